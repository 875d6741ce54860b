"""Flickr30k caption-space hard negatives: stratification, hard-negative selection against brute force,
seeded candidate order, source readers, and an offline build → run (tiny CLIP) → rank (fake LLM) → compare."""
from __future__ import annotations

import csv
import hashlib
import json
import math
import re

import numpy as np
import pytest

from fake_llm_server import FakeLLMServer
from mmbench.builders.flickr_hard_negatives import _rng, embed_captions, hard_negatives, sample_pool, stratify
from mmbench.builders.sources.flickr30k import (FlickrSourceError, read_annotations_csv, read_hf, read_karpathy,
                                                read_token)
from mmbench.builders.sources.sample_flickr import captions, sample_flickr, sample_scenes
from mmbench.cli import main
from mmbench.poolset import load_poolset
from mmbench.results import load_results
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
    vecs, _ = embed_captions(texts, None)
    expected = _brute_force(vecs.astype(float).tolist(), pool_ids, 24)
    for item in ps.pools:
        row = pool_ids.index(item.id)
        q = queries[item.query_id]
        assert q.text == all_caps[item.id][strata[item.id]] == rep[item.id]
        assert item.relevant_ids == [f"img-{item.id}"] and item.meta["caption_index"] == strata[item.id]
        assert len(item.candidate_ids) == 25 == len(set(item.candidate_ids))
        assert set(item.candidate_ids) == {f"img-{item.id}"} | {f"img-{pool_ids[j]}" for j in expected[row]}
        # stored order is the documented seeded permutation of the candidates listed by image id
        members = sorted([f"img-{item.id}"] + [f"img-{pool_ids[j]}" for j in expected[row]])
        order = _rng(0, "order", item.id).permutation(25)
        assert item.candidate_ids == [members[i] for i in order]
        assert item.candidate_ids.index(f"img-{item.id}") + 1 == item.meta["gt_position"]
    assert len({p.meta["gt_position"] for p in ps.pools}) > 5    # the answer is not parked in one place
    assert sorted(b["queries"]) == sorted(p.id for p in ps.pools)
    img = cands[ps.pools[0].candidate_ids[0]].segments[0]
    assert img.kind == "image" and img.ref.endswith(".jpg")


def _export(tmp_path, n=30):
    """The sample written out in the three real layouts: image folder + Karpathy JSON, CSVs, parquet."""
    recs = sample_flickr(n, seed=0)
    root = tmp_path / "images"
    root.mkdir()
    for r in recs:
        (root / f"{r.image_id}.jpg").write_bytes(r.read()[0])
    karpathy = {"images": [{"filename": f"{r.image_id}.jpg", "split": "test" if i % 3 == 0 else "train",
                            "sentences": [{"raw": c, "tokens": c.split()} for c in r.captions]}
                           for i, r in enumerate(recs)]}
    (tmp_path / "dataset_flickr30k.json").write_text(json.dumps(karpathy))
    with open(tmp_path / "results.csv", "w") as fh:
        fh.write("image_name| comment_number| comment\n")
        for r in recs:
            for k in (4, 2, 0, 1, 3):  # out of order on purpose: comment_number decides
                fh.write(f"{r.image_id}.jpg| {k}| {r.captions[k]}\n")
    with open(tmp_path / "flickr_annotations_30k.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["raw", "sentids", "split", "filename", "img_id"])
        for i, r in enumerate(recs):
            w.writerow([json.dumps(list(r.captions)), "[]", "test", f"{r.image_id}.jpg", i])
    with open(tmp_path / "results_20130124.token", "w") as fh:  # the original release: name.jpg#k<TAB>caption
        for k in (3, 0, 4, 1, 2):  # the caption number decides the order, not the line order
            for r in recs:
                fh.write(f"{r.image_id}.jpg#{k}\t{r.captions[k]}\n")
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"image": [{"bytes": (root / f"{r.image_id}.jpg").read_bytes(), "path": f"{r.image_id}.jpg"}
                                for r in recs],
                      "caption": [list(r.captions) for r in recs], "filename": [f"{r.image_id}.jpg" for r in recs]})
    pq.write_table(table, tmp_path / "flickr.parquet")
    return recs, root


