"""64K and 128K bins on real-layout sources where only some documents are long enough (issue 27).

Each builder that bins documents by their own length counts, per requested bin, the source units it
measured that were long enough and too short, stores the counts in the manifest's drop log and prints
them at the end of `mmbench build`. Temporal Summarization builds the bins it can and names the empty
ones; Logical Summarization refuses a bin it cannot fill, and the refusal carries the counts.
"""
from __future__ import annotations

import json

import pytest

from mmbench.builders.logical_summarization import build as build_ls
from mmbench.builders.parts.video_bins import bin_ranges
from mmbench.builders.sources.sample_reports import natural_reports
from mmbench.builders.sources.sample_videos import make_sample_videos
from mmbench.builders.temporal_summarization import build as build_ts
from mmbench.data.drops import DropLog, summary_lines
from mmbench.data.tokens import UnifiedTokenCounter
from mmbench.tasks.validation import validate

LONG = [65536, 131072]
FRAME = [1024, 768]          # 768 unified tokens per frame: 64k holds 61..120 s, 128k 121..241 s at 1 FPS
DURATIONS = [20, 60, 61, 70, 76]    # 60 s is 261 tokens short of the 64k bin, 61 s just reaches it


@pytest.fixture(scope="module")
def counter():
    return UnifiedTokenCounter.default()


@pytest.fixture(scope="module")
def activitynet(tmp_path_factory):
    """ActivityNet Captions layout: {video id: {duration, timestamps, sentences}} and a folder of videos."""
    root = tmp_path_factory.mktemp("anet")
    records = make_sample_videos(root / "videos", DURATIONS, seed=4)
    annotations = {}
    for r in records:
        events = r.events or ()
        annotations[r.id] = {"duration": r.duration, "timestamps": [[e.start, e.end] for e in events] or None,
                             "sentences": [e.caption for e in events] or list(r.captions)}
    (root / "ann.json").write_text(json.dumps(annotations))
    return root


def test_drop_log_counts_per_bin_and_names_the_empty_ones():
    log = DropLog("videos")
    for n in (10, 50, 70):
        for label, lo in (("64k", 40), ("128k", 100)):
            log.measure(label, n >= lo)
    log.note_bin("64k", queries=2, built=True)
    log.note_bin("128k", queries=0, built=False)
    stored = log.to_dict()
    assert stored["length_bins"] == {"64k": {"long_enough": 2, "too_short": 1, "queries": 2, "built": True},
                                     "128k": {"long_enough": 0, "too_short": 3, "queries": 0, "built": False}}
    assert summary_lines({"v": stored})[1:] == [
        "    per length bin: 64k: 2 long enough, 1 too short, 2 queries; 128k: 0 long enough, 3 too short, "
        "0 queries (not built)",
        "    length bins left empty (not built): 128k (0 of 3 long enough)"]
    assert "length_bins" not in DropLog("records").to_dict()      # logs that measure no lengths are unchanged


def test_temporal_summarization_builds_the_64k_bin_and_names_the_empty_128k_bin(activitynet, tmp_path, capsys,
                                                                                 monkeypatch):
    from mmbench.cli import main

    monkeypatch.setenv("MMBENCH_HOME", str(tmp_path / "home"))
    out = tmp_path / "ts"
    assert main(["build", "--task", "temporal_summarization", "--source", "activitynet", "--out", str(out),
                 "--param", f"annotations={activitynet / 'ann.json'}", "--param", f"video_root={activitynet / 'videos'}",
                 "--param", "lengths=[65536,131072]", "--param", "frame_size=[1024,768]",
                 "--param", "distractors=1"]) == 0
    printed = capsys.readouterr().out
    from mmbench.data.poolset import load_poolset

    ps = load_poolset(out, verify=True)
    # independent count: a video of n 1-FPS frames is n x 768 tokens; long enough once it reaches the bin's edge
    frames = {vid: v["frames"] for vid, v in ps.manifest["builder"]["videos"].items()}
    ranges = bin_ranges(LONG)
    expected_long = {label: sum(n * 768 >= ranges[L][0] for n in frames.values())
                     for label, L in (("64k", 65536), ("128k", 131072))}
    assert expected_long == {"64k": 3, "128k": 0}
    bins = ps.manifest["dropped"]["bins"]["length_bins"]
    assert bins == {"64k": {"long_enough": 3, "too_short": 2, "queries": 3, "built": True},
                    "128k": {"long_enough": 0, "too_short": 5, "queries": 0, "built": False}}
    assert "    per length bin: 64k: 3 long enough, 2 too short, 3 queries; 128k: 0 long enough, 5 too short, " \
           "0 queries (not built)" in printed
    assert "    length bins left empty (not built): 128k (0 of 5 long enough)" in printed
    assert {item.meta["length_bin"] for item in ps.pools} == {"64k"} and len(ps.pools) == 6
    assert all(ranges[65536][0] <= c.tokens < ranges[65536][1] for c in ps.candidates)
    assert validate(ps).ok


