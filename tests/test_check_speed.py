"""The validity checks' faster paths give the previous paths' numbers bit for bit (issue 49): each is compared with a
copy of the code it replaced (for the checks issue 43 added or changed, a copy of issue 43's code), on random inputs that reach its corner cases, and the probe gives the same figures
with its fits one after another and side by side. The five default samples' reports are compared whole by
tests/test_leaderboard_boards.py (official hashes) and by the manifests' probe figures against `validate`."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import sparse

from mmbench.builders.checks import fits, lexical, probe, query_structure, shingles
from mmbench.builders.checks.probe_features import pool_relative, pool_relative_blocks
from mmbench.data.documents import Document, Image, Text, Video
from mmbench.data.lexical import tokenize


# ---- copies of the code before issue 49 (the reference) ---------------------------------------------------------

def old_structural_rows(query, cands):
    stated = sorted(set(query_structure.numbers(query.text)))
    rows = []
    for c in cands:
        got = query_structure.counts(c)
        row = []
        for u in query_structure.UNITS:
            v = got[u]
            row.append(float(v in stated))
            row.append(min((min(query_structure.FAR, abs(v - n) / max(1, n)) for n in stated),
                           default=query_structure.FAR))
        row.append(math.log((got["tokens"] + 1) / (int(query.tokens) + 1)))
        rows.append(row)
    return np.asarray(rows, dtype=np.float64)


def old_ngram_scores(query, docs, vocabulary):
    wanted = {" ".join(w[i:i + 4]) for w in [tokenize(query)] for i in range(len(w) - 3)}
    out = []
    for d in docs:
        words = tokenize(d.text)
        keep = [w in vocabulary for w in words]
        found = {" ".join(words[i:i + 4]) for i in range(len(words) - 3) if all(keep[i:i + 4])}
        out.append(float(len(wanted & found)))
    return out


def old_lexical_row(found, doc):
    """The lexical baseline's `_Row` of a candidate as issue 43 read it: its whole text tokenised at once."""
    words = tokenize(doc.text)
    ids = found.ids(words)
    return lexical._Row(len(words), np.bincount(ids[ids >= 0], minlength=len(found.number)), found.codes(ids),
                        " " + " ".join(words) + " ")


def old_intersections(sets):
    codes, column = np.unique(np.concatenate(list(sets)), return_inverse=True)
    rows = np.repeat(np.arange(len(sets)), [len(a) for a in sets])
    incidence = sparse.csr_matrix((np.ones(len(column)), (rows, column.ravel())), shape=(len(sets), len(codes)))
    return (incidence @ incidence.T).toarray()


# ---- the comparisons -------------------------------------------------------------------------------------------

def _texts(rng, n):
    words = ["one", "two", "3", "12", "1,234", "twenty", "Σ", "ΑΣ", "end.", "Why?", "word", "x"]
    seps = [" ", "\n", "\n\n", "\n \n", ". ", "  "]
    return ["".join(str(rng.choice(words)) + str(rng.choice(seps)) for _ in range(int(rng.integers(0, 30))))
            for _ in range(n)]


def _docs(rng, n, texts, prefix: str = "d"):
    """Candidates with ids unique under `prefix` (the checks remember a candidate's counts by its id)."""
    out = []
    for k in range(n):
        segs = [Text(str(rng.choice(texts))) for _ in range(int(rng.integers(0, 4)))]
        if rng.random() < 0.3:
            segs.insert(int(rng.integers(0, len(segs) + 1)), Image(ref=f"{k:064x}.png", width=8, height=8))
        if rng.random() < 0.2:
            segs.append(Video(frames=("a", "b"), fps=1.0, width=8, height=8))
        out.append(Document(id=f"{prefix}{k}", segments=segs, tokens=int(rng.integers(0, 5000))))
    return out


def test_structural_rows_equal_the_per_candidate_loop():
    rng = np.random.default_rng(1)
    texts = _texts(rng, 30)
    table = query_structure.CountTable()
    for k in range(200):
        cands = _docs(rng, int(rng.integers(1, 9)), texts, f"p{k}-")
        stated = rng.choice(["", "over 3 paragraphs", "twenty-one and 12 words", "1,234 of 7", "0 images",
                             "12345678901234567890123 tokens"])
        q = Document(id=f"q{k}", segments=[Text(str(stated))], tokens=int(rng.integers(0, 50)))
        got = query_structure.structural_rows(q, cands, table)
        assert got.tobytes() == old_structural_rows(q, cands).tobytes(), stated


