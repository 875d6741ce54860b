"""Temporal Summarization: events, the 0.5 s filter, permutations, queries, and the built pool sets."""
from __future__ import annotations

import json
import math
from collections import Counter

import numpy as np
import pytest

from mmbench.builders.parts.captions import PROMPT_VERSION, SYSTEM_PROMPT, ChatRewriter, language_of, rule_rewrite
from mmbench.builders.parts.events import (Event, anti_overlap, apply_order, assign_frames, block_permutation,
                                     detect_shots, distractor_permutations, overlap, reversal, segment_events)
from mmbench.builders.sources.sample_videos import make_sample_videos
from mmbench.builders.temporal_summarization import bin_ranges, build
from mmbench.builders.parts.video import colour_histogram
from mmbench.data.documents import Video
from mmbench.common.http_client import APIError, HttpClient, RetryPolicy
from mmbench.data.poolset import load_poolset
from mmbench.tasks import get_task

from test_api_embedders import Server

# 64x64 frames (4 unified tokens each): bin "128" holds 23..45 frames, bin "256" 46..90 frames
SMALL = dict(videos=8, lengths=[128, 256], frame_size=[64, 64], distractors=3, progress=False)


# --- events ------------------------------------------------------------------------------------

def test_anti_overlap_filter_is_precise():
    a, b, c, d, e = (Event(0, 10, "a"), Event(9.5, 20, "b"), Event(19.4, 30, "c"), Event(0, 30, "whole"),
                     Event(25, 25.3, "e"))
    kept, dropped = anti_overlap([d, c, b, a, e])
    # earliest end first: a; b overlaps a by exactly 0.5 s (kept); e overlaps nothing kept;
    # c overlaps b by 0.6 s (dropped); the whole-video event overlaps a by 10 s (dropped)
    assert [x.caption for x in kept] == ["a", "b", "e"]
    assert sorted(x.event.caption for x in dropped) == ["c", "whole"]
    assert "0.60 s > 0.5 s" in next(x.reason for x in dropped if x.event.caption == "c")


def test_anti_overlap_property_random():
    rng = np.random.default_rng(0)
    for _ in range(200):
        starts = rng.uniform(0, 60, size=8)
        events = [Event(float(s), float(s + rng.uniform(0.5, 20)), str(i)) for i, s in enumerate(starts)]
        kept, dropped = anti_overlap(events)
        assert len(kept) + len(dropped) == len(events)
        for i, x in enumerate(kept):           # no two kept events overlap by more than 0.5 s
            for y in kept[i + 1:]:
                assert overlap(x, y) <= 0.5 + 1e-9
        for dr in dropped:                     # every dropped event clashes with a kept one
            assert max(overlap(dr.event, k) for k in kept) > 0.5
        assert [k.start for k in kept] == sorted(k.start for k in kept)


def test_frames_go_to_events_at_midpoint_cuts():
    times = [float(t) for t in range(30)]
    events, segments, dropped = assign_frames([Event(0, 10), Event(9.5, 20), Event(22, 30)], times)
    # cuts at (10 + 9.5) / 2 = 9.75 and (20 + 22) / 2 = 21: the gap 20..22 is split at its middle
    assert segments == [list(range(0, 10)), list(range(10, 21)), list(range(21, 30))]
    assert not dropped
    # an event with no 1-FPS frame of its own is dropped, the cut recomputed
    events, segments, dropped = assign_frames([Event(0, 5.6), Event(5.6, 5.9), Event(5.9, 10)], times[:10])
    assert [len(s) for s in segments] == [6, 4] and dropped[0].event == Event(5.6, 5.9)
    # clipping to the video and the filter together; leading frames go to the first event
    events, segments, dropped = segment_events([Event(3, 12), Event(11.8, 40), Event(-2, 1.0)], 20.0, times[:20])
    assert [(e.start, e.end) for e in events] == [(0.0, 1.0), (3, 12), (11.8, 20.0)]
    assert sum(len(s) for s in segments) == 20 and segments[0] == [0, 1]


def test_shot_detector_finds_cuts():
    rng = np.random.default_rng(1)
    frames = []
    for colour, n in (((200, 30, 30), 10), ((30, 200, 30), 12), ((30, 30, 200), 8)):
        for _ in range(n):
            f = np.full((64, 64, 3), colour, np.uint8)
            y, x = rng.integers(0, 56, size=2)
            f[y:y + 8, x:x + 8] = 255              # a small moving object is not a cut
            frames.append(f)
    times = [float(t) for t in range(len(frames))]
    shots = detect_shots([colour_histogram(f) for f in frames], times, 30.0)
    assert [(s.start, s.end) for s in shots] == [(0.0, 10.0), (10.0, 22.0), (22.0, 30.0)]


def _segments(lengths):
    return [[f"e{i}f{j}" for j in range(n)] for i, n in enumerate(lengths)]


