"""Numbers the seed papers report, shipped as data, to stand beside a run (never ranked with measured runs).

`data/reported_results.csv` holds one row per published number: the paper, the seed file its text is in,
where in the paper (table and row), the system as the paper names it (and mmbench's registered name where one
exists), task, subset, metric, value, the value's scale, and a quote of the paper's text that holds the value.
`tests/test_reported.py` finds every quote, and the value in it, in the seed text. mmbench did not produce
these numbers: every place that prints them says so (`CAVEAT`), and the protocol of the paper (its data, its
sample sizes, its model versions) may differ from a run's.
"""
from __future__ import annotations

import csv
from dataclasses import dataclass, fields
from importlib import resources
from pathlib import Path
from typing import Any

FILE = "reported_results.csv"
CAVEAT = "reported in {paper}, not reproduced here; protocol may differ"
BENCHMARK_OF = {"visual_grounding": "mmlongembed", "multi_source_reasoning": "mmlongembed",
                "logical_summarization": "mmlongembed", "temporal_summarization": "mmlongembed"}


@dataclass(frozen=True)
class ReportedResult:
    """One published number: who reported it, where, for which system, task, subset and metric."""

    paper: str
    seed: str
    where: str
    model: str
    mmbench_model: str
    task: str
    subset: str
    metric: str
    value: float
    scale: str
    quote: str

    @property
    def caveat(self) -> str:
        return CAVEAT.format(paper=self.paper)


def shipped_path() -> Path:
    return Path(str(resources.files("mmbench.leaderboards").joinpath("data", FILE)))


def load_reported(path: Path | None = None) -> list[ReportedResult]:
    """Every row of the reported-results file; a malformed row is a ValueError naming its line and field."""
    path = path or shipped_path()
    names = [f.name for f in fields(ReportedResult)]
    out = []
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        if reader.fieldnames != names:
            raise ValueError(f"{path}: header {reader.fieldnames} is not {names}")
        for line, row in enumerate(reader, start=2):
            try:
                value = float(row["value"])
            except (TypeError, ValueError):
                raise ValueError(f"{path}:{line}: field 'value' is not a number: {row['value']!r}") from None
            record: dict[str, Any] = {**row, "value": value}
            out.append(ReportedResult(**record))
    return out


def reported_for(task: str | None, rows: list[ReportedResult] | None = None) -> list[ReportedResult]:
    """The rows about `task` (and about the benchmark it belongs to), or all rows for None."""
    rows = load_reported() if rows is None else rows
    if task is None:
        return rows
    wanted = {task, BENCHMARK_OF.get(task, task)}
    return [r for r in rows if r.task in wanted]


def format_value(r: ReportedResult) -> str:
    """The value as the paper's scale reads: '53.41 (percent)', '0.820', '6,100 s'."""
    if r.scale == "seconds":
        return f"{r.value:,g} s"
    if r.scale == "count":
        return f"{r.value:,.0f}"
    if r.scale == "percent":
        return f"{r.value:.2f} %"
    if r.scale == "percentage points":
        return f"{r.value:g} points"
    return f"{r.value:g}"


def reported_lines(rows: list[ReportedResult]) -> list[str]:
    """A table of reported rows for the terminal, one caveat per paper above its rows."""
    out: list[str] = []
    for paper in dict.fromkeys(r.paper for r in rows):
        out.append(f"-- {CAVEAT.format(paper=paper)}")
        for r in (r for r in rows if r.paper == paper):
            name = r.model + (f" [{r.mmbench_model}]" if r.mmbench_model else "")
            out.append(f"   {name:44s} {r.task:22s} {r.subset:26s} {r.metric:34s} {format_value(r):>12s}  ({r.where})")
    return out
