"""The efficiency table of `compare` and `report`: each run's encoding speed, memory and cost, side by side.

Read from results only (`mmbench.efficiency`, written by the runner). Speeds depend on the machine, so every
row names its device and backend, and a table whose rows were measured on different devices says so above
the numbers: those rows are not comparable.
"""
from __future__ import annotations

from typing import Any, Sequence

from mmbench.evaluators.ordering import label_key
from mmbench.results.store import RunResults

from mmbench.reports.common import fmt, md_table, run_labels


def efficiency_rows(runs: Sequence[RunResults]) -> list[dict[str, Any]]:
    """One JSON-ready row per run that has an efficiency record (runs written before it existed are left out)."""
    rows = []
    for label, run in zip(run_labels(runs), runs):
        eff = run.info.get("efficiency")
        if not isinstance(eff, dict):
            continue
        batches = eff.get("batches") or {}
        rows.append({"label": label, "task": run.task, "device": eff.get("device"),
                     "device_name": eff.get("device_name"), "backend": eff.get("backend"), "dtype": eff.get("dtype"),
                     "documents": eff.get("documents"), "tokens": eff.get("tokens"),
                     "documents_per_second": eff.get("documents_per_second"),
                     "tokens_per_second": eff.get("tokens_per_second"),
                     "time_to_first_vector_seconds": eff.get("time_to_first_vector_seconds"),
                     "load_seconds": eff.get("load_seconds"), "peak_rss_mb": eff.get("peak_rss_mb"),
                     "gpu_peak_allocated_mb": eff.get("gpu_peak_allocated_mb"),
                     "gpu_peak_reserved_mb": eff.get("gpu_peak_reserved_mb"),
                     "batches": batches.get("count"), "mean_batch_size": batches.get("mean_size"),
                     "padding_ratio": eff.get("padding_ratio"),
                     "api_requests": (eff.get("api") or {}).get("requests"),
                     "api_retries": (eff.get("api") or {}).get("retries"),
                     "cost_per_1k_documents": eff.get("cost_per_1k_documents"),
                     "by_length_bin": {k: v.get("tokens_per_second") for k, v in (eff.get("by_length_bin") or {}).items()
                                       if isinstance(v, dict)}})
    return rows


def device_label(row: dict[str, Any]) -> str:
    """'cpu', or 'cuda:0 (NVIDIA H200)' where the GPU's name is known."""
    dev = str(row.get("device") or "?")
    return f"{dev} ({row['device_name']})" if row.get("device_name") else dev


def mixed_devices(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The distinct devices of `rows` (more than one: their speeds are not comparable)."""
    return sorted({device_label(r) for r in rows})


def _bin_order(labels) -> list[str]:
    return sorted(set(labels), key=label_key)


def efficiency_markdown(rows: Sequence[dict[str, Any]], level: int = 2) -> str:
    if not rows:
        return ""
    devices = mixed_devices(rows)
    lines = ["#" * level + " Efficiency", "",
             "Measured while encoding (cache hits excluded: a vector read from the cache costs no encoding). "
             "Tokens are the tokens each model was fed (after truncation); time to first vector counts from the start "
             "of encoding (weights loaded inside the first batch included); load time is the weights' loading; peak RSS is "
             "the process's resident memory, GPU columns the peak allocated / reserved CUDA memory.", ""]
    if len(devices) > 1:
        lines += [f"**Measured on different devices ({', '.join(devices)}): speeds and memory are not comparable "
                  "across them.**", ""]
    lines += [md_table(["system", "device", "backend", "docs", "docs/s", "tokens/s", "first vector s", "load s",
                        "peak RSS MB", "GPU alloc / reserved MB", "batches (mean size)", "padding", "requests / retries",
                        "cost / 1k docs"],
                       [[r["label"], device_label(r), r["backend"] or "–", r["documents"] if r["documents"] is not None else "–",
                         fmt(r["documents_per_second"], 2), fmt(r["tokens_per_second"], 1),
                         fmt(r["time_to_first_vector_seconds"], 3), fmt(r["load_seconds"], 2), fmt(r["peak_rss_mb"], 0),
                         (f"{fmt(r['gpu_peak_allocated_mb'], 0)} / {fmt(r['gpu_peak_reserved_mb'], 0)}"
                          if r["gpu_peak_reserved_mb"] is not None else "–"),
                         f"{r['batches'] if r['batches'] is not None else '–'} ({fmt(r['mean_batch_size'], 1)})",
                         fmt(r["padding_ratio"], 3),
                         (f"{r['api_requests']} / {r['api_retries']}" if r["api_requests"] is not None else "–"),
                         fmt(r["cost_per_1k_documents"], 4)] for r in rows]), ""]
    bins = _bin_order(k for r in rows for k in r["by_length_bin"])
    if bins:
        lines += ["Tokens per second by length bin (a batch's time is shared among its documents by their tokens):", "",
                  md_table(["system"] + bins,
                           [[r["label"]] + [fmt(r["by_length_bin"].get(b), 1) for b in bins] for r in rows]), ""]
    return "\n".join(lines)
