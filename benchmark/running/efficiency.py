"""Efficiency of one run: encoding speed, time to first vector, load time, peak memory, batches, API calls, cost.

The runner hands every finished batch to an `EfficiencyMeter` (its documents, their seen tokens, its padded
size and the wall time since the previous batch finished). The meter keeps totals for the run and per length
bin (the bin of the pool a document belongs to), and `record()` turns them into the `efficiency` block of
results.json. These are measurements, not results: they depend on the machine, so the block names the device
and backend they were taken on, and nothing recomputes them (leaderboards accept them as measured numbers).

A batch's time is shared among its documents in proportion to their tokens, so a batch that mixes two bins
gives each bin the part of the time its tokens took. A model that loads its weights on first use (a lazy
model) has that load time taken out of the batch that triggered it and reported as `load_seconds`.

Every time is read from the meter's `clock` (default `time.perf_counter`); tests give it a fake clock that
their fake model advances by a known cost per token, so what they check is exact and cannot flake.
"""
from __future__ import annotations

import os
import resource
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

from mmbench.evaluators.ordering import label_key

MB = 1024 * 1024


@dataclass
class _Tally:
    documents: int = 0
    tokens: int = 0
    padded_tokens: int = 0
    seconds: float = 0.0
    rss_mb: float = 0.0
    gpu_allocated_mb: float = 0.0
    gpu_reserved_mb: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"documents": self.documents, "tokens": self.tokens, "seconds": round(self.seconds, 6),
                               "documents_per_second": _rate(self.documents, self.seconds),
                               "tokens_per_second": _rate(self.tokens, self.seconds),
                               "padding_ratio": round(self.padded_tokens / self.tokens, 4) if self.tokens else None,
                               "rss_after_batch_max_mb": round(self.rss_mb, 1) if self.rss_mb else None}
        if self.gpu_reserved_mb:
            out.update(gpu_peak_allocated_mb=round(self.gpu_allocated_mb, 1),
                       gpu_peak_reserved_mb=round(self.gpu_reserved_mb, 1))
        return out


def _rate(n: float, seconds: float) -> float | None:
    return round(n / seconds, 3) if seconds > 0 else None


def current_rss_mb() -> float:
    """Resident memory of this process now (from /proc; 0 where it cannot be read)."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / MB
    except (OSError, ValueError, IndexError):
        return 0.0


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far (getrusage: kilobytes on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / MB if sys.platform == "darwin" else peak / 1024


def refresh_peak_rss(summary: dict[str, Any]) -> None:
    """Set a summary's `efficiency.peak_rss_mb` to the process's peak now: the meter records it when encoding
    ends, but building the tables and aggregates afterwards can raise it (by 131 MiB on one measured run)."""
    eff = (summary.get("mmbench") or {}).get("efficiency")
    if isinstance(eff, dict) and "peak_rss_mb" in eff:
        eff["peak_rss_mb"] = round(peak_rss_mb(), 1)


def _cuda() -> Any:
    """torch.cuda when torch is already imported and a GPU is there (never imports torch itself)."""
    torch = sys.modules.get("torch")
    try:
        return torch.cuda if torch is not None and torch.cuda.is_available() else None
    except Exception:  # noqa: BLE001 - a broken CUDA setup means no GPU figures, not a failed run
        return None


def device_of(model: Any) -> dict[str, Any]:
    """Where the model ran: its weights' device and dtype (cpu when it has none; 'remote' for API models),
    the GPU's name when one is used, the CPU count."""
    from mmbench.running.provenance import model_device_dtype

    device, dtype = model_device_dtype(model)
    card = model.card
    if device is None:
        device = "remote" if str(card.family).startswith("api") else "cpu"
    out = {"device": device, "backend": card.family, "dtype": dtype, "cpu_count": os.cpu_count()}
    cuda = _cuda()
    if cuda is not None and device.startswith("cuda"):
        out["device_name"] = cuda.get_device_name()
    return out


def load_seconds_of(model: Any) -> float | None:
    """Seconds the model took to load, when its loader measured it (`load_seconds`); never loads a lazy model."""
    value = model.__dict__.get("load_seconds") if hasattr(model, "__dict__") else None
    return float(value) if isinstance(value, (int, float)) else None


def _api_counts(model: Any) -> tuple[int, int] | None:
    """(requests sent, retries) of an API model's HTTP client, None for local models or an unloaded lazy one."""
    if not getattr(model, "loaded", True):
        return None
    real = getattr(model, "real", model)
    client = getattr(real, "client", None)
    sent = getattr(client, "requests_sent", None)
    if not isinstance(sent, int):
        return None
    return sent, int(getattr(client, "retries", 0) or 0)


