"""Runner: encode-once, cache and resume, failures reported, token-budget batches, tie-breaking."""
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import pandas as pd

from mmbench.running.batching import fixed_size_batches, padding_ratio, token_budget_batches
from mmbench.data.poolset import load_poolset
from mmbench.running.runner import RunOptions, rank, run_poolset
from toy_models import HashingModel


def test_token_budget_batches_respect_budget_and_cover_everything():
    rng = np.random.default_rng(0)
    lengths = list(rng.integers(1, 500, size=300))
    batches = token_budget_batches(lengths, budget=2000, max_batch_size=32)
    assert sorted(i for b in batches for i in b) == list(range(300))
    for b in batches:
        assert len(b) <= 32
        assert max(lengths[i] for i in b) * len(b) <= 2000 or len(b) == 1
    assert padding_ratio(lengths, batches) < padding_ratio(lengths, fixed_size_batches(300, 16))


def test_ties_are_broken_by_a_seeded_permutation_not_by_id():
    ids = [f"c{i}" for i in range(10)]
    scores = np.zeros(10)
    firsts = {ids[rank(f"item{k}", ids, scores, seed=0)[0]] for k in range(60)}
    assert len(firsts) > 5  # each item gets its own order
    assert list(rank("x", ids, scores, 0)) == list(rank("x", ids, scores, 0))
    assert rank("x", ids, np.arange(10.0), 0)[0] == 9


def test_each_distinct_document_is_encoded_once_and_cached(vg_tiny, tmp_path):
    ps = load_poolset(vg_tiny)
    model = HashingModel()
    opts = RunOptions(cache_dir=tmp_path / "cache", progress=False, batch_tokens=4096)
    pq1, seen1, info1 = run_poolset(ps, model, opts)
    assert info1["encode"]["encoded"] == info1["encode"]["distinct_views"] == len(ps.candidates) + len(ps.queries)
    model2 = HashingModel()
    pq2, seen2, info2 = run_poolset(ps, model2, opts)
    assert model2.calls == [] and info2["encode"]["cache_hits"] == len(ps.candidates) + len(ps.queries)
    pd.testing.assert_frame_equal(pq1, pq2)
    # a different setting is a different cache key
    model3 = HashingModel(dim=32)
    run_poolset(ps, model3, opts)
    assert sum(model3.calls) > 0


def test_no_cache_option(vg_tiny, tmp_path):
    ps = load_poolset(vg_tiny)
    opts = RunOptions(cache_dir=tmp_path / "cache", use_cache=False, progress=False)
    run_poolset(ps, HashingModel(), opts)
    assert not (tmp_path / "cache").exists()


def test_corrupt_and_missing_media_fail_only_their_items(vg_small, tmp_path):
    ps_dir = tmp_path / "ps"
    shutil.copytree(vg_small, ps_dir)
    ps = load_poolset(ps_dir)
    cand = next(c for c in ps.candidates if c.meta["anchor_kind"] == "image" and c.meta["background_modality"] == "text"
                and c.meta["length_bin"] == "256" and c.meta["depth"] == 0.0)
    ref = next(s.ref for s in cand.segments if s.kind == "image")
    (ps_dir / "media" / ref).write_bytes(b"not an image")
    other = next(c for c in ps.candidates if c.meta["background_modality"] == "image" and c.meta["length_bin"] == "2k")
    other_ref = next(s.ref for s in other.segments if s.kind == "image" and s.ref != ref)
    (ps_dir / "media" / other_ref).unlink()
    per_query, _, info = run_poolset(ps, HashingModel(), RunOptions(progress=False, use_cache=False))
    failed = per_query[per_query["error"].notna()]
    assert info["n_failed_items"] == len(failed) > 0
    assert any(str(ps_dir / "media" / ref) in e and cand.id in e and "corrupt" in e for e in failed["error"])
    assert any("missing media file" in e and other_ref in e for e in failed["error"])
    ok = per_query[per_query["error"].isna()]
    # the corrupt file is a shared image anchor, so every cell holding it fails; the others do not
    assert len(ok) > 0 and ok["precision_at_1"].notna().all()
    assert set(failed["anchor_kind"]) == {"image"} or failed["error"].str.contains(other_ref).any()


