"""Logical Summarization construction: BM25 look-alike replacements from other reports (checked
against rank-bm25), page replacements from the document's own extension, exact length matching,
constant C/Q, determinism, and a BM25 run where Hard pools are harder than Easy ones."""
import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from mmbench.builders.expansion import Filler, pad, text_unit
from mmbench.builders.logical_summarization import (HARD_EASY_TOLERANCE, LENGTH_TOLERANCE, PARTS, build, page_span,
                                                    part_span)
from mmbench.builders.lookalikes import LookalikeIndex
from mmbench.builders.sources.sample_reports import pydoc_reports
from mmbench.documents import Image, Text
from mmbench.models.bm25 import tokenize
from mmbench.poolset import load_poolset
from mmbench.tokens import UnifiedTokenCounter

C = 4
K = 3


@pytest.fixture(scope="module")
def ps(tmp_path_factory):
    out = tmp_path_factory.mktemp("ls") / "ls"
    build("sample", out, seed=0, lengths=(4096, 8192), queries_per_dataset=6, candidates_per_query=C, lookalikes=K,
          progress=False)
    return load_poolset(out, verify=True)


@pytest.fixture(scope="module")
def counter():
    return UnifiedTokenCounter.default()


def test_constant_candidates_per_query_and_subsets(ps):
    assert {p.subset for p in ps.pools} == {f"{d}/{x}/{n}" for d in ("govreport", "mmlongbench")
                                            for x in ("easy", "hard") for n in ("4k", "8k")}
    assert all(len(p.candidate_ids) == C for p in ps.pools)
    assert ps.manifest["counts"]["candidates_per_query"] == C