@dataclass
class EfficiencyMeter:
    """Collects per-batch timings of one run; `bin_of` maps a document id to its length bin label."""

    model: Any
    bin_of: dict[str, str] = field(default_factory=dict)
    price_per_token: float | None = None
    total: _Tally = field(default_factory=_Tally)
    bins: dict[str, _Tally] = field(default_factory=dict)
    sizes: list[int] = field(default_factory=list)
    batch_tokens: list[int] = field(default_factory=list)
    first_vector_seconds: float | None = None
    clock: Callable[[], float] = time.perf_counter   # seconds, monotonic; injectable for tests
    _started: float | None = None
    _last: float = 0.0
    _load_seen: float | None = None
    _api_start: tuple[int, int] | None = None

    def start(self) -> None:
        """Mark the start of encoding (the first call counts; later calls only restart the batch clock)."""
        now = self.clock()
        if self._started is None:
            self._started = now
            self._load_seen = load_seconds_of(self.model)
            self._api_start = _api_counts(self.model)
            cuda = _cuda()
            if cuda is not None:
                cuda.reset_peak_memory_stats()
        self._last = now

    def batch(self, doc_ids: Sequence[str], tokens: Sequence[int], padded: int) -> None:
        """One finished batch: its documents, each one's seen tokens, and its padded token count."""
        now = self.clock()
        seconds = now - self._last
        self._last = now
        load = load_seconds_of(self.model)
        if load is not None and self._load_seen is None:  # the weights loaded inside this batch
            seconds = max(0.0, seconds - load)
            self._load_seen = load
        if self.first_vector_seconds is None and self._started is not None:
            self.first_vector_seconds = now - self._started
        rss = current_rss_mb()
        alloc = reserved = 0.0
        cuda = _cuda()
        if cuda is not None:
            alloc, reserved = cuda.max_memory_allocated() / MB, cuda.max_memory_reserved() / MB
            cuda.reset_peak_memory_stats()
        real = sum(max(1, t) for t in tokens)
        self.sizes.append(len(doc_ids))
        self.batch_tokens.append(real)
        for tally, share_docs, share_tokens in self._shares(doc_ids, tokens):
            tally.documents += share_docs
            tally.tokens += share_tokens
            share = share_tokens / real if real else share_docs / max(1, len(doc_ids))
            tally.seconds += seconds * share
            tally.padded_tokens += round(padded * share)
            tally.rss_mb = max(tally.rss_mb, rss)
            tally.gpu_allocated_mb = max(tally.gpu_allocated_mb, alloc)
            tally.gpu_reserved_mb = max(tally.gpu_reserved_mb, reserved)

    def _shares(self, doc_ids: Sequence[str], tokens: Sequence[int]) -> Iterator[tuple[_Tally, int, int]]:
        per_bin: dict[str, list[int]] = {}
        for d, t in zip(doc_ids, tokens):
            per_bin.setdefault(self.bin_of.get(d, ""), []).append(max(1, t))
        yield self.total, len(doc_ids), sum(max(1, t) for t in tokens)
        for label, toks in per_bin.items():
            if label:
                yield self.bins.setdefault(label, _Tally()), len(toks), sum(toks)

    def record(self) -> dict[str, Any]:
        """The `efficiency` block of results.json."""
        out: dict[str, Any] = {**device_of(self.model), **self.total.as_dict(),
                               "load_seconds": None if self._load_seen is None else round(self._load_seen, 3),
                               "time_to_first_vector_seconds": (None if self.first_vector_seconds is None
                                                                else round(self.first_vector_seconds, 6)),
                               "peak_rss_mb": round(peak_rss_mb(), 1)}
        out.pop("rss_after_batch_max_mb", None)
        if self.sizes:
            out["batches"] = {"count": len(self.sizes), "mean_size": round(sum(self.sizes) / len(self.sizes), 3),
                              "max_size": max(self.sizes),
                              "mean_tokens": round(sum(self.batch_tokens) / len(self.batch_tokens), 1),
                              "max_tokens": max(self.batch_tokens)}
        api = _api_counts(self.model)
        if api is not None:
            before = self._api_start or (0, 0)
            out["api"] = {"requests": api[0] - before[0], "retries": api[1] - before[1]}
        if self.price_per_token is not None:
            out["price_per_token"] = self.price_per_token
            docs = self.total.documents
            out["cost_per_1k_documents"] = (round(1000 * self.price_per_token * self.total.tokens / docs, 9)
                                            if docs else None)
        out["by_length_bin"] = {k: v.as_dict() for k, v in sorted(self.bins.items(), key=lambda kv: label_key(kv[0]))}
        return out


def bins_of_documents(items: Sequence[Any]) -> dict[str, str]:
    """Document id -> the length bin of the first pool (in item order) that holds it, for items that state one."""
    out: dict[str, str] = {}
    for p in items:
        label = p.meta.get("length_bin")
        if label is None:
            continue
        label = str(label)
        out.setdefault(p.query_id, label)
        for d in p.candidate_ids:
            if d not in out:
                out[d] = label
    return out
