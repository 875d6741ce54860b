"""The board's fresh-draw overfitting tests: reports of `mmbench overfit --board` shown on the overview.

The keeper of a board runs `mmbench overfit` with the board's secret seed; `--board` files the report (without
the keeper's folders) as <board>/overfit/<task>-<model>.json. The site lists each model's public − fresh gap,
its CI and the band draw variance allows, and flags a significant gap. A report that does not parse, holds a
number outside its range, or was not made for the board's run of its model (another public pool set, identity,
protocol setup: `results.report_checks.overfit_problem`) is named on the page in one line and not shown.
"""
from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any, Callable, Sequence

from mmbench.leaderboards.draw_spread import latest_entries
from mmbench.leaderboards.store import Entry
from mmbench.results.report_checks import overfit_problem


OVERFIT_DIR = "overfit"


def file_report(board: Path, data: dict[str, Any]) -> Path:
    """Store an overfit report on the board (atomically), leaving out where the keeper's runs are."""
    from mmbench.data.media import atomic_write_bytes

    public = {k: v for k, v in data["public"].items() if k != "results"}
    fresh = [{k: v for k, v in f.items() if k != "results"} for f in data["fresh"]]
    slim = {**data, "public": public, "fresh": fresh}
    folder = Path(board) / OVERFIT_DIR
    folder.mkdir(parents=True, exist_ok=True)
    from mmbench.leaderboards.store import slugify

    path = folder / f"{slugify(data['task'])}-{slugify(data['model'])}.json"
    atomic_write_bytes(path, json.dumps(slim, indent=1, sort_keys=True).encode())
    return path


def overfit_section(board: Path | None, entries: Sequence[Entry], info_of: Callable[[Entry], dict[str, Any]]) -> str:
    """HTML of the overview's fresh-draw section ('' when the board holds no overfit report); each report is checked
    against the board's latest run of its task and model (`info_of(entry)`: its results.json's `mmbench` block)."""
    folder = Path(board) / OVERFIT_DIR if board is not None else None
    if folder is None or not folder.is_dir():
        return ""
    rows, bad = [], []
    for path in sorted(folder.glob("*.json")):
        try:
            d = json.loads(path.read_text(encoding="utf-8"))
            mine = latest_entries(entries, str(d.get("task"))).get(str(d.get("model")))
            problem = overfit_problem(d, [] if mine is None else [(f"the board's {d.get('model')} run ({mine.id})",
                                                                   info_of(mine))])
            if problem is not None:
                raise ValueError(f"refused: {problem}")
            g = d["gap"]
            flag = "<strong>significant: fitted to the public draw?</strong>" if g["flagged"] else "–"
            rows.append(f"<tr><td class=\"text\">{html.escape(str(d['model']))}</td><td class=\"text\">"
                        f"{html.escape(str(d['task']))}</td><td>{g['public']:.4f}</td><td>{g['fresh_mean']:.4f} "
                        f"({g['n_fresh']})</td><td>{g['gap']:+.4f} [{g['ci_low']:+.4f}, {g['ci_high']:+.4f}]</td>"
                        f"<td>±{g['half_width']:.4f}</td><td class=\"text\">{flag}</td></tr>")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            bad.append(f"{path.name}: {html.escape(str(exc))}")
    head = ("<tr><th class=\"text\">model</th><th class=\"text\">task</th><th>public</th><th>fresh mean (draws)</th>"
            "<th>gap public − fresh [CI]</th><th>gap draw variance allows</th><th class=\"text\">flag</th></tr>")
    note = "".join(f"<p>Unreadable report {b}</p>" for b in bad)
    return ("<section id=\"fresh-draws\"><h2>Fresh-draw overfitting tests</h2><p>Each model on fresh draws of the task "
            "built from the board's secret seed (their results have their own protocol id and are not on the boards "
            "above). A gap above the band draw variance allows is flagged.</p>"
            f"<table><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>{note}</section>")
