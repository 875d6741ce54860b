"""The leak audit (label-blind baselines), the blinding of ids and order, and `mmbench validate` on each leak kind."""
from __future__ import annotations

import copy
import itertools
from pathlib import Path

import pytest

from mmbench.builders.checks import leaks
from mmbench.builders.parts.blinding import blind
from mmbench.builders.multi_source_reasoning import build
from mmbench.cli import main
from mmbench.data.documents import Document, Text
from mmbench.data.poolset import PoolItem, PoolSet, load_poolset
from poolset_edits import rewrite, validate_cli


def _brute_p1(scores, relevant):
    """P@1 averaged over every order of the candidates, the top-scored one kept (an independent tie-break)."""
    hits = []
    for perm in itertools.permutations(range(len(scores))):
        best = max(perm, key=lambda i: (scores[i], -perm.index(i)))
        hits.append(relevant[best])
    return sum(hits) / len(hits)


@pytest.mark.parametrize("scores,relevant", [([1, 1, 0, 1], [0, 1, 0, 0]), ([0, 0, 0], [1, 0, 0]),
                                             ([3, 2, 3, 1, 3], [1, 0, 1, 0, 0]), ([5, 1], [0, 1])])
def test_expected_p1_equals_the_average_over_every_tie_break(scores, relevant):
    assert leaks.expected_p1(scores, relevant) == pytest.approx(_brute_p1(scores, relevant))


def _toy(n_items=30, C=6, leak_first=True, stem_ids=True, meta_leak=False) -> PoolSet:
    """n_items queries; each pool holds its own document and C-1 others; the label leaks where asked."""
    queries, cands, pools = [], [], []
    for i in range(n_items):
        queries.append(Document(id=f"q-rec{i:03d}" if stem_ids else f"q-{i * 7919 % 1000:03d}x",
                                segments=[Text(f"question {i}")], tokens=3, meta={"record": i}))
        cands.append(Document(id=f"doc-rec{i:03d}" if stem_ids else f"d-{i * 104729 % 1000:03d}y",
                              segments=[Text(f"document {i}")], tokens=100,
                              meta={"kind": "gold" if meta_leak else "any"}))
    for i in range(n_items):
        others = [cands[(i + k) % n_items].id for k in range(1, C)]
        own = cands[i].id
        ids = [own] + others if leak_first else others[:2] + [own] + others[2:]
        pools.append(PoolItem(id=f"item{i}", query_id=queries[i].id, subset="s", candidate_ids=ids,
                              relevant_ids=[own]))
    if meta_leak:   # each pool's others are its own distractors, marked differently from the relevant one
        for i, p in enumerate(pools):
            extra = [Document(id=f"x-{i * 31 + k:04d}", segments=[Text(f"other {i} {k}")], tokens=100,
                              meta={"kind": "other"}) for k in range(C - 1)]
            cands += extra
            p.candidate_ids = [e.id for e in extra[:2]] + p.relevant_ids + [e.id for e in extra[2:]]
    return PoolSet(task="toy", task_version="0", queries=queries, candidates=cands, pools=pools, seed=3)


def _leaking(ps, kept_apart=()):
    return {s.baseline for s in leaks.audit(ps, kept_apart) if s.leaks}


def test_audit_names_an_order_leak_and_an_id_leak_and_passes_a_blinded_set():
    leaky = _toy(leak_first=True, stem_ids=True)
    found = _leaking(leaky)
    assert {"first_position", "id_shared_tokens", "id_similarity"} <= found, found
    blinded = blind(copy.deepcopy(leaky))
    assert _leaking(blinded) == set()
    assert not any(p.candidate_ids[0] == p.relevant_ids[0] for p in blinded.pools[:3]) or \
        sum(p.candidate_ids[0] == p.relevant_ids[0] for p in blinded.pools) < len(blinded.pools) / 2
    q = blinded.query_by_id()[blinded.pools[0].query_id]
    assert q.id.startswith("q-") and q.meta["provenance"]["built_id"] == "q-rec000"