def _runs_intact(segments, frames, order):
    """The permuted sequence is the events in `order`, each event's frames together and in order."""
    pos = 0
    for i in order:
        assert frames[pos:pos + len(segments[i])] == segments[i]
        pos += len(segments[i])
    return pos == len(frames)


def test_permutations_keep_every_event_intact():
    segments = _segments([3, 1, 4, 2, 5])
    original = apply_order(segments, range(5))
    rev = reversal(5)
    assert rev.order == (4, 3, 2, 1, 0)
    assert _runs_intact(segments, apply_order(segments, rev.order), rev.order)
    rng = np.random.default_rng(3)
    for _ in range(100):
        p = block_permutation(5, rng)
        frames = apply_order(segments, p.order)
        assert p.order != tuple(range(5))                       # never the identity
        assert sorted(frames) == sorted(original)               # same frames: same length
        assert _runs_intact(segments, frames, p.order)
        assert sum(p.blocks) == 5 and len(p.blocks) >= 2
        # blocks are contiguous runs of the original order
        pos = 0
        for size in p.blocks:
            run = p.order[pos:pos + size]
            assert list(run) == list(range(run[0], run[0] + size))
            pos += size


def test_distractor_permutations_are_distinct_and_not_identity():
    segments = _segments([2, 3, 2, 4])
    perms = distractor_permutations(segments, 5, np.random.default_rng(0))
    assert perms[0].kind == "reversal" and {p.kind for p in perms[1:]} == {"block"}
    seqs = [tuple(apply_order(segments, p.order)) for p in perms]
    assert len(set(seqs)) == 5 and tuple(apply_order(segments, range(4))) not in seqs
    assert len(distractor_permutations(_segments([2, 2]), 3, np.random.default_rng(0))) == 1   # only the swap
    # two identical events: swapping them reproduces the original, so it is no distractor
    assert distractor_permutations([["a", "b"], ["a", "b"]], 3, np.random.default_rng(0)) == []


# --- queries -----------------------------------------------------------------------------------

def test_rule_rewrite():
    text = rule_rewrite(["A man walks into the room.", "  he sits   down ", "NBA players cheer!", "The man leaves"])
    assert text == ("First, a man walks into the room. Then, he sits down. Next, NBA players cheer. "
                    "Finally, the man leaves.")
    assert rule_rewrite(["A dog runs."]) == "A dog runs."
    zh = ["一个男人走进厨房。", "他切了一些蔬菜", "他把菜放进锅里"]
    assert language_of(zh) == "zh" and language_of(["a dog"]) == "en"
    assert rule_rewrite(zh) == "首先，一个男人走进厨房。然后，他切了一些蔬菜。最后，他把菜放进锅里。"
    with pytest.raises(ValueError):
        rule_rewrite(["  ", ""])


def _chat_reply(body):
    return {"choices": [{"message": {"role": "assistant", "content": " First the man cooks,\nthen he eats. "}}]}


def test_chat_rewrite_stores_prompt_version_and_caches(tmp_path, monkeypatch):
    monkeypatch.setenv("TS_TEST_KEY", "sk-test")
    server = Server()
    server.default = _chat_reply
    try:
        cache = tmp_path / "rewrites.jsonl"
        rw = ChatRewriter(server.url, "qwen2.5-32b-instruct", "TS_TEST_KEY", cache)
        out = rw.rewrite(["一个男人做饭", "他吃饭"], item="v1")
        assert out.text == "First the man cooks, then he eats."
        assert out.record() == {"method": "llm", "version": PROMPT_VERSION, "model": "qwen2.5-32b-instruct"}
        req = server.requests[0]
        assert req["path"] == "/chat/completions" and req["headers"]["authorization"] == "Bearer sk-test"
        assert req["json"]["messages"][0]["content"] == SYSTEM_PROMPT and req["json"]["temperature"] == 0
        assert "1. 一个男人做饭\n2. 他吃饭" in req["json"]["messages"][1]["content"]
        line = json.loads(cache.read_text(encoding="utf-8").splitlines()[0])
        assert line["prompt_version"] == PROMPT_VERSION and line["output"] == out.text
        again = ChatRewriter(server.url, "qwen2.5-32b-instruct", "TS_TEST_KEY", cache)
        assert again.rewrite(["一个男人做饭", "他吃饭"]).text == out.text
        assert len(server.requests) == 1                      # served from the cache
        server.default = lambda body: {"choices": []}
        fast = HttpClient(retry=RetryPolicy(max_attempts=1))
        with pytest.raises(APIError, match="v2: malformed chat response"):
            ChatRewriter(server.url, "m", "TS_TEST_KEY", client=fast).rewrite(["x"], item="v2")
    finally:
        server.close()


# --- built pool sets ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("ts") / "ps"
    return build("sample", out, seed=0, **SMALL), out


