"""Temporal Summarization's real sources in their official layouts: ActivityNet Captions JSON and the
YoukuDenseCaption release (through `mmbench prepare youku`), with malformed variants."""
from __future__ import annotations

import json

import pytest

from mmbench.builders.parts.captions import rule_rewrite
from mmbench.builders.parts.events import Event
from mmbench.builders.sources.activitynet import read_activitynet
from mmbench.builders.sources.sample_videos import make_sample_videos
from mmbench.builders.sources.youku import read_youku
from mmbench.builders.temporal_summarization import build


def test_real_source_readers_validate(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"v_x": {"duration": 10, "timestamps": [[0, 5]], "sentences": ["a", "b"]}}))
    with pytest.raises(ValueError, match=r"bad.json: record 'v_x': field 'timestamps'"):
        read_activitynet(bad, tmp_path)
    jl = tmp_path / "youku.jsonl"
    jl.write_text(json.dumps({"video_id": "yk1", "duration": 30, "timestamps": None,
                              "sentences": ["一个女孩在跳舞", "她鞠躬"]}, ensure_ascii=False) + "\n"
                  + json.dumps({"duration": 3, "sentences": ["x"]}) + "\n")
    with pytest.raises(ValueError, match=r"youku.jsonl:2: missing field 'video_id'"):
        read_youku(jl, tmp_path)
    jl.write_text(jl.read_text(encoding="utf-8").splitlines()[0] + "\n", encoding="utf-8")
    (rec,) = read_youku(jl, tmp_path)
    assert rec.events is None and rec.lang == "zh" and rec.dataset == "youku" and rec.path is None
    assert rule_rewrite(rec.captions, rec.lang).startswith("首先，一个女孩在跳舞。")


# --- YoukuDenseCaption official release layout -------------------------------------------------

ZH = ("一个红球滚过灰色地面", "蓝色方块慢慢变大", "黄色星星在绿色背景上旋转", "紫色小球上下跳动")
ZH_PLACES = ("在农场里", "在厨房里", "在公园里", "在海边")


def _youku_release(root, n=4, seed=4):
    """A miniature release as its README lays it out: meta_files/<Category>.csv + data_files/<Category>/test/."""
    import csv

    videos = root / "data_files" / "Agriculture" / "test"
    records = make_sample_videos(videos, [30 + 2 * i for i in range(n)], seed=seed)
    (root / "benchmark_files").mkdir(parents=True)
    (root / "meta_files").mkdir()
    rows, moments = [], []
    for i, r in enumerate(records):
        events = r.events or tuple(Event(10.0 * k, 10.0 * (k + 1)) for k in range(3))
        caps = [{"timestamp": [round(e.start, 2), round(e.end, 2)], "sentence": f"{ZH[(i + k) % 4]}，{ZH_PLACES[i]}"}
                for k, e in enumerate(events[:3])]
        rows.append({"video_path": f"test/{r.id}.mp4", "caption": json.dumps(caps, ensure_ascii=False)})
        moments += [{"video": f"test/{r.id}.mp4", "category": "Agriculture", "timestamp": c["timestamp"],
                     "sentence": c["sentence"]} for c in reversed(caps)]
    with (root / "meta_files" / "Agriculture.csv").open("w", encoding="utf-8", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=["video_path", "caption"])
        w.writeheader()
        w.writerows(rows)
    (root / "benchmark_files" / "grounding.json").write_text(json.dumps(moments, ensure_ascii=False),
                                                             encoding="utf-8")
    return records


