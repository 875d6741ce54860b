"""Token-budget batching vs fixed-size batching: padding and encode time, same model and data.

Usage: python perf/batching.py [--docs 400] [--batch-size 32] [--budget 8192]
Prints, for each scheme, real/padded tokens and the encode time, all measured in this one run
(machines are noisy; compare ratios, not seconds). Schemes: fixed-size batches in input order;
token-budget batches without the fill rule (the previous default, the baseline); token-budget
batches closed when a batch would fall below 90 % real tokens (mmbench's default).
"""
from __future__ import annotations

import argparse
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--docs", type=int, default=400)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--budget", type=int, default=8192)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()

    import pydoc_data.topics as topics

    from mmbench.running.batching import fixed_size_batches, padding_ratio, token_budget_batches
    from mmbench.data.documents import Document, Text
    from mmbench.models.registry import load_model

    model = load_model("minilm")
    tok = model.budget_tokenizer()
    words = " ".join(topics.topics[k] for k in sorted(topics.topics)).split()
    rng = np.random.default_rng(0)
    docs = []
    for i in range(args.docs):
        n = int(rng.choice([8, 16, 32, 64, 128, 240]))  # a long-tailed mix of lengths, all inside the window
        start = int(rng.integers(0, len(words) - n))
        docs.append(Document(f"d{i}", [Text(" ".join(words[start:start + n]))]))
    lengths = [len(tok.encode(d.text)) + 2 for d in docs]
    schemes = {
        "fixed": fixed_size_batches(len(docs), args.batch_size),
        "budget-only": token_budget_batches(lengths, args.budget, max_batch_size=256, min_fill=0),
        "token-budget": token_budget_batches(lengths, args.budget, max_batch_size=256),
    }
    model.encode(docs[:8], "document", None)  # warm-up
    times = {}
    for name, batches in schemes.items():
        best = float("inf")
        for _ in range(args.repeats):
            start = time.perf_counter()
            for b in batches:
                model.encode([docs[i] for i in b], "document", None)
            best = min(best, time.perf_counter() - start)
        times[name] = best
        print(f"{name:13s} batches={len(batches):4d} real/padded tokens={1 / padding_ratio(lengths, batches):.3f} "
              f"time={best:.2f}s")
    print(f"real/padded tokens, token-budget batching = {1 / padding_ratio(lengths, schemes['token-budget']):.3f} "
          f"(budget-only baseline {1 / padding_ratio(lengths, schemes['budget-only']):.3f}, "
          f"fixed {1 / padding_ratio(lengths, schemes['fixed']):.3f})")
    print(f"speed-up of token-budget batching = {times['fixed'] / times['token-budget']:.2f}x over fixed, "
          f"{times['budget-only'] / times['token-budget']:.2f}x over budget-only")


if __name__ == "__main__":
    main()