def test_pools_are_binned_by_each_video_s_own_duration(built):
    ps, out = built
    spec = get_task("temporal_summarization")
    assert spec.summary_axes == ("length_bin", "difficulty") and spec.length_bins == ("8k", "16k", "32k")
    cands = ps.candidate_by_id()
    assert {p.subset for p in ps.pools} == {f"sample/{d}/{b}" for d in ("easy", "hard") for b in ("128", "256")}
    assert {len(p.candidate_ids) for p in ps.pools} == {4}                     # C/Q constant
    ranges = bin_ranges([128, 256])
    assert ranges == {128: (91, 182), 256: (182, 363)}                         # geometric midpoints, no gaps
    durations = {}
    for item in ps.pools:
        assert {"length_bin", "length_tokens", "difficulty", "dataset", "length_range"} <= set(item.meta)
        assert item.meta["dataset"] == "sample" and item.meta["length_control"] == "duration"
        lo, hi = ranges[item.meta["length_tokens"]]
        for cid in item.candidate_ids:
            doc = cands[cid]
            (video,) = doc.segments
            assert isinstance(video, Video) and video.fps == 1.0
            assert (video.width, video.height) == (64, 64)                      # one frame size for every video
            assert doc.tokens == len(video.frames) * 4                            # length = frames x tokens/frame
            assert len(video.frames) == math.ceil(doc.meta["duration_s"] - 1e-6)  # one frame per second
            assert lo <= doc.tokens < hi                                          # inside its own bin's range
            durations.setdefault(item.meta["length_bin"], {})[doc.meta["video_id"]] = doc.meta["duration_s"]
    # every video sits in exactly one bin, and the longer bin holds the longer videos
    assert not set(durations["128"]) & set(durations["256"])
    assert max(durations["128"].values()) < min(durations["256"].values())
    assert np.mean(list(durations["128"].values())) * 1.5 < np.mean(list(durations["256"].values()))
    # every query is in both difficulties of the one bin it appears in
    by_query = Counter((p.query_id, p.meta["length_bin"]) for p in ps.pools)
    assert set(by_query.values()) == {2} and len({q for q, _ in by_query}) == len(by_query)


def test_default_sample_fills_8k_16k_32k_by_duration():
    """The default sample's plan: durations spread inside each bin at 512x512 frames (256 tokens each)."""
    from mmbench.builders.temporal_summarization import TSParams, frame_range, sample_durations

    p = TSParams(frame_size=(512, 512))
    assert p.tokens_per_frame == 256
    durations = sample_durations(p)
    assert len(durations) == 15
    by_bin = [durations[0:5], durations[5:10], durations[10:15]]
    for (L, r), ds in zip(sorted(p.ranges.items()), by_bin):
        lo, hi = frame_range(r, 256)
        assert all(lo <= d <= hi and r[0] <= d * 256 < r[1] for d in ds), (L, ds)
    means = [np.mean(ds) for ds in by_bin]
    assert means[0] < means[1] < means[2] and 1.8 < means[1] / means[0] < 2.2 and 1.8 < means[2] / means[1] < 2.2


def test_bin_ranges_tile_and_state_their_edges():
    r = bin_ranges([8192, 16384, 32768])
    assert r == {8192: (5793, 11586), 16384: (11586, 23171), 32768: (23171, 46341)}
    assert bin_ranges([1000]) == {1000: (708, 1415)}
    from mmbench.builders.temporal_summarization import bin_of, frame_range

    assert bin_of(11585, r) == 8192 and bin_of(11586, r) == 16384 and bin_of(5792, r) is None
    assert bin_of(46341, r) is None
    assert frame_range(r[8192], 256) == (23, 45)            # 23*256 = 5888 >= 5793; 46*256 = 11776 >= 11586


def test_hard_candidates_are_length_matched_event_permutations(built):
    ps, _ = built
    cands = ps.candidate_by_id()
    hard = [p for p in ps.pools if p.meta["difficulty"] == "hard"]
    assert hard
    for item in hard:
        target = cands[item.relevant_ids[0]]
        frames = list(target.segments[0].frames)
        lengths = target.meta["event_frames"]
        segments, pos = [], 0
        for n in lengths:
            segments.append(frames[pos:pos + n])
            pos += n
        assert pos == len(frames) and len(lengths) >= 3
        seen = {tuple(frames)}
        for cid in item.candidate_ids:
            doc = cands[cid]
            assert doc.tokens == target.tokens                                   # length-matched exactly
            if cid == target.id:
                continue
            assert doc.meta["perturbation"] in ("reversal", "block")
            order = doc.meta["event_order"]
            assert sorted(order) == list(range(len(lengths))) and order != sorted(order)
            assert list(doc.segments[0].frames) == apply_order(segments, order)   # events intact
            seen.add(tuple(doc.segments[0].frames))
        assert len(seen) == 4                                                   # all distinct, none = target
    for item in (p for p in ps.pools if p.meta["difficulty"] == "easy"):
        others = [cands[c] for c in item.candidate_ids if c not in item.relevant_ids]
        assert all(d.meta["perturbation"] == "none" and d.meta["video_id"] != item.meta["video_id"] for d in others)


