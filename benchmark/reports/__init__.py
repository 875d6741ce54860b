"""Reports over results folders: `mmbench compare` (paired statistics) and `mmbench report`
(positional bias, heatmaps, length curves, Easy vs Hard, modality robustness).

Each writer produces a Markdown file and a JSON file holding the same numbers (and, for the
report, PNG figures under ``figures/``).

Imports: `mmbench.common`, `mmbench.data`, `mmbench.evaluators` (the statistics), `mmbench.tasks` and
`mmbench.results`.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from mmbench.evaluators.stats._base import jsonable
from mmbench.data.media import atomic_write_bytes
from mmbench.results.store import RunResults

from mmbench.reports.common import PoolSetMismatch, check_same_pool_set, run_labels
from mmbench.reports.compare import compare_runs, comparison_markdown, draw_comparison_figures
from mmbench.reports.figures import FigureInfo
from mmbench.reports.report import draw_figures, report_markdown, report_numbers

COMPARE_MD, COMPARE_JSON = "compare.md", "compare.json"
REPORT_MD, REPORT_JSON = "report.md", "report.json"


def _write(out: Path, md_name: str, json_name: str, markdown: str, data: dict[str, Any]) -> None:
    atomic_write_bytes(out / md_name, (markdown + "\n").encode("utf-8"))
    atomic_write_bytes(out / json_name, (json.dumps(jsonable(data), indent=2) + "\n").encode("utf-8"))


def write_comparison(runs: Sequence[RunResults], out: Path | None = None, **kwargs: Any) -> tuple[dict[str, Any], str]:
    """Compute the comparison; write compare.md, compare.json and the forest plot (figures/) to `out` when given."""
    data = compare_runs(runs, **kwargs)
    if out is not None:
        draw_comparison_figures(data, Path(out))
    markdown = comparison_markdown(data)
    if out is not None:
        _write(Path(out), COMPARE_MD, COMPARE_JSON, markdown, data)
    return data, markdown


def write_report(runs: Sequence[RunResults], out: Path, **kwargs: Any) -> tuple[dict[str, Any], str]:
    """Compute the report, draw its figures into out/figures, write report.md and report.json."""
    out = Path(out)
    data = report_numbers(runs, **kwargs)
    draw_figures(data, out)
    markdown = report_markdown(data)
    _write(out, REPORT_MD, REPORT_JSON, markdown, data)
    return data, markdown


__all__ = ["PoolSetMismatch", "check_same_pool_set", "run_labels", "compare_runs", "comparison_markdown", "FigureInfo",
           "report_numbers", "report_markdown", "draw_figures", "write_comparison", "write_report"]
