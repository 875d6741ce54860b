"""Flickr30k caption-space hard negatives: stratification, hard-negative selection against brute force,
exclusions and invariants, seeded candidate order, the same content hash on every machine, and an offline
build → run (tiny CLIP) → rank (fake LLM) → compare. The readers are tested in test_flickr30k_readers.py."""
from __future__ import annotations

import hashlib
import json
import math
import re

import numpy as np
import pytest

from fake_llm_server import FakeLLMServer
from flickr_layouts import export_layouts
from mmbench.builders.flickr_hard_negatives import embed_captions, hard_negatives, sample_pool, stratify
from mmbench.models.sentence_transformer import load_caption_model
from mmbench.builders.sources.sample_flickr import captions, sample_flickr, sample_scenes
from mmbench.cli import main
from mmbench.data.poolset import load_poolset
from mmbench.results.store import load_results
from mmbench.tasks import get_task
from tiny_models import build_clip

POOL, QUERIES = 50, 15


def test_stratify_equal_groups_seeded():
    ids = [f"im{i:03d}" for i in range(100)]
    s = stratify(ids, seed=3)
    assert sorted(s) == ids
    assert [sum(v == g for v in s.values()) for g in range(5)] == [20] * 5
    assert stratify(ids, seed=3) == s and stratify(ids, seed=4) != s
    odd = stratify(ids[:23], seed=0)
    assert sorted(sum(v == g for v in odd.values()) for g in range(5)) == [4, 4, 5, 5, 5]


def test_sample_pool_ignores_input_order():
    recs = sample_flickr(30, seed=0)
    a = [r.image_id for r in sample_pool(recs, 12, seed=1)]
    b = [r.image_id for r in sample_pool(recs[::-1], 12, seed=1)]
    assert a == b and len(set(a)) == 12
    with pytest.raises(ValueError, match="exceeds"):
        sample_pool(recs, 31, seed=0)


def _brute_force(emb, ids, k):
    out = []
    for i in range(len(ids)):
        sims = []
        for j in range(len(ids)):
            if i == j:
                continue
            dot = sum(a * b for a, b in zip(emb[i], emb[j]))
            cos = dot / (math.sqrt(sum(a * a for a in emb[i])) * math.sqrt(sum(b * b for b in emb[j])))
            sims.append((-round(cos, 6), ids[j], j))
        out.append([j for _, _, j in sorted(sims)[:k]])
    return out


def test_hard_negatives_match_brute_force_with_ties():
    rng = np.random.default_rng(0)
    emb = rng.normal(size=(40, 6))
    emb[7] = emb[3] * 2.0          # same direction: exact ties with row 3 for every other row
    emb[21] = emb[3]
    ids = [f"id{(i * 17) % 40:02d}" for i in range(40)]  # id order differs from row order
    idx, sims, skipped = hard_negatives(emb, ids, k=9, block=16)
    assert idx.tolist() == _brute_force(emb.tolist(), ids, 9) and skipped == {}
    assert all(i not in row for i, row in enumerate(idx.tolist()))
    assert np.all(np.diff(sims, axis=1) <= 0)
    # permuting the rows permutes the answer: selection does not depend on input order
    perm = rng.permutation(40)
    idx2, _, _ = hard_negatives(emb[perm], [ids[p] for p in perm], k=9)
    assert [[ids[perm[j]] for j in row] for row in idx2.tolist()] == [[ids[j] for j in idx[p]] for p in perm]
    with pytest.raises(ValueError, match="more than"):
        hard_negatives(emb[:9], ids[:9], k=9)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("fhn") / "sample"
    get_task("flickr_hard_negatives").build("sample", out, seed=0, sample_images=POOL, pool_size=POOL,
                                            n_queries=QUERIES, progress=False)
    return out