def test_queries_and_manifest(built):
    ps, out = built
    loaded = load_poolset(out, verify=True)
    assert loaded.content_hash == ps.content_hash
    q = loaded.queries[0]
    assert q.segments[0].text.startswith("First, ") and "Finally, " in q.segments[0].text
    assert q.meta["rewrite"]["method"] == "rule"
    b = loaded.manifest["builder"]
    assert b["length_control"] == "duration" and b["anti_overlap_s"] == 0.5 and b["failures"] == []
    assert b["frame_size"] == [64, 64] and b["tokens_per_frame"] == 4
    assert b["bins"] == {"128": {"tokens": [91, 182], "frames": [23, 45]},
                         "256": {"tokens": [182, 363], "frames": [46, 90]}}
    assert loaded.manifest["dropped"]["files"] == {"what": "annotated videos (files)", "read": 8, "kept": 8,
                                                   "dropped": {}}
    assert loaded.manifest["validity"]["ok"] and "bin_length" in loaded.manifest["validity"]["invariants"]
    drops = loaded.manifest["dropped"]
    assert drops["bins"]["read"] == 8 and drops["bins"]["kept"] == 8
    assert drops["queries"]["read"] == 8 and drops["queries"]["kept"] == len(loaded.queries)
    videos = b["videos"]
    assert {v["segmentation"] for v in videos.values()} == {"annotations", "shots"}
    # sample_02 carries a whole-video caption that the 0.5 s filter drops, and its query leaves it out
    assert any("overlaps a kept event" in d["reason"] for d in videos["sample_02"]["events_dropped"])
    q2 = next(q for q in loaded.queries if q.meta["video_id"] == "sample_02")
    assert "one after another" not in q2.segments[0].text


def test_same_seed_same_hash(built, tmp_path):
    ps, _ = built
    again = build("sample", tmp_path / "again", seed=0, **SMALL)
    assert again.content_hash == ps.content_hash
    other = build("sample", tmp_path / "other", seed=1, **SMALL)
    assert other.content_hash != ps.content_hash


def _write_annotations(records, path):
    data = {r.id: {"duration": r.duration, "timestamps": [[e.start, e.end] for e in r.events] if r.events else None,
                   "sentences": list(r.captions) if r.events is None else [e.caption for e in r.events]}
            for r in records}
    path.write_text(json.dumps(data))
    return data


def test_corrupt_video_is_reported_and_build_survives(tmp_path, capsys):
    videos = tmp_path / "videos"
    records = make_sample_videos(videos, [30, 32, 34, 36], seed=5)
    data = _write_annotations(records, tmp_path / "ann.json")
    data = {f"v_{k}": v for k, v in data.items()}      # ActivityNet ids; files are named without "v_"
    data["v_broken"] = {"duration": 50.0, "timestamps": [[0, 20], [20, 50]], "sentences": ["a", "b"]}
    data["v_missing"] = {"duration": 50.0, "timestamps": [[0, 20], [20, 50]], "sentences": ["a", "b"]}
    (videos / "broken.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42" + b"corrupt" * 500)
    ann = tmp_path / "ann.json"
    ann.write_text(json.dumps(data))
    common = dict(annotations=str(ann), video_root=str(videos), lengths=[128], frame_size=[64, 64], distractors=3,
                  progress=False)
    # 2 of 6 annotated videos lost is more than the stated 10 %: the build fails, naming the count and the way out
    with pytest.raises(ValueError, match=r"activitynet videos under .*: 1 of 6 annotated videos have no video file "
                                         r"\(e.g. v_missing\), more than 10%; .*allow_missing=true"):
        build("activitynet", tmp_path / "ps", **common)
    assert not (tmp_path / "ps").exists()
    # found but unreadable counts the same way, checked once the files were opened
    only_broken = {k: v for k, v in data.items() if k != "v_missing"}
    (tmp_path / "ann2.json").write_text(json.dumps(only_broken))
    with pytest.raises(ValueError, match=r"1 of 5 annotated videos \(files\) unusable \(unreadable video file ×1\)"):
        build("activitynet", tmp_path / "ps", **{**common, "annotations": str(tmp_path / "ann2.json")})
    ps = build("activitynet", tmp_path / "ps", allow_missing=True, **common)
    assert ps.manifest["dropped"]["files"]["dropped"] == {
        "no video file": {"count": 1, "examples": ["v_missing"]},
        "unreadable video file": {"count": 1, "examples": ["v_broken"]}}
    failures = {f["video_id"]: f for f in ps.manifest["builder"]["failures"]}
    assert set(failures) == {"v_broken", "v_missing"}
    assert "broken.mp4" in failures["v_broken"]["error"] and failures["v_broken"]["file"].endswith("broken.mp4")
    assert "no video file for 'v_missing'" in failures["v_missing"]["error"]
    assert "broken.mp4" in capsys.readouterr().err
    assert {p.meta["dataset"] for p in ps.pools} == {"activitynet"} and len(ps.pools) == 8
    assert ps.sources["annotations"].startswith("ann.json sha256:")


