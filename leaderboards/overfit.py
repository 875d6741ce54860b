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
COMMIT_DIR = "commitments"   # <board>/overfit/commitments/<task>.json: published before any fresh draw


def commitment_path(board: Path, task: str) -> Path:
    from mmbench.leaderboards.store import slugify

    return Path(board) / OVERFIT_DIR / COMMIT_DIR / f"{slugify(task)}.json"


def file_commitment(board: Path, record: dict[str, Any]) -> Path:
    """Publish the keeper's commitment to the secret seed of a task on the board (refusing to replace another)."""
    from mmbench.data.media import atomic_write_bytes

    path = commitment_path(board, str(record["task"]))
    if path.is_file():
        old = json.loads(path.read_text(encoding="utf-8"))
        if old.get("commitment") != record["commitment"] or old.get("salt") != record["salt"]:
            raise ValueError(f"{path} already holds a commitment for {record['task']} "
                             f"({str(old.get('commitment'))[:16]}…); a board commits once per task")
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, json.dumps(record, indent=1, sort_keys=True).encode())
    return path


def _commitments(board: Path) -> str:
    folder = Path(board) / OVERFIT_DIR / COMMIT_DIR
    rows = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            c = json.loads(path.read_text(encoding="utf-8"))
            rows.append(f"<li>{html.escape(str(c['task']))}: <code>{html.escape(str(c['commitment']))}</code> (salt "
                        f"<code>{html.escape(str(c['salt']))}</code>, public draw "
                        f"<code>{html.escape(str(c['public_content_hash'])[:16])}</code>, {html.escape(str(c['committed_at']))})</li>")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            rows.append(f"<li>Unreadable commitment {html.escape(path.name)}: {html.escape(str(exc))}</li>")
    if not rows:
        return ""
    return ("<p>Commitments to the secret seed, published before the fresh draws were built (sha256 of "
            "\"mmbench-commit:&lt;salt&gt;:&lt;secret&gt;\"; checked when the secret is revealed):</p>"
            f"<ul>{''.join(rows)}</ul>")


def _flag_cell(g: dict[str, Any]) -> str:
    if not g.get("judged", True):
        return html.escape(str(g.get("reason") or "cannot judge"))
    if g["flagged"]:
        return "<strong>significant: fitted to the public draw?</strong>"
    if g.get("detectable_gap") is None:
        return "not flagged"
    return (f"not flagged (detectable gap at {g['power']:.0%} power: {g['detectable_gap']:.4f}; "
            "a smaller gap could go unseen)")


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
    commitments = _commitments(Path(board)) if board is not None else ""
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
            ci = (f" [{g['ci_low']:+.4f}, {g['ci_high']:+.4f}]" if g.get("ci_low") is not None else "")
            band = f"±{g['half_width']:.4f}" if g.get("half_width") is not None else "–"
            c = d.get("commitment")
            commit = (f"<code>{html.escape(str(c['commitment'])[:12])}</code> checked" if c else "none")
            rows.append(f"<tr><td class=\"text\">{html.escape(str(d['model']))}</td><td class=\"text\">"
                        f"{html.escape(str(d['task']))}</td><td>{g['public']:.4f}</td><td>{g['fresh_mean']:.4f} "
                        f"({g['n_fresh']})</td><td>{g['gap']:+.4f}{ci}</td>"
                        f"<td>{band}</td><td class=\"text\">{_flag_cell(g)}</td><td class=\"text\">{commit}</td></tr>")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            bad.append(f"{path.name}: {html.escape(str(exc))}")
    head = ("<tr><th class=\"text\">model</th><th class=\"text\">task</th><th>public</th><th>fresh mean (draws)</th>"
            "<th>gap public − fresh [CI]</th><th>gap draw variance allows</th><th class=\"text\">flag</th>"
            "<th class=\"text\">commitment</th></tr>")
    note = "".join(f"<p>Unreadable report {b}</p>" for b in bad)
    return ("<section id=\"fresh-draws\"><h2>Fresh-draw overfitting tests</h2><p>Each model on fresh draws of the task "
            "built from the board's secret seed (their results have their own protocol id and are not on the boards "
            "above). A gap above the band draw variance and item noise allow is flagged; \"not flagged\" names the gap "
            "the test would catch with 80 % power, so it is not read as \"not overfitted\".</p>"
            f"{commitments}<table><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>{note}</section>")