def test_lexical_codes_count_what_the_string_sets_count():
    rng = np.random.default_rng(2)
    texts = _texts(rng, 40)
    for big in (False, True):
        vocabulary = {w for t in texts[:10] for w in tokenize(t)}
        if big:   # past 2^16 numbered words: the codes are the numbers' raw bytes
            vocabulary |= {f"w{k}" for k in range(1 << 16)}
        found = lexical._QueryGrams(vocabulary)
        for k in range(40):
            docs = _docs(rng, 6, texts, f"p{k}-")
            query = str(rng.choice(texts[:10]))
            assert lexical.ngram_scores(query, docs, found) == old_ngram_scores(query, docs, vocabulary)


def test_lexical_rows_from_segments_equal_the_whole_text_rows(monkeypatch):
    """Issue 43's lexical baseline tokenised each candidate's whole text; it now tokenises each distinct text segment
    once. Segments that end or start on a capital sigma (lower-cased by its context), on case-ignorable marks, on
    blanks, and empty ones; both ways of numbering words (word by word and the pandas lookup past LONG_TEXT)."""
    rng = np.random.default_rng(9)
    edges = ["ΑΣ", "ΑΣ'", "'Β", "Σ", "ΑΣ\u0301", "\u0301Β", "", " ", "\n", "x.", "ΑΣΑ"]
    texts = _texts(rng, 40) + [str(a) + str(t) + str(b) for t in _texts(rng, 20)
                                for a, b in [rng.choice(edges, 2)]] + edges
    for long_text in (lexical.LONG_TEXT, 3):
        monkeypatch.setattr(lexical, "LONG_TEXT", long_text)
        vocabulary = {w for t in texts[:25] for w in tokenize(t)} | {"σ", "ς", "ας", "β", "ασ", "ασα"}
        found = lexical._QueryGrams(vocabulary)
        for k in range(60):
            docs = _docs(rng, 6, texts, f"p{k}-{long_text}-")
            for d in docs:
                got, want = found.row(d), old_lexical_row(found, d)
                assert (got.length, got.joined) == (want.length, want.joined), d.text
                assert got.counts.tobytes() == want.counts.tobytes() and got.grams.tobytes() == want.grams.tobytes()
            query = " ".join(str(rng.choice(texts[:25])) for _ in range(2))
            rows, old = [found.row(d) for d in docs], [old_lexical_row(found, d) for d in docs]
            assert lexical.bm25_whole(query, rows, found) == lexical.bm25_whole(query, old, found)
            rel = [bool(r) for r in rng.random(len(docs)) < 0.3]
            words = found.query(query)[0]
            assert lexical.verbatim(words, rows, rel) == lexical.verbatim(words, old, rel)


def test_pool_relative_blocks_equal_one_pool_at_a_time():
    rng = np.random.default_rng(3)
    for f in (1, 2, 9, 22, 31):          # one width per probe matrix; pools of many sizes
        blocks = []
        for _ in range(150):
            raw = rng.normal(size=(int(rng.integers(2, 40)), f)) * 10.0 ** int(rng.integers(-3, 6))
            if rng.random() < 0.5:
                raw = np.round(raw)          # ties and constant columns
            blocks.append(raw)
        blocks += [blocks[0].copy() for _ in range(3)]
        assert pool_relative_blocks(blocks).tobytes() == np.vstack([pool_relative(b) for b in blocks]).tobytes()


@pytest.mark.parametrize("dense", [True, False])
def test_intersections_equal_the_sparse_product(monkeypatch, dense):
    monkeypatch.setattr(shingles, "DENSE_CELLS", 1 << 24 if dense else 0)
    rng = np.random.default_rng(4)
    for _ in range(100):
        base = rng.integers(0, 2 ** 63, size=int(rng.integers(0, 500)), dtype=np.uint64)
        sets = [np.unique(np.concatenate([rng.choice(base, size=int(rng.integers(0, len(base) + 1)))
                                          if len(base) else base,
                                          rng.integers(0, 2 ** 63, size=int(rng.integers(0, 9)), dtype=np.uint64)]))
                for _ in range(int(rng.integers(1, 25)))]
        assert shingles.intersections(sets).tobytes() == old_intersections(sets).tobytes()


