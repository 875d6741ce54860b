"""Length bins as stated ranges of a candidate's own length, and where a document of n tokens goes.

A bin is named by its nominal length L (8K, 16K, 32K) and holds documents whose own length n lies
in (lo, L]: lo is L/2, or the next smaller bin's L when that is larger, so bins never overlap and
doubling bins tile the axis without gaps. A document goes into the one bin its own length falls
in. Below the smallest bin (or in a gap between bins) a document may be padded with unrelated
filler up to just past the next bin's lower bound, but only if the filler stays within
`max_filler_share` of the padded candidate; otherwise it fits no bin and is reported. So no
document is ever stretched into a bin it does not nearly fill, and none lands in two bins.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from mmbench.data.tokens import length_label


MAX_FILLER_SHARE = 0.25   # filler is at most a quarter of a padded candidate: its own document is >= 75 %


@dataclass(frozen=True)
class Bin:
    nominal: int     # L, the upper bound (inclusive)
    lo: int          # exclusive lower bound

    @property
    def label(self) -> str:
        return length_label(self.nominal)

    def holds(self, n: int) -> bool:
        return self.lo < n <= self.nominal

    def describe(self) -> str:
        return f"{self.label} = ({self.lo}, {self.nominal}]"


@dataclass(frozen=True)
class Placement:
    bin: Bin
    target: int         # the candidate's length: the document's own length, or just past the lower bound
    filler: int         # target - own length (0 when the document fits as it is)


def make_bins(lengths: Sequence[int]) -> list[Bin]:
    out: list[Bin] = []
    for L in sorted(lengths):
        lo = L // 2 if not out else max(L // 2, out[-1].nominal)
        out.append(Bin(int(L), int(lo)))
    labels = [b.label for b in out]
    if len(set(labels)) != len(labels):
        raise ValueError(f"lengths {sorted(lengths)} give bins with the same name ({', '.join(labels)}); "
                         "use lengths at least 1024 tokens apart")
    return out


def place(n: int, bins: Sequence[Bin], max_filler_share: float = MAX_FILLER_SHARE, step: int = 1) -> Placement | None:
    """The bin a document of `n` own tokens goes to, or None. `step` is the padding granularity
    (1 for text; a visual-token row for pages, whose padded length may land up to step - 1 short)."""
    for b in bins:
        if b.holds(n):
            return Placement(b, n, 0)
    for b in bins:
        if n <= b.lo:
            target = b.lo + step
            if target <= b.nominal and (target - n) / target <= max_filler_share:
                return Placement(b, target, target - n)
            return None
    return None


def no_bin_reason(n: int, bins: Sequence[Bin], max_filler_share: float) -> str:
    if n > bins[-1].nominal:
        return f"longer than the largest bin ({bins[-1].describe()})"
    return f"fits no bin without more than {max_filler_share:.0%} filler (bins {', '.join(b.describe() for b in bins)})"
