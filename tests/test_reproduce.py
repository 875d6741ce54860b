"""`mmbench reproduce`: the reproduction matrix run as a regression on the five official pool sets.

The fast part (every task's official sample with BM25 and MiniLM, all but Visual Grounding with two tiny random
image models, Flickr with the reference LLM ranker, and BM25 on a seeded `--limit` selection of Visual Grounding)
runs here, on samples built once per session and shared with the official-hash check (tests/official_samples.py).
The slow part (tiny-clip on all of Visual Grounding) runs with MMBENCH_REPRODUCE_SLOW=1. A flipped scoring detail (the tie-break seed) or another
request from the ranker must make it fail, naming task, model, expected and got."""
from __future__ import annotations

import hashlib
import json
import os

import numpy as np
import pytest

from mmbench.cli import main
from mmbench.leaderboards import reproduction as rp
from mmbench.leaderboards.official import OfficialRegistry
from official_samples import official_sample

SLOW = os.environ.get("MMBENCH_REPRODUCE_SLOW") == "1"
TASKS = ("flickr_hard_negatives", "logical_summarization", "multi_source_reasoning", "temporal_summarization",
         "visual_grounding")


@pytest.fixture(scope="module")
def home(official_home):
    for task in TASKS:
        official_sample(official_home, task)
    return official_home


def test_the_matrix_covers_every_official_pool_set_with_every_model_in_its_fast_part():
    """BM25 and MiniLM on the whole of every task's official pool set, the two tiny image models on all but Visual
    Grounding, the reference ranker on the task of single-image candidates; BM25 on a seeded selection of Visual
    Grounding; the slow row (tiny-clip on all of Visual Grounding) is there too."""
    matrix = rp.load_matrix()
    registry = OfficialRegistry.load()
    from mmbench.tasks import get_task

    for task in registry.tasks():
        official = registry.get(task, get_task(task).version)
        fast = [r for r in matrix.values() if r.task == task and r.fast]
        want = {"bm25", "minilm"} | (set() if task == "visual_grounding" else {"tiny-clip", "tiny-gme"}) \
            | ({"llm-ranker"} if task == "flickr_hard_negatives" else set())
        assert {r.limit for r in fast if r.model == "minilm"} == {None}, f"{task}: MiniLM runs the whole sample"
        assert {r.model for r in fast} == want, f"{task}: fast rows {[r.key for r in fast]}"
        assert all(r.content_hash == official.content_hash for r in matrix.values() if r.task == task), \
            f"{task}: the matrix is not keyed by the official pool set {official.content_hash[:12]}"
    conds = rp.conditions(registry.tasks())
    assert {c.key for c in conds} == set(matrix), "every condition has a row, and no row is for a condition " \
                                                  "reproduce does not run"
    assert {c.key for c in conds if not c.fast} == {"visual_grounding/tiny-clip/all"}
    assert "visual_grounding/bm25/300" in matrix   # a seeded selection on an official pool set pins --limit's sampling
    for row in matrix.values():
        assert row.fast == next(c.fast for c in conds if c.key == row.key), row.key
        assert row.n_items == (row.limit or row.n_items) and row.main_metric in row.figures


def test_reproduce_fast_passes_on_the_official_pool_sets(home, monkeypatch, capsys):
    monkeypatch.setenv("MMBENCH_HOME", str(home))
    code = main(["reproduce", "--fast"])
    out = capsys.readouterr().out
    assert code == 0, out
    for task in TASKS:
        assert f"\n{task}  " in out or out.startswith(task), f"{task} missing from the table:\n{out}"
    assert "MISS" not in out and "within tolerance" in out


@pytest.mark.skipif(not SLOW, reason="the slow row: tiny-clip on all 7,250 Visual Grounding documents (6.3 min on 2 "
                                      "cores; CONTRIBUTING, before a release); MMBENCH_REPRODUCE_SLOW=1 runs it")
def test_reproduce_slow_rows_pass_on_the_official_pool_sets(home, monkeypatch, capsys):
    monkeypatch.setenv("MMBENCH_HOME", str(home))
    code = main(["reproduce", "--slow"])
    out = capsys.readouterr().out
    assert code == 0 and "MISS" not in out, out
    assert "visual_grounding  tiny-clip" in out