def test_readers_agree_with_the_sample(tmp_path):
    recs, root = _export(tmp_path)
    want = {r.image_id: r.captions for r in recs}
    readers = {"karpathy": read_karpathy(str(tmp_path / "dataset_flickr30k.json"), str(root)),
               "results.csv": read_annotations_csv(str(tmp_path / "results.csv"), str(root)),
               "annotations.csv": read_annotations_csv(str(tmp_path / "flickr_annotations_30k.csv"), str(root)),
               "token": read_token(str(tmp_path / "results_20130124.token"), str(root)),
               "parquet": read_hf(str(tmp_path / "flickr.parquet"))}
    for name, got in readers.items():
        assert {r.image_id: r.captions for r in got} == want, name
        data, suffix, w, h = got[0].read()
        assert suffix == ".jpg" and (w, h) == (96, 96) and data == (root / f"{got[0].image_id}.jpg").read_bytes()
    assert len(read_karpathy(str(tmp_path / "dataset_flickr30k.json"), str(root), split="test")) == 10


def test_reader_errors_name_file_and_record(tmp_path):
    recs, root = _export(tmp_path, n=6)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"images": [{"filename": f"{recs[0].image_id}.jpg", "sentences": [{"raw": "x"}]},
                                          {"filename": f"{recs[1].image_id}.jpg"}]}))
    with pytest.raises(FlickrSourceError, match=r"bad\.json: images\[1\] lacks field 'sentences'"):
        read_karpathy(str(bad), str(root))
    odd = tmp_path / "odd.csv"
    odd.write_text("foo,bar\n1,2\n")
    with pytest.raises(FlickrSourceError, match="odd.csv: unknown CSV layout"):
        read_annotations_csv(str(odd), str(root))
    (root / f"{recs[0].image_id}.jpg").write_bytes(b"not an image")
    first = [r for r in read_karpathy(str(tmp_path / "dataset_flickr30k.json"), str(root)) if r.image_id == recs[0].image_id]
    with pytest.raises(FlickrSourceError, match=f"{recs[0].image_id}.jpg is not a readable image"):
        first[0].read()
    with pytest.raises(FlickrSourceError, match="needs the parameter image_root"):
        read_karpathy(str(tmp_path / "dataset_flickr30k.json"), None)


def test_karpathy_build_matches_sample_build(tmp_path, built):
    _export(tmp_path, n=POOL)
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


def test_results_csv_line_without_its_second_bar_is_read_with_a_warning(tmp_path):
    """The published results.csv has one line like '2199200615.jpg| 4 A dog runs across the grass .'."""
    recs, root = _export(tmp_path, n=3)
    path = tmp_path / "results.csv"
    lines = path.read_text().splitlines()
    target = next(i for i, line in enumerate(lines) if line.endswith(recs[1].captions[3]) and "| 3|" in line)
    lines[target] = lines[target].replace("| 3| ", "| 3 ")
    path.write_text("\n".join(lines) + "\n")
    with pytest.warns(UserWarning, match=rf"results\.csv: line {target + 1}: no '\|' between comment_number"):
        got = {r.image_id: r.captions for r in read_annotations_csv(str(path), str(root))}
    assert got == {r.image_id: r.captions for r in recs}