def test_cli_build_and_run_offline(tmp_path, monkeypatch, capsys):
    from mmbench.cli import main

    monkeypatch.setenv("MMBENCH_HOME", str(tmp_path / "home"))
    out = tmp_path / "ps"
    assert main(["build", "--task", "temporal_summarization", "--out", str(out), "--param", "videos=4",
                 "--param", "lengths=[128]", "--param", "frame_size=[64,64]"]) == 0
    printed = capsys.readouterr().out
    assert "content hash" in printed and "annotated videos (files): 4 read -> 4 kept" in printed
    assert main(["run", "--task", "temporal_summarization", "--model", "minilm", "--data", str(out), "--quiet",
                 "--output", str(tmp_path / "run")]) == 0
    text = capsys.readouterr().out
    assert "the model sees only text" in text and "precision_at_1 by difficulty" in text
    per_query = __import__("pandas").read_parquet(next((tmp_path / "run").glob("per_query*.parquet")))
    assert set(per_query["difficulty"]) == {"easy", "hard"} and set(per_query["length_bin"]) == {"128"}
    assert math.isclose(per_query["precision_at_1"].isin([0.0, 1.0]).mean(), 1.0)


def test_qwen_adapter_receives_the_counted_frames(built, tmp_path):
    """A Qwen3-VL adapter (factor 32) gets every stored frame, unresized, in the candidate's order."""
    from dataclasses import replace

    from mmbench.models.qwen_vl import QwenVLEmbedder
    from mmbench.models.qwen_vl_presets import PRESETS
    from tiny_models import build_qwen3vl

    ps, out = built
    loaded = load_poolset(out)
    preset = PRESETS["qwen3-vl-embedding-2b"]
    # frame bounds as wide as the builder's, so the model's own resizing leaves the frames as they are
    preset = replace(preset, vision=replace(preset.vision, video_min_pixels=4 * 32 * 32,
                                            video_max_pixels=768 * 32 * 32))
    model = QwenVLEmbedder(preset, model_path=str(build_qwen3vl(tmp_path / "q3")), context=4096, device="cpu",
                           dtype="float32")
    item = next(p for p in loaded.pools if p.meta["difficulty"] == "hard" and p.meta["length_bin"] == "256")
    cands = loaded.candidate_by_id()
    target = cands[item.relevant_ids[0]]
    reversed_ = next(cands[c] for c in item.candidate_ids if cands[c].meta["perturbation"] == "reversal")
    vecs = model.encode([target, reversed_], "document", loaded.media)
    for doc, info in zip((target, reversed_), model.last_encode_info):
        video = doc.segments[0]
        # an odd frame count is padded by the processor (Qwen-VL's temporal pairs): stated, never silent
        assert info["frames"] == len(video.frames)
        assert info["adapted"] == (["odd_frames_padded"] if len(video.frames) % 2 else [])
        h, w = model.frame_size(video.width, video.height)
        assert (w, h) == (video.width, video.height)             # per-frame tokens = the unified count's
    assert not np.allclose(vecs[0], vecs[1], atol=1e-4)         # same frames, other order: another vector


def test_decode_failure_in_decord_falls_back_to_pyav(tmp_path, monkeypatch):
    from mmbench.builders.parts import video as video_mod
    from mmbench.builders.temporal_summarization import TSParams, process_video
    from mmbench.data.media import MediaStore

    (rec,) = make_sample_videos(tmp_path / "v", [30], seed=2)
    real = video_mod._OPENERS["decord"]

    def flaky(path, fps):
        sv = real(path, fps)

        def boom():
            yield from ()
            raise RuntimeError("simulated decode error")
        sv._iter = boom
        return sv

    monkeypatch.setitem(video_mod._OPENERS, "decord", flaky)
    params = TSParams(lengths=(128, 1 << 17), frame_size=(64, 64))
    pv = process_video(rec, MediaStore(tmp_path / "m"), params)
    assert pv.info["reader"] == "pyav" and pv.info["frame_sizes"]["128k"] is None   # 30 s is far from 128K
    assert set(pv.renders) == {128} and len(pv.renders[128].frames) == pv.info["frames"] == 30
    with pytest.raises(video_mod.VideoReadError, match="simulated decode error"):
        process_video(rec, MediaStore(tmp_path / "m"), TSParams(lengths=(128,), frame_size=(64, 64), reader="decord"))


