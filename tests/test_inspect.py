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