def test_temporal_summarization_refuses_when_no_requested_bin_has_a_video_and_says_how_many_were_short(
        activitynet, tmp_path):
    with pytest.raises(ValueError, match=r"no pool could be built: .*; decoded videos per length bin: "
                                         r"128k: 0 long enough, 5 too short$"):
        build_ts("activitynet", tmp_path / "ts", annotations=str(activitynet / "ann.json"),
                 video_root=str(activitynet / "videos"), lengths=[131072], frame_size=FRAME, distractors=1,
                 progress=False)


def _govreport(path, reports):
    path.write_text("".join(json.dumps({"id": r.id, "report": r.text, "summary": r.summary}) + "\n"
                            for r in reports))
    return str(path)


@pytest.fixture(scope="module")
def reports(counter):
    """Three short reports (1K-2K tokens) and three of 32K-64K, cut from one stream of disjoint text."""
    return natural_reports([(1024, 2048), (32768, 65536)], 3, counter.text)


def test_logical_summarization_refuses_a_long_bin_it_cannot_fill_with_the_counts(reports, counter, tmp_path):
    gov = _govreport(tmp_path / "gov.jsonl", reports[:5])          # only two long reports
    lengths = {r.id: counter.text(r.text) for r in reports[:5]}
    assert sorted(n > 32768 for n in lengths.values()) == [False] * 3 + [True] * 2
    with pytest.raises(ValueError) as err:
        build_ls("real", tmp_path / "o", lengths=LONG, datasets=("govreport",), queries_per_dataset=3,
                 candidates_per_query=3, lookalikes=2, govreport=gov, progress=False)
    assert str(err.value).startswith("govreport bin 64k = (32768, 65536]: 2 documents fit, 3 are needed")
    assert str(err.value).endswith(
        "govreport reports measured per bin: 64k: 2 long enough, 3 too short, 2 kept of 3 needed (not built); "
        "128k: 0 long enough, 5 too short, 0 kept of 3 needed (not built)")
    assert "\n" not in str(err.value) and not (tmp_path / "o").exists()


def test_logical_summarization_builds_a_64k_bin_its_long_reports_fill_and_stores_the_counts(reports, counter,
                                                                                          tmp_path):
    gov = _govreport(tmp_path / "gov.jsonl", reports)
    ps = build_ls("real", tmp_path / "o", lengths=[65536], datasets=("govreport",), queries_per_dataset=4,
                  candidates_per_query=3, lookalikes=2, govreport=gov, progress=False)
    log = ps.manifest["dropped"]["govreport"]
    assert log["length_bins"] == {"64k": {"long_enough": 3, "too_short": 3, "kept": 3, "needed": 3, "built": True}}
    assert log["dropped"] and all(k.startswith("fits no bin") for k in log["dropped"])
    assert "    per length bin: 64k: 3 long enough, 3 too short, 3 kept of 3 needed" in summary_lines({"g": log})
    easy = [c for c in ps.candidates if c.meta["difficulty"] == "easy"]
    assert len(easy) == 3 and all(32768 < c.tokens <= 65536 and c.meta["filler_tokens"] == 0 for c in easy)
    assert {item.meta["length_bin"] for item in ps.pools} == {"64k"} and validate(ps).ok


def test_visual_grounding_builds_a_64k_text_haystack_from_a_short_obelics_text_and_counts_the_wrap(tmp_path):
    """A real OBELICS haystack of about 2K tokens: the 2k bin fits in it, the 64k bin's text haystacks repeat it
    (built, valid, and counted as too short); a build whose bins all fit records nothing extra."""
    from test_visual_grounding_sources import write_needlebench, write_obelics

    from mmbench.tasks import get_task

    files = {"text_needles": str(write_needlebench(tmp_path / "needles.jsonl")), "haystack": str(write_obelics(tmp_path))}
    common = dict(kinds=("text",), backgrounds=("text",), depths=(0.5,), needles_per_kind=10, progress=False, **files)
    ps = get_task("visual_grounding").build("real", tmp_path / "vg", seed=0, lengths=(2048, 65536), **common)
    texts = __import__("pyarrow.parquet").parquet.read_table(files["haystack"]).column("texts").to_pylist()
    kept = [t for doc in texts for t in doc if t and "Moon" not in t]    # the paragraph naming a needle is left out
    n = len(UnifiedTokenCounter.default().tokenizer.encode("\n\n".join(kept)))
    assert 2048 <= n < 65536
    log = ps.manifest["dropped"]["haystack_text"]
    assert log["what"] == f"haystack text ({n} tokens; a longer text haystack repeats part of it)"
    assert log["length_bins"] == {"2k": {"long_enough": 1, "too_short": 0, "built": True},
                                  "64k": {"long_enough": 0, "too_short": 1, "built": True}}
    assert {c.meta["length_bin"] for c in ps.candidates} == {"2k", "64k"} and validate(ps).ok
    short = get_task("visual_grounding").build("real", tmp_path / "vg2", seed=0, lengths=(1024, 2048), **common)
    assert "haystack_text" not in short.manifest["dropped"]