def test_bm25_runs_on_video_only_candidates(built, tmp_path):
    """A text-only lexical model fits an empty vocabulary and ranks every pool at chance, without failures."""
    from mmbench.models.bm25 import BM25Model
    from mmbench.running.runner import RunOptions, run_poolset

    _, out = built
    per_query, _, info = run_poolset(load_poolset(out), BM25Model(), RunOptions(cache_dir=tmp_path, progress=False))
    assert info["n_failed_items"] == 0 and info["documents_with_unseen_modalities"] > 0
    assert per_query["precision_at_1"].isin([0.0, 1.0]).all()


def test_permutation_reproducing_the_original_frames_is_rejected():
    """Two events with identical frames (a static shot): swapping them leaves the video unchanged."""
    from mmbench.builders.sources.activitynet import VideoRecord
    from mmbench.builders.temporal_summarization import ProcessedVideo, TSParams, assemble
    from mmbench.data.tokens import UnifiedTokenCounter

    def video(vid, frames):
        rec = VideoRecord(vid, None, 4.0, ("a man walks in", "he sits down"), None)
        render = Video(tuple(frames), 1.0, 64, 64)
        return ProcessedVideo(rec, {64: render}, [Event(0, 2, f"{vid} a"), Event(2, 4, f"{vid} b")], [[0, 1], [2, 3]], [],
                              "annotations", {"frames": 4, "duration": 4.0})

    static = video("v_static", ["f0.jpg", "f1.jpg", "f0.jpg", "f1.jpg"])
    moving = [video(f"v_{k}", [f"{k}{j}.jpg" for j in range(4)]) for k in "abc"]
    ps, excluded = assemble([static, *moving], UnifiedTokenCounter.default(), TSParams(lengths=(64,), distractors=1),
                            0, None, [])
    assert "q-v_static" not in {q.id for q in ps.queries}
    assert any(e["video_id"] == "v_static" and "0 distinct non-identity" in e["reason"] for e in excluded)
    for doc in ps.candidates:      # no Hard candidate repeats its original's frames
        if doc.meta["perturbation"] != "none":
            original = next(c for c in ps.candidates if c.id == doc.id.rsplit("-p", 1)[0])
            assert doc.segments[0].frames != original.segments[0].frames


def test_clip_events_says_why_an_event_was_dropped():
    from mmbench.builders.parts.events import clip_events

    kept, dropped = clip_events([Event(2.0, 5.0, "ok"), Event(9.0, 4.0, "backwards"), Event(12.0, 15.0, "late"),
                                 Event(-3.0, 1.0, "early")], duration=10.0)
    assert [(e.start, e.end, e.caption) for e in kept] == [(2.0, 5.0, "ok"), (0.0, 1.0, "early")]
    reasons = {d.event.caption: d.reason for d in dropped}
    assert "ends (4 s) before it starts (9 s)" in reasons["backwards"]
    assert reasons["late"] == "empty within [0, 10] s"


# --- issue 13/14 fixes ---------------------------------------------------------------------------

def test_event_cut_goes_to_the_scene_change_not_one_frame_past_it():
    """Annotated boundaries within ±0.25 s of a scene change at t = 20 s: frame 20 shows the new scene."""
    times = [float(t) for t in range(40)]
    for a_end in (19.8, 20.0, 20.2, 20.25):
        for b_start in (19.75, 20.0, 20.1, 20.25):
            _, segments, _ = assign_frames([Event(0, a_end, "a"), Event(b_start, 40, "b")], times)
            assert segments[1][0] == 20, (a_end, b_start)


def test_sample_event_segments_start_at_the_scene_changes(tmp_path):
    """Issue 13.7: with the old "t_k < cut" rule, 13 of 30 sample boundaries slipped one frame past the change."""
    from mmbench.builders.sources.sample_videos import scene_starts
    from mmbench.builders.parts.video import sample_times

    durations = [27, 34, 41, 53, 61, 68]
    records = make_sample_videos(tmp_path, durations, seed=0)
    boundaries = 0
    for rec, true_starts in zip(records, scene_starts(durations, seed=0)):
        if rec.events is None:
            continue
        _, segments, _ = segment_events(rec.events, rec.duration, sample_times(rec.duration))
        assert [s[0] for s in segments] == true_starts, rec.id
        boundaries += len(true_starts) - 1
    assert boundaries >= 10


def test_story_key_keeps_chinese_text():
    """Sameness of event sequences must not fold every Chinese caption to the empty string."""
    from mmbench.builders.parts.captions import story_key

    assert story_key("一个红球滚过灰色地面。") == "一个红球滚过灰色地面"
    assert story_key("一个红球滚过灰色地面") != story_key("蓝色方块慢慢变大")
    assert story_key("  A Dog, runs!  ") == "a dog runs" and story_key("ＡＢＣ") == "abc"
    # Chinese events without digits: reversal is a real distractor, repeated events A, B, A are not
    segments = _segments([2, 2, 2])
    zh = [story_key(c) for c in ("一个男人走进厨房", "他切菜", "他把菜放进锅里")]
    assert distractor_permutations(segments, 3, np.random.default_rng(0), captions=zh)[0].kind == "reversal"


