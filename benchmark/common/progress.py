"""Progress bars: tqdm's, imported only when one is shown (tqdm.auto brings asyncio with it, and a warm run, which
shows none, would pay for it in every process)."""
from __future__ import annotations

from typing import Any, Iterable, TypeVar

T = TypeVar("T")


def progress_bar(items: Iterable[T], disable: bool = False, **options: Any) -> Iterable[T]:
    """`items` under a tqdm.auto bar with `options` (desc, unit, total, ...), or `items` itself when `disable`."""
    if disable:
        return items
    from tqdm.auto import tqdm

    return tqdm(items, **options)