def test_a_flipped_tie_break_seed_is_a_miss_naming_task_model_expected_and_got(home, monkeypatch, capsys):
    """BM25 sees none of Flickr's image candidates: every score ties and the seeded tie-break alone orders them."""
    import mmbench.running.scoring as scoring

    def flipped(item_id: str, n: int, seed: int) -> np.ndarray:
        digest = hashlib.sha256(f"{seed + 1}:{item_id}".encode()).digest()
        return np.random.default_rng(int.from_bytes(digest[:8], "little")).permutation(n)

    monkeypatch.setenv("MMBENCH_HOME", str(home))
    monkeypatch.setattr(scoring, "tiebreak_keys", flipped)
    code = main(["reproduce", "--task", "flickr_hard_negatives", "--model", "bm25"])
    out = capsys.readouterr().out
    assert code == 1, out
    expected = rp.load_matrix()["flickr_hard_negatives/bm25/all"].figures
    main_metric = next(iter(expected))
    miss = next(line for line in out.splitlines() if line.startswith("MISS") and main_metric in line)
    assert "flickr_hard_negatives / bm25" in miss and f"expected {expected[main_metric].value:.6f}" in miss
    assert "got " in miss and miss.split("got ")[1].split()[0] != f"{expected[main_metric].value:.6f}"


def test_compare_names_an_unknown_pool_set_and_a_protocol_change():
    cond = rp.Condition("logical_summarization", "bm25")
    row = rp.Row("logical_summarization", "bm25", None, True, "2.4", "a" * 64, "1.2", 96, "precision_at_1",
                 {"precision_at_1": rp.Figure(0.5, 1e-6)})
    other_hash = rp.Row(**{**row.__dict__, "content_hash": "b" * 64})
    (c,) = rp.compare(cond, row, other_hash)
    assert not c.ok and "pool set bbbbbbbbbbbb built here, the matrix has aaaaaaaaaaaa" in c.why
    moved = rp.Row(**{**row.__dict__, "protocol_id": "1.3", "figures": {"precision_at_1": rp.Figure(0.5000005, 0)}})
    checks = rp.compare(cond, row, moved)
    assert [c.ok for c in checks] == [False, True]   # the protocol is a miss; a figure within tolerance is not
    (missing,) = rp.compare(cond, None, row)
    assert "no row" in missing.why and rp.REGENERATE in missing.why
    lines = rp.miss_lines(rp.compare(cond, row, rp.Row(**{**row.__dict__, "figures": {"precision_at_1": rp.Figure(0.4, 0)}})))
    assert lines == ["MISS logical_summarization / bm25: precision_at_1 expected 0.500000, got 0.400000 (tolerance ±1e-06)"]


def test_write_matrix_keeps_other_rows_and_round_trips(tmp_path):
    rows = list(rp.load_matrix().values())
    path = rp.save_matrix(rows[:3], tmp_path / "m.json", "test")
    assert list(rp.load_matrix(path).values()) == rows[:3]
    data = json.loads(path.read_text())
    assert data["written_by"] == rp.REGENERATE
    path.write_text(json.dumps({**data, "format": "other/1"}))
    with pytest.raises(rp.MatrixError, match="format"):
        rp.load_matrix(path)


def test_bad_selection_is_a_one_line_error(capsys):
    assert main(["reproduce", "--task", "nope"]) == 2
    assert "has no official pool set" in capsys.readouterr().err
    assert main(["reproduce", "--model", "clip-vit-b-32"]) == 2
    assert "not in the reproduction matrix" in capsys.readouterr().err
    assert main(["reproduce", "--task", "visual_grounding", "--model", "llm-ranker"]) == 2
    assert "no condition of the matrix matches" in capsys.readouterr().err   # not "all 0 figures ... within tolerance"
    assert main(["reproduce", "--slow", "--task", "flickr_hard_negatives"]) == 2
    assert "slow conditions: " in capsys.readouterr().err