def test_rule_rewrite_does_not_repeat_transition_words():
    text = rule_rewrite(["A man walks in.", "Then he sits down.", "then, a dog barks", "Next to the car a woman waves",
                         "After that the crowd cheers", "Finally, the man leaves."])
    assert text == ("First, a man walks in. Then, he sits down. Next, a dog barks. After that, next to the car a "
                    "woman waves. Then, the crowd cheers. Finally, the man leaves.")
    assert "then, then" not in text.lower() and "finally, finally" not in text.lower()
    assert rule_rewrite(["First, a girl dances.", "Afterwards she bows", "Lastly she leaves"]) == \
        "First, a girl dances. Then, she bows. Finally, she leaves."
    assert rule_rewrite(["First place goes to a boy", "he smiles"]) == "First, first place goes to a boy. Finally, he smiles."
    assert rule_rewrite(["First the man stretches", "Next he runs", "Next day he rests"]) == \
        "First, the man stretches. Then, he runs. Finally, next day he rests."
    assert rule_rewrite(["首先，一个男人走进厨房。", "然后他切菜", "最后，他把菜放进锅里"]) == \
        "首先，一个男人走进厨房。然后，他切菜。最后，他把菜放进锅里。"


def test_videos_outside_every_bin_are_counted_not_stretched(tmp_path):
    videos = tmp_path / "videos"
    durations = [16, 30, 32, 34, 36, 60]     # bin "128" at 64x64 holds 23..45 s: 16 s and 60 s fit no bin
    records = make_sample_videos(videos, durations, seed=3)
    data = _write_annotations(records, tmp_path / "ann.json")
    ps = build("activitynet", tmp_path / "ps", annotations=str(tmp_path / "ann.json"), video_root=str(videos),
               lengths=[128], frame_size=[64, 64], distractors=3, progress=False)
    assert len(data) == 6
    drops = ps.manifest["dropped"]["bins"]
    assert drops["read"] == 6 and drops["kept"] == 4
    assert drops["dropped"] == {"longer than the longest bin": {"count": 1, "examples": ["sample_05"]},
                                "shorter than the shortest bin": {"count": 1, "examples": ["sample_00"]}}
    info = ps.manifest["builder"]["videos"]
    assert info["sample_00"]["frame_sizes"] == {"128": None} and "events_kept" not in info["sample_00"]
    assert {d.meta["video_id"] for d in ps.candidates} == {f"sample_0{i}" for i in range(1, 5)}


def test_resolution_control_keeps_the_per_bin_frame_size_rule(tmp_path):
    ps = build("sample", tmp_path / "res", videos=4, lengths=[1024, 2048], length_control="resolution",
               progress=False)
    cands = ps.candidate_by_id()
    assert ps.manifest["builder"]["length_control"] == "resolution" and ps.manifest["validity"]["ok"]
    sizes = {}
    for item in ps.pools:
        assert item.meta["length_control"] == "resolution"
        L = item.meta["length_tokens"]
        for cid in item.candidate_ids:
            doc = cands[cid]
            assert abs(doc.tokens - L) <= 0.10 * L
            v = doc.segments[0]
            sizes.setdefault(doc.meta["video_id"], {})[L] = (v.width, v.height, len(v.frames))
    # the same video in both bins: the same frames, larger ones in the longer bin
    for vid, per_bin in sizes.items():
        assert set(per_bin) == {1024, 2048}
        assert per_bin[1024][2] == per_bin[2048][2] and per_bin[1024][0] < per_bin[2048][0]


def test_validator_catches_broken_pool_sets(built):
    import copy
    from dataclasses import replace as dc_replace

    from mmbench.tasks.validation import validate

    ps, _ = built
    assert validate(ps).ok

    def broken(edit):
        bad = copy.deepcopy(ps)
        edit(bad)
        return validate(bad).counts()

    def hard_copy_of_target(bad):
        item = next(p for p in bad.pools if p.meta["difficulty"] == "hard")
        cands = bad.candidate_by_id()
        target = cands[item.relevant_ids[0]]
        other = next(cands[c] for c in item.candidate_ids if c != target.id)
        other.segments[0] = target.segments[0]
    assert set(broken(hard_copy_of_target)) >= {"one_answer", "hard_permutation"}

    def resize(bad):
        doc = bad.candidates[0]
        doc.segments[0] = dc_replace(doc.segments[0], width=96)
    assert "bin_length" in broken(resize)

    def same_story(bad):
        item = next(p for p in bad.pools if p.meta["difficulty"] == "easy")
        cands = bad.candidate_by_id()
        target = cands[item.relevant_ids[0]]
        other = next(cands[c] for c in item.candidate_ids if c != target.id)
        other.meta["captions"] = list(target.meta["captions"])
    assert "easy_other_video" in broken(same_story)

    def short_pool(bad):
        bad.pools[0].candidate_ids = bad.pools[0].candidate_ids[:3]
    assert "constant_cq" in broken(short_pool)

    def two_bins(bad):
        item = next(p for p in bad.pools if p.meta["length_bin"] == "128")
        other = next(p for p in bad.pools if p.meta["length_bin"] == "256" and p.meta["difficulty"] == "easy")
        stray = next(c for c in item.candidate_ids if c not in item.relevant_ids)
        other.candidate_ids[-1] = stray if stray not in other.relevant_ids else other.candidate_ids[-1]
    assert "one_bin_per_video" in broken(two_bins)