def test_seed_003_defaults(tmp_path, monkeypatch):
    """The seed's numbers are the defaults: pool 5,000 in 5 strata of 1,000, 1,000 queries, 24 negatives
    (25 candidates), all-mpnet-base-v2 for real sources, 1,000 bootstrap resamples for metric CIs."""
    import inspect

    from mmbench.builders import flickr_hard_negatives as fhn
    from mmbench.evaluators.reports.compare import compare_runs

    assert fhn.DEFAULTS["real"] == {"pool_size": 5000, "n_queries": 1000}
    assert inspect.signature(fhn.build).parameters["n_negatives"].default == 24
    assert inspect.signature(compare_runs).parameters["ci_resamples"].default == 1000
    strata = stratify([f"{i:05d}" for i in range(5000)], seed=0)
    assert [sum(v == g for v in strata.values()) for g in range(5)] == [1000] * 5
    _export(tmp_path, n=30)
    args = dict(annotations=str(tmp_path / "dataset_flickr30k.json"), image_root=str(tmp_path / "images"), progress=False)
    with pytest.raises(ValueError, match="pool_size 5000 exceeds the 30 usable images"):
        fhn.build("karpathy", tmp_path / "out", **args)
    used = []

    def fake_embed(texts, model_name, **_):
        used.append(model_name)
        raise RuntimeError("stop after choosing the caption model")

    monkeypatch.setattr(fhn, "embed_captions", fake_embed)
    with pytest.raises(RuntimeError, match="stop after"):
        fhn.build("karpathy", tmp_path / "out", pool_size=30, n_queries=10, **args)
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
    recs, root = _export(tmp_path, n=30)
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
    recs, root = _export(tmp_path, n=11)
    a, b = recs[0].image_id, recs[1].image_id
    (root / f"{b}.jpg").write_bytes((root / f"{a}.jpg").read_bytes())     # the same photo under two names
    ps = get_task("flickr_hard_negatives").build("karpathy", tmp_path / "out", seed=0, pool_size=11, n_queries=11,
                                                 n_negatives=9, caption_model="minilm", progress=False,
                                                 annotations=str(tmp_path / "dataset_flickr30k.json"),
                                                 image_root=str(root))
    by_id = {p.id: p for p in ps.pools}
    assert f"img-{b}" not in by_id[a].candidate_ids and f"img-{a}" not in by_id[b].candidate_ids
    assert all(len(p.candidate_ids) == 10 for p in ps.pools)     # the other 9 images stand in
    skipped = ps.manifest["dropped"]["negatives"]["dropped"]["same image bytes as the query's image"]
    assert skipped == {"count": 2, "examples": [f"q-{a}: img-{b}", f"q-{b}: img-{a}"]}
    assert ps.manifest["validity"]["ok"]


def test_validator_names_item_and_invariant(built, tmp_path):
    from mmbench.builders.validity import validate

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

    from mmbench.media import encode_image

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


# ---- readers: official layouts and malformed variants ----------------------------------------

def _one_line(exc_info) -> str:
    msg = str(exc_info.value)
    assert "\n" not in msg, msg
    return msg


def test_token_reader_has_no_splits(tmp_path):
    _, root = _export(tmp_path, n=3)
    with pytest.raises(FlickrSourceError, match="no splits; use source karpathy"):
        read_token(str(tmp_path / "results_20130124.token"), str(root), split="test")


@pytest.mark.parametrize("bad, message", [
    ("{name}#0 A dog runs .", r"line 3: no TAB between the caption id and the caption"),
    ("{name}\tA dog runs .", r"line 3: field 'caption id' is '.*\.jpg', expected 'name\.jpg#k'"),
    ("{name}#one\tA dog runs .", r"line 3: field 'caption id' is '.*#one'"),
    ("{name}#0\tA dog runs .", r"line 3: field 'caption id': .*\.jpg#0 appears twice"),
])
def test_token_reader_malformed_lines(tmp_path, bad, message):
    recs, root = _export(tmp_path, n=2)
    name = f"{recs[0].image_id}.jpg"
    path = tmp_path / "bad.token"
    path.write_text(f"{name}#0\t{recs[0].captions[0]}\n{name}#1\t{recs[0].captions[1]}\n{bad.format(name=name)}\n")
    with pytest.raises(FlickrSourceError) as exc:
        read_token(str(path), str(root))
    assert re.search(rf"bad\.token: {message}", _one_line(exc))


def test_empty_captions_are_read_and_the_build_drops_and_counts_their_image(tmp_path):
    from mmbench.builders.flickr_hard_negatives import FEW_CAPTIONS, usable_images
    from mmbench.builders.validity import DropLog

    recs, root = _export(tmp_path, n=3)
    path = tmp_path / "results_20130124.token"
    lines = path.read_text().splitlines()
    target = next(i for i, line in enumerate(lines) if line.startswith(f"{recs[1].image_id}.jpg#2\t"))
    lines[target] = f"{recs[1].image_id}.jpg#2\t  "
    path.write_text("\n".join(lines) + "\n")
    got = {r.image_id: r for r in read_token(str(path), str(root))}
    assert got[recs[1].image_id].captions[2] == ""
    log = DropLog("images")
    kept = usable_images(list(got.values()), log)
    assert sorted(r.image_id for r in kept) == sorted([recs[0].image_id, recs[2].image_id])
    assert dict(log.reasons) == {FEW_CAPTIONS: 1} and log.read == 3


