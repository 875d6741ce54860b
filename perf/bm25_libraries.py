"""rank-bm25 vs bm25s on a GovReport-sized synthetic corpus: do they rank alike, and how much faster is bm25s?

Both libraries get the same tokens and parameters: Okapi BM25, k1 = 1.5, b = 0.75, IDF
log((N - n + 0.5) / (n + 0.5)) with negative values floored at 0 (rank-bm25 `BM25Okapi` with
epsilon = 0; bm25s method "robertson"). bm25s drops the constant (k1 + 1) factor, which does not
change rankings, so scores are compared after rescaling. The corpus mimics GovReport's size
(19,500 reports) with topic-mixture documents; queries are summary-like word samples of one
document. `builders/lookalikes.py` uses bm25s when this script reports agreeing rankings.

    python perf/bm25_libraries.py [--docs 19500] [--words 600] [--queries 30]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

K1, B = 1.5, 0.75


def corpus(n_docs: int, words: int, seed: int) -> tuple[list[list[str]], list[list[str]], list[int]]:
    """Documents mixing 3 of 400 topics (each 150 specific words) with Zipfian common words."""
    rng = np.random.default_rng(seed)
    common = [f"w{i}" for i in range(5000)]
    zipf = 1 / np.arange(1, len(common) + 1)
    zipf /= zipf.sum()
    topics = [[f"t{t}_{i}" for i in range(150)] for t in range(400)]
    docs, mixes = [], []
    for _ in range(n_docs):
        mix = rng.choice(len(topics), 3, replace=False)
        n_topic = words // 3
        toks = [topics[int(mix[int(k)])][int(j)] for k, j in zip(rng.integers(3, size=n_topic),
                                                                 rng.integers(150, size=n_topic))]
        toks += [common[int(i)] for i in rng.choice(len(common), words - n_topic, p=zipf)]
        docs.append(toks)
        mixes.append(mix)
    targets = [int(t) for t in rng.choice(n_docs, 30, replace=False)]
    queries = [list(rng.choice(docs[t], 60)) for t in targets]
    return docs, queries, targets


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", type=int, default=19500)
    ap.add_argument("--words", type=int, default=600, help="tokens per document (GovReport averages ~9k)")
    ap.add_argument("--queries", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    import bm25s
    from rank_bm25 import BM25Okapi

    docs, queries, targets = corpus(args.docs, args.words, args.seed)
    queries, targets = queries[:args.queries], targets[:args.queries]
    print(f"corpus: {len(docs)} documents x {args.words} tokens; {len(queries)} queries")

    t0 = time.perf_counter()
    rb = BM25Okapi(docs, k1=K1, b=B, epsilon=0.0)
    t_rb_index = time.perf_counter() - t0
    t0 = time.perf_counter()
    rb_scores = [np.asarray(rb.get_scores(q)) for q in queries]
    t_rb_query = time.perf_counter() - t0

    t0 = time.perf_counter()
    bs = bm25s.BM25(k1=K1, b=B, method="robertson")
    bs.index(docs, show_progress=False)
    t_bs_index = time.perf_counter() - t0
    vocab = bs.vocab_dict
    t0 = time.perf_counter()
    bs_scores = [np.asarray(bs.get_scores([t for t in q if t in vocab]), dtype=np.float64) for q in queries]
    t_bs_query = time.perf_counter() - t0

    top1, overlap10, rel_err = 0, [], []
    for a, s in zip(rb_scores, bs_scores):
        ra, rs = np.argsort(-a, kind="stable")[:10], np.argsort(-s, kind="stable")[:10]
        top1 += int(ra[0] == rs[0])
        overlap10.append(len(set(ra) & set(rs)) / 10)
        mask = a > 0
        rel_err.append(float(np.max(np.abs(s[mask] * (K1 + 1) - a[mask]) / a[mask])) if mask.any() else 0.0)
    hits = sum(int(np.argmax(s) == t) for s, t in zip(bs_scores, targets))
    print(f"rankings: top-1 identical for {top1}/{len(queries)} queries; mean top-10 overlap "
          f"{np.mean(overlap10):.3f}; max relative score difference (after x(k1+1)) {max(rel_err):.2e}")
    print(f"sanity: the query's source document ranks first for {hits}/{len(queries)} queries")
    print(f"index:  rank-bm25 {t_rb_index:8.2f} s   bm25s {t_bs_index:8.2f} s   ratio {t_rb_index / t_bs_index:6.1f}x")
    print(f"query:  rank-bm25 {t_rb_query / len(queries) * 1000:8.1f} ms  bm25s {t_bs_query / len(queries) * 1000:8.1f} ms"
          f"  ratio {t_rb_query / max(t_bs_query, 1e-9):6.1f}x  (per query)")
    per_rb, per_bs = t_rb_query / len(queries), t_bs_query / len(queries)
    if t_bs_index > t_rb_index and per_rb > per_bs:
        print(f"break-even: bm25s is faster overall (index + queries) from "
              f"{(t_bs_index - t_rb_index) / (per_rb - per_bs):.0f} queries on")
    agree = top1 == len(queries) and min(overlap10) == 1.0
    print("verdict: rankings agree; bm25s is faster" if agree and t_bs_query < t_rb_query
          else "verdict: check the differences above before switching libraries")


if __name__ == "__main__":
    main()