def test_audit_names_a_metadata_column_unless_it_is_kept_apart():
    ps = _toy(leak_first=False, stem_ids=False, meta_leak=True)
    assert "meta:kind=gold" in _leaking(ps)
    assert "meta:kind=gold" not in _leaking(ps, kept_apart=("kind",))
    summary = leaks.summary(leaks.audit(ps, ("kind",)), ("kind",))
    assert summary["kept_apart"] == ["kind"] and "meta:kind=gold" not in summary["baselines"]
    assert "Binomial" in summary["rule"] and "exempt" not in summary


def _direct_tail(total, n, c):
    """The two-sided rule written out with math.comb (independent of scipy)."""
    import math

    pmf = [math.comb(n, k) * c ** k * (1 - c) ** (n - k) for k in range(n + 1)]
    up, lo = math.floor(total + 1e-9), math.ceil(total - 1e-9)
    return min(1.0, 2 * min(sum(pmf[up:]), sum(pmf[:lo + 1])))


@pytest.mark.parametrize("total,n,c", [(2, 5, 0.04), (5, 5, 0.04), (144, 144, 0.125), (0, 144, 0.125), (18, 144, 0.125),
                                       (7.5, 12, 0.25), (16, 16, 0.25)])
def test_tail_probability_is_the_exact_binomial_tail(total, n, c):
    assert leaks.tail_p(total, n, c) == pytest.approx(_direct_tail(total, n, c), rel=1e-9, abs=1e-300)


def test_a_small_subset_is_not_failed_by_luck_but_a_full_leak_is():
    """Five Flickr pools of 25 with the label first twice by chance: p = 0.03, not a leak (a 4-sigma normal
    tolerance called it one); the label first in all five: p = 2e-7, a leak."""
    assert leaks.tail_p(2, 5, 0.04) > leaks.ALPHA
    assert leaks.tail_p(5, 5, 0.04) < leaks.ALPHA


# ---- `mmbench validate` on a built sample, tampered three ways --------------------------------------------

@pytest.fixture(scope="module")
def msr(tmp_path_factory):
    out = tmp_path_factory.mktemp("msr") / "msr"
    build("sample", out, seed=0, lengths=(2048,), datasets=("hotpotqa",), queries_per_dataset=8,
          candidates_per_query=4, progress=False)
    return out


def test_validate_passes_the_blinded_build(msr, capsys):
    rc, out = validate_cli(msr, capsys)
    assert rc == 0, out
    assert "ok   label_blind" in out and "ok   label_is_own_record" in out


def test_validate_fails_on_an_order_leak(msr, tmp_path, capsys):
    def relevant_first(ps):
        for p in ps.pools:
            p.candidate_ids = p.relevant_ids + [c for c in p.candidate_ids if c not in p.relevant_ids]
    rc, out = validate_cli(rewrite(msr, tmp_path / "order", relevant_first), capsys)
    assert rc == 2 and "baseline first_position scores P@1 1.000 on subset" in out, out


def test_validate_fails_on_an_id_leak(msr, tmp_path, capsys):
    def stem_ids(ps):
        names = {}
        for p in ps.pools:
            names.setdefault(p.relevant_ids[0], "doc-" + p.query_id)
        for c in ps.candidates:
            c.id = names.get(c.id, c.id)
            prov = c.meta.get("provenance", {})
            prov["counterpart"] = names.get(prov.get("counterpart"), prov.get("counterpart"))
        for p in ps.pools:
            p.candidate_ids = [names.get(c, c) for c in p.candidate_ids]
            p.relevant_ids = [names.get(c, c) for c in p.relevant_ids]
    rc, out = validate_cli(rewrite(msr, tmp_path / "ids", stem_ids), capsys)
    assert rc == 2 and "baseline id_shared_tokens scores P@1" in out, out


