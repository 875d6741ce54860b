"""Visual Grounding invariants: each one holds on the sample and is caught when broken; drawing and wording fixes."""
import copy
import json
import re
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mmbench.builders.checks import visual_grounding as checks
from mmbench.builders.parts.validity import write_valid_poolset
from mmbench.tasks.validation import task_checks, validate
from mmbench.data.documents import Text
from mmbench.data.poolset import PoolSetError, load_poolset


@pytest.fixture(scope="module")
def small(vg_small):
    return load_poolset(vg_small, verify=True)


def _broken(ps, invariant):
    report = validate(ps)
    assert not report.ok
    assert set(report.counts()) == {invariant}, report.counts()
    return report.violations


def test_every_invariant_holds_on_the_sample_and_the_manifest_says_so(small):
    report = validate(small)
    assert report.ok, report.summary_line()
    assert set(checks.INVARIANTS) <= set(report.invariants)
    assert all(report.checked[name] > 0 for name in checks.INVARIANTS)
    stored = small.manifest["validity"]
    assert stored["ok"] and stored["violations"] == 0 and set(stored["invariants"]) == set(report.invariants)


def test_cli_validate_passes_on_the_sample(vg_small):
    res = subprocess.run([sys.executable, "-m", "mmbench", "validate", str(vg_small)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert "entity_unique" in res.stdout and "is valid" in res.stdout


def _text_item(ps, bg="text"):
    return next(i for i in ps.pools if i.meta["anchor_kind"] == "text" and i.meta["background_modality"] == bg)


def test_a_second_candidate_naming_the_entity_is_caught(small, tmp_path):
    """The NeedleBench defect: another candidate of the cell answers the query equally."""
    ps = copy.deepcopy(small)
    item = _text_item(ps)
    q = ps.query_by_id()[item.query_id]
    other = next(c for c in ps.candidates if c.id in item.candidate_ids and c.meta["family"] != q.meta["family"])
    k = next(i for i, s in enumerate(other.segments) if i != other.meta["anchor_segment"] and isinstance(s, Text))
    for c in ps.candidates:   # the whole family in this cell, so its haystack stays shared
        if c.id in item.candidate_ids and c.meta["family"] == other.meta["family"]:
            c.segments[k] = Text(c.segments[k].text + f" It happened on {q.meta['entity']} too.")
    violations = _broken(ps, "entity_unique")
    assert any(v.item == item.id and other.id in v.detail for v in violations)
    with pytest.raises(PoolSetError, match="entity_unique"):
        write_valid_poolset(ps, tmp_path / "never", task_checks(ps.task))


def test_cli_validate_names_item_and_invariant_of_a_pool_set_written_around_the_checks(small, tmp_path, capsys):
    from mmbench.cli import main
    from mmbench.data.poolset import write_poolset

    ps = copy.deepcopy(small)
    item = _text_item(ps, "image")
    q = ps.query_by_id()[item.query_id]
    cands = ps.candidate_by_id()
    other = next(cands[c] for c in item.candidate_ids if cands[c].meta["family"] != q.meta["family"])
    other.segments[other.meta["anchor_segment"]] = Text(f"Nothing happened on {q.meta['entity']}.")
    write_poolset(ps, tmp_path / "bad", media_from=small.root / "media")   # the plain writer does not check
    assert main(["validate", str(tmp_path / "bad")]) == 2
    captured = capsys.readouterr()
    assert f"{item.id}: entity_unique: candidate {other.id} also names" in captured.out
    assert "entity_unique" in captured.err and "\n" not in captured.err.strip()


def test_a_copy_of_the_anchor_elsewhere_is_caught(small):
    ps = copy.deepcopy(small)
    item = _text_item(ps, "image")
    cands = ps.candidate_by_id()
    rel = cands[item.relevant_ids[0]]
    anchor = rel.segments[rel.meta["anchor_segment"]]
    victim = cands[next(c for c in item.candidate_ids if cands[c].meta["family"] != rel.meta["family"])]
    victim.segments.append(anchor)
    found = validate(ps).counts()
    assert found.get("anchor_unique") and found.get("entity_unique")


def test_lookalikes_with_different_haystacks_are_caught(small):
    ps = copy.deepcopy(small)
    item = _text_item(ps)
    cands = ps.candidate_by_id()
    rel = cands[item.relevant_ids[0]]
    sibling = next(cands[c] for c in item.candidate_ids if c != rel.id and cands[c].meta["family"] == rel.meta["family"])
    k = next(i for i, s in enumerate(sibling.segments) if i != sibling.meta["anchor_segment"])
    sibling.segments[k] = Text(sibling.segments[k].text.replace(" ", "  ", 1))
    # named as the odd one out, or as the member the others are compared with (the cell's stored order decides)
    assert any(sibling.id in (v.item, v.detail.rsplit(" ", 1)[-1], v.detail.split("from ")[-1].split(" ")[0])
               for v in _broken(ps, "shared_haystack"))


def test_uneven_cells_and_double_labels_are_caught(small):
    ps = copy.deepcopy(small)
    ps.pools[0].candidate_ids = ps.pools[0].candidate_ids[:-1] if ps.pools[0].relevant_ids[0] != \
        ps.pools[0].candidate_ids[-1] else ps.pools[0].candidate_ids[1:]
    assert validate(ps).counts().get("candidates_per_query")
    ps = copy.deepcopy(small)
    ps.pools[5].relevant_ids = ps.pools[5].candidate_ids[:2]
    assert validate(ps).counts().get("one_relevant")


def test_a_lookalike_that_differs_beyond_its_entity_is_caught(small):
    ps = copy.deepcopy(small)
    item = _text_item(ps)
    cands = ps.candidate_by_id()
    rel = cands[item.relevant_ids[0]]
    i = rel.meta["anchor_segment"]
    changed = rel.segments[i].text.replace("was", "had been", 1).replace("the", "a", 1)
    for c in ps.candidates:   # the same edit on every copy of this anchor keeps the haystacks shared
        if c.meta["needle_id"] == rel.meta["needle_id"] and c.meta["background_modality"] == "text":
            c.segments[c.meta["anchor_segment"]] = Text(changed)
    assert validate(ps).counts().get("lookalike_anchor")


def test_bm25_finds_text_anchors_on_image_backgrounds_at_every_depth(small):
    from mmbench.models.registry import load_model
    from mmbench.running.runner import RunOptions, run_poolset

    per_query, _, _ = run_poolset(small, load_model("bm25"), RunOptions(progress=False, use_cache=False))
    sel = per_query[(per_query["anchor_kind"] == "text") & (per_query["background_modality"] == "image")]
    assert len(sel) == 2 * 6 * 10
    assert sel.groupby("depth")["precision_at_1"].mean().min() >= 0.95


def test_length_and_depth_promises_are_rechecked(small):
    ps = copy.deepcopy(small)
    ps.candidates[3].tokens = int(ps.candidates[3].meta["length_tokens"] * 1.2)
    ps.candidates[7].meta["anchor_token_offset"] += 40
    counts = validate(ps).counts()
    assert counts.get("length_bin") and counts.get("depth")


def test_background_text_naming_a_query_entity_is_redrawn():
    from mmbench.builders.visual_grounding import clean_background

    class Tok:
        def decode(self, ids):
            return " ".join(ids)

    class Bg:
        tokenizer = Tok()
        draws = [["the", "Moon", "rose"], ["calm", "sea"]]

        def text_window(self, rng, n):
            return self.draws.pop(0)

    units, segments = clean_background(Bg(), "text", 3, 256, np.random.default_rng(0), (["moon"], []), "cell")
    assert units == [("text", ["calm", "sea"])]
    assert [s.text for s in segments] == ["calm sea"]   # the clean draw, decoded once for the candidates

    class Stuck(Bg):
        def text_window(self, rng, n):
            return ["Moon"]

    with pytest.raises(ValueError, match="cell: every one of 50 background windows contains 'moon'"):
        clean_background(Stuck(), "text", 3, 256, np.random.default_rng(0), (["moon"], []), "cell")


# ---- drawing and wording ------------------------------------------------------------------

def test_crescent_bite_shows_the_background_and_checkers_stay_inside_the_sphere():
    from PIL import Image

    from mmbench.builders.sources import procedural as P

    base = Image.new("RGB", (200, 200), (10, 120, 10))
    img = np.asarray(P.draw_object(base, "crescent", "orange", 1, seed=0)).astype(int)
    orange = np.array(P.COLOURS["orange"])
    painted = np.abs(img - orange).sum(axis=2) < 30
    yy, xx = np.mgrid[0:200, 0:200]
    r = 200 * 0.32
    y0 = 100 + np.random.default_rng(0).uniform(-0.05, 0.05) * 200
    off = r * 0.45
    in_bite = np.hypot(xx - (100 + off), yy - (y0 - off * 0.3)) < r - 2
    in_disc = np.hypot(xx - 100, yy - y0) < r - 2
    assert not painted[in_bite].any()                      # the bite is background, not a full disc
    assert painted[in_disc & ~np.hypot(xx - (100 + off), yy - (y0 - off * 0.3)).__lt__(r + 2)].all()
    assert 0.2 < painted.sum() / in_disc.sum() < 0.6

    img = np.asarray(P.draw_object(base, "checkered sphere", "purple", 1, seed=0)).astype(int)
    purple = np.abs(img - np.array(P.COLOURS["purple"])).sum(axis=2) < 30
    assert purple.any()
    assert (np.hypot(xx[purple] - 100, yy[purple] - y0) <= r + 1).all()   # no square sticks out


def test_one_article_helper_and_no_slips_in_sample_texts():
    from mmbench.builders.sources.articles import article_for, with_article
    from mmbench.builders.sources.needles import sample_needles
    from mmbench.builders.sources.sample_flickr import captions, sample_scenes

    assert [article_for(w) for w in ("orange", "engineer", "hour", "unicorn", "one-eyed", "blue", "8", "18th")] == \
        ["an", "an", "an", "a", "a", "a", "an", "an"]
    assert with_article("orange crescent") == "an orange crescent"
    texts = [n.query for n in sample_needles()] + [c for s in sample_scenes(100) for c in captions(s)]
    assert "A picture of an orange crescent on a natural background." in texts
    slips = [t for t in texts if re.search(r"\b[Aa] (?:orange|engineer|[aeio]\w)", t)
             or re.search(r"\b[Aa]n (?:[b-df-hj-np-tv-z])", t)]
    assert slips == []


# ---- mmbench prepare obelics ---------------------------------------------------------------

def _obelics_with_urls(tmp_path):
    docs = {"images": [[None, "https://img.example/a.jpg", None, "https://img.example/b.png"],
                       ["https://img.example/gone.jpg", None]],
            "texts": [["Harbour notes " * 20, None, "Tides and sails " * 20, None], [None, "Mountain passes " * 30]],
            "metadata": ["[]", "[]"], "general_metadata": ["{}", "{}"]}
    src = tmp_path / "obelics-url.parquet"
    pq.write_table(pa.table(docs), src)
    return src


def _img2dataset_folder(tmp_path):
    from PIL import Image

    shard = tmp_path / "dl" / "00000"
    shard.mkdir(parents=True)
    for key, url, colour in (("000000000", "https://img.example/a.jpg", (200, 30, 30)),
                             ("000000001", "https://img.example/b.png", (30, 30, 200))):
        Image.new("RGB", (40, 30), colour).save(shard / f"{key}.jpg")
        (shard / f"{key}.json").write_text(json.dumps({"url": url, "key": key, "status": "success"}))
    (shard / "000000002.json").write_text(json.dumps({"url": "https://img.example/gone.jpg", "status": "failed_to_download"}))
    (tmp_path / "dl" / "00000_stats.json").write_text(json.dumps({"count": 3, "successes": 2}))
    return tmp_path / "dl"


def test_prepare_obelics_from_an_img2dataset_folder_and_build_reads_it(tmp_path, capsys):
    from mmbench.builders.sources.backgrounds import obelics_background
    from mmbench.cli import main
    from mmbench.data.media import MediaStore
    from mmbench.data.tokens import UnifiedTokenCounter

    src, folder, out = _obelics_with_urls(tmp_path), _img2dataset_folder(tmp_path), tmp_path / "prep" / "obelics.parquet"
    assert main(["prepare", "obelics", str(src), "--images", str(folder), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "3 read -> 2 kept" in printed and "dropped 1: no local file for the URL" in printed
    table = pq.read_table(out)
    assert table.column_names == pq.read_table(src).column_names
    images = table.column("images").to_pylist()
    assert images[1] == [None, None] and images[0][1].endswith("000000000.jpg")
    bg = obelics_background(out, UnifiedTokenCounter.default().tokenizer, MediaStore(tmp_path / "m"))
    assert bg.pool_size == 2
    assert list(tmp_path.joinpath("prep").iterdir()) == [out]       # written atomically, no temp left
    assert main(["prepare", "obelics", str(src), "--images", str(folder), "--out", str(out)]) == 2
    assert "exists; choose another --out or pass --overwrite" in capsys.readouterr().err
    assert main(["prepare", "obelics", str(src), "--images", str(folder), "--out", str(out), "--overwrite"]) == 0


def test_prepare_obelics_url_map_errors_are_one_line(tmp_path, capsys):
    from mmbench.cli import main

    src = _obelics_with_urls(tmp_path)
    bad = tmp_path / "map.tsv"
    bad.write_text("https://img.example/a.jpg\ta.jpg\nhttps://img.example/b.png\n")
    assert main(["prepare", "obelics", str(src), "--url-map", str(bad), "--out", str(tmp_path / "o.parquet")]) == 2
    err = capsys.readouterr().err.strip()
    assert "map.tsv:2: expected `url<TAB>path`" in err and "\n" not in err
    empty = tmp_path / "map.json"
    empty.write_text(json.dumps({"https://img.example/a.jpg": "nowhere.jpg"}))
    assert main(["prepare", "obelics", str(src), "--url-map", str(empty), "--out", str(tmp_path / "o.parquet")]) == 2
    assert "none of its 3 image URLs has a local file" in capsys.readouterr().err
    assert not (tmp_path / "o.parquet").exists()