def test_prepare_youku_release_then_build(tmp_path, capsys):
    from mmbench.cli import main

    root = tmp_path / "Youku_Dense_Caption"
    _youku_release(root)
    out = tmp_path / "youku.jsonl"
    assert main(["prepare", "youku", "--root", str(root), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "4 videos read, 4 with event timestamps, 4 with a video file" in printed
    assert "Agriculture.csv: path <- 'video_path', caption <- 'caption'" in printed
    recs = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert recs[0]["video_path"] == "data_files/Agriculture/test/sample_00.mp4" and recs[0]["category"] == "Agriculture"
    assert len(recs[0]["timestamps"]) == len(recs[0]["sentences"]) == 3
    ps = build("youku", tmp_path / "ps", annotations=str(out), video_root=str(root), lengths=[128],
               frame_size=[64, 64], distractors=1, progress=False)
    assert {p.meta["dataset"] for p in ps.pools} == {"youku"} and ps.manifest["validity"]["ok"]
    assert ps.queries[0].segments[0].text.startswith("首先，") and len(ps.queries) == 4
    # grounding.json gives the same events (its moments come in any order and are put in time order)
    out2 = tmp_path / "grounding.jsonl"
    assert main(["prepare", "youku", "--root", str(root), "--out", str(out2), "--from", "grounding"]) == 0
    recs2 = [json.loads(x) for x in out2.read_text(encoding="utf-8").splitlines()]
    assert [(r["sentences"], r["timestamps"]) for r in recs2] == [(r["sentences"], r["timestamps"]) for r in recs]


def test_prepare_youku_malformed_release_gives_one_line_errors(tmp_path, capsys):
    from mmbench.cli import main

    root = tmp_path / "rel"
    _youku_release(root, n=1)
    csv_path = root / "meta_files" / "Agriculture.csv"
    good = csv_path.read_text(encoding="utf-8")
    out = str(tmp_path / "o.jsonl")

    def error(text, *extra):
        csv_path.write_text(text, encoding="utf-8")
        assert main(["prepare", "youku", "--root", str(root), "--out", out, *extra]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1, err
        return err[0]

    assert "Agriculture.csv: no caption column (looked for captions, caption" in error("video_path,words\na.mp4,x\n")
    assert "--caption-column" in error("video_path,words\na.mp4,x\n")
    line = error('video_path,caption\na.mp4,"[{""sentence"": ""x""}, {""timestamp"": [1, 2]}]"\n')
    assert "Agriculture.csv, line 2: field 'caption': an event has no sentence" in line
    line = error('video_path,caption\na.mp4,"[{""sentence"": ""x"", ""timestamp"": [1]}]"\n')
    assert "line 2: field 'caption': expected [start, end], got [1]" in line
    line = error('video_path,caption\na.mp4,"[oops"\n')
    assert "line 2: field 'caption': invalid JSON" in line
    assert "line 2: field 'video_path' is empty" in error('video_path,caption\n,一个人走路\n')
    assert "line 2: 3 fields for 2 columns (an unquoted comma in field 'caption'?)" in \
        error("video_path,caption\na.mp4,他走路,然后坐下\n")
    line = error('video_path,caption,timestamps\na.mp4,"[""一"", ""二""]","[[0, 1]]"\n')
    assert "line 2: field 'timestamps': expected one [start, end] per sentence (2)" in line
    csv_path.write_text(good, encoding="utf-8")
    (root / "benchmark_files" / "grounding.json").write_text('[{"video": "a.mp4", "sentence": "x"}]')
    assert main(["prepare", "youku", "--root", str(root), "--out", out, "--from", "grounding"]) == 2
    assert "grounding.json, record 0: field 'timestamp': missing [start, end]" in capsys.readouterr().err
    assert main(["prepare", "youku", "--root", str(tmp_path / "nowhere"), "--out", out]) == 2
    assert "meta_files not found: expected the YoukuDenseCaption release layout" in capsys.readouterr().err
    # plain-text captions: split into sentences, no timestamps (the shot detector segments such a video)
    from mmbench.builders.sources.youku_prepare import parse_captions

    assert parse_captions("一个人走进来。他坐下！然后离开", None, "f, line 2", "caption", None) == \
        (["一个人走进来。", "他坐下！", "然后离开"], None)


def test_activitynet_official_layout_and_malformed_variants(tmp_path):
    """val_1.json's shape: {"v_<id>": {"duration", "timestamps", "sentences"}}; each defect named by file, record, field."""
    (tmp_path / "QOlSCBRmfWY.mp4").write_bytes(b"x")
    ok = {"v_QOlSCBRmfWY": {"duration": 82.73, "timestamps": [[0.83, 19.86], [17.37, 60.81], [56.26, 79.42]],
                            "sentences": ["A young woman is seen standing in a room.", " Then she begins to dance.",
                                          " Finally she bows."]}}
    path = tmp_path / "val_1.json"
    path.write_text(json.dumps(ok))
    (rec,) = read_activitynet(path, tmp_path)
    assert rec.path.name == "QOlSCBRmfWY.mp4" and rec.duration == 82.73 and len(rec.events) == 3
    assert rule_rewrite(rec.captions) == ("First, a young woman is seen standing in a room. Then, she begins to "
                                          "dance. Finally, she bows.")
    cases = [
        ({"v_a": {"duration": "long", "timestamps": [[0, 1]], "sentences": ["x"]}}, r"record 'v_a': field 'duration'"),
        ({"v_a": {"duration": 9, "timestamps": [[0, 1]], "sentences": "x"}}, r"record 'v_a': field 'sentences'"),
        ({"v_a": {"duration": 9, "timestamps": [["a", 1]], "sentences": ["x"]}}, r"record 'v_a': field 'timestamps'"),
        ({"v_a": ["not", "an", "object"]}, r"record 'v_a' is not an object"),
        (["v_a"], r"expected an object mapping video ids to records"),
    ]
    for data, message in cases:
        path.write_text(json.dumps(data))
        with pytest.raises(ValueError, match=r"val_1.json: " + message):
            read_activitynet(path, tmp_path)
    path.write_text("{not json")
    with pytest.raises(ValueError, match=r"val_1.json:1: invalid JSON"):
        read_activitynet(path, tmp_path)


def test_prepare_refuses_unknown_categories_binary_csvs_and_a_negative_max_docs(tmp_path, capsys):
    """Issue 26 #7: `--categories Nope` and `--max-docs -1` wrote empty outputs and exited 0; a binary CSV
    failed with a bare codec error naming no file."""
    from mmbench.cli import main

    root = tmp_path / "rel"
    _youku_release(root, n=1)
    out = tmp_path / "o.jsonl"

    def one_error(argv):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1, err
        return err[0]

    line = one_error(["prepare", "youku", "--root", str(root), "--out", str(out), "--categories", "Nope"])
    assert "no category 'Nope'" in line and "Agriculture" in line and not out.exists()
    csv_path = root / "meta_files" / "Agriculture.csv"
    csv_path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe binary")
    line = one_error(["prepare", "youku", "--root", str(root), "--out", str(out)])
    assert f"{csv_path}: not a readable UTF-8 CSV file" in line
    line = one_error(["prepare", "obelics", str(tmp_path / "shard.parquet"), "--url-map", str(tmp_path / "m.json"),
                      "--out", str(tmp_path / "o.parquet"), "--max-docs", "-1"])
    assert "--max-docs -1: give at least 1" in line
