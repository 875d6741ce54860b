"""The check every batch of vectors passes when it comes back from a model, whatever the adapter.

A model (a local network, a plugin, a remote API) can hand back garbage: NaN or infinite values, too many or
too few rows, an array of the wrong rank, strings, ragged rows, or a dimension that differs from its card or
from its earlier batches. None of these is a fault of one document, so none is retried document by document:
the first bad batch stops the run with one line naming the model, the batch's first document and what was
wrong (`BadModelOutput`, a user error: exit 2), before anything of it is cached, scored or counted.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from mmbench.common.errors import CLIError
from mmbench.common.sparse import issparse
from mmbench.data.documents import Document


class BadModelOutput(CLIError):
    """A model's output for a batch is not a usable matrix of vectors; the message names the model, the batch's
    first document and what was wrong."""


def batch_rows(model_name: str, output: Any, views: Sequence[Document], role: str,
               dim: int | None = None) -> list[Any]:
    """`output` as one float32 row (or sparse row) per document of `views`, or `BadModelOutput`.

    `dim`: the dimension the vectors must have (the model card's, or that of the run's earlier batches)."""
    n = len(views)

    def bad(what: str) -> BadModelOutput:
        first = views[0].id if views else "?"
        docs = "queries" if role == "query" else "documents"
        return BadModelOutput(f"model {model_name!r} gave unusable vectors for the batch of {n} {docs} starting at "
                              f"{first!r}: {what}; the run stops here")

    if issparse(output):
        matrix = output.tocsr()
        if matrix.shape[0] != n:
            raise bad(f"{matrix.shape[0]} rows for {n} documents")
        if not np.all(np.isfinite(matrix.data)):
            raise bad("non-finite values (NaN or infinity)")
        return [matrix[i] for i in range(n)]
    try:
        arr = np.asarray(output)
    except (ValueError, TypeError) as exc:   # numpy refuses ragged nested lists
        raise bad("rows of different lengths, or values that are not numbers") from exc
    if arr.dtype.kind not in "fiu":
        kind = {"U": "strings", "S": "bytes", "O": "Python objects (ragged rows?)", "b": "booleans",
                "c": "complex numbers"}.get(arr.dtype.kind, f"dtype {arr.dtype}")
        raise bad(f"{kind} instead of numbers")
    if arr.ndim != 2:
        raise bad(f"an array of rank {arr.ndim} (shape {arr.shape}); expected (documents, dimension)")
    if arr.shape[0] != n:
        raise bad(f"{arr.shape[0]} rows for {n} documents")
    if arr.shape[1] == 0:
        raise bad("vectors of dimension 0")
    if dim is not None and arr.shape[1] != dim:
        raise bad(f"{arr.shape[1]}-dimensional vectors; expected {dim}")
    arr = arr.astype(np.float32, copy=False)
    finite = np.isfinite(arr)
    if not finite.all():
        row = int(np.argmin(finite.all(axis=1)))
        what = "NaN" if np.isnan(arr[row]).any() else "infinite values"
        raise bad(f"{what} in the vector of document {views[row].id!r}")
    return list(arr)