def test_build_sample_structure_and_hard_negatives(built):
    ps = load_poolset(built, verify=True)
    b = ps.manifest["builder"]
    assert b["params"]["pool_size"] == POOL and b["stratification"]["group_sizes"] == [POOL // 5] * 5
    assert "MiniLM" in b["caption_model"]["name"] and len(b["pool"]) == POOL and len(ps.pools) == QUERIES
    strata = dict(b["pool"])
    pool_ids = [p for p, _ in b["pool"]]
    cands = ps.candidate_by_id()
    queries = ps.query_by_id()
    # The representative captions, re-embedded here, give the same hard negatives by brute force.
    rep = {c.meta["image_id"]: c.meta["captions"][strata[c.meta["image_id"]]] for c in ps.candidates}
    all_caps = {r.image_id: r.captions for r in sample_flickr(POOL, seed=0)}
    texts = [all_caps[i][strata[i]] for i in pool_ids]
    vecs, _ = embed_captions(texts, load_caption_model(None))
    expected = _brute_force(vecs.astype(float).tolist(), pool_ids, 24)
    img_of = {c.meta["image_id"]: c.id for c in ps.candidates}   # ids are opaque: the image id is provenance
    for item in ps.pools:
        row = pool_ids.index(item.id)
        q = queries[item.query_id]
        assert q.text == all_caps[item.id][strata[item.id]] == rep[item.id]
        assert item.relevant_ids == [img_of[item.id]] and item.meta["caption_index"] == strata[item.id]
        assert len(item.candidate_ids) == 25 == len(set(item.candidate_ids))
        assert set(item.candidate_ids) == {img_of[item.id]} | {img_of[pool_ids[j]] for j in expected[row]}
        assert item.candidate_ids.index(img_of[item.id]) + 1 == item.meta["gt_position"]
    assert len({p.meta["gt_position"] for p in ps.pools}) > 5    # the answer is not parked in one place
    assert sorted(b["queries"]) == sorted(p.id for p in ps.pools)
    img = cands[ps.pools[0].candidate_ids[0]].segments[0]
    assert img.kind == "image" and img.ref.endswith(".jpg")


def test_karpathy_build_matches_sample_build(tmp_path, built):
    export_layouts(tmp_path, n=POOL)
    out = tmp_path / "from_karpathy"
    ps = get_task("flickr_hard_negatives").build("karpathy", out, seed=0, pool_size=POOL, n_queries=QUERIES,
                                                 caption_model="minilm", annotations=str(tmp_path / "dataset_flickr30k.json"),
                                                 image_root=str(tmp_path / "images"), progress=False)
    ref = load_poolset(built)
    assert [(p.id, p.candidate_ids) for p in ps.pools] == [(p.id, p.candidate_ids) for p in sorted(ref.pools, key=lambda p: p.id)]
    assert ps.manifest["builder"]["source"] == "karpathy" and "sha256:" in ps.manifest["sources"]["annotations"]


def test_sample_captions_differ_per_style():
    scene = sample_scenes(3, seed=0)[1]
    caps = captions(scene)
    assert len(caps) == 5 and len(set(caps)) == 5 and scene.colour in caps[4]


def _oracle_server(ps):
    """Answers with the true image first, found by hashing the image bytes sent for the caption."""
    media, cands, queries = ps.media, ps.candidate_by_id(), ps.query_by_id()
    truth = {queries[p.query_id].text: hashlib.sha256(media.path(cands[p.relevant_ids[0]].segments[0].ref).read_bytes()).hexdigest()
             for p in ps.pools}

    def respond(req):
        query = re.search(r'Caption: "(.*)"', req.intro).group(1)
        hashes = [hashlib.sha256(b).hexdigest() for b in req.images]
        first = hashes.index(truth[query]) + 1
        return 200, json.dumps([first] + [i for i in range(1, len(hashes) + 1) if i != first])
    return FakeLLMServer(respond)


def test_offline_run_rank_compare(built, tmp_path, capsys):
    ps = load_poolset(built)
    clip = build_clip(tmp_path / "clip")
    emb_out, llm_out, cmp_out = tmp_path / "clip_run", tmp_path / "llm_run", tmp_path / "cmp"
    assert main(["run", "--task", "flickr_hard_negatives", "--model", str(clip), "--data", str(built),
                 "--output", str(emb_out), "--quiet"]) == 0
    with _oracle_server(ps) as server:
        assert main(["rank", "--task", "flickr_hard_negatives", "--ranker", "openai-chat", "--model", "oracle",
                     "--base-url", server.url + "/v1", "--data", str(built), "--output", str(llm_out), "--quiet",
                     "--cache-dir", str(tmp_path / "cache")]) == 0
        sent = {r.intro: [hashlib.sha256(b).hexdigest() for b in r.images] for r in server.requests}
    emb, llm = load_results(emb_out), load_results(llm_out)
    # The same candidate sets reach both systems, and the LLM sees them in the stored order.
    cands = ps.candidate_by_id()
    digest = {c: hashlib.sha256(ps.media.path(cands[c].segments[0].ref).read_bytes()).hexdigest() for c in cands}
    queries = ps.query_by_id()
    for item in ps.pools:
        e = emb.per_query.set_index("item_id").loc[item.id]
        l = llm.per_query.set_index("item_id").loc[item.id]
        assert sorted(e["ranked_ids"]) == sorted(l["ranked_ids"]) == sorted(item.candidate_ids)
        assert list(l["presented_ids"]) == item.candidate_ids
        intro = next(k for k in sent if f'"{queries[item.query_id].text}"' in k)
        assert sent[intro] == [digest[c] for c in item.candidate_ids]
    assert (llm.per_query["recall_at_1"] == 1.0).all() and list(llm.per_query["scores"].iloc[0]) == list(map(float, range(25, 0, -1)))
    assert llm.info["model"]["kind"] == "llm_ranker" and emb.content_hash == llm.content_hash
    capsys.readouterr()
    assert main(["compare", str(emb_out), str(llm_out), "--resamples", "200", "--ci-resamples", "200",
                 "--out", str(cmp_out)]) == 0
    data = json.loads((cmp_out / "compare.json").read_text())
    assert data["n_items"] == QUERIES and {"recall_at_1", "recall_at_3", "mrr"} <= set(data["runs"][0]["bootstrap_ci"])
    pair = data["pairs"][0]
    assert sum(map(sum, pair["mcnemar"]["table"])) == QUERIES and "p_bonferroni" in pair["wilcoxon"]
    kinds = {r["label"]: r for r in data["timing"]}
    assert kinds["openai-chat:oracle"]["kind"] == "llm_ranker" and kinds["openai-chat:oracle"]["precompute_seconds"] is None
    clip_row = kinds[emb.model_name]
    assert clip_row["kind"] == "embedding"
    assert clip_row["precompute_seconds"] == pytest.approx(emb.info["encode"]["query_seconds"] + emb.info["encode"]["document_seconds"])
    assert clip_row["ranking_seconds"] == emb.info["scoring_seconds"]
    assert "## Timing" in (cmp_out / "compare.md").read_text()
    # the seed's random baseline: one relevant image among 25 candidates
    assert data["chance"]["recall_at_1"] == pytest.approx(1 / 25) and data["chance"]["recall_at_3"] == pytest.approx(3 / 25)
    assert data["chance"]["mrr"] == pytest.approx(sum(1 / i for i in range(1, 26)) / 25)  # H(25)/25 ≈ 0.153
    assert "| random ranking (expected) |" in (cmp_out / "compare.md").read_text()


def test_seed_003_defaults(tmp_path, monkeypatch):
    """The seed's numbers are the defaults: pool 5,000 in 5 strata of 1,000, 1,000 queries, 24 negatives
    (25 candidates), all-mpnet-base-v2 for real sources, 1,000 bootstrap resamples for metric CIs."""
    import inspect

    from mmbench.builders import flickr_hard_negatives as fhn
    from mmbench.reports.compare import compare_runs

    assert fhn.DEFAULTS["real"] == {"pool_size": 5000, "n_queries": 1000}
    assert inspect.signature(fhn.build).parameters["n_negatives"].default == 24
    assert inspect.signature(compare_runs).parameters["ci_resamples"].default == 1000
    strata = stratify([f"{i:05d}" for i in range(5000)], seed=0)
    assert [sum(v == g for v in strata.values()) for g in range(5)] == [1000] * 5
    export_layouts(tmp_path, n=30)
    args = dict(annotations=str(tmp_path / "dataset_flickr30k.json"), image_root=str(tmp_path / "images"), progress=False)
    with pytest.raises(ValueError, match="pool_size 5000 exceeds the 30 usable images"):
        fhn.build("karpathy", tmp_path / "out", **args)
    used = []

    def fake_loader(model_name):
        used.append(model_name)
        raise RuntimeError("stop after choosing the caption model")

    with pytest.raises(ValueError, match="needs a caption model loader"):   # builders import no model code
        fhn.build("karpathy", tmp_path / "out", pool_size=30, n_queries=10, **args)
    with pytest.raises(RuntimeError, match="stop after"):
        fhn.build("karpathy", tmp_path / "out", pool_size=30, n_queries=10, load_caption_model=fake_loader, **args)
    assert used == ["sentence-transformers/all-mpnet-base-v2"]


# ---- exclusions, validity ------------------------------------------------------------------

def test_hard_negatives_skip_excluded_rows_and_report_those_they_displaced():
    rng = np.random.default_rng(1)
    emb = rng.normal(size=(30, 5))
    ids = [f"id{i:02d}" for i in range(30)]
    free, _, _ = hard_negatives(emb, ids, k=6)
    displaced = {int(free[4, 0]), int(free[4, 5])}
    far = next(j for j in range(30) if j != 4 and j not in free[4])     # would not have been chosen anyway
    idx, _, skipped = hard_negatives(emb, ids, k=6, exclude={4: displaced | {far}})
    assert skipped == {4: sorted(displaced)}
    ranked = [j for j in _brute_force(emb.tolist(), ids, 29)[4] if j not in displaced | {far}]
    assert idx[4].tolist() == ranked[:6]
    assert np.array_equal(np.delete(idx, 4, axis=0), np.delete(free, 4, axis=0))   # other rows untouched
    with pytest.raises(ValueError, match="fewer than 6 images are left"):
        hard_negatives(emb[:8], ids[:8], k=6, exclude={0: {1, 2}})


def test_negative_sharing_the_query_caption_is_excluded_and_counted(tmp_path):
    """Three images described by one caption: none may be a negative of a query made of that caption."""
    recs, root = export_layouts(tmp_path, n=30)
    data = json.loads((tmp_path / "dataset_flickr30k.json").read_text())
    shared = data["images"][0]["sentences"][0]["raw"]
    for entry in data["images"][:3]:                  # whichever caption index they get, their query is `shared`
        for sent in entry["sentences"]:
            sent["raw"] = shared
    (tmp_path / "dataset_flickr30k.json").write_text(json.dumps(data))
    ps = get_task("flickr_hard_negatives").build("karpathy", tmp_path / "out", seed=0, pool_size=30, n_queries=30,
                                                 n_negatives=4, caption_model="minilm", progress=False,
                                                 annotations=str(tmp_path / "dataset_flickr30k.json"),
                                                 image_root=str(root))
    queries, cands = ps.query_by_id(), ps.candidate_by_id()
    hit = [p for p in ps.pools if queries[p.query_id].text == shared]
    assert len(hit) == 3
    for item in hit:
        negatives = [c for c in item.candidate_ids if c not in item.relevant_ids]
        assert len(negatives) == 4 and all(shared not in cands[c].meta["captions"] for c in negatives)
    dropped = ps.manifest["dropped"]["negatives"]["dropped"]
    # identical texts have identical vectors (similarity 1): each query lost its 2 twins from its top 4
    assert dropped["shares the query's caption text"]["count"] == 6
    assert ps.manifest["validity"]["ok"]


def test_an_image_with_the_query_image_bytes_is_never_its_negative(tmp_path):
    recs, root = export_layouts(tmp_path, n=11)
    a, b = recs[0].image_id, recs[1].image_id
    (root / f"{b}.jpg").write_bytes((root / f"{a}.jpg").read_bytes())     # the same photo under two names
    ps = get_task("flickr_hard_negatives").build("karpathy", tmp_path / "out", seed=0, pool_size=11, n_queries=11,
                                                 n_negatives=9, caption_model="minilm", progress=False,
                                                 annotations=str(tmp_path / "dataset_flickr30k.json"),
                                                 image_root=str(root))
    by_id = {p.id: p for p in ps.pools}
    img_of = {c.meta["image_id"]: c.id for c in ps.candidates}
    assert img_of.get(b) not in by_id[a].candidate_ids and img_of.get(a) not in by_id[b].candidate_ids
    assert all(len(p.candidate_ids) == 10 for p in ps.pools)     # the other 9 images stand in
    skipped = ps.manifest["dropped"]["negatives"]["dropped"]["same image bytes as the query's image"]
    assert skipped == {"count": 2, "examples": [f"q-{a}: img-{b}", f"q-{b}: img-{a}"]}
    assert ps.manifest["validity"]["ok"]


def test_validator_names_item_and_invariant(built, tmp_path):
    from mmbench.tasks.validation import validate

    ps = load_poolset(built)
    assert validate(ps).ok
    cands = ps.candidate_by_id()
    a, b = ps.pools[0], ps.pools[1]
    neg = next(c for c in a.candidate_ids if c not in a.relevant_ids)
    cands[neg].meta["captions"][2] = ps.query_by_id()[a.query_id].text        # a negative now also fits the query
    b.relevant_ids = [b.relevant_ids[0], next(c for c in b.candidate_ids if c not in b.relevant_ids)]
    ps.pools[2].candidate_ids = ps.pools[2].candidate_ids[:-1]
    ps.pools[3].meta["gt_position"] = 0
    d = ps.pools[4]
    twin = next(c for c in d.candidate_ids if c not in d.relevant_ids)
    cands[twin].segments = list(cands[d.relevant_ids[0]].segments)                 # same bytes as the answer
    got = {(v.item, v.invariant) for v in validate(ps).violations}
    assert {(a.id, "negatives_not_described"), (b.id, "one_relevant_image"), (ps.pools[2].id, "candidates_per_query"),
            (ps.pools[3].id, "gt_position"), (d.id, "negatives_not_described")} <= got
    assert {inv for _, inv in got} == {"negatives_not_described", "one_relevant_image", "candidates_per_query",
                                       "gt_position"}


# ---- the same content hash on every machine --------------------------------------------------

def _small_sample(out):
    return get_task("flickr_hard_negatives").build("sample", out, seed=0, sample_images=POOL, pool_size=POOL,
                                                   n_queries=QUERIES, progress=False)


def test_hash_ignores_last_bit_noise_in_the_caption_vectors(built, tmp_path, monkeypatch):
    """Float32 vectors differ in their last bits between CPUs, kernels and batch shapes (shipped b4b3ccd7 vs
    e10f4ea6 on another machine); no such difference may reach the hashed records."""
    from mmbench.builders import flickr_hard_negatives as fhn

    ref = load_poolset(built).content_hash
    original = fhn.embed_captions
    seen = []

    def other_batches(texts, model_name, **kw):      # other padding per batch: ~1e-7 differences
        v, info = original(texts, model_name, batch_size=7)
        seen.append(float(np.abs(v - original(texts, model_name)[0]).max()))
        return v, info

    monkeypatch.setattr(fhn, "embed_captions", other_batches)
    assert _small_sample(tmp_path / "batches").content_hash == ref
    assert seen[0] > 0, "batch size changed nothing: this check would not see float noise"

    def perturbed(texts, model_name, **kw):          # similarities move by ~1e-9
        v, info = original(texts, model_name)
        return v + np.random.default_rng(5).normal(scale=1e-9, size=v.shape), info

    monkeypatch.setattr(fhn, "embed_captions", perturbed)
    assert _small_sample(tmp_path / "perturbed").content_hash == ref


def test_hash_is_the_same_with_other_cpu_kernels_and_thread_counts(built, tmp_path):
    """A subprocess stands in for another machine: one BLAS/OpenMP thread instead of the default, torch's
    generic kernels instead of AVX2/AVX-512, numpy without its AVX dispatch, libjpeg-turbo without SIMD."""
    import os
    import subprocess
    import sys

    from numpy._core._multiarray_umath import __cpu_dispatch__

    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
           "ATEN_CPU_CAPABILITY": "default", "ONEDNN_MAX_CPU_ISA": "SSE41", "JSIMD_FORCENONE": "1",
           "NPY_DISABLE_CPU_FEATURES": " ".join(__cpu_dispatch__)}
    out = tmp_path / "other_machine"
    code = ("import sys; from mmbench.tasks import get_task; "
            f"ps = get_task('flickr_hard_negatives').build('sample', sys.argv[1], seed=0, sample_images={POOL}, "
            f"pool_size={POOL}, n_queries={QUERIES}, progress=False); print(ps.content_hash)")
    proc = subprocess.run([sys.executable, "-c", code, str(out)], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split()[-1] == load_poolset(built).content_hash


def test_no_model_floats_in_hashed_records(built):
    ps = load_poolset(built)
    for item in ps.pools:
        assert not any(isinstance(v, float) for v in item.meta.values()), item.meta
    stats = ps.manifest["builder"]["hard_negatives"]["similarity_max_min"]
    assert set(stats) == {p.id for p in ps.pools} and all(1 >= hi >= lo for hi, lo in stats.values())


def test_image_encoding_is_fixed_and_drops_metadata():
    import io

    from PIL import Image as PILImage
    from PIL import PngImagePlugin

    from mmbench.data.media import encode_image

    img = PILImage.new("RGB", (8, 8), (10, 200, 30))
    tagged = img.copy()
    tagged.info.update({"icc_profile": b"\0" * 64, "dpi": (300, 300)})
    info = PngImagePlugin.PngInfo()
    info.add_text("Software", "x")
    buf = io.BytesIO()
    tagged.save(buf, format="PNG", pnginfo=info, icc_profile=b"\0" * 64)
    reread = PILImage.open(io.BytesIO(buf.getvalue()))
    for fmt in ("PNG", "JPEG"):
        plain = encode_image(img, fmt)
        assert encode_image(tagged, fmt) == plain == encode_image(reread, fmt)
        assert b"iCCP" not in plain[0] and b"tEXt" not in plain[0] and b"pHYs" not in plain[0]
    assert encode_image(img.convert("RGBA"), "PNG") == encode_image(img, "PNG")
