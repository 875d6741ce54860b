"""The board's between-draw spread: reports of `mmbench draws --board` and what they say of the board's gaps.

A keeper runs `mmbench draws --task T --model ... --board B`, which files the draws report as
<board>/draws/<task>.json. The overview then shows, per task, each board model's score on the task's main metric
in rank order, and flags every gap to the next model that is smaller than the between-draw spread of that
difference (the sd of the two models' difference over the draws where both were run on them, else the larger of
their between-draw sds, else the largest sd in the report): a new draw of the same task could reverse that order.
A report that does not parse, holds a spread outside its range, or was not made for the board's runs (another
task version, design, protocol setup or model: `results.report_checks.draws_problem`) is named on the page in one
line and not used.
"""
from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any, Callable, Sequence

from mmbench.results.draw_report import spread_for
from mmbench.results.report_checks import draws_problem
from mmbench.leaderboards.store import Entry

DRAWS_DIR = "draws"


def board_draws_path(board: Path, task: str) -> Path:
    """Where the board keeps the draws report of `task`."""
    from mmbench.leaderboards.store import slugify

    return Path(board) / DRAWS_DIR / f"{slugify(task)}.json"


def file_draws(board: Path, data: dict[str, Any]) -> Path:
    """Store a draws report on the board (atomically) as draws/<task>.json."""
    from mmbench.data.media import atomic_write_bytes

    path = board_draws_path(board, str(data["task"]))
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, json.dumps(data, indent=1, sort_keys=True).encode())
    return path


def ordered_gaps(scores: dict[str, float], report: dict[str, Any]) -> list[dict[str, Any]]:
    """Models by score (best first); each with its gap to the next one and whether the gap is within the
    between-draw spread of that difference."""
    order = sorted(scores, key=lambda m: (-scores[m], m))
    rows = []
    for i, model in enumerate(order):
        row: dict[str, Any] = {"model": model, "score": scores[model], "gap": None, "sd": None, "within": None}
        if i + 1 < len(order):
            nxt = order[i + 1]
            sd = spread_for(report, model, nxt)
            gap = scores[model] - scores[nxt]
            row.update(gap=gap, sd=sd, within=None if sd is None else bool(gap < sd), next=nxt)
        rows.append(row)
    return rows


def latest_entries(entries: Sequence[Entry], task: str) -> dict[str, Entry]:
    """Each model's latest retrieval submission on `task`."""
    latest: dict[str, Entry] = {}
    for e in sorted((e for e in entries if e.task == task and e.kind == "retrieval"), key=lambda e: (e.submitted_at, e.id)):
        latest[e.model_name] = e
    return latest


def _latest_scores(entries: Sequence[Entry], task: str, metric: str) -> dict[str, float]:
    latest = latest_entries(entries, task)
    return {m: float(e.scores["all"][metric]) for m, e in latest.items() if metric in e.scores.get("all", {})}


def _num(v: float | None) -> str:
    return "–" if v is None else f"{v:.4f}"


def draws_section(board: Path | None, entries: Sequence[Entry], info_of: Callable[[Entry], dict[str, Any]]) -> str:
    """HTML of the overview's between-draw section ('' when the board holds no draws report); `info_of(entry)`: the
    `mmbench` block of the entry's results.json, against which each report is checked before it is used."""
    folder = Path(board) / DRAWS_DIR if board is not None else None
    if folder is None or not folder.is_dir():
        return ""
    parts, bad = [], []
    for path in sorted(folder.glob("*.json")):
        try:
            report = json.loads(path.read_text(encoding="utf-8"))
            task, metric = str(report["task"]), str(report["metric"])
            runs = [(f"the board's {name} run ({e.id})", info_of(e)) for name, e in latest_entries(entries, task).items()]
            problem = draws_problem(report, task, runs)
            if problem is not None:
                raise ValueError(f"refused: {problem}")
            rows = ordered_gaps(_latest_scores(entries, task, metric), report)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            bad.append(f"{path.name}: {html.escape(str(exc))}")
            continue
        body = "".join(
            f"<tr><td class=\"text\">{html.escape(r['model'])}</td><td>{r['score']:.4f}</td>"
            f"<td>{_num(r['gap'])}</td><td>{_num(r['sd'])}</td><td class=\"text\">"
            + ("<strong>within the spread: another draw could reverse this order</strong>" if r["within"] else "–")
            + "</td></tr>" for r in rows)
        parts.append(f"<h3>{html.escape(task)} ({html.escape(metric)}, {len(report.get('seeds', []))} draws)</h3>"
                     "<table><thead><tr><th class=\"text\">model</th><th>score</th><th>gap to the next</th>"
                     "<th>between-draw sd of the gap</th><th class=\"text\">note</th></tr></thead>"
                     f"<tbody>{body}</tbody></table>")
    note = "".join(f"<p>Unreadable draws report {b}</p>" for b in bad)
    return ("<section id=\"between-draws\"><h2>Between-draw spread</h2><p>The same task built again from the same "
            "sources with other seeds: a gap between neighbouring models smaller than the spread of their difference "
            "over those draws is flagged (docs: Beyond one draw).</p>" + "".join(parts) + note + "</section>")
