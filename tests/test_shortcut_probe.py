"""The learned shortcut probe and the lexical ceiling: a planted shortcut refuses the build, naming the probe and its
features; shortcut-free pools are refused at most about alpha of the time (simulation); the five samples pass."""
from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image as PILImage

from mmbench.builders.checks import lexical, probe
from mmbench.builders.checks.probe_features import pool_relative, pool_rows
from mmbench.builders.parts.validity import write_valid_poolset
from mmbench.data.documents import Document, Image, Text
from mmbench.data.poolset import PoolItem, PoolSet, PoolSetError, load_poolset


def _planted(tmp_path, shortcut: str, n_items: int = 40, C: int = 6, seed: int = 0) -> tuple[PoolSet, object]:
    """n_items pools of C candidates with random lengths and image counts; the relevant one carries `shortcut`:
    'longer' (3 % more tokens and text than the pool's longest other), 'image' (one more image than the others),
    or 'none'."""
    rng = np.random.default_rng(seed)
    media = tmp_path / "media"
    media.mkdir(exist_ok=True)
    refs = []
    for k in range(4):
        ref = f"img{k}.png"
        PILImage.new("RGB", (8, 8), (40 * k, 0, 0)).save(media / ref)
        refs.append(ref)
    queries, cands, pools = [], [], []
    for i in range(n_items):
        queries.append(Document(id=f"q{i}", segments=[Text(f"question number {i} about topic {i * 7 % 13}")], tokens=8))
        lengths = rng.integers(900, 1100, C).astype(float)
        images = np.full(C, int(rng.integers(0, 3)))
        rel = int(rng.integers(C))
        if shortcut == "longer":
            lengths[rel] = round(1.03 * max(lengths[k] for k in range(C) if k != rel))
        elif shortcut == "image":
            images[rel] += 1
        ids = []
        for k in range(C):
            words = " ".join(f"w{int(x)}" for x in rng.integers(0, 5000, int(lengths[k]) // 10))
            segs = [Text(words)] + [Image(ref=refs[j % 4], width=8, height=8) for j in range(int(images[k]))]
            cands.append(Document(id=f"d{i}-{k}", segments=segs, tokens=int(lengths[k])))
            ids.append(cands[-1].id)
        pools.append(PoolItem(id=f"item{i}", query_id=f"q{i}", subset=f"s{i % 2}", candidate_ids=ids,
                              relevant_ids=[ids[rel]]))
    return PoolSet(task="toy", task_version="0", queries=queries, candidates=cands, pools=pools, seed=seed), media


@pytest.mark.parametrize("shortcut,feature", [("longer", "tokens"), ("image", "images")])
def test_a_planted_shortcut_refuses_the_build_naming_the_probe_and_its_features(tmp_path, shortcut, feature):
    ps, media = _planted(tmp_path, shortcut)
    with pytest.raises(PoolSetError) as err:
        write_valid_poolset(ps, tmp_path / "out", None, media_from=media)
    msg = str(err.value)
    assert "shortcut_probe" in msg and "shortcut probe (gradient boosting" in msg, msg
    assert "feature importances: " + feature in msg or f", {feature}:" in msg, msg
    assert not (tmp_path / "out").exists()


def test_the_image_shortcut_is_found_by_the_probe_alone(tmp_path):
    """One more image is no fixed baseline's signal: label_blind passes, only the probe refuses."""
    ps, media = _planted(tmp_path, "image")
    with pytest.raises(PoolSetError, match="shortcut_probe") as err:
        write_valid_poolset(ps, tmp_path / "out", None, media_from=media)
    assert "label_blind" not in str(err.value)


def test_shortcut_free_pools_build_and_report_the_probe_and_the_ceiling(tmp_path):
    ps, media = _planted(tmp_path, "none")
    write_valid_poolset(ps, tmp_path / "out", None, media_from=media)
    audit = ps.manifest["validity"]["leak_audit"]
    sets = audit["shortcut_probe"]["feature_sets"]
    assert set(sets) == {"candidate", "pool", "query", "text"} and sets["candidate"]["enforced"]
    assert sets["query"]["enforced"] and sets["text"]["enforced"] and sets["pool"]["enforced"]     # pool: issue 43
    assert sets["candidate"]["per_subset"]["all"]["n"] == 40 and not audit["shortcut_probe"]["refusals"]
    assert set(audit["lexical_ceiling"]["per_subset"]) == {"all", "s0", "s1"}
    card = (tmp_path / "out" / "README.md").read_text()
    assert "Learned shortcut probe" in card and "Lexical baseline per subset" in card
    assert "| subset | BM25 on the whole text | BM25 on the first text unit |" in card
    weights = [v for _, v in sets["candidate"]["importances"]]
    assert weights == sorted(weights, reverse=True) and len(weights) == probe.TOP_FEATURES


def test_validate_prints_the_probe_and_the_ceiling(tmp_path, capsys):
    from mmbench.cli.commands_validate import print_shortcuts

    ps, media = _planted(tmp_path, "none")
    write_valid_poolset(ps, tmp_path / "out", None, media_from=media)
    print_shortcuts(ps.manifest["validity"]["leak_audit"])
    out = capsys.readouterr().out
    assert "shortcut probe: gradient boosting" in out and "  pool features: held-out P@1" in out
    assert "  candidate features: held-out P@1" in out and "importances: " in out
    assert "lexical baseline (Easy pools may be lexical by design" in out and "  s0: BM25 whole text" in out


def test_pool_relative_features_are_ranks_and_z_scores():
    raw = np.array([[1.0, 5.0], [3.0, 5.0], [2.0, 5.0]])
    out = pool_relative(raw)
    assert out[:, 0].tolist() == [0.0, 1.0, 0.5] and out[:, 1].tolist() == [0.5, 0.5, 0.5]
    z = (raw[:, 0] - raw[:, 0].mean()) / raw[:, 0].std()
    assert np.allclose(out[:, 2], z) and out[:, 3].tolist() == [0.0, 0.0, 0.0]


def test_features_read_media_bytes_and_the_pool_overlap(tmp_path):
    ps, media = _planted(tmp_path, "image", n_items=2, C=3)
    X, y, items, names = pool_rows(ps, (), media)
    assert X.shape == (6, len(names)) and y.sum() == 2 and items.tolist() == [0, 0, 0, 1, 1, 1]
    rel = int(np.flatnonzero(y[:3])[0])
    assert X[rel, names.index("images:rank")] == 1.0 and X[rel, names.index("media_bytes:rank")] == 1.0


def test_query_groups_join_a_repeated_question_and_a_shared_relevant_candidate(tmp_path):
    ps, _ = _planted(tmp_path, "none", n_items=4, C=3)
    ps.queries[1].segments = [Text(ps.queries[0].text.upper())]            # same question, other case
    ps.pools[3].relevant_ids = list(ps.pools[2].relevant_ids)
    ps.pools[3].candidate_ids[0] = ps.pools[2].relevant_ids[0]
    ps.pools[3].relevant_ids = [ps.pools[3].candidate_ids[0]]
    g = probe.query_groups(ps, range(4)).tolist()
    assert g[0] == g[1] and g[2] == g[3] and g[0] != g[2]


def test_upper_tail_is_the_exact_binomial_sum():
    import math

    n, c = 12, 0.205
    direct = sum(math.comb(n, k) * c ** k * (1 - c) ** (n - k) for k in range(7, n + 1))
    assert probe.upper_p(7.6, n, c) == pytest.approx(direct, rel=1e-12)


def test_shortcut_free_pools_are_refused_at_most_about_alpha_of_the_time():
    """Seeded simulation: label-independent features, 36 pools of 5 in six subsets, 16 replicates (7 tests each: the
    subsets and all). With the stated margin no test refuses; with no margin (the plain one-sided exact test at
    alpha) the share of rejected tests stays within alpha plus three standard errors."""
    rng = np.random.default_rng(33)
    n_pools, C, reps, parts = 36, 5, 16, 6
    with_margin, without = 0, 0
    for _ in range(reps):
        X = np.vstack([pool_relative(rng.normal(size=(C, 4))) for _ in range(n_pools)])
        y = np.zeros(n_pools * C)
        y[np.arange(n_pools) * C + rng.integers(C, size=n_pools)] = 1
        items = np.repeat(np.arange(n_pools), C)
        s = probe.held_out_scores(X, y, items, int(rng.integers(1 << 30)))
        hits = np.array([probe.expected_p1(s[items == i].tolist(), y[items == i].tolist()) for i in range(n_pools)])
        for part in [hits[k::parts] for k in range(parts)] + [hits]:
            with_margin += probe.upper_p(part.sum(), len(part), 1 / C + probe.MARGIN) < probe.ALPHA
            without += probe.upper_p(part.sum(), len(part), 1 / C) < probe.ALPHA
    tests = (parts + 1) * reps
    assert with_margin == 0
    assert without / tests <= probe.ALPHA + 3 * np.sqrt(probe.ALPHA * (1 - probe.ALPHA) / tests)


def test_probe_is_deterministic(tmp_path):
    ps, media = _planted(tmp_path, "longer", n_items=20)
    a, b = probe.probe(ps, (), media), probe.probe(ps, (), media)
    assert [(s.subset, s.score, s.importances) for s in a] == [(s.subset, s.score, s.importances) for s in b]


def test_lexical_ceiling_finds_a_title_line_and_a_quoted_query():
    q = Document(id="q", segments=[Text("How much revenue did Amberfield Optics report in 2019?")], tokens=9)
    docs = [Document(id=f"d{k}", segments=[Text(f"Company number {k} annual report"), Text("filler text " * 20)])
            for k in range(4)]
    docs[2] = Document(id="d2", segments=[Text("Amberfield Optics annual report"), Text("filler text " * 20)])
    assert np.argmax(lexical.bm25_scores(q.text, docs)) == 2
    docs[1] = Document(id="d1", segments=[Text("x"), Text("it says how much revenue did amberfield optics report")])
    found = lexical._QueryGrams(set(lexical.tokenize(q.text)))
    assert lexical.ngram_scores(q.text, docs, found)[1:3] == [4.0, 0.0]
    per = {"a/easy/x": {"ceiling": 0.5}, "a/hard/x": {"ceiling": 0.75}, "b/hard/x": {"ceiling": 0.2}}
    assert lexical.hard_above_easy(per) == ["a/hard/x: lexical ceiling 0.750 above a/easy/x's 0.500"]


# ---- the samples ------------------------------------------------------------------------------------------------

REDUCED = {
    "visual_grounding": dict(lengths=(256,), backgrounds=("text",), kinds=("text",), needles_per_kind=10),
    "multi_source_reasoning": dict(lengths=(2048,), queries_per_dataset=8, candidates_per_query=4),
    "logical_summarization": dict(lengths=(2048, 4096, 8192), queries_per_dataset=4, candidates_per_query=4,
                                  lookalikes=3),
    "temporal_summarization": dict(videos=8, lengths=[128, 256], frame_size=[64, 64], distractors=3),
    "flickr_hard_negatives": dict(sample_images=50, pool_size=50, n_queries=15),
}


@pytest.mark.parametrize("task", sorted(REDUCED))
def test_the_reduced_samples_pass_the_probe_and_report_the_lexical_ceiling(task, tmp_path):
    from mmbench.tasks import get_task

    ps = get_task(task).build("sample", tmp_path / task, seed=0, progress=False, **REDUCED[task])
    audit = ps.manifest["validity"]["leak_audit"]
    candidate = audit["shortcut_probe"]["feature_sets"]["candidate"]
    assert candidate["enforced"] and candidate["per_subset"]["all"]["n"] == len(ps.pools)
    assert not audit["shortcut_probe"]["refusals"]
    assert audit["lexical_ceiling"]["per_subset"]["all"]["n"] == sum(
        bool(q.text.strip()) for q in (ps.query_by_id()[p.query_id] for p in ps.pools))
    assert audit["lexical_ceiling"]["refusals"] == [], audit["lexical_ceiling"]["per_subset"]
    if task in ("multi_source_reasoning", "logical_summarization"):    # no line nor quote gives a Hard pool away
        per = audit["lexical_ceiling"]["per_subset"]
        for group, row in per.items():
            easy = per.get(group.replace("/hard", "/easy"))
            if "/hard" in group and easy:
                assert max(row["bm25_first_unit"], row["query_ngrams"]) <= \
                    max(easy["bm25_first_unit"], easy["query_ngrams"]), (group, row, easy)
    # the figures written at build time are the ones `mmbench validate` recomputes from the files (the builder's
    # pool order is not the loaded one: the folds once followed it, and LS's manifest said 0.073 where validate said 0.062)
    loaded = load_poolset(tmp_path / task)
    again = probe.summary(probe.probe(loaded, loaded.provenance_columns, tmp_path / task / "media"))
    assert json.loads(json.dumps(again)) == audit["shortcut_probe"]


def test_no_sample_report_title_line_names_the_company_the_question_asks_about():
    from mmbench.builders.sources.sample_reasoning import mmdocrag_records

    records, _ = mmdocrag_records(0, 12)
    for rec in records:
        first = min(rec["text_quotes"], key=lambda q: (q["page_id"], q["layout_id"]))["text"]
        company = rec["doc_name"].removesuffix(" annual report")
        assert company not in first and company.split()[0] not in first, first
        if "revenue" in rec["question"]:
            assert company in rec["question"]
            assert all(any(q["quote_id"] == g for q in rec["text_quotes"] + rec["img_quotes"])
                       for g in rec["gold_quotes"])


def test_sample_summaries_quote_no_run_of_their_report():
    from mmbench.builders.sources.sample_reports import pydoc_reports
    from mmbench.data.lexical import tokenize

    reports = [r for r in pydoc_reports() if not r.summary.startswith("This report quotes")]
    assert len(reports) > 20
    for r in reports:
        text = " " + " ".join(tokenize(r.text)) + " "
        words = tokenize(r.summary)
        grams = {" " + " ".join(words[i:i + 4]) + " " for i in range(len(words) - 3)}
        assert not [g for g in grams if g in text], (r.id, [g for g in grams if g in text])
