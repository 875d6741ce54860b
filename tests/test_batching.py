"""Token-budget batching keeps padding under 10 % in every batch, within budget, covering every item once."""
import numpy as np

from mmbench.running.batching import padding_ratio, token_budget_batches


def test_every_batch_is_at_least_ninety_percent_real_tokens():
    rng = np.random.default_rng(0)
    lengths = [int(x) for x in rng.lognormal(4.5, 1.0, 2000).clip(1, 8000)]  # long-tailed, like real corpora
    batches = token_budget_batches(lengths, budget=8192, max_batch_size=256)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for b in batches:
        longest = max(lengths[i] for i in b)
        assert longest * len(b) <= 8192 or len(b) == 1
        assert sum(lengths[i] for i in b) >= 0.9 * longest * len(b)
    assert 1 / padding_ratio(lengths, batches) >= 0.9
    # the rule can be turned off (pure budget filling: fewer, fuller batches with more padding)
    loose = token_budget_batches(lengths, budget=8192, max_batch_size=256, min_fill=0)
    assert len(loose) <= len(batches) and padding_ratio(lengths, loose) >= padding_ratio(lengths, batches)
    assert token_budget_batches(lengths, 8192, 256) == batches  # deterministic
