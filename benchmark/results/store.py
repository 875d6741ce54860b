"""Run results on disk: per-query records, per-document views, and an mteb-style summary.

A results folder holds::

    per_query.parquet   one row per evaluation item: ranking, scores, metrics, item metadata
    seen.parquet        one row per encoded document: what the model actually saw
    results.json        mteb `TaskResult` JSON (split "test", one hf_subset "default": all items), plus an
                        "mmbench" block: task, content hash, model identity, run stats, the facet groups
                        (layout in mmbench.results.mteb_layout)
    mmbench.json        a copy of the "mmbench" block, for a results.json that mteb rewrote

Statistics, reports and leaderboards read these files only; they never re-run a model.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq


from mmbench.common.url_redaction import redact_urls
from mmbench.data.media import atomic_write_files
from mmbench.results.aggregate import finite_json
from mmbench.results.mteb_layout import SIDECAR, restore_block, sidecar_bytes
from mmbench.common.address_limit import is_out_of_memory

PER_QUERY = "per_query.parquet"
SEEN = "seen.parquet"
SUMMARY = "results.json"
TABLES = (PER_QUERY, SEEN)   # the files results.json's digests must cover (seen.parquet when present)
FIXED_COLUMNS = ("item_id", "query_id", "subset", "relevant_ids", "ranked_ids", "scores", "first_relevant_rank")


class ResultsError(RuntimeError):
    """A results folder is missing a file or a field; the message says which."""


@dataclass
class RunResults:
    """Everything a run produced, in memory."""

    per_query: pd.DataFrame
    seen: pd.DataFrame
    summary: dict[str, Any]
    root: Path | None = None

    @property
    def info(self) -> dict[str, Any]:
        return self.summary.get("mmbench", {})

    @property
    def content_hash(self) -> str:
        return self.info.get("content_hash", "")

    @property
    def model_name(self) -> str:
        return self.info.get("model", {}).get("name", "?")

    @property
    def task(self) -> str:
        return self.info.get("task", "?")


def write_results(out: Path, per_query: pd.DataFrame, seen: pd.DataFrame, summary: dict[str, Any]) -> Path:
    """Write the tables, then results.json naming their digests, so a half-finished rewrite is detectable."""
    out = Path(out)
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    digests, files = {}, {}
    for name, frame in ((PER_QUERY, per_query), (SEEN, seen)):
        table = pa.Table.from_pandas(frame, preserve_index=False)
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, compression="zstd")
        files[name] = sink.getvalue().to_pybytes()
        digests[name] = hashlib.sha256(files[name]).hexdigest()
    summary = redact_urls(summary)  # a credential in a URL (a base_url, the command line) is never written
    summary = finite_json({**summary, "mmbench": {**summary.get("mmbench", {}), "files": digests}})
    files[SIDECAR] = sidecar_bytes(summary)  # survives mteb rewriting results.json
    files[SUMMARY] = (json.dumps(summary, indent=2, sort_keys=False) + "\n").encode()
    try:  # all four or none: a full disk leaves the folder as it was (a new one is removed)
        atomic_write_files(out, files)
    except OSError as exc:
        if created:
            try:
                out.rmdir()
            except OSError:
                pass
        raise OSError(exc.errno, f"could not write the results folder {out}: {exc.strerror or exc}") from exc
    return out


def file_digest_problems(summary: dict[str, Any], files: dict[str, bytes]) -> list[str]:
    """What does not match the table digests results.json records; `files` holds the tables present.

    The digests are required: without them an edited table could not be told from the one the run
    wrote, so a results file lacking them (or not covering per_query.parquet) is refused, as is a
    listed table that is missing and a present table that is not listed."""
    recorded = (summary.get("mmbench") or {}).get("files") if isinstance(summary, dict) else None
    if not isinstance(recorded, dict) or not recorded:
        return [f"{SUMMARY} records no table digests (mmbench.files), so changes to the tables cannot be detected; "
                "re-run to write a complete results folder"]
    problems = []
    for name in sorted(recorded):
        if name not in TABLES:
            problems.append(f"mmbench.files lists {ascii(name)}, which is not a results table ({', '.join(TABLES)})")
        elif not isinstance(recorded[name], str):
            problems.append(f"mmbench.files.{name} is not a digest string")
        elif name not in files:
            problems.append(f"{name} is listed in mmbench.files but missing")
        elif hashlib.sha256(files[name]).hexdigest() != recorded[name]:
            problems.append(f"{name} does not match the digest in {SUMMARY} (a partial rewrite, or edited after the run)")
    for name in sorted(set(files) | {PER_QUERY}):
        if name in TABLES and name not in recorded:
            problems.append(f"{name} has no digest in mmbench.files (every table must be covered)")
    return problems


def load_results(root: Path) -> RunResults:
    root = Path(root)
    if not root.is_dir():
        raise ResultsError(f"results folder {root} does not exist")
    for name in (PER_QUERY, SUMMARY):
        if not (root / name).is_file():
            raise ResultsError(f"results folder {root}: {name} is missing")
    try:
        summary = json.loads((root / SUMMARY).read_text())
    except ValueError as exc:
        raise ResultsError(f"{root / SUMMARY}: invalid JSON ({exc})") from exc
    summary = restore_block(root, summary)
    if "mmbench" not in summary:
        raise ResultsError(f"{root / SUMMARY}: no 'mmbench' block; not an mmbench results file")
    present = {n: (root / n).read_bytes() for n in (PER_QUERY, SEEN) if (root / n).is_file()}
    problems = file_digest_problems(summary, present)
    if problems:
        raise ResultsError(f"results folder {root}: " + "; ".join(problems))
    per_query = _read_table(root / PER_QUERY, present[PER_QUERY])
    missing = [c for c in FIXED_COLUMNS if c not in per_query.columns]
    if missing:
        raise ResultsError(f"{root / PER_QUERY}: missing columns {missing}")
    seen = _read_table(root / SEEN, present[SEEN]) if SEEN in present else pd.DataFrame()
    return RunResults(per_query=per_query, seen=seen, summary=summary, root=root)


def _read_table(path: Path, data: bytes) -> pd.DataFrame:
    """The table `path` from its bytes (already read once, for the digest check)."""
    try:
        return pq.ParquetFile(pa.BufferReader(data)).read().to_pandas()  # (read_table would import pyarrow.dataset)
    except Exception as exc:  # pyarrow raises several types for corrupt files
        if is_out_of_memory(exc):  # a healthy table that did not fit is no corrupt file
            raise
        raise ResultsError(f"{path}: unreadable parquet ({exc})") from exc