def test_text_model_reports_unseen_images(vg_small):
    ps = load_poolset(vg_small)
    model = HashingModel(modalities=("text",))
    _, seen, info = run_poolset(ps, model, RunOptions(progress=False, use_cache=False, limit=100))
    assert info["documents_with_unseen_modalities"] > 0
    img_rows = seen[seen["unseen_images"] > 0]
    assert (img_rows["unseen_modalities"].map(list) == pd.Series([["image"]] * len(img_rows), index=img_rows.index)).all()


def test_limit_is_a_deterministic_spread(vg_small):
    ps = load_poolset(vg_small)
    a, _, _ = run_poolset(ps, HashingModel(), RunOptions(progress=False, use_cache=False, limit=50))
    b, _, _ = run_poolset(ps, HashingModel(), RunOptions(progress=False, use_cache=False, limit=50))
    assert list(a["item_id"]) == list(b["item_id"]) and len(a) == 50
    assert a["subset"].nunique() > 2


def _run_cli(args, env, **kw):
    return subprocess.Popen([sys.executable, "-m", "mmbench", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, **kw)


def test_sigkill_midway_then_resume_gives_identical_results(vg_tiny, tmp_path):
    env = {**os.environ, "MMBENCH_HOME": str(tmp_path / "home")}
    base = ["run", "--task", "visual_grounding", "--model", "minilm", "--data", str(vg_tiny), "--quiet",
            "--batch-tokens", "600"]
    cache = tmp_path / "cache"
    proc = _run_cli([*base, "--cache-dir", str(cache), "--output", str(tmp_path / "killed")], env)
    deadline = time.time() + 240
    while time.time() < deadline and len(list(cache.rglob("*.npz"))) < 8 and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    stored = len(list(cache.rglob("*.npz")))
    n_candidates = len(load_poolset(vg_tiny).candidates)
    # killed in the middle of encoding the candidates: some entries are stored, not all
    # (whole entries only; a half-written temporary file may remain and is ignored)
    assert 8 <= stored < n_candidates
    resumed = _run_cli([*base, "--cache-dir", str(cache), "--output", str(tmp_path / "resumed")], env)
    out, _ = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, out
    fresh = _run_cli([*base, "--cache-dir", str(tmp_path / "cache2"), "--output", str(tmp_path / "fresh")], env)
    out2, _ = fresh.communicate(timeout=300)
    assert fresh.returncode == 0, out2
    a = pd.read_parquet(tmp_path / "resumed" / "per_query.parquet")
    b = pd.read_parquet(tmp_path / "fresh" / "per_query.parquet")
    assert list(a["ranked_ids"].map(list)) == list(b["ranked_ids"].map(list))
    # each vector is computed in the same batch as in the uninterrupted run, so the tables are the same bytes
    assert (tmp_path / "resumed" / "per_query.parquet").read_bytes() == (tmp_path / "fresh" / "per_query.parquet").read_bytes()
    import json

    info = json.loads((tmp_path / "resumed" / "results.json").read_text())["mmbench"]["encode"]
    assert info["cache_hits"] >= stored  # every entry stored before the kill was used
    # only the batch the kill split is encoded whole again (its stored members too, to keep it the same batch)
    assert info["encoded"] < info["documents"] - stored + 3


class _LevelModel:
    """Scores a candidate by the number in its text (`level 3` -> 3): many exact ties by construction."""

    def __init__(self):
        from mmbench.models.base import ModelCard

        self.card = ModelCard(name="level", family="test", modalities=frozenset({"text"}), max_tokens=None, dim=2,
                              similarity="dot", settings={})

    def fit(self, documents, media):
        pass

    def budget_tokenizer(self):
        return None

    def encode(self, documents, role, media):
        if role == "query":
            return np.tile([1.0, 0.0], (len(documents), 1))
        return np.array([[float(d.segments[0].text.split()[1]), 0.0] for d in documents])


def test_written_metrics_agree_with_pytrec_eval_under_ties_and_several_relevant():
    """The runner's per-query metrics equal pytrec_eval's on the ranking it wrote (ties included)."""
    import pytrec_eval

    from mmbench.data.documents import Document, Text
    from mmbench.data.poolset import PoolItem, PoolSet

    rng = np.random.default_rng(3)
    queries, cands, pools = [], [], []
    for q in range(40):
        n = int(rng.integers(3, 30))
        ids = [f"q{q}c{i}" for i in range(n)]
        cands += [Document(c, [Text(f"level {int(rng.integers(0, 3))}")]) for c in ids]  # three score levels
        queries.append(Document(f"q{q}", [Text("query")]))
        rel = list(rng.choice(ids, size=int(rng.integers(1, min(n, 5) + 1)), replace=False))
        pools.append(PoolItem(f"item{q}", f"q{q}", "s", ids, rel))
    ps = PoolSet("toy", "1", queries, cands, pools)
    per_query, _, _ = run_poolset(ps, _LevelModel(), RunOptions(progress=False, use_cache=False))
    assert per_query["error"].isna().all()
    qrels = {r.item_id: {c: int(c in set(r.relevant_ids)) for c in r.ranked_ids} for r in per_query.itertuples()}
    run = {r.item_id: {c: float(len(r.ranked_ids) - i) for i, c in enumerate(r.ranked_ids)} for r in per_query.itertuples()}
    trec = {"P_1": "precision_at_1", "P_3": "precision_at_3", "P_5": "precision_at_5", "recall_1": "recall_at_1",
            "recall_3": "recall_at_3", "recall_5": "recall_at_5", "recall_10": "recall_at_10",
            "ndcg_cut_10": "ndcg_at_10", "recip_rank": "mrr"}
    theirs = pytrec_eval.RelevanceEvaluator(qrels, set(trec)).evaluate(run)
    ties = 0
    for r in per_query.itertuples():
        scores = list(r.scores)
        assert scores == sorted(scores, reverse=True), r.item_id  # the written order follows the scores
        ties += len(scores) - len(set(scores))
        for trec_name, name in trec.items():
            assert getattr(r, name) == pytest.approx(theirs[r.item_id][trec_name], abs=1e-9), (r.item_id, name)
        rr = theirs[r.item_id]["recip_rank"]
        assert r.mrr_at_10 == pytest.approx(rr if rr >= 0.1 else 0.0)
        assert r.first_relevant_rank == round(1 / rr)
    assert ties > 100


def test_pool_scorer_gives_score_pools_bits():
    """The runner normalises the candidates once for all items; each item's scores must stay the same bits."""
    from mmbench.running.runner import PoolScorer, score_pool

    rng = np.random.default_rng(3)
    vecs = {f"c{i}": rng.standard_normal(384).astype(np.float32) * rng.uniform(0.01, 100) for i in range(300)}
    vecs["zero"] = np.zeros(384, dtype=np.float32)
    for similarity in ("cosine", "dot"):
        scorer = PoolScorer(vecs, similarity)
        for k in (1, 2, 7, 20, 64, 301):
            ids = list(rng.choice(sorted(vecs), size=min(k, len(vecs)), replace=False))
            q = rng.standard_normal(384).astype(np.float32)
            assert scorer(q, ids).tobytes() == score_pool(q, [vecs[c] for c in ids], similarity).tobytes()


def test_rank_without_ties_skips_the_generator_and_orders_the_same():
    """`rank` builds the seeded tie-break permutation only when rounded scores tie; the order must be the
    full lexsort's in every case (distinct scores, ties, -0.0 against 0.0, NaN)."""
    import hashlib

    from mmbench.running.runner import SCORE_DECIMALS, rank

    def reference(item_id, n, scores, seed):
        digest = hashlib.sha256(f"{seed}:{item_id}".encode()).digest()
        tiebreak = np.random.default_rng(int.from_bytes(digest[:8], "little")).permutation(n)
        return np.lexsort((tiebreak, -np.round(scores, SCORE_DECIMALS)))

    rng = np.random.default_rng(11)
    cases = [rng.standard_normal(n) for n in (1, 2, 5, 25, 100)]
    cases += [np.round(rng.standard_normal(30), 1), np.zeros(12), np.array([0.0, -0.0, 1.0, -0.0]),
              np.array([np.nan, 0.5, np.nan, 0.2]), np.array([0.1234564, 0.1234561, 0.3]), np.array([np.inf, 1, np.inf])]
    for k, scores in enumerate(cases):
        ids = [f"c{i}" for i in range(len(scores))]
        for seed in (0, 7):
            assert rank(f"item{k}", ids, scores, seed).tolist() == reference(f"item{k}", len(ids), scores, seed).tolist()
