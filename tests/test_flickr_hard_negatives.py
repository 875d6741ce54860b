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
from mmbench.builders.sources.flickr30k import (FlickrSourceError, read_annotations_csv, read_hf, read_karpathy)
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
    idx, sims = hard_negatives(emb, ids, k=9, block=16)
    assert idx.tolist() == _brute_force(emb.tolist(), ids, 9)
    assert all(i not in row for i, row in enumerate(idx.tolist()))
    assert np.all(np.diff(sims, axis=1) <= 0)
    # permuting the rows permutes the answer: selection does not depend on input order
    perm = rng.permutation(40)
    idx2, _ = hard_negatives(emb[perm], [ids[p] for p in perm], k=9)
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
        # stored order is the documented seeded permutation of [image, negatives by similarity]
        members = [f"img-{item.id}"] + [f"img-{pool_ids[j]}" for j in expected[row]]
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
               "parquet": read_hf(str(tmp_path / "flickr.parquet"))}
    for name, got in readers.items():
        assert {r.image_id: r.captions for r in got} == want, name
        data, suffix, w, h = got[0].read()
        assert suffix == ".jpg" and (w, h) == (96, 96) and data == (root / f"{got[0].image_id}.jpg").read_bytes()
    assert len(read_karpathy(str(tmp_path / "dataset_flickr30k.json"), str(root), split="test")) == 10


def test_reader_errors_name_file_and_record(tmp_path):
    recs, root = _export(tmp_path, n=6)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"images": [{"filename": "a.jpg", "sentences": [{"raw": "x"}]}, {"filename": "b.jpg"}]}))
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
