"""One stored order per candidate set, the pool-aware leak baselines, and Multi-Source Reasoning's one-content rule.

Every task is built from its sample, with parameters cut hard, for seeds 0-9 and must pass `validate`; Logical
Summarization's Easy pools (several pools over one candidate set) must keep the relevant slot uniform. The medoid
and turnover baselines are checked against a brute-force implementation and on simulated pools with a known answer.
"""
from __future__ import annotations

import copy
import hashlib
import itertools

import numpy as np
import pytest
from scipy.stats import chisquare

from mmbench.builders.checks import leaks, pool_aware
from mmbench.builders.parts.seeding import seeded_rng
from mmbench.data.documents import Document, Image, Text
from mmbench.data.poolset import PoolItem, PoolSet, load_poolset
from mmbench.tasks import get_task
from mmbench.tasks.validation import validate
from poolset_edits import rewrite, validate_cli

SEEDS = range(10)
SMALL = {   # seconds per build on one core; every pool kind of the task still present
    "multi_source_reasoning": dict(lengths=(2048,), queries_per_dataset=4, candidates_per_query=4),
    "logical_summarization": dict(lengths=(2048,), queries_per_dataset=4, candidates_per_query=4, lookalikes=2),
    "visual_grounding": dict(lengths=(256,), depths=(0.5,), backgrounds=("text",), needles_per_kind=2),
    "temporal_summarization": dict(videos=4, lengths=[128], frame_size=[64, 64], distractors=2),
    "flickr_hard_negatives": dict(sample_images=12, pool_size=12, n_queries=4, n_negatives=7),
}


@pytest.fixture(scope="module")
def small_build(tmp_path_factory):
    """(task, seed) -> the folder of its reduced sample build, built once per module."""
    built: dict[tuple[str, int], object] = {}

    def get(task: str, seed: int):
        if (task, seed) not in built:
            out = tmp_path_factory.mktemp(f"{task}-{seed}") / "ps"
            get_task(task).build("sample", out, seed=seed, progress=False, **SMALL[task])
            built[(task, seed)] = out
        return built[(task, seed)]
    return get


def _shared_sets(ps: PoolSet) -> dict[frozenset[str], list[PoolItem]]:
    groups: dict[frozenset[str], list[PoolItem]] = {}
    for p in ps.pools:
        groups.setdefault(frozenset(p.candidate_ids), []).append(p)
    return groups


@pytest.mark.parametrize("task", sorted(SMALL))
def test_every_task_builds_and_validates_for_seeds_0_to_9(task, small_build):
    for seed in SEEDS:
        ps = load_poolset(small_build(task, seed), verify=True)
        report = validate(ps)
        assert report.ok, f"{task} seed {seed}: {report.summary_line()}"
        for group in _shared_sets(ps).values():   # pools over one set store it in one order
            assert len({tuple(p.candidate_ids) for p in group}) == 1, f"{task} seed {seed}: two stored orders"
        turnover = report.leak_audit["pool_aware"]["all"]["pool_order_turnover"]
        assert turnover["score"] == pytest.approx(turnover["chance"])


def _easy_slots(ps: PoolSet) -> list[int]:
    return [p.candidate_ids.index(p.relevant_ids[0]) for p in ps.pools if "/easy/" in p.subset]


def test_logical_summarization_easy_relevant_slot_is_uniform_over_pools_subsets_and_seeds(small_build):
    """Before the fix the 4 Easy pools of a subset kept the relevant document at one slot (the builder's own
    order, permuted once): 20 slots drawn 4 times each; now every slot holds it once per candidate set."""
    slots, repeats, turnover = [], [], []
    for seed in SEEDS:
        ps = load_poolset(small_build("logical_summarization", seed))
        slots += _easy_slots(ps)
        for group in _shared_sets(ps).values():
            held = [p.candidate_ids.index(p.relevant_ids[0]) for p in group]
            repeats += [seed] if len(set(held)) < len(held) else []
        turnover += [s for s in pool_aware.audit(ps) if s.baseline == "pool_order_turnover" and s.subset == "all"]
    counts = np.bincount(slots, minlength=SMALL["logical_summarization"]["candidates_per_query"])
    assert chisquare(counts).pvalue > 0.01, counts
    assert not repeats, f"the relevant slot repeats within one candidate set (seeds {sorted(set(repeats))})"
    assert all(s.score <= s.chance + 0.08 for s in turnover), [s.line() for s in turnover]


