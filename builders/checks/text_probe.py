"""The text probe across source records: can a candidate's own text, read by a model that never saw its source
record, say which candidate is relevant?

The learned shortcut probe (`probe`) reads sizes and counts; a marker in the text itself (a trailing space, one
punctuation mark, a token, a Unicode character, a change of casing that a builder left on every relevant
candidate) is invisible to it. This probe reads the text, never the query: each candidate is hashed into word
unigrams and bigrams over its whole text (case kept, punctuation kept on the word: tokens are runs of
non-space) and character 1- to 3-grams of the first and last `EDGE` characters of each text segment, with the
segment's start and end marked (so trailing or leading whitespace, a closing mark, a stray character is a feature),
and character 2- to 4-grams of the *shapes* of the document's first and last `EDGE` characters (capitals X, small
letters x, digits d, the rest kept; issue 43: a casing marker, the last word in capitals, is a different n-gram in
each record's words but one shape n-gram in all); an image or a frame adds its one token ``<img>``. Only n-grams
that candidates of at least MIN_RECORDS source records hold are kept (`shared_columns`): the rest name one record,
and a model that learnt them would find a distractor by having seen it relevant in training. Every feature is
given twice, once alone and once crossed with the pool's kind (its ``difficulty``, else its subset), since a marker
can separate the relevant candidate from its Hard look-alikes while an Easy pool's distractors, other queries'
relevant candidates, carry it too. The
K_BEST n-grams of the training pools by chi-square, then a logistic regression on them (liblinear, L2, balanced
classes, seeded), is trained K-fold with the folds grouped by query and source record (`probe.query_groups`), so
the candidates a held-out pool is scored on come from source records the model never trained on; each held-out pool ranks its
candidates by the predicted probability. The refusal rule is the probe's (`probe.ALPHA`, `probe.MARGIN`); the
refusal names the n-grams with the largest weights in one model fitted on every pool.

Hashing uses scikit-learn's `HashingVectorizer` (MurmurHash3 with a fixed seed: the same features in every process),
so nothing depends on Python's string hash.
"""
from __future__ import annotations

import string

import numpy as np

from mmbench.builders.checks.text_fits import C_REG, K_BEST, TextRows, held_out, held_out_jobs, top_terms
from mmbench.builders.checks.text_pieces import char_seams, hashed_union, no_seams, word_seams
from mmbench.data.documents import Document, Image, Text, Video

__all__ = ["BLOCKS", "C_REG", "EDGE", "HASH_FEATURES", "K_BEST", "MIN_RECORDS", "MODEL", "TextRows", "held_out",
           "held_out_jobs", "name_terms", "shared_columns", "text_matrix", "top_terms"]

EDGE = 64
HASH_FEATURES = 2 ** 17
BLOCKS = 3                       # word, char and shape features, HASH_FEATURES columns each
MIN_RECORDS = 3
MODEL = ("logistic regression over the 256 chi-square-screened hashed word 1-2-grams, segment-edge character "
         "1-3-grams and their shape 2-4-grams, folds by source record")


def _word_parts(doc: Document) -> list[str]:
    """The pieces `_words` joins: each text segment, ``<img>`` per image, one ``<img>`` per frame of a video."""
    parts = []
    for s in doc.segments:
        if isinstance(s, Text):
            parts.append(s.text)
        elif isinstance(s, Image):
            parts.append("<img>")
        elif isinstance(s, Video):
            parts.append(" ".join("<img>" for _ in s.frames))
    return parts


def _words(doc: Document) -> str:
    return "\n".join(_word_parts(doc))


def _edge_blocks(doc: Document) -> list[str]:
    """The pieces `_edges` joins: per text segment its first and last EDGE characters between markers."""
    return [f"\x02{s.text[:EDGE]}\x03{s.text[-EDGE:]}\x04" for s in doc.segments if isinstance(s, Text)]


def _edges(doc: Document) -> str:
    return "".join(_edge_blocks(doc))


# Each ASCII capital -> X, small letter -> x, digit -> d; everything else kept (issue 43: casing).
SHAPE = str.maketrans({**{c: "X" for c in string.ascii_uppercase}, **{c: "x" for c in string.ascii_lowercase},
                       **{c: "d" for c in string.digits}})


def _shapes(doc: Document) -> str:
    """The first and last EDGE characters of the document's text (its first and last text segments) in shapes,
    start and end marked (\x01, \x03, \x05): a casing marker (the last word upper-cased, the first lower-cased) is a
    different n-gram in every record's own words, but one shape n-gram (``XXX.\x05``) in all of them. Only the
    document's two ends are read: inside, the filler's own capitals (``PEP``, ``OR``, ``NEWLINE``) are in every
    candidate alike."""
    texts = [s.text for s in doc.segments if isinstance(s, Text)]
    if not texts:
        return ""
    return f"\x01{texts[0][:EDGE].translate(SHAPE)}\x03{texts[-1][-EDGE:].translate(SHAPE)}\x05"