def test_logical_summarization_counts_page_documents_per_bin_in_its_refusal(tmp_path):
    """MMLongBench layout (JSONL of page image paths, page text): three documents of 5-8 pages and two of 35-40
    pages of 1024 tokens; 64k needs three long documents and 128k has none."""
    from mmbench.builders.sources.sample_reports import natural_paged_documents

    docs = list(natural_paged_documents([(4096, 8192), (32768, 65536)], 3, size=(1024, 1024)))[:5]
    rows = []
    for d in docs:
        paths = {}
        for kind, pages in (("pages", d.pages), ("extended_pages", d.extension)):
            paths[kind] = [f"{d.id}/{kind}{k:03d}.png" for k in range(len(pages))]
            for rel, page in zip(paths[kind], pages):
                (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
                page.save(tmp_path / rel)
        rows.append({"id": d.id, "summary": d.summary, **paths, "page_texts": d.page_texts})
    (tmp_path / "summ.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert [len(d.pages) * 1024 > 32768 for d in docs] == [False] * 3 + [True] * 2
    with pytest.raises(ValueError) as err:
        build_ls("real", tmp_path / "o", lengths=LONG, datasets=("mmlongbench",), queries_per_dataset=3,
                 candidates_per_query=3, mmlongbench=str(tmp_path / "summ.jsonl"), mmlongbench_images=str(tmp_path),
                 progress=False)
    assert str(err.value) == (
        "mmlongbench bin 64k = (32768, 65536]: 2 documents fit, 3 are needed (candidates_per_query); add documents, "
        "lower candidates_per_query or leave the bin out of lengths; mmlongbench documents measured per bin: "
        "64k: 2 long enough, 3 too short, 2 kept of 3 needed (not built); "
        "128k: 0 long enough, 5 too short, 0 kept of 3 needed (not built)")


def test_multi_source_reasoning_counts_a_filler_text_shorter_than_a_bin(tmp_path):
    """A filler file of a few thousand tokens: the 8k expansions repeat part of it (built, valid, counted as
    too short); the default filler (the Language Reference, about 106K tokens) covers 8k and records nothing."""
    from mmbench.builders.sources.needles import sample_background_text
    from mmbench.tasks import get_task

    text = sample_background_text()[:12000]
    (tmp_path / "filler.txt").write_text(text, encoding="utf-8")
    n = len(UnifiedTokenCounter.default().tokenizer.encode(text))
    assert 1000 <= n < 8192
    common = dict(lengths=(8192,), queries_per_dataset=8, progress=False)
    ps = get_task("multi_source_reasoning").build("sample", tmp_path / "msr", seed=0,
                                                  filler=str(tmp_path / "filler.txt"), **common)
    log = ps.manifest["dropped"]["filler_text"]
    assert log["what"] == f"filler text filler.txt ({n} tokens; an expansion to a longer bin repeats part of it)"
    assert log["length_bins"] == {"8k": {"long_enough": 0, "too_short": 1, "built": True}}
    assert validate(ps).ok
    default = get_task("multi_source_reasoning").build("sample", tmp_path / "msr2", seed=0, **common)
    assert "filler_text" not in default.manifest["dropped"]


def test_temporal_summarization_under_resolution_control_counts_per_bin_why_a_video_cannot_reach_it(
        activitynet, tmp_path):
    """Frames take 4 to 768 tokens (32x32-pixel cells) and a bin is reached within ±10 %: 20–76 frames all reach
    4096; at 256 the 76-frame video is too long even at 4 tokens a frame (304 > 281.6); at 64k every video is
    too short even at 768 (76 x 768 = 58,368 < 58,982.4). The 64k bin is left empty and named."""
    ps = build_ts("activitynet", tmp_path / "ts", seed=0, annotations=str(activitynet / "ann.json"),
                  video_root=str(activitynet / "videos"), lengths=[256, 4096, 65536], length_control="resolution",
                  distractors=1, progress=False)
    frames = sorted(v["frames"] for v in ps.manifest["builder"]["videos"].values())
    assert frames == DURATIONS
    bins = ps.manifest["dropped"]["bins"]["length_bins"]
    assert {k: {f: b[f] for f in b if f != "queries"} for k, b in bins.items()} == {
        "256": {"long_enough": 4, "too_short": 0, "too_long": 1, "built": True},
        "4k": {"long_enough": 5, "too_short": 0, "built": True},
        "64k": {"long_enough": 0, "too_short": 5, "built": False}}
    assert bins["64k"]["queries"] == 0 and bins["256"]["queries"] > 0
    lines = summary_lines(ps.manifest["dropped"])
    assert "    per length bin: 256: 4 long enough, 0 too short, 1 too long" in "\n".join(lines)
    assert "    length bins left empty (not built): 64k (0 of 5 long enough)" in lines
    assert {item.meta["length_bin"] for item in ps.pools} == {"256", "4k"} and validate(ps).ok


def test_a_drop_log_refuses_an_unknown_outcome():
    log = DropLog("videos")
    log.measure("8k", False, "no_frame_size")
    assert log.bins["8k"] == {"long_enough": 0, "too_short": 0, "no_frame_size": 1}
    with pytest.raises(ValueError, match="unknown length-bin outcome 'too_wide'"):
        log.measure("8k", False, "too_wide")
