"""Loading a model by the name a user gave, with every way that fails turned into one line that says how to fix it."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

from mmbench.models.base import EmbeddingModel
from mmbench.common.address_limit import OutOfMemory, is_out_of_memory, memory_step


WEIGHT_MAGIC = {".bin": (b"PK\x03\x04", b"\x80"), ".pt": (b"PK\x03\x04", b"\x80"),
                ".pth": (b"PK\x03\x04", b"\x80")}  # torch.save: a zip archive, or a pickle (older files)


def damaged_weights(name: str, options: dict[str, Any]) -> str | None:
    """'<file> is damaged (why)' for the first weight file of the model `name` that cannot be a checkpoint:
    a safetensors file whose header does not parse, a torch file that is neither a zip archive nor a pickle;
    None when every file looks whole (or none is found)."""
    from mmbench.running.memory_fit import weight_files

    for path in weight_files(name, options):
        why = _damage(path)
        if why is not None:
            return f"{path} is damaged ({why})"
    return None


def _damage(path: Path) -> str | None:
    try:
        if path.suffix == ".safetensors":
            from safetensors import safe_open

            with safe_open(str(path), framework="numpy"):
                return None
        with path.open("rb") as f:
            head = f.read(4)
    except OSError as exc:
        return f"unreadable: {exc.strerror or exc}"
    except Exception as exc:  # noqa: BLE001 - safetensors raises its own error type for a bad header
        return " ".join(str(exc).split())[:160] or type(exc).__name__
    magic = WEIGHT_MAGIC.get(path.suffix)
    if magic is not None and not head.startswith(magic):
        return "neither a zip archive nor a pickle, as torch.save writes" if head else "empty"
    return None


class ModelUnavailable(RuntimeError):
    """A model name is unknown, or its weights cannot be reached; the message says how to fix it."""


def load_model_explained(name: str, options: dict[str, Any],
                         clock: Callable[[], float] = time.perf_counter) -> EmbeddingModel:
    """`load_model`, with unknown names and unreachable weights turned into one-line explanations. The time
    the load took (by `clock`) is set as the model's `load_seconds`, which the run's efficiency record reads."""
    from mmbench.models.registry import UnknownModelError, load_model, weights_problem
    from mmbench.running.memory_fit import fit_problem

    problem = weights_problem(name, options)
    if problem is not None:  # decided in a second, where the load would retry each file for minutes
        hint = "--model-path DIR"
        raise ModelUnavailable(f"{problem} (offline? download the weights and pass {hint})")
    no_fit = fit_problem(name, options)
    if no_fit is not None:  # refused in one line, before an allocation fails somewhere (or aborts in C++)
        raise OutOfMemory(no_fit)
    try:
        start = clock()
        with memory_step(f"loading model {name!r}"):
            model = load_model(name, **options)
        try:
            setattr(model, "load_seconds", clock() - start)  # read by the run's efficiency record (an extra attribute)
        except AttributeError:
            pass  # an adapter with __slots__ or a frozen object: its load time goes unrecorded
        return model
    except UnknownModelError as exc:
        raise ModelUnavailable(str(exc)) from None
    except TypeError as exc:  # an option the adapter's constructor does not take (paths, hub ids, mteb names)
        if "keyword argument" not in str(exc) and "multiple values" not in str(exc):
            raise
        raise ModelUnavailable(f"model {name!r}: {exc}") from None
    except OutOfMemory:
        raise
    except Exception as exc:
        damaged = damaged_weights(name, options) if not is_out_of_memory(exc) else None
        if damaged is not None:  # a truncated or zeroed checkpoint: name it, not the loader's traceback
            raise ModelUnavailable(f"could not load model {name!r}: {damaged}; download or copy the weights "
                                   "again") from None
        if not isinstance(exc, OSError) or is_out_of_memory(exc):  # a library or the weights that could not be
            raise                                                   # mapped: memory, not the network
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        hint = "--model mteb:DIR" if name.startswith("mteb:") else "--model-path DIR"
        raise ModelUnavailable(f"could not load model {name!r}: {first} "
                               f"(offline? download the weights and pass {hint})") from None