def _old_order(ps: PoolSet) -> PoolSet:
    """The order blinding gave before: the draw keyed by the sorted set, applied to the builder's per-pool order
    (here, as the Logical Summarization builder had it: the relevant candidate first)."""
    for p in ps.pools:
        built = p.relevant_ids + sorted(c for c in p.candidate_ids if c not in p.relevant_ids)
        key = hashlib.sha256("\x1f".join(sorted(built)).encode()).hexdigest()
        perm = seeded_rng(ps.seed, "candidate order", ps.task, key).permutation(len(built))
        p.candidate_ids = [built[i] for i in perm]
    return ps


def test_turnover_baseline_refuses_a_per_pool_order(tmp_path, capsys):
    """The old order on a Logical Summarization build with 8 Easy pools over each 8-candidate set: the slot that
    changes between them is the relevant one far above chance, and `validate` refuses the pool set."""
    src = tmp_path / "ls"
    get_task("logical_summarization").build("sample", src, seed=0, progress=False,
                                            **{**SMALL["logical_summarization"], "queries_per_dataset": 8,
                                               "candidates_per_query": 8})
    scores = {s.subset: s for s in pool_aware.audit(_old_order(load_poolset(src)))
              if s.baseline == "pool_order_turnover"}
    easy = [s for k, s in scores.items() if "/easy/" in k]
    assert easy and all(s.score >= 0.7 for s in easy), [s.line() for s in easy]
    assert scores["all"].leaks
    rc, out = validate_cli(rewrite(src, tmp_path / "old", _old_order), capsys)
    assert rc == 2 and "FAIL pool_order_blind" in out and "baseline pool_order_turnover scores P@1" in out, out


def test_validate_prints_the_pool_aware_audit_and_the_card_states_it(small_build, capsys):
    folder = small_build("logical_summarization", 0)
    rc, out = validate_cli(folder, capsys)
    assert rc == 0, out
    assert "ok   pool_order_blind" in out and "pool_medoid: P@1" in out and "pool_order_turnover: P@1" in out
    card = (folder / "README.md").read_text(encoding="utf-8")
    assert "- pool-aware pool_medoid: P@1" in card and "- label-blind" in card


# ---- the baselines themselves -----------------------------------------------------------------------------

def _brute_medoid(docs: list[set]) -> list[float]:
    """Summed Jaccard with the others, written out over Python sets."""
    return [sum(len(a & b) / len(a | b) for j, b in enumerate(docs) if j != i and a | b) for i, a in enumerate(docs)]


def _words(rng, n: int) -> list[str]:
    return [f"w{int(x)}" for x in rng.integers(0, 400, n)]


def test_medoid_equals_summed_jaccard_over_word_shingles():
    rng = np.random.default_rng(0)
    base = _words(rng, 60)
    docs = [Document(f"d{i}", [Text(" ".join(base[:10 * i] + _words(rng, 8) + base[10 * i + 8:])),
                               Image(f"{'ab'[i % 2] * 64}.png", 8, 8)]) for i in range(5)]
    docs.append(Document("empty", []))
    shingle = pool_aware.Shingler()
    got = pool_aware.medoid_from_shingles([shingle(d) for d in docs])

    def as_set(doc):
        out = set()
        for s in doc.segments:
            if isinstance(s, Text):
                w = s.text.casefold().split()
                out |= {tuple(w[i:i + pool_aware.SHINGLE_WORDS]) for i in range(len(w) - pool_aware.SHINGLE_WORDS + 1)}
            else:
                out.add(("media", s.ref))
        return out
    assert got == pytest.approx(_brute_medoid([as_set(d) for d in docs]), rel=1e-12)


def _family_pools(rng, n_pools: int, C: int, centred: bool) -> PoolSet:
    """Pools of C look-alikes of one base text. Centred: the relevant one is the base and each other replaces one
    span of it (the relevant document is the family's centre); otherwise every member, the relevant one too,
    replaces its own span, so no member is closer to the rest than another."""
    queries, cands, pools = [], [], []
    for k in range(n_pools):
        base = [" ".join(_words(rng, 40)) for _ in range(C)]   # C paragraphs; member i replaces paragraph i
        members = [Document(f"c{k}-{i}", [Text(t) for t in base] if centred and i == 0 else
                            [Text(t) for t in base[:i]] + [Text(" ".join(_words(rng, 40)))] + [Text(t) for t in base[i + 1:]])
                   for i in range(C)]
        ids = [m.id for m in members]
        order = list(rng.permutation(ids))
        cands += members
        queries.append(Document(f"q{k}", [Text(f"question {k}")]))
        pools.append(PoolItem(f"p{k}", f"q{k}", "s", [str(c) for c in order], [ids[0]]))
    return PoolSet(task="toy", task_version="0", queries=queries, candidates=cands, pools=pools, seed=0)


