"""Where batches of model views are encoded: in this process, or spread over Ray actors.

The runner forms the batches (length-sorted, token-budget) and hands them to an executor;
an executor only decides where each batch runs. Both executors run each batch through the
same `encode_batch`, so vectors depend on the batch's contents, never on the executor.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from mmbench.running.executors.local import LocalExecutor, encode_batch

if TYPE_CHECKING:   # ray is imported only when a run asks for it
    from mmbench.running.executors.ray_actors import RayExecutor

__all__ = ["LocalExecutor", "encode_batch"]


def make_executor(kind: str, model: str, model_options: dict, workers: int = 1, *, address: str | None = None,
                  cpus_per_worker: float = 1.0, gpus_per_worker: float = 0.0, num_cpus: int | None = None,
                  timeout: float | None = None) -> LocalExecutor | RayExecutor:
    """The executor a run asked for: `local`, or `ray` with `workers` actors loading `model` themselves
    (`timeout`: seconds an actor may take to load it or to encode one batch; None: the default)."""
    if kind == "local":
        return LocalExecutor()
    if kind != "ray":
        raise ValueError(f"unknown executor {kind!r} (local or ray)")
    import functools

    from mmbench.running.model_loading import load_model_explained
    from mmbench.running.executors.ray_actors import DEFAULT_TIMEOUT_S, RayExecutor

    factory = functools.partial(load_model_explained, model, dict(model_options))
    return RayExecutor(factory, workers, cpus=cpus_per_worker, gpus=gpus_per_worker, address=address,
                       num_cpus=num_cpus, timeout=DEFAULT_TIMEOUT_S if timeout is None else timeout)
