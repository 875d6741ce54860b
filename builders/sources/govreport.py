"""GovReport: long government reports with expert summaries (Logical Summarization, text).

Accepted layouts:

* parquet or JSONL with a report column (`report`, or `document` as in `launch/gov_report`'s
  parquet) and `summary` as text; `id` is optional (the row number is used otherwise);
* the original release's structured records (`gov-report/crs/*.json`, `gov-report/gao/*.json`,
  also the raw JSONL of `launch/gov_report`): CRS has `reports` as one section tree and `summary`
  as a list of paragraphs; GAO has `report` as a list of section trees and `highlight` as a list
  of `{section_title, paragraphs}`. A section tree is `{section_title, paragraphs, subsections}`;
  it is flattened in reading order (title, paragraphs, subsections), as the dataset's own loaders
  do, and the summary is the highlight/summary paragraphs.

`path` may be such a file (`.parquet`, `.jsonl`, or `.json` holding one record, a list of records
or JSON lines) or a folder, whose `.json` files (searched recursively, in sorted order) hold one
record each. A text report's paragraphs are its non-empty lines.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from mmbench.builders.sources import hub
from mmbench.builders.sources.jsonl import read_jsonl, read_text

REPORT_COLUMNS = ("report", "document", "reports")


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


HUB_DEFAULTS = {"split": "test"}   # e.g. hf:ccdv/govreport-summarization@<commit> (report, summary)


def read_govreport(path: str | Path, limit: int | None = None) -> list[Report]:
    """Reports from a local file or folder (layouts above) or from the hub (`hf:<id>@<revision>`,
    builders/sources/hub.py; its test split unless the name says `?split=`)."""
    if hub.is_hub(path):
        source = hub.rows(str(path), "govreport", **HUB_DEFAULTS)
    else:
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"GovReport file {path} not found")
        source = _rows(path)
    out: list[Report] = []
    for i, (where, rec) in enumerate(source):
        out.append(govreport_record(rec, where, i))
        if limit is not None and len(out) >= limit:
            break
    if not out:
        raise ValueError(f"{path}: no reports found")
    if len({r.id for r in out}) != len(out):
        raise ValueError(f"{path}: report ids are not unique")
    return out


def _rows(path: Path) -> Iterator[tuple[str, Any]]:
    """(where, record) for a folder of JSON files, a parquet, a JSONL or a JSON file."""
    if path.is_dir():
        files = sorted(p for p in path.rglob("*.json") if p.is_file())
        if not files:
            raise ValueError(f"{path}: folder holds no .json report files")
        for f in files:
            yield from _json_file(f)
        return
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        yield from ((f"{path}: row {i}", r) for i, r in enumerate(pq.read_table(path).to_pylist()))
    elif suffix == ".jsonl":  # read_jsonl names file, line and column of a byte that is not UTF-8
        yield from ((where, rec) for where, _, rec in read_jsonl(path))
    elif suffix == ".json":
        yield from _json_file(path)
    else:
        raise ValueError(f"{path}: GovReport must be .parquet, .jsonl, .json or a folder of .json files")


def _json_file(path: Path) -> Iterator[tuple[str, Any]]:
    """One record, a list of records, or JSON lines (a .json file may hold any of them)."""
    text = read_text(path)  # a byte that is not UTF-8 is named with its line and column
    try:
        data = json.loads(text)
    except ValueError:
        yield from ((where, rec) for where, _, rec in read_jsonl(path))
        return
    if isinstance(data, list):
        yield from ((f"{path}: record {i}", rec) for i, rec in enumerate(data))
    else:
        yield str(path), data


def govreport_record(rec: Any, where: str, index: int) -> Report:
    """One report in either layout; errors name the file, the record and the field."""
    if not isinstance(rec, dict):
        raise ValueError(f"{where}: expected a JSON object")
    col = next((c for c in REPORT_COLUMNS if c in rec), None)
    if col is None:
        raise ValueError(f"{where}: field 'report' (or 'document', or 'reports') missing")
    paragraphs = _report_paragraphs(rec[col], f"{where}: field {col!r}")
    if not paragraphs:
        raise ValueError(f"{where}: field {col!r} is empty")
    summary_field = "summary" if "summary" in rec or "highlight" not in rec else "highlight"
    summary = " ".join(_summary_paragraphs(rec.get(summary_field), f"{where}: field {summary_field!r}"))
    if not summary.strip():
        raise ValueError(f"{where}: field {summary_field!r} missing or empty")
    return Report(str(rec.get("id", index)), " ".join(summary.split()), paragraphs)


def _report_paragraphs(value: Any, where: str) -> list[str]:
    if isinstance(value, str):
        return split_paragraphs(value)
    if isinstance(value, dict):
        return _flatten(value, where)
    if isinstance(value, list):
        return [p for k, s in enumerate(value) for p in _flatten(s, f"{where}[{k}]")]
    raise ValueError(f"{where} must be text or section trees, not {type(value).__name__}")


def _flatten(section: Any, where: str) -> list[str]:
    """A section tree in reading order: its title, its paragraphs, then its subsections."""
    if not isinstance(section, dict):
        raise ValueError(f"{where} must be a section object with 'section_title', 'paragraphs', 'subsections'")
    paras = section.get("paragraphs", [])
    subs = section.get("subsections", [])
    if not isinstance(paras, list) or not all(isinstance(p, str) for p in paras):
        raise ValueError(f"{where}: 'paragraphs' must be a list of strings")
    if not isinstance(subs, list):
        raise ValueError(f"{where}: 'subsections' must be a list")
    title = section.get("section_title") or ""
    out = split_paragraphs(title) if isinstance(title, str) else []
    out += [q for p in paras for q in split_paragraphs(p)]
    return out + [p for k, s in enumerate(subs) for p in _flatten(s, f"{where}.subsections[{k}]")]


def _summary_paragraphs(value: Any, where: str) -> list[str]:
    """Summary text, a list of paragraphs (CRS) or a list of highlight sections (GAO: their paragraphs)."""
    if value is None or isinstance(value, str):
        return [value or ""]
    if isinstance(value, list):
        out = []
        for k, item in enumerate(value):
            if isinstance(item, str):
                out.append(item)
            elif isinstance(item, dict) and isinstance(item.get("paragraphs"), list):
                out += [str(p) for p in item["paragraphs"]]
            else:
                raise ValueError(f"{where}[{k}] must be a paragraph or a section with 'paragraphs'")
        return out
    raise ValueError(f"{where} must be text or a list of paragraphs, not {type(value).__name__}")


def govreport_fingerprint(path: Path) -> str:
    """The manifest's name for the source: the file's fingerprint, or for a folder its .json files'."""
    return hub.fingerprint(str(path), "govreport", pattern="*.json", **HUB_DEFAULTS)
