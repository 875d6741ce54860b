"""The `bm25` model scores through bm25s and equals rank_bm25's Okapi BM25 (with Lucene IDF)."""
from __future__ import annotations

import math

import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from mmbench.data.documents import Document, Text, Video
from mmbench.models.bm25 import BM25Model, tokenize


class LuceneIdfOkapi(BM25Okapi):
    """rank_bm25's Okapi scoring with the non-negative Lucene IDF the model states."""

    def _calc_idf(self, nd):
        self.idf = {w: math.log1p((self.corpus_size - n + 0.5) / (n + 0.5)) for w, n in nd.items()}


def _corpus(seed=0, n=40):
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(30)] + ["the", "of", "Grün", "数据"]
    docs = [Document(f"d{i:02d}", [Text(" ".join(rng.choice(words, size=rng.integers(1, 60))))]) for i in range(n)]
    docs.append(Document("empty", [Video(("f0.jpg",), 1.0, 8, 8)]))              # no text at all
    docs.append(Document("dup", [Text(docs[3].text)]))                            # same text as d03
    return docs, words


@pytest.mark.parametrize("k1,b", [(1.5, 0.75), (0.9, 0.4), (2.0, 1.0)])
def test_scores_equal_rank_bm25(k1, b):
    docs, words = _corpus()
    model = BM25Model(k1=k1, b=b)
    model.fit(docs, None)
    d = model.encode(docs, "document", None)
    rng = np.random.default_rng(1)
    queries = [Document(f"q{i}", [Text(" ".join(rng.choice(words + ["unseen"], size=rng.integers(1, 8))))])
               for i in range(25)]
    queries.append(Document("repeat", [Text("w1 w1 w1 w2")]))                    # repeated terms count each time
    q = model.encode(queries, "query", None)
    got = (q @ d.T).toarray()
    reference = LuceneIdfOkapi([tokenize(x.text) for x in docs], k1=k1, b=b)
    with np.errstate(invalid="ignore"):
        want = np.array([reference.get_scores(tokenize(x.text)) for x in queries])
    assert np.all(np.isnan(want[:, -2]) | (want[:, -2] == 0))   # rank_bm25: 0/0 for a textless doc when b = 1
    want[:, -2] = 0.0
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    assert got[:, -1].tolist() == got[:, 3].tolist() and not got[:, -2].any()   # duplicate text, empty doc


def test_unfitted_and_textless_corpora():
    model = BM25Model()
    with pytest.raises(RuntimeError, match="fit"):
        model.encode([Document("a", [Text("x")])], "query", None)
    videos = [Document(f"v{i}", [Video(("f.jpg",), 1.0, 8, 8)]) for i in range(3)]
    model.fit(videos, None)
    assert model.encode(videos, "document", None).shape == (3, 0)
    assert model.encode([Document("q", [Text("anything")])], "query", None).nnz == 0
    model.fit(_corpus()[0], None)
    with pytest.raises(RuntimeError, match=r"fitted on another corpus: documents \['new'\]"):
        model.encode([Document("new", [Text("w1 never seen in the corpus")])], "document", None)


def test_scores_do_not_depend_on_the_process_string_hash(tmp_path):
    """Two processes with different PYTHONHASHSEED store bit-identical BM25 scores (a Ray worker, a resume)."""
    import subprocess
    import sys

    script = (
        "import numpy as np\n"
        "from mmbench.data.documents import Document, Text\n"
        "from mmbench.models.bm25 import BM25Model\n"
        "rng = np.random.default_rng(0)\n"
        "words = [f'term{k}x' for k in range(300)]\n"
        "docs = [Document(f'd{i}', [Text(' '.join(rng.choice(words, size=int(rng.integers(50, 400)))))])\n"
        "        for i in range(60)]\n"
        "m = BM25Model(); m.fit(docs, None)\n"
        "q = m.encode([Document('q', [Text(' '.join(rng.choice(words, size=80)))])], 'query', None)\n"
        "d = m.encode(docs, 'document', None)\n"
        "print((q @ d.T).toarray().tobytes().hex())\n")
    outs = set()
    for seed in ("1", "2", "3"):
        env = {**__import__("os").environ, "PYTHONHASHSEED": seed}
        outs.add(subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                                check=True).stdout)
    assert len(outs) == 1
