"""`issparse` without importing scipy when nothing sparse can exist.

scipy.sparse takes about half a second to import; only corpus-fitted models (BM25) make sparse vectors,
and a sparse matrix exists only once its module is loaded, so a missing module means "not sparse".
"""
from __future__ import annotations

import sys
from typing import Any


def issparse(value: Any) -> bool:
    sparse = sys.modules.get("scipy.sparse")
    return sparse is not None and sparse.issparse(value)