def test_non_utf8_annotations_name_the_line(tmp_path):
    recs, root = _export(tmp_path, n=2)
    path = tmp_path / "latin1.token"
    path.write_bytes(f"{recs[0].image_id}.jpg#0\tA dog\n".encode() + b"{0}.jpg#1\tA caf\xe9 .\n".replace(
        b"{0}", recs[0].image_id.encode()))
    with pytest.raises(FlickrSourceError) as exc:
        read_token(str(path), str(root))
    assert re.search(r"latin1\.token: line 2: not UTF-8 text \(byte 0xe9", _one_line(exc))


def test_image_caption_csv_with_an_unquoted_comma_is_an_error(tmp_path):
    """Before: 'A dog, running' was read as 'A dog' and the rest silently dropped."""
    recs, root = _export(tmp_path, n=2)
    path = tmp_path / "captions.txt"
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["image", "caption"])
        for r in recs:
            for c in r.captions:
                w.writerow([f"{r.image_id}.jpg", c.replace(" over ", ", over ")])   # commas, quoted by the writer
    got = {r.image_id: r.captions for r in read_annotations_csv(str(path), str(root))}
    assert got == {r.image_id: tuple(c.replace(" over ", ", over ") for c in r.captions) for r in recs}
    lines = path.read_text().splitlines()
    lines[4] = f"{recs[0].image_id}.jpg,A dog, running on grass"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(FlickrSourceError) as exc:
        read_annotations_csv(str(path), str(root))
    assert re.search(r"captions\.txt: line 5: 3 fields where the header has 2 \(an unquoted ',' inside field "
                     r"'caption'\?\)", _one_line(exc))


def test_results_csv_with_an_extra_bar_is_an_error(tmp_path):
    recs, root = _export(tmp_path, n=2)
    path = tmp_path / "results.csv"
    lines = path.read_text().splitlines()
    lines[2] = lines[2] + " | and more"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(FlickrSourceError) as exc:
        read_annotations_csv(str(path), str(root))
    assert re.search(r"results\.csv: line 3: 4 fields where the header has 3 \(an unquoted '\|' inside field "
                     r"'comment'\?\)", _one_line(exc))


def test_missing_image_is_a_one_line_error_or_a_counted_drop(tmp_path):
    from mmbench.builders.sources.flickr30k import MISSING_IMAGE
    from mmbench.builders.validity import DropLog

    recs, root = _export(tmp_path, n=6)
    gone = recs[2].image_id
    (root / f"{gone}.jpg").unlink()
    layouts = [(read_karpathy, "dataset_flickr30k.json", r"dataset_flickr30k\.json: images\[2\]: field 'filename'"),
               (read_token, "results_20130124.token", r"results_20130124\.token: line \d+: field 'caption id'"),
               (read_annotations_csv, "results.csv", r"results\.csv: line \d+: field 'image_name'"),
               (read_annotations_csv, "flickr_annotations_30k.csv",
                r"flickr_annotations_30k\.csv: line 4: field 'filename'")]
    for reader, name, where in layouts:
        with pytest.raises(FlickrSourceError) as exc:
            reader(str(tmp_path / name), str(root))
        assert re.search(rf"{where}: image file .*{gone}\.jpg does not exist", _one_line(exc)), name
        log = DropLog("images")
        got = reader(str(tmp_path / name), str(root), drops=log)
        assert sorted(r.image_id for r in got) == sorted(r.image_id for r in recs if r.image_id != gone)
        assert dict(log.reasons) == {MISSING_IMAGE: 1} and gone in log.examples[MISSING_IMAGE][0], name


def test_build_fails_above_the_missing_share_unless_allowed(tmp_path, capsys):
    recs, root = _export(tmp_path, n=30)
    (root / f"{recs[5].image_id}.jpg").unlink()
    out = tmp_path / "out"
    args = ["build", "--task", "flickr_hard_negatives", "--source", "token", "--out", str(out),
            "--param", f"annotations={tmp_path / 'results_20130124.token'}", "--param", f"image_root={root}",
            "--param", "pool_size=25", "--param", "n_queries=5", "--param", "caption_model=minilm"]
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "1 of 30 images unusable, more than 1%" in err
    assert f"{recs[5].image_id}.jpg" in err and "--param allow_missing=true" in err and not out.exists()
    assert main(args + ["--param", "allow_missing=true"]) == 0
    printed = capsys.readouterr().out
    assert "source images: 30 read -> 29 kept" in printed and "dropped 1: image file missing under image_root" in printed
    ps = load_poolset(out)
    assert ps.manifest["dropped"]["images"]["dropped"]["image file missing under image_root"]["count"] == 1
    assert ps.manifest["builder"]["source_images"] == 30