def test_medoid_finds_a_centred_family_and_stays_at_chance_without_a_centre():
    """Known answers: a centred family is found every time (P@1 1, a leak); over 400 simulated pools with no
    centre the medoid's P@1 is chance (0.2) within the binomial test's 99.9 % band, and flags no leak."""
    rng = np.random.default_rng(7)
    centred = pool_aware.audit(_family_pools(rng, 30, 5, True), {"m": pool_aware.medoid_scores})
    assert {s.subset: s.score for s in centred} == {"all": 1.0, "s": 1.0} and centred[0].leaks
    flat = pool_aware.audit(_family_pools(rng, 400, 5, False), {"m": pool_aware.medoid_scores})
    overall = next(s for s in flat if s.subset == "all")
    assert not overall.leaks and overall.p_value > 1e-3 and abs(overall.score - 0.2) < 0.06, overall.line()


def test_turnover_counts_the_other_pools_that_move_a_slot():
    cands = [Document(c, [Text(c)]) for c in "abcd"]
    pools = [PoolItem("p0", "q", "s", list("abcd"), ["a"]), PoolItem("p1", "q", "s", list("bacd"), ["b"]),
             PoolItem("p2", "q", "s", list("cbad"), ["c"]), PoolItem("p3", "q", "s", list("dcba"), ["d"])]
    ps = PoolSet("toy", "0", [Document("q", [Text("q")])], cands, pools, seed=0)
    got = pool_aware.turnover_scores(ps)
    brute = {p.id: [float(sum(o.candidate_ids[i] != c for o in pools if o is not p))
                    for i, c in enumerate(p.candidate_ids)] for p in pools}
    assert got == brute
    same = copy.deepcopy(ps)
    for p in same.pools:
        p.candidate_ids = list("abcd")
    assert set(itertools.chain(*pool_aware.turnover_scores(same).values())) == {0.0}


def test_pool_aware_leak_uses_the_label_blind_binomial_rule():
    s = next(x for x in pool_aware.audit(_family_pools(np.random.default_rng(1), 12, 8, True))
             if x.baseline == "pool_medoid" and x.subset == "all")
    assert s.p_value == pytest.approx(leaks.tail_p(12.0, 12, 0.125)) and s.leaks


# ---- Multi-Source Reasoning: one content under two ids ---------------------------------------------------

def test_validate_refuses_a_relevant_msr_context_copied_under_a_new_id(small_build, tmp_path, capsys):
    """An exact copy of the relevant context, its id re-hashed, put in place of one distractor: `validate` passed
    it (the record checks trust the metadata the copy carries) and now refuses it, naming distinct_content."""
    src = small_build("multi_source_reasoning", 0)

    def duplicate(ps):
        item = ps.pools[0]
        rel = ps.candidate_by_id()[item.relevant_ids[0]]
        twin = Document("c-" + hashlib.sha256(b"copy").hexdigest()[:12], list(rel.segments), rel.tokens,
                        copy.deepcopy(rel.meta))
        ps.candidates.append(twin)
        slot = next(i for i, c in enumerate(item.candidate_ids) if c not in item.relevant_ids)
        item.candidate_ids[slot] = twin.id
    rc, out = validate_cli(rewrite(src, tmp_path / "dup", duplicate), capsys)
    assert rc == 2 and "FAIL distinct_content" in out and "hold the relevant context under two ids" in out, out
    assert "validity: 1 violations (distinct_content ×1)" in out


def test_no_number_a_logical_summarization_query_states_picks_one_candidate(small_build):
    """Issue 43: the GovReport-layout summary said "spans N subjects over M paragraphs", and the relevant report
    was the only candidate with M text segments in every such pool. Over every pool of the reduced sample at seeds
    0-9, no number a query states (digits or number words) equals the count of exactly one candidate in any unit
    (segments, paragraphs, lines, sentences, words, characters, tokens, images, frames, videos)."""
    from mmbench.builders.checks.query_structure import unique_picks

    pools = picks = 0
    for seed in SEEDS:
        ps = load_poolset(small_build("logical_summarization", seed))
        queries, cands = ps.query_by_id(), ps.candidate_by_id()
        for item in ps.pools:
            found = unique_picks(queries[item.query_id], [cands[c] for c in item.candidate_ids])
            assert not found, (seed, item.id, found)
            pools += 1
            picks += len(found)
    assert pools >= 10 * 16 and picks == 0
