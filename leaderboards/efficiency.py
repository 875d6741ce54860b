"""The efficiency board: one row per retrieval submission with the speed, memory and cost its run measured.

Speeds depend on the machine, so each row names its device and backend and the description says that rows
of different devices are not comparable. Read from each submission's `mmbench.efficiency` record (accepted
as measured, not recomputed, by `leaderboards.stated`); submissions without one are listed with dashes.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from mmbench.reports.efficiency import device_label, efficiency_rows, mixed_devices
from mmbench.results.store import RunResults
from mmbench.running.parity_thresholds import describe_block

from mmbench.leaderboards.boards import Column, Table
from mmbench.leaderboards.modelmeta import display_name
from mmbench.leaderboards.store import Entry

# the units and decimals `mmbench run` prints these figures with (results/summary.py, efficiency_lines)
COLUMNS = [Column("model", "Model", "model"), Column("task", "Task", "text"), Column("device", "Device", "text"),
           Column("backend", "Backend", "text"), Column("documents_per_second", "Speed (documents)", unit="docs/s", digits=2),
           Column("tokens_per_second", "Speed (tokens)", unit="tokens/s", digits=1),
           Column("time_to_first_vector_seconds", "First vector", unit="s", digits=3),
           Column("load_seconds", "Load", unit="s", digits=2), Column("peak_rss_mb", "Peak RSS", unit="MB", digits=0),
           Column("gpu_peak_allocated_mb", "GPU peak allocated", unit="MB", digits=0), Column("padding_ratio", "Padding"),
           Column("api_requests", "Requests", "count"), Column("api_retries", "Retries", "count"),
           Column("cost_per_1k_documents", "Cost / 1k docs"), Column("certificate", "Backend certificate", "text")]


def efficiency_table(entries: Sequence[Entry], loader: Callable[[Entry], RunResults]) -> Table | None:
    """None when no retrieval submission states an efficiency record."""
    src = [e for e in entries if e.kind == "retrieval"]
    rows: list[dict[str, Any]] = []
    for e in sorted(src, key=lambda e: (e.task, e.submitted_at, e.id)):
        run = loader(e)
        found = efficiency_rows([run])
        row: dict[str, Any] = {"model": display_name(e.model_name), "_page": f"models/{e.slug}.html", "_id": e.id,
                               "task": e.task, "certificate": certificate_cell(run.info.get("backend_certificate"))}
        if found:
            r = found[0]
            row.update({c.key: r.get(c.key) for c in COLUMNS if c.key not in ("model", "task", "certificate")})
            row["device"] = device_label(r)
        rows.append(row)
    measured = [r for r in rows if r.get("device")]
    if not measured:
        return None
    devices = mixed_devices(measured)
    note = (f" Rows were measured on {len(devices)} devices ({', '.join(devices)}): compare speeds only between rows "
            "of one device." if len(devices) > 1 else f" Every row was measured on {devices[0]}.")
    return Table("efficiency", "Efficiency", "Encoding speed, time to first vector, load time and peak memory each run "
                 "measured (cache hits excluded), the padding share of its batches, API requests and retries, and the cost "
                 "per 1,000 documents where the submitter stated a price per token. Measurements, not scores: they "
                 "depend on the machine." + note + " Backend certificate: whether the run carries a `mmbench "
                 "verify-backend` certificate for its backend (NONE: the backend was never checked against the "
                 "reference path), judged by mmbench's protocol: the measured minimum cosine and top-1 agreement "
                 "beside the thresholds applied (the certificate's own, raised to the protocol minimum of its "
                 "comparison kind).", COLUMNS, rows)


def certificate_cell(block: Any) -> str:
    """'passed (cosine min 0.99998, needs 0.99; ...)', 'FAILED (...)': the protocol's verdict with the measured values
    and the thresholds applied, or 'NONE' for a run without a certificate (`parity_thresholds.describe_block`)."""
    return describe_block(block)