def test_report_draws_length_curves_over_the_duration_bins(built, tmp_path, monkeypatch, capsys):
    from mmbench.cli import main

    monkeypatch.setenv("MMBENCH_HOME", str(tmp_path / "home"))
    _, out = built
    assert main(["run", "--task", "temporal_summarization", "--model", "bm25", "--data", str(out), "--quiet",
                 "--output", str(tmp_path / "run")]) == 0
    assert main(["report", str(tmp_path / "run"), "--out", str(tmp_path / "report"), "--ci-resamples", "50"]) == 0
    md = (tmp_path / "report" / "report.md").read_text()
    assert "length curves" in md and (tmp_path / "report" / "figures" / "temporal_summarization_length_curves.png").is_file()
    assert any(line.startswith("- bm25, temporal_summarization / sample (hard): 128: ") and ", 256: " in line
               for line in md.splitlines())


def test_frame_size_parameters_are_checked(tmp_path):
    for bad, message in (([100, 64], "multiples of 32"), ([2048, 2048], "outside the frame pixel budget")):
        with pytest.raises(ValueError, match=message):
            build("sample", tmp_path / "x", videos=4, lengths=[128], frame_size=bad, progress=False)
    with pytest.raises(ValueError, match="length_control must be one of"):
        build("sample", tmp_path / "x", length_control="padding", progress=False)
    with pytest.raises(ValueError, match="allow_missing must be true or false"):
        build("sample", tmp_path / "x", allow_missing="maybe", progress=False)
    with pytest.raises(ValueError, match=r"bin 128 \(91..181 tokens\) holds no whole number of 256-token frames"):
        build("sample", tmp_path / "x", lengths=[128], progress=False)
    with pytest.raises(ValueError, match=r"bin 1k holds 3..5 frames at 256 tokens per frame, too short for a sample"):
        build("sample", tmp_path / "x", lengths=[1024], progress=False)


def test_hard_permutation_must_tell_another_caption_sequence(built):
    """Events A, B, A reversed still read "A, then B, then A": such an order answers the query and is no distractor."""
    import copy

    from mmbench.tasks.validation import validate

    segments = _segments([2, 3, 2])
    perms = distractor_permutations(segments, 5, np.random.default_rng(0), captions=["a dog runs", "it sits", "a dog runs"])
    assert perms and all(tuple(["x", "y", "x"][i] for i in p.order) != ("x", "y", "x") for p in perms)
    assert (2, 1, 0) not in {p.order for p in perms}
    assert (2, 1, 0) in {p.order for p in distractor_permutations(segments, 5, np.random.default_rng(0))}
    # the validator finds such a distractor in a built pool set
    ps, _ = built
    bad = copy.deepcopy(ps)
    cands = bad.candidate_by_id()
    item = next(p for p in bad.pools if p.meta["difficulty"] == "hard" and p.meta["n_events"] == 3
                and cands[p.relevant_ids[0]].meta["segmentation"] == "annotations")
    target = cands[item.relevant_ids[0]]
    target.meta["captions"] = ["a dog runs", "it sits", "a dog runs"]
    report = validate(bad)
    assert any(v.invariant == "hard_permutation" and "same caption sequence" in v.detail for v in report.violations)


def test_shot_detector_splits_the_unannotated_sample_videos_scenes():
    """sample_14 (no timestamps, so shots segment it): orange-and-white stripes for 7 s, then a blue square growing
    on white for 49 s, then a pink triangle on light blue. The stripes-to-square cut changes the colour histogram by
    about 0.47 (< the 0.5 threshold) and was merged before issue 24; the adaptive rule splits it."""
    from mmbench.builders.sources import sample_videos as sv

    captions = [c for _, _, c in sv.SCENES]
    plan = [(captions.index("Orange and white stripes scroll slowly downwards"), 7),
            (next(i for i, c in enumerate(captions) if c.startswith("A blue square")), 49),
            (next(i for i, c in enumerate(captions) if c.startswith("A pink triangle")), 20)]
    frames = list(sv._render(plan, np.random.default_rng(0)))[::sv.FPS]   # 1 frame per second, as sampled
    times = [float(t) for t in range(len(frames))]
    shots = detect_shots([colour_histogram(f) for f in frames], times, float(len(frames)))
    assert [s.start for s in shots] == [0.0, 7.0, 56.0]