def test_item_rows_are_the_masks_of_each_item():
    rng = np.random.default_rng(5)
    for _ in range(100):
        items = rng.integers(0, 12, size=int(rng.integers(0, 80)))
        got = probe.item_rows(items)
        want = [(i, np.flatnonzero(items == i)) for i in dict.fromkeys(items.tolist())]
        assert [i for i, _ in got] == [i for i, _ in want]
        assert all(np.array_equal(a, b) for (_, a), (_, b) in zip(got, want))


def test_the_probe_gives_the_same_figures_with_its_fits_side_by_side(tmp_path, monkeypatch):
    from test_shortcut_probe import _planted

    ps, media = _planted(tmp_path, "longer", n_items=40)
    runs = []
    for threads in ("1", "3"):
        monkeypatch.setenv("MMBENCH_CHECK_THREADS", threads)
        assert fits.threads() == int(threads)
        runs.append(probe.summary(probe.probe(ps, (), media)))
    assert runs[0] == runs[1]
    monkeypatch.setenv("MMBENCH_CHECK_THREADS", "many")
    with pytest.raises(ValueError, match="MMBENCH_CHECK_THREADS"):
        fits.threads()


@pytest.mark.parametrize("columns, density", [(40, 0.05), (600, 0.003), (3000, 0.05)])
def test_text_fits_on_distinct_rows_equal_the_pipeline_on_every_row(columns, density):
    """Rows repeated as a candidate is in many pools; fewer columns than K_BEST, fewer than K_BEST holding anything
    (the screen keeps columns whose statistic is NaN) and many (ties at the K_BEST-th statistic)."""
    from mmbench.builders.checks import text_fits

    rng = np.random.default_rng(6)
    distinct = sparse.random(60, columns, density=density, random_state=7, format="csr")
    distinct.data[:] = 1.0
    rows = text_fits.TextRows(distinct, rng.integers(0, 60, size=400))
    y = (rng.random(400) < 0.2).astype(float)
    groups = rng.integers(0, 30, size=400)
    full = rows.matrix()
    plan = fits.group_folds(y, groups, probe.FOLDS)
    for train, test in plan.folds:
        want = text_fits.pipeline(3, columns).fit(full[train], y[train]).predict_proba(full[test])[:, 1]
        assert text_fits.fit_predict(rows, y, train, test, 3).tobytes() == want.tobytes()
    assert text_fits.top_terms(rows, y, 3, 5) == text_fits.top_terms(full, y, 3, 5)
    model = text_fits.pipeline(3, columns).fit(full, y)
    coef, kept = model[-1].coef_[0], model[0].get_support(indices=True)
    best = [int(j) for j in np.argsort(-coef, kind="stable")[:5] if coef[j] > 0]
    assert text_fits.top_terms(rows, y, 3, 5) == tuple((f"text:{int(kept[j])}", round(float(coef[j]), 3))
                                                       for j in best)


def test_sequence_ratios_are_difflibs():
    import difflib

    from mmbench.builders.checks.sequence_ratio import ratios

    rng = np.random.default_rng(8)
    pairs = []
    for _ in range(4000):   # small alphabets: many equal-length blocks, ties between them, repeats
        letters = list("abcab-")[:int(rng.integers(1, 7))]
        pairs.append(("".join(rng.choice(letters, int(rng.integers(1, 20)))),
                      "".join(rng.choice(letters, int(rng.integers(1, 20))))))
    pairs += [("", "x"), ("x", ""), ("", ""), ("a" * 5, "a" * 300), ("é€𝄞ab", "ab𝄞é"), ("q-0a1b2c3d4e5f", "c-0a1b2c3d4e5f")]
    assert ratios(pairs) == [difflib.SequenceMatcher(None, a, b).ratio() for a, b in pairs]


def test_a_build_records_and_prints_what_each_check_cost(vg_tiny, capsys):
    import json

    from mmbench.cli.commands_core import check_cost_line

    costs = json.loads((vg_tiny / "manifest.json").read_text())["check_costs"]
    assert {"distinct_questions", "label_blind", "pool_aware", "shortcut_probe", "lexical_ceiling",
            "visual_grounding invariants"} == set(costs["checks"])
    assert costs["threads"] == fits.threads() and costs["total"]["wall"] > 0
    assert all(c["wall"] >= 0 and c["cpu"] >= 0 for c in costs["checks"].values())
    line = check_cost_line(costs)
    assert line.startswith(f"checks: {costs['total']['wall']:.1f} s (") and "shortcut_probe" in line
    assert "check_costs" not in json.dumps(json.loads((vg_tiny / "manifest.json").read_text())["validity"])