def test_offline_caption_model_is_a_one_line_error_with_the_fix(tmp_path, monkeypatch, capsys):
    import mmbench.models.sentence_transformer as st

    _, root = _export(tmp_path, n=10)

    def offline(model_id, **_):
        raise OSError("We couldn't connect to 'https://huggingface.co' to load the files, and couldn't find them in "
                      "the cached files.\nCheck your internet connection or see how to run the library in offline "
                      "mode at 'https://huggingface.co/docs/transformers/installation#offline-mode'.")

    monkeypatch.setattr(st, "SentenceTransformerModel", offline)
    capsys.readouterr()
    assert main(["build", "--task", "flickr_hard_negatives", "--source", "karpathy", "--out", str(tmp_path / "o"),
                 "--param", f"annotations={tmp_path / 'dataset_flickr30k.json'}", "--param", f"image_root={root}",
                 "--param", "pool_size=10", "--param", "n_queries=3"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "'sentence-transformers/all-mpnet-base-v2' (hub id) cannot be loaded" in err
    assert "--param caption_model=/path/to/all-mpnet-base-v2" in err and "--param caption_model=minilm" in err


def test_image_root_may_be_the_release_archive(tmp_path):
    """nlphuji/flickr30k ships flickr30k-images.zip beside flickr_annotations_30k.csv; it is read in place."""
    import tarfile
    import zipfile

    recs, root = _export(tmp_path, n=6)
    want = {r.image_id: (root / f"{r.image_id}.jpg").read_bytes() for r in recs}
    zpath, tpath, gz = tmp_path / "flickr30k-images.zip", tmp_path / "flickr30k-images.tar", tmp_path / "images.tar.gz"
    with zipfile.ZipFile(zpath, "w") as zf:
        for r in recs[1:]:                                  # recs[0] is missing from the archives
            zf.write(root / f"{r.image_id}.jpg", f"flickr30k-images/{r.image_id}.jpg")
    with tarfile.open(tpath, "w") as tf, tarfile.open(gz, "w:gz") as tgz:
        for r in recs[1:]:
            tf.add(root / f"{r.image_id}.jpg", f"flickr30k-images/{r.image_id}.jpg")
            tgz.add(root / f"{r.image_id}.jpg", f"flickr30k-images/{r.image_id}.jpg")
    for archive in (zpath, tpath):
        with pytest.raises(FlickrSourceError) as exc:
            read_annotations_csv(str(tmp_path / "flickr_annotations_30k.csv"), str(archive))
        assert re.search(rf"line 2: field 'filename': image file .*{archive.name}!{recs[0].image_id}\.jpg does not "
                         "exist", _one_line(exc))
        from mmbench.builders.validity import DropLog

        log = DropLog("images")
        got = read_annotations_csv(str(tmp_path / "flickr_annotations_30k.csv"), str(archive), drops=log)
        assert log.dropped == 1 and {r.image_id: r.read()[0] for r in got} == {k: v for k, v in want.items()
                                                                              if k != recs[0].image_id}
    with pytest.raises(FlickrSourceError, match="compressed tar archive; unpack it first"):
        read_karpathy(str(tmp_path / "dataset_flickr30k.json"), str(gz))
    (tmp_path / "notes.txt").write_text("not an archive")
    with pytest.raises(FlickrSourceError, match="neither a .zip nor a .tar"):
        read_token(str(tmp_path / "results_20130124.token"), str(tmp_path / "notes.txt"))
    damaged = bytearray(zpath.read_bytes())
    start = damaged.find(want[recs[1].image_id][200:260])
    damaged[start:start + 40] = bytes(40)
    zpath.write_bytes(bytes(damaged))
    first = next(r for r in read_token(str(tmp_path / "results_20130124.token"), str(zpath), drops=DropLog("x"))
                 if r.image_id == recs[1].image_id)
    with pytest.raises(FlickrSourceError) as exc:
        first.read()
    assert re.search(rf"cannot read .*flickr30k-images\.zip!{recs[1].image_id}\.jpg \(damaged archive member",
                     _one_line(exc))