def test_lengths_and_hard_easy_matching(ps, counter):
    cands = ps.candidate_by_id()
    for c in ps.candidates:
        L = c.meta["length_tokens"]
        if c.meta["dataset"] == "govreport":
            assert abs(c.tokens - L) <= LENGTH_TOLERANCE * L
        else:                                   # whole pages, then one cropped page: at most a row short
            width = c.segments[0].width
            assert 0 <= L - c.tokens < -(-width // 32)
        if c.meta["difficulty"] == "hard":
            assert abs(c.tokens - cands[c.meta["provenance"]["counterpart"]].tokens) <= HARD_EASY_TOLERANCE
    for c in ps.candidates[::11]:
        assert counter.document(c) == c.tokens


def test_lookalikes_are_other_reports_ranked_by_bm25(ps):
    reports = {r.id: r for r in pydoc_reports()}
    ids = list(reports)
    reference = BM25Okapi([tokenize(reports[i].text) for i in ids], k1=1.5, b=0.75, epsilon=0.0)  # independent
    queries = {q.id: q for q in ps.queries}
    checked = 0
    for c in ps.candidates:
        if c.meta["dataset"] != "govreport" or c.meta["difficulty"] != "hard":
            continue
        own = c.meta["record_id"]
        repl = c.meta["provenance"]["replacement"]
        summary = queries[f"q-govreport-{own}"].segments[0].text
        scores = reference.get_scores(tokenize(summary))
        expected = [ids[i] for i in np.argsort(-scores, kind="stable") if ids[i] != own][:K]
        assert [x["doc"] for x in repl["lookalikes"]] == expected
        a, b = c.meta["provenance"]["replaced"]["segments"]
        new = c.segments[a:a + len(repl["paragraphs"])]
        for seg, para in zip(new, repl["paragraphs"]):
            assert para["from"] != own and para["from"] in expected
            source_text = reports[para["from"]].paragraphs[para["paragraph"]]
            assert isinstance(seg, Text) and (seg.text == source_text if not para["trimmed"]
                                              else source_text.startswith(seg.text[:40]))
        checked += 1
    assert checked >= 12


def test_replaced_parts_are_the_right_quarters(ps):
    cands = ps.candidate_by_id()
    for c in ps.candidates:
        if c.meta["dataset"] != "govreport" or c.meta["difficulty"] != "hard":
            continue
        prov = c.meta["provenance"]
        easy = cands[prov["counterpart"]]
        a, b = prov["replaced"]["segments"]
        report_units = [u for u in easy.meta["provenance"]["units"] if u[0] == "context"]
        n = len(report_units)
        tokens = [u[2] for u in report_units]
        lo, hi = PARTS[prov["part"]]
        assert sum(tokens[a:b]) == pytest.approx((hi - lo) * sum(tokens), abs=max(tokens))
        assert (a == 0) == (prov["part"] == "first_25") and (b == n) == (prov["part"] == "last_25")
        k = len(prov["replacement"]["paragraphs"])
        assert c.segments[:a] == easy.segments[:a]          # everything outside the part is untouched
        assert c.segments[a + k:] == easy.segments[b:]


def test_page_documents_take_unseen_pages_of_their_own_extension(ps):
    cands = ps.candidate_by_id()
    hard = [c for c in ps.candidates if c.meta["dataset"] == "mmlongbench" and c.meta["difficulty"] == "hard"]
    assert {c.meta["provenance"]["part"] for c in hard} == set(PARTS)
    for c in hard:
        prov = c.meta["provenance"]
        easy = cands[prov["counterpart"]]
        a, b = prov["replaced"]["segments"]
        n_pages = sum(1 for u in easy.meta["provenance"]["units"] if u[0] == "context")
        assert (a, b) == page_span(n_pages, *PARTS[prov["part"]])
        report = c.meta["record_id"].removeprefix("pages-")
        assert all(u.startswith(f"mmlongbench:{c.meta['record_id']}#{report}/") for u in prov["replaced"]["units"])
        for k in range(a, b):
            old, new = easy.segments[k], c.segments[k]
            assert isinstance(new, Image) and (new.width, new.height) == (old.width, old.height) and new.ref != old.ref
        assert all(isinstance(s, Image) for s in c.segments)
        ext = prov["replacement"]["extension_pages"]
        assert len(ext) == b - a and not any(p.startswith(report + "/") for p in ext)
        nums = [int(p.rsplit("/p", 1)[1]) for p in ext]
        assert nums == list(range(nums[0], nums[0] + len(nums)))   # consecutive pages


def test_local_excerpt_summaries_are_dropped_with_reason(ps):
    decisions = ps.manifest["builder"]["query_filter"]["decisions"]
    # pydoc-r04's summary quotes one paragraph: too local, or spread over none of the report
    (r04,) = [d for d in decisions if d["query_id"] == "pydoc-r04"]
    assert not r04["kept"] and ("local excerpt" in r04["reason"] or "matches only" in r04["reason"])
    kept = {d["query_id"] for d in decisions if d["kept"] and d["dataset"] == "govreport"}
    assert {q.meta["record_id"] for q in ps.queries if q.meta["dataset"] == "govreport"} <= kept


def test_span_helpers_and_padding(counter):
    units = [text_unit(counter, "word " * n) for n in (10, 10, 10, 10, 10, 10, 10, 10)]
    assert part_span(units, 0.0, 0.25) == (0, 2) and part_span(units, 0.75, 1.0) == (6, 8)
    assert part_span(units, 0.25, 0.75) == (2, 6)
    assert page_span(4, 0.0, 0.25) == (0, 1) and page_span(4, 0.25, 0.75) == (1, 3) and page_span(4, 0.75, 1) == (3, 4)
    filler = Filler.from_text("\n\n".join(r.text for r in pydoc_reports()[:3]), counter.tokenizer, "t")
    padded = pad(units, 1000, filler, np.random.default_rng(0))
    assert sum(counter.segment(u.segment) for u in padded) == 1000 and padded[:8] == units


def test_lookalike_index_excludes_and_orders():
    idx = LookalikeIndex(["a", "b", "c", "d", "e", "f"], ["river bank loan", "river water fish",
                                                          "loan interest bank rate", "cats sleep", "dogs bark", "owls"])
    got = idx.nearest("bank loan", 2, exclude=["a"])
    assert [g.doc_id for g in got] == ["c", "b"] and got[0].rank == 1 and got[0].score > got[1].score == 0


def test_same_seed_same_hash(tmp_path):
    kw = dict(lengths=(4096,), datasets=("govreport",), queries_per_dataset=4, candidates_per_query=3, progress=False)
    a = build("sample", tmp_path / "a", seed=1, **kw).content_hash
    assert a == build("sample", tmp_path / "b", seed=1, **kw).content_hash
    assert a != build("sample", tmp_path / "c", seed=2, **kw).content_hash


def test_bm25_run_hard_is_harder_than_easy(ps):
    from mmbench.models.registry import load_model
    from mmbench.runner import RunOptions, run_poolset

    per_query, _, info = run_poolset(ps, load_model("bm25"), RunOptions(use_cache=False, progress=False))
    assert info["n_failed_items"] == 0
    text = per_query[per_query["dataset"] == "govreport"]
    p1 = text.groupby("difficulty")["precision_at_1"].mean()
    assert p1["easy"] >= 0.8 and p1["hard"] <= p1["easy"] - 0.3


def test_page_middle_part_is_half_the_pages_when_the_quarters_round_up():
    """Middle 50 % is its own centred span: 6 pages give 3 middle pages (not the 2 left between rounded quarters)."""
    for n in range(1, 41):
        a, b = page_span(n, 0.25, 0.75)
        assert b - a == max(1, (n + 1) // 2) and 0 <= a and b <= n
        assert abs((a + b) / 2 - n / 2) <= 0.5          # centred within half a page
    assert page_span(6, 0.25, 0.75) == (1, 4) and page_span(10, 0.25, 0.75) == (2, 7)
    assert page_span(5, 0.25, 0.75) == (1, 4)            # unchanged where the quarters already gave half