class _Vectoriser:
    """Candidates -> their hashed feature rows, each distinct piece of text hashed once (`hashed_union`)."""

    def __init__(self) -> None:
        from sklearn.feature_extraction.text import HashingVectorizer

        self.words = HashingVectorizer(n_features=HASH_FEATURES, token_pattern=r"\S+", lowercase=False,
                                       ngram_range=(1, 2), alternate_sign=False, binary=True, norm=None)
        self.chars = HashingVectorizer(n_features=HASH_FEATURES, analyzer="char", lowercase=False,
                                       ngram_range=(1, 3), alternate_sign=False, binary=True, norm=None)
        self.shapes = HashingVectorizer(n_features=HASH_FEATURES, analyzer="char", lowercase=False,
                                        ngram_range=(2, 4), alternate_sign=False, binary=True, norm=None)

    def views(self):
        """(column offset, name, analyzer, the text of a document it reads) of each block of features."""
        return ((0, "word", self.words, _words), (HASH_FEATURES, "char", self.chars, _edges),
                (2 * HASH_FEATURES, "shape", self.shapes, _shapes))

    def __call__(self, docs: list[Document]):
        from scipy import sparse

        # the shape text is one piece per document (no seams): each distinct one is hashed once
        return sparse.hstack([hashed_union(self.words, [_word_parts(d) for d in docs], word_seams),
                              hashed_union(self.chars, [_edge_blocks(d) for d in docs], char_seams),
                              hashed_union(self.shapes, [[_shapes(d)] for d in docs], no_seams)]).tocsr()


def _kind(item) -> str:
    return str(item.meta.get("difficulty") or item.subset)


def text_matrix(ps, items: list[int]):
    """(rows, labels, item per row): one hashed row per candidate of each listed pool, in stored order: the
    candidate's features, then the same features in its pool kind's block (see the module text). The rows are
    `TextRows`: a candidate in many pools of one kind is stored once (`rows.matrix()` gives every row)."""
    from scipy import sparse

    cands = ps.candidate_by_id()
    ids = sorted({c for i in items for c in ps.pools[i].candidate_ids})
    where = {c: k for k, c in enumerate(ids)}
    unique = shared_columns(_Vectoriser()([cands[c] for c in ids]), [_record(cands[c]) for c in ids])
    kinds = sorted({_kind(ps.pools[i]) for i in items})
    pairs: dict[tuple[int, int], int] = {}     # (candidate, pool kind) -> its distinct row
    row_of, labels, owner = [], [], []
    for i in items:
        item = ps.pools[i]
        rel = set(item.relevant_ids)
        kind = kinds.index(_kind(item))
        for c in item.candidate_ids:
            row_of.append(pairs.setdefault((where[c], kind), len(pairs)))
            labels.append(float(c in rel))
            owner.append(i)
    distinct = np.asarray(list(pairs), dtype=np.int64).reshape(-1, 2)
    alone = unique[distinct[:, 0]]
    width = alone.shape[1]
    crossed = alone.tocoo()
    crossed = sparse.csr_matrix((crossed.data, (crossed.row, crossed.col + width * distinct[crossed.row, 1])),
                                shape=(alone.shape[0], width * len(kinds)))
    rows = TextRows(sparse.hstack([alone, crossed]).tocsr(), np.asarray(row_of, dtype=np.int64))
    rows.candidates = [ids[k] for k in distinct[:, 0]]
    return rows, np.asarray(labels), np.asarray(owner, dtype=np.int64)


def _record(doc: Document) -> str:
    """The candidate's source record (its provenance ``dataset`` and ``record_id``; the candidate itself without)."""
    rec = doc.meta.get("record_id")
    return f"{doc.meta.get('dataset')}:{rec}" if rec is not None else "id:" + doc.id


def shared_columns(X, records: list[str]):
    """X with every column zeroed that fewer than MIN_RECORDS distinct source records' candidates hold: an n-gram of
    one record's text names that record (a distractor relevant elsewhere would be found by its identity), a marker a
    builder leaves on many records' candidates does not."""
    from scipy import sparse

    names = sorted(set(records))
    onehot = sparse.csr_matrix((np.ones(len(records)), (np.arange(len(records)), [names.index(r) for r in records])),
                               shape=(len(records), len(names)))
    held = ((onehot.T @ (X > 0).astype(np.float64)) > 0).sum(axis=0).A1
    return (X @ sparse.diags((held >= MIN_RECORDS).astype(np.float64))).tocsr()


def name_terms(ps, items: list[int], terms: tuple[tuple[str, float], ...],
               rows: TextRows | None = None) -> tuple[tuple[str, float], ...]:
    """`top_terms` with each hashed column named by an n-gram of the relevant candidates that hashes to it (the
    first found; a column no relevant n-gram reaches keeps its number). With the probe's `rows`, a candidate whose
    row holds none of the columns is not read (no n-gram of it hashes there)."""
    from sklearn.utils import murmurhash3_32

    width = BLOCKS * HASH_FEATURES
    wanted = {int(t.split(":")[1]) % width for t, _ in terms}
    vec, cands = _Vectoriser(), ps.candidate_by_id()
    holds = _holding(rows, wanted)
    found: dict[int, str] = {}
    for i in items:
        for c in ps.pools[i].relevant_ids:
            if holds is not None and c not in holds:
                continue
            for offset, kind, analyzer, text in vec.views():
                for gram in dict.fromkeys(analyzer.build_analyzer()(text(cands[c]))):
                    col = offset + abs(int(murmurhash3_32(gram, seed=0))) % HASH_FEATURES
                    if col in wanted:
                        found.setdefault(col, f"{kind} {gram!r}")
        if len(found) == len(wanted):
            break
    return tuple((found.get(int(t.split(":")[1]) % width, t), v) for t, v in terms)


def _holding(rows: TextRows | None, wanted: set[int]) -> set[str] | None:
    """The candidates whose own features (the first BLOCKS * HASH_FEATURES columns of their rows: word, char and
    shape blocks) hold a wanted column."""
    if rows is None or rows.candidates is None:
        return None
    m, cols = rows.distinct, np.fromiter(wanted, dtype=np.int64, count=len(wanted))
    hits = np.concatenate(([0], np.cumsum(np.isin(m.indices, cols))))
    per_row = hits[m.indptr[1:]] - hits[m.indptr[:-1]]
    return {c for c, n in zip(rows.candidates, per_row) if n}
