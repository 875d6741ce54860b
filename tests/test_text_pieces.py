"""The text probe's rows built from distinct pieces are the rows scikit-learn gives the whole joined texts, bit for
bit: on adversarial texts (whitespace of every kind at the seams, empty and blank segments, the edge markers inside
the text, images and videos between texts, capitals and digits for the word-shape block) and on a built pool
set."""
from __future__ import annotations

import numpy as np
from scipy import sparse

from mmbench.builders.checks import text_probe
from mmbench.builders.checks.text_pieces import char_seams, word_seams
from mmbench.data.documents import Document, Image, Text, Video

SPACES = [" ", "  ", "\n", "\n\n", "\t", "\u2003", "\x1c", "\x85", "\u3000 ", "\r\n", ""]
WORDS = ["alpha", "beta", "x", "\x02", "\x04", "é", "\u0301", "a\x03b", "<img>", "Σ", "ς", "1,234", ".", "ALPHA", "Beta",
         "\x01", "\x05", "X9x"]


def _text(rng: np.random.Generator) -> str:
    n = int(rng.integers(0, 12))
    parts = [str(rng.choice(SPACES))]
    for _ in range(n):
        parts += [str(rng.choice(WORDS)), str(rng.choice(SPACES))]
    if rng.random() < 0.2:
        parts.append("long " * int(rng.integers(20, 40)))   # past EDGE characters: head and tail differ
    return "".join(parts)


def _doc(rng: np.random.Generator, k: int, shared: list[str]) -> Document:
    segments = []
    for _ in range(int(rng.integers(0, 6))):
        r = rng.random()
        if r < 0.15:
            segments.append(Image(ref=f"{k:064x}.png", width=32, height=32))
        elif r < 0.25:
            segments.append(Video(frames=[f"{j:064x}.png" for j in range(int(rng.integers(0, 3)))], fps=1.0, width=32,
                                  height=32))
        else:
            segments.append(Text(str(rng.choice(shared)) if rng.random() < 0.5 else _text(rng)))
    return Document(id=f"d{k}", segments=segments, tokens=1)


def _same(a, b) -> None:
    assert type(a) is type(b) and a.dtype == b.dtype and a.shape == b.shape
    assert a.has_sorted_indices and b.has_sorted_indices
    assert np.array_equal(a.indptr, b.indptr) and np.array_equal(a.indices, b.indices)
    assert np.array_equal(a.data, b.data)


def _whole(docs: list[Document]):
    """What the text probe hashed before it hashed pieces: each document's joined texts, whole, and its shape text
    (issue 43's third block), one document at a time."""
    v = text_probe._Vectoriser()
    return sparse.hstack([v.words.transform([text_probe._words(d) for d in docs]),
                          v.chars.transform([text_probe._edges(d) for d in docs]),
                          v.shapes.transform([text_probe._shapes(d) for d in docs])]).tocsr()


def test_rows_from_pieces_equal_rows_of_the_joined_texts_on_adversarial_texts():
    rng = np.random.default_rng(7)
    shared = [_text(rng) for _ in range(6)]
    docs = [_doc(rng, k, shared) for k in range(300)] + [Document(id="empty", segments=[], tokens=0)]
    _same(text_probe._Vectoriser()(docs), _whole(docs))


def test_the_seams_are_the_n_grams_across_the_joins():
    assert word_seams(["a b", "  ", "c d", "", "e"]) == ["b c", "d e"]   # a blank piece is spanned
    assert word_seams(["", " "]) == []
    assert char_seams(["\x02ab  \x03x\t\n\x04", "\x02 y\x03\x04"]) == [" \x04\x02 "]   # whitespace runs collapse first


def test_rows_from_pieces_equal_rows_of_the_joined_texts_on_a_built_pool_set(vg_tiny):
    from mmbench.data.poolset import load_poolset

    docs = load_poolset(vg_tiny).candidates
    _same(text_probe._Vectoriser()(docs), _whole(docs))
