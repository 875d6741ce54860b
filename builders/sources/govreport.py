"""GovReport: long government reports with expert summaries (Logical Summarization, text).

Accepted layouts: parquet or JSONL with a report column (`report`, or `document` as in
`launch/gov_report`) and `summary`; `id` is optional (the row number is used otherwise).
A report's paragraphs are its non-empty lines (GovReport separates paragraphs by newlines).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .jsonl import read_jsonl

REPORT_COLUMNS = ("report", "document")


@dataclass
class Report:
    id: str
    summary: str
    paragraphs: list[str]

    @property
    def text(self) -> str:
        return "\n".join(self.paragraphs)


def split_paragraphs(text: str) -> list[str]:
    return [p.strip() for p in text.replace("\r\n", "\n").split("\n") if p.strip()]


def read_govreport(path: Path, limit: int | None = None) -> list[Report]:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"GovReport file {path} not found")
    if path.suffix.lower() == ".parquet":
        import pyarrow.parquet as pq

        rows = ((f"{path}: row {i}", r) for i, r in enumerate(pq.read_table(path).to_pylist()))
    elif path.suffix.lower() in (".jsonl", ".json"):
        rows = ((where, rec) for where, _, rec in read_jsonl(path))
    else:
        raise ValueError(f"{path}: GovReport must be .parquet or .jsonl")
    out: list[Report] = []
    for i, (where, rec) in enumerate(rows):
        col = next((c for c in REPORT_COLUMNS if c in rec), None)
        if col is None or not isinstance(rec[col], str) or not rec[col].strip():
            raise ValueError(f"{where}: field 'report' (or 'document') missing or empty")
        summary = rec.get("summary")
        if not isinstance(summary, str) or not summary.strip():
            raise ValueError(f"{where}: field 'summary' missing or empty")
        out.append(Report(str(rec.get("id", i)), " ".join(summary.split()), split_paragraphs(rec[col])))
        if limit is not None and len(out) >= limit:
            break
    if not out:
        raise ValueError(f"{path}: no reports found")
    if len({r.id for r in out}) != len(out):
        raise ValueError(f"{path}: report ids are not unique")
    return out


