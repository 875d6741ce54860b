"""`mmbench inspect`: items printed with their query, top candidates and the relevant one marked (issue 37, 5)."""
from __future__ import annotations

import re

import pandas as pd
import pytest

from mmbench.cli import main
from mmbench.data.documents import Document, Image, Text
from mmbench.results.inspection import ItemChoice, choose_items, excerpt, format_item, seen_note

SMALL = {  # each task's sample, cut to seconds (BM25 ranks it)
    "visual_grounding": dict(lengths=(256,), needles_per_kind=4),
    "multi_source_reasoning": dict(lengths=(2048,), datasets=("hotpotqa",), queries_per_dataset=6,
                                   candidates_per_query=4),
    "logical_summarization": dict(lengths=(8192,)),
    "temporal_summarization": dict(videos=4, lengths=(128,), frame_size=(64, 64)),
    "flickr_hard_negatives": {},
}


@pytest.mark.parametrize("task", sorted(SMALL))
def test_inspect_marks_the_relevant_candidate_on_every_sample(task, tmp_path, capsys):
    from mmbench.tasks import get_task

    data, out = tmp_path / "data", tmp_path / "run"
    get_task(task).build("sample", data, seed=0, progress=False, **SMALL[task])
    assert main(["run", "--task", task, "--data", str(data), "--model", "bm25", "--output", str(out), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["inspect", str(out), "--data", str(data), "--worst", "2", "--top", "3"]) == 0
    printed = capsys.readouterr().out
    per_query = pd.read_parquet(out / "per_query.parquet").set_index("item_id")
    items = re.findall(r"^== (\S+)", printed, flags=re.M)
    assert len(items) == 2
    for block, item in zip(printed.split("\n== ")[:2], items):
        relevant = set(per_query.loc[item, "relevant_ids"])
        marked = re.findall(r"^ \*\s+(\d+)\.\s+\S+\s+(\S+):", block, flags=re.M)
        assert marked and {cid for _, cid in marked} <= relevant, block   # the marked line is a relevant one
        ranked = list(per_query.loc[item, "ranked_ids"])
        assert all(ranked[int(r) - 1] == cid for r, cid in marked)       # at the rank the run gave it
        assert "query " in block and "[" in block                           # the query and what was seen


def _doc(i: str, text: str, images: int = 0) -> Document:
    return Document(i, [Text(text)] + [Image(f"media/{i}-{k}.png", 32, 32) for k in range(images)])


def test_worst_items_come_first_and_a_sample_is_seeded():
    pq = pd.DataFrame({"item_id": ["a", "b", "c", "d"], "precision_at_1": [1.0, 0.0, 0.0, 1.0],
                       "first_relevant_rank": [1, 2, 9, 1]})
    assert choose_items(pq, ItemChoice(worst=2)) == ["c", "b"]          # the relevant ranked lowest first
    one = choose_items(pq, ItemChoice(sample=2, seed=3))
    assert one == choose_items(pq, ItemChoice(sample=2, seed=3)) and len(set(one)) == 2
    with pytest.raises(ValueError, match="no item 'zz'"):
        choose_items(pq, ItemChoice(ids=("zz",)))


def test_an_item_shows_the_relevant_rank_beyond_the_top_and_what_was_cut():
    cands = {f"c{i}": _doc(f"c{i}", f"candidate number {i} " * 20, images=i % 2) for i in range(6)}
    item = {"item_id": "x", "subset": "s", "ranked_ids": [f"c{i}" for i in range(6)], "relevant_ids": ["c4"],
            "scores": [0.9, 0.8, 0.7, 0.6, 0.5, 0.4], "precision_at_1": 0.0}
    seen = {"c4": {"seen_tokens": 100, "unified_tokens": 900, "truncated": True, "cut_text_tokens": 800,
                   "dropped_images": 1}}
    lines = format_item(item, _doc("q", "which one"), cands, seen, "precision_at_1", top=2, chars=30)
    text = "\n".join(lines)
    assert "relevant at rank 5" in lines[0] and "   ..." in lines
    assert re.search(r"^ \*\s+5\.\s+0\.5000\s+c4:", text, flags=re.M)
    assert "truncated: saw 100 model tokens of 900, 800 text tokens cut, 1 images dropped" in text
    assert "not encoded in this run" in text                                # c0 has no seen row


def test_excerpt_and_seen_note():
    assert excerpt(_doc("d", "a  b\n c " * 50, images=2), 12) == '"a b c a b c…" + 2 images (media/d-0.png, ...)'
    assert seen_note({"seen_tokens": 12, "unified_tokens": 14, "truncated": False}) == "whole (14 tokens; 12 model tokens)"


# --- issue 45, item 5: inspect renders what the pool set says, never echoes the results ---------------------

@pytest.fixture(scope="module")
def vg_run(tmp_path_factory):
    """A BM25 run on the smallest Visual Grounding pool set, and the pool set."""
    from mmbench.tasks import get_task

    root = tmp_path_factory.mktemp("inspect45")
    data, out = root / "data", root / "run"
    get_task("visual_grounding").build("sample", data, seed=0, progress=False, lengths=(256,), backgrounds=("text",),
                                       kinds=("text",), needles_per_kind=2)
    assert main(["run", "--task", "visual_grounding", "--data", str(data), "--model", "bm25", "--output", str(out),
                 "--quiet"]) == 0
    return data, out


def _forged(vg_run, tmp_path, change):
    """A copy of the run whose per_query table `change` edited, re-sealed (its digests written again)."""
    import shutil

    from mmbench.results.store import load_results, write_results

    out = tmp_path / "forged"
    shutil.copytree(vg_run[1], out)
    res = load_results(out)
    per_query = res.per_query.copy()
    change(per_query)
    write_results(out, per_query, res.seen, res.summary)
    return out


ESC_TITLE, CLEAR = "\x1b]0;pwned\x07", "\x1b[2J\x1b[31m"


def test_control_sequences_in_ids_print_escaped(vg_run, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("MMBENCH_HOME", str(tmp_path / "home"))

    def change(pq):
        pq.loc[0, "subset"] = "s" + CLEAR
        pq.at[0, "ranked_ids"] = [CLEAR + "fake", *list(pq.at[0, "ranked_ids"])]
        pq.at[0, "scores"] = [9.0, *list(pq.at[0, "scores"])]

    out = _forged(vg_run, tmp_path, change)
    item = str(pd.read_parquet(out / "per_query.parquet")["item_id"][0])
    capsys.readouterr()
    assert main(["inspect", str(out), "--data", str(vg_run[0]), "--item", item]) == 0
    printed = capsys.readouterr().out
    assert "\x1b" not in printed and "\x07" not in printed
    assert "\\x1b[2J\\x1b[31mfake: (not in the pool set)" in printed
    # the subset is the pool set's, whatever the results say
    assert "(subset text_anchor/text_background;" in printed


def test_escape_controls_covers_c0_c1_del_and_bidi():
    from mmbench.results.inspection import escape_controls

    assert escape_controls(ESC_TITLE) == "\\x1b]0;pwned\\x07"
    assert escape_controls("a\x7fb\x9bc\u202ed\u2028e") == "a\\x7fb\\x9bc\\u202ed\\u2028e"
    assert escape_controls("plain text, ümlaut, 漢字 and emoji 🙂") == "plain text, ümlaut, 漢字 and emoji 🙂"


def test_relevance_and_metrics_come_from_the_pool_set(vg_run, tmp_path, capsys):
    def change(pq):  # the first item: its relevant id moved to the top-ranked wrong candidate, P@1 forged
        ranked = list(pq.at[0, "ranked_ids"])
        wrong = next(c for c in ranked if c not in set(pq.at[0, "relevant_ids"]))
        pq.at[0, "relevant_ids"] = [wrong]
        pq.at[0, "ranked_ids"] = [wrong] + [c for c in ranked if c != wrong]
        pq.loc[0, "precision_at_1"] = 1.0
        pq.loc[0, "first_relevant_rank"] = 1

    original = pd.read_parquet(vg_run[1] / "per_query.parquet")
    truly_relevant = set(original.at[0, "relevant_ids"])
    out = _forged(vg_run, tmp_path, change)
    item = str(original["item_id"][0])
    capsys.readouterr()
    assert main(["inspect", str(out), "--data", str(vg_run[0]), "--item", item, "--top", "1"]) == 0
    printed = capsys.readouterr().out
    marked = re.findall(r"^ \*\s+(\d+)\.\s+\S+\s+(\S+):", printed, flags=re.M)
    assert marked and {cid for _, cid in marked} <= truly_relevant, printed
    assert int(marked[0][0]) > 1
    head = printed.splitlines()[0]
    assert "precision_at_1 0.000 [the results state 1.000, which this ranking does not give]" in head, head
    assert "relevant at rank 1;" not in head and "relevant at rank 1)" not in head


@pytest.mark.parametrize("metric", ["ranked_ids", "subset", "scores", "item_id", "nonsense", "error", "depth"])
def test_every_metric_works_or_is_refused_in_one_line(vg_run, metric, capsys):
    assert main(["inspect", str(vg_run[1]), "--data", str(vg_run[0]), "--metric", metric]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--metric {metric!r} is not a per-query metric" in err[0], err


def test_every_listed_metric_works(vg_run, capsys):
    from mmbench.evaluators.metrics import metric_names

    for metric in metric_names():
        assert main(["inspect", str(vg_run[1]), "--data", str(vg_run[0]), "--metric", metric, "--worst", "1"]) == 0
        assert f"; {metric} " in capsys.readouterr().out


def test_the_pool_set_is_found_through_the_runs_record(vg_run, tmp_path, capsys, monkeypatch):
    import json
    import shutil

    monkeypatch.setenv("MMBENCH_HOME", str(tmp_path / "empty-home"))
    info = json.loads((vg_run[1] / "results.json").read_text())["mmbench"]
    assert info["provenance"]["poolset"] == str(vg_run[0].resolve())
    capsys.readouterr()
    assert main(["inspect", str(vg_run[1]), "--worst", "1"]) == 0       # no --data
    assert "query " in capsys.readouterr().out
    moved = tmp_path / "elsewhere"
    shutil.copytree(vg_run[0], moved)
    run = tmp_path / "run"
    shutil.copytree(vg_run[1], run)
    shutil.rmtree(vg_run[0])
    try:
        assert main(["inspect", str(run), "--worst", "1"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "pass --data" in err[0] and str(vg_run[0].resolve()) in err[0], err
        assert main(["inspect", str(run), "--worst", "1", "--data", str(moved)]) == 0
    finally:
        shutil.copytree(moved, vg_run[0])