def test_validate_fails_on_a_label_moved_to_another_record(msr, tmp_path, capsys):
    def move(ps):
        cands = ps.candidate_by_id()
        p = ps.pools[0]
        own = cands[p.relevant_ids[0]].meta["record_id"]
        other = next(c for c in p.candidate_ids if cands[c].meta["record_id"] != own)
        p.relevant_ids = [other]
    rc, out = validate_cli(rewrite(msr, tmp_path / "moved", move), capsys)
    assert rc == 2 and "label_is_own_record" in out and "comes from record" in out, out


@pytest.fixture(scope="module")
def flickr_sample(tmp_path_factory):
    from mmbench.tasks import get_task

    out = tmp_path_factory.mktemp("flickr") / "flickr"
    get_task("flickr_hard_negatives").build("sample", out, seed=0, progress=False)
    return out


def _raw_documents(folder: Path, table: str) -> list[Document]:
    """A table's documents as an evaluator reads the file, without mmbench's loader."""
    import pyarrow.parquet as pq

    return [Document.from_record(r) for r in pq.read_table(folder / f"{table}.parquet").to_pylist()]


def test_label_revealing_provenance_is_stored_apart_from_the_tables_an_evaluator_reads(flickr_sample):
    """Issue 24: Flickr's image_id names the relevant candidate outright (the query's own image), so it and the
    other provenance columns live in provenance.parquet; the document tables hold none of them and pass the
    audit with nothing exempt, while the same audit on the merged metadata finds the leak they would be."""
    from mmbench.builders.checks.flickr_hard_negatives import PROVENANCE_COLUMNS

    ps = load_poolset(flickr_sample, verify=True)
    apart = set(ps.provenance_columns)
    assert apart == {*PROVENANCE_COLUMNS, "provenance"}
    seen = [*_raw_documents(flickr_sample, "queries"), *_raw_documents(flickr_sample, "candidates")]
    assert not {k for d in seen for k in d.meta} & apart
    assert all(d.meta.get("image_id") for d in ps.candidates)   # the loader merges them back for the checks
    as_read = PoolSet(task=ps.task, task_version=ps.task_version, queries=_raw_documents(flickr_sample, "queries"),
                      candidates=_raw_documents(flickr_sample, "candidates"), pools=ps.pools, seed=ps.seed)
    assert _leaking(as_read) == set()
    merged = {s.baseline: s for s in leaks.audit(ps) if s.subset == "all"}
    assert merged["meta:image_id=query"].score == 1.0 and merged["meta:image_id=query"].leaks
    audit = ps.manifest["validity"]["leak_audit"]
    assert audit["kept_apart"] == sorted(apart) and audit["leaks"] == []


def test_an_edited_provenance_table_is_refused(flickr_sample, tmp_path, capsys):
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    from mmbench.data.poolset import PoolSetError, check_integrity

    copy_ = tmp_path / "edited"
    shutil.copytree(flickr_sample, copy_)
    rows = pq.read_table(copy_ / "provenance.parquet").to_pylist()
    rows[0]["meta"] = rows[0]["meta"].replace('"image_id": "', '"image_id": "x')
    pq.write_table(pa.Table.from_pylist(rows, schema=pq.read_schema(copy_ / "provenance.parquet")),
                   copy_ / "provenance.parquet")
    with pytest.raises(PoolSetError, match="content hash mismatch"):
        check_integrity(load_poolset(copy_))
    assert main(["validate", str(copy_)]) == 2
    rows[0]["meta"] = '{"answer": "the label"}'   # a column the manifest does not declare as provenance
    pq.write_table(pa.Table.from_pylist(rows, schema=pq.read_schema(copy_ / "provenance.parquet")),
                   copy_ / "provenance.parquet")
    with pytest.raises(PoolSetError, match=r"provenance.parquet: row 0: column \['answer'\] is not among"):
        load_poolset(copy_)
    capsys.readouterr()


def test_a_model_view_carries_no_metadata(flickr_sample):
    from toy_models import HashingModel

    from mmbench.running.views import model_view

    ps = load_poolset(flickr_sample)
    doc = ps.candidates[0]
    view, _ = model_view(doc, HashingModel())
    assert doc.meta and view.meta == {} and view.segments == doc.segments