def test_the_reference_ranker_is_a_fixed_function_of_the_request_with_repairable_flaws(tmp_path):
    """The reference server's reply depends on the query and each image's bytes (not on the port or the run), and
    its flaws go through the parser's repairs: a full ranking comes back whatever the flaw."""
    from mmbench.data.media import MediaStore
    from mmbench.rankers.reference import FLAWS, ReferenceServer, reference_order, reference_ranker
    from tiny_models import random_image

    media = MediaStore(tmp_path / "media")
    refs = [media.put_image(random_image(8, 8, i)).ref for i in range(6)]
    ids = [f"c{i}" for i in range(6)]
    captions = [f"caption number {k}" for k in range(40)]
    with ReferenceServer() as first, ReferenceServer() as second:
        a = [reference_ranker(first).rank(c, ids, refs, media) for c in captions]
        b = [reference_ranker(second).rank(c, ids, refs, media) for c in captions]
        card = reference_ranker(first).card.identity()
    assert first.url != second.url and [r.ranked_ids for r in a] == [r.ranked_ids for r in b]
    assert all(not r.failed and sorted(r.ranked_ids) == ids for r in a)
    assert "127.0.0.1" not in json.dumps(card)   # the port would change the protocol id run by run
    kinds = {k for r in a for k, v in r.repairs.items() if v}
    assert {"extracted", "missing", "duplicate", "coerced"} <= kinds and len(FLAWS) == 4
    clean = [r for r in a if not r.n_repairs]
    assert clean and len(clean) < len(a)
    # the order is by content: other image bytes give another order for the same caption
    images = [media.path(r).read_bytes() for r in refs]
    assert reference_order("q", images) != reference_order("q", images[:1] + [b"x" + images[1]] + images[2:])


def test_a_change_in_what_the_ranker_sends_is_a_miss(home, monkeypatch, capsys):
    """Another label before each image changes the request (its tokens and, through the digest, its flaws): the
    ranker's row misses, naming task, model, expected and got."""
    import mmbench.rankers.base as base
    from dataclasses import replace

    monkeypatch.setenv("MMBENCH_HOME", str(home))
    monkeypatch.setattr(base, "DEFAULT_PROMPT", replace(base.DEFAULT_PROMPT, label="Picture {id}:"))
    code = main(["reproduce", "--task", "flickr_hard_negatives", "--model", "llm-ranker"])
    out = capsys.readouterr().out
    assert code == 1, out
    miss = next(line for line in out.splitlines() if line.startswith("MISS") and "input_tokens" in line)
    assert miss.startswith("MISS flickr_hard_negatives / llm-ranker: input_tokens expected ")


@pytest.mark.parametrize("builder", ["clip", "qwen2vl"])
def test_the_tiny_models_build_the_same_weights_from_the_same_seed(builder, tmp_path):
    """The matrix's tiny-model rows rest on this: the same seed gives byte-identical weights and tokenizer."""
    from mmbench.models.tiny_random import BUILDERS

    def digests(folder):
        return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())
                if p.suffix == ".safetensors" or p.name == "tokenizer.json"}

    one, two = BUILDERS[builder](tmp_path / "a", 0), BUILDERS[builder](tmp_path / "b", 0)
    assert digests(one) == digests(two) and len(digests(one)) == 2
    assert digests(BUILDERS[builder](tmp_path / "c", 1)) != digests(one)


def test_list_tasks_says_what_a_text_model_sees_from_the_matrix_rows():
    """`mmbench list tasks` prints, beside each runtime, what the matrix's run of that model saw of the sample."""
    matrix = rp.load_matrix()
    flickr, vg, msr = (matrix[f"{t}/minilm/all"] for t in ("flickr_hard_negatives", "visual_grounding",
                                                           "multi_source_reasoning"))
    assert rp.seen_note(flickr, 100) == "text only: sees none of the 100 candidates, its ranking is chance"
    assert rp.seen_note(vg, 7200) == "text only: 6,000 of 7,250 documents hold content it cannot see"
    assert rp.seen_note(matrix["visual_grounding/tiny-clip/all"], 7200) == ""   # it sees the images
    limited = rp.Row(**{**vg.__dict__, "limit": 300})
    assert rp.seen_note(limited) == "text only: 83 % of documents hold content it cannot see"
    assert rp.seen_note(None) == "" and msr.seen["modalities"] == ["text"]
