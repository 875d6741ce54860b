"""The static leaderboard site: plain HTML, one small script for sorting, figures as PNG.

Layout of a built site::

    index.html                  every board, sortable, with CSV/JSON downloads
    models/<slug>-<id>.html     one page per submission: identity, scores, figures
    data/<table>.csv|json       the numbers behind each table (per model: data/models/...)
    img/*.png                   length x depth heatmaps and length curves
    assets/                     sort.js, style.css, favicon.svg

Every user-supplied string goes through `html.escape`; a strict Content-Security-Policy allows
only the site's own script, style and images, so injected markup could not run even if it got in.
"""
from __future__ import annotations

import html
import json
import os
import shutil
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any, Sequence

from mmbench.evaluators.reports import figures
from mmbench.evaluators.reports.report import HEATMAP_METRIC, heatmap_numbers, length_curve_numbers
from mmbench.media import atomic_write_bytes
from mmbench.results import load_results

from .boards import MAIN, Column, Table, aggregates_table, all_tables, is_mmlongembed, ravel_predictions_table
from .store import Board, Entry

ASSETS = ("sort.js", "style.css", "favicon.svg")
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
       "base-uri 'none'; form-action 'none'")


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def build_site(board: Board, out: Path | str) -> Path:
    """Render `board` into `out` (replaced atomically: a reader never sees half a site)."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.building."))
    try:
        _render(board.entries(), tmp)
        old = None
        if out.exists():
            old = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.old.")) / "site"
            os.replace(out, old)
        os.replace(tmp, out)
        if old is not None:
            shutil.rmtree(old.parent, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def _render(entries: Sequence[Entry], out: Path) -> None:
    for sub in ("assets", "data/models", "img", "models"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    for name in ASSETS:
        (out / "assets" / name).write_bytes(resources.files("mmbench.leaderboards").joinpath("data", name).read_bytes())
    tables = all_tables(entries)
    for t in tables:
        _write_table_data(t, out / "data")
    links = " ".join(f'<a href="#{esc(t.id)}">{esc(t.title)}</a>' for t in tables)
    body = [f"<nav>{links}</nav>"]
    if not tables:
        body.append("<p>No submissions yet.</p>")
    for t in tables:
        body.append(_table_section(t, "data", "", level=2))
        fig = _board_figure(t, entries, out)
        if fig:
            body.append(fig)
    atomic_write_bytes(out / "index.html", _page("mmbench leaderboards", "\n".join(body), "").encode("utf-8"))
    for e in entries:
        atomic_write_bytes(out / "models" / f"{e.slug}.html", _model_page(e, out).encode("utf-8"))


def _page(title: str, body: str, root: str) -> str:
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<meta name="referrer" content="no-referrer">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{esc(title)}</title>
<link rel="icon" href="{root}assets/favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="{root}assets/style.css">
</head>
<body>
<h1>{esc(title)}</h1>
{body}
<script src="{root}assets/sort.js"></script>
</body>
</html>
"""


def _write_table_data(t: Table, folder: Path) -> None:
    atomic_write_bytes(folder / f"{t.id}.csv", t.to_csv().encode("utf-8"))
    atomic_write_bytes(folder / f"{t.id}.json", (json.dumps(t.to_json(), indent=1, ensure_ascii=False) + "\n").encode("utf-8"))


def _table_section(t: Table, data_href: str, root: str, level: int) -> str:
    head = "".join(f'<th class="{esc(c.kind)}" data-type="{"number" if c.kind in ("number", "ci") else "text"}" '
                   f'data-key="{esc(c.key)}" scope="col"><button type="button">{esc(c.label)}</button></th>'
                   for c in t.columns)
    rows = "\n".join("<tr>" + "".join(_cell(c, r, root) for c in t.columns) + "</tr>" for r in t.rows)
    return (f'<section id="{esc(t.id)}"><h{level}>{esc(t.title)}</h{level}>\n<p class="desc">{esc(t.description)}</p>\n'
            f'<div class="scroll"><table class="sortable" id="table-{esc(t.id)}"><thead><tr>{head}</tr></thead>\n'
            f'<tbody>\n{rows}\n</tbody></table></div>\n'
            f'<p class="downloads">Download: <a href="{data_href}/{esc(t.id)}.csv" download>CSV</a> · '
            f'<a href="{data_href}/{esc(t.id)}.json" download>JSON</a></p></section>')


def _cell(c: Column, row: dict[str, Any], root: str) -> str:
    v = row.get(c.key)
    if c.kind == "model":
        return (f'<td class="model" data-value="{esc(v)}"><a href="{root}{esc(row["_page"])}">{esc(v)}</a></td>'
                if "_page" in row else f'<td class="model" data-value="{esc(v)}">{esc(v)}</td>')
    if c.kind == "text":
        return f'<td class="text" data-value="{esc("" if v is None else v)}">{esc("" if v is None else v)}</td>'
    if c.kind == "ci":
        if not v:
            return '<td data-value=""></td>'
        return (f'<td data-value="{v["estimate"]!r}">{_num(v["estimate"])} '
                f'<span class="ci">[{_num(v["low"])}, {_num(v["high"])}]</span></td>')
    if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v:
        shown = str(int(v)) if c.key == "n" or float(v).is_integer() and abs(v) > 1 else _num(v)
        return f'<td data-value="{float(v)!r}">{shown}</td>'
    return '<td data-value="">–</td>'


def _num(v: Any) -> str:
    return "–" if v is None else f"{float(v):.3f}"


def _figure_label(name: str) -> str:
    """Model names go into matplotlib text; keep them literal ('$' would start mathtext)."""
    label = name if len(name) <= 40 else name[:37] + "..."
    return label.replace("\\", "\\\\").replace("$", r"\$")


def _board_figure(t: Table, entries: Sequence[Entry], out: Path) -> str:
    """Under the MMLongEmbed table: the main metric against length, one line per model."""
    if t.id != "mmlongembed":
        return ""
    curves = []
    for e in entries:
        if e.kind == "retrieval" and is_mmlongembed(e.task):
            pq = load_results(e.folder).per_query
            curves += length_curve_numbers(pq, _figure_label(e.model_name), e.task, MAIN)
    if not curves:
        return ""
    figures.length_curves_figure(curves, out / "img" / "mmlongembed_length_curves.png", MAIN)
    return '<img class="figure" src="img/mmlongembed_length_curves.png" alt="P@1 against context length, one line per model">'


def _model_page(e: Entry, out: Path) -> str:
    parts = ['<p><a href="../index.html">← all boards</a></p>',
             '<table class="identity"><tbody>',
             f'<tr><th class="text">Model</th><td class="text" id="model-name">{esc(e.model_name)}</td></tr>',
             f'<tr><th class="text">Task</th><td class="text">{esc(e.task)} v{esc(e.task_version)}</td></tr>',
             f'<tr><th class="text">Data</th><td class="text"><code>{esc(e.content_hash)}</code></td></tr>',
             f'<tr><th class="text">Submitted</th><td class="text">{esc(e.submitted_at)}</td></tr>',
             f'<tr><th class="text">Submission id</th><td class="text"><code>{esc(e.id)}</code></td></tr>',
             '</tbody></table>',
             f'<h2>Identity and settings</h2><pre>{esc(json.dumps(e.model, indent=1, sort_keys=True, ensure_ascii=False))}</pre>']
    tables = [aggregates_table(e)]
    if e.kind == "ravel":
        tables.append(ravel_predictions_table(e))
    for t in tables:
        t.id = f"{e.slug}-{t.id.split('-')[0]}"
        _write_table_data(t, out / "data" / "models")
        parts.append(_table_section(t, "../data/models", "../", level=2))
    if e.kind == "retrieval":
        parts += _model_figures(e, out)
    return _page(f"{e.model_name} — {e.task}", "\n".join(parts), "../")


def _model_figures(e: Entry, out: Path) -> list[str]:
    pq = load_results(e.folder).per_query
    label = _figure_label(e.model_name)
    html_parts = []
    heat = heatmap_numbers(pq, label, HEATMAP_METRIC)
    if heat:
        name = f"{e.slug}-heatmap.png"
        figures.heatmap_figure(heat, out / "img" / name, HEATMAP_METRIC, title=f"{HEATMAP_METRIC} by length and depth")
        html_parts.append(f'<h2>Length × depth</h2><img class="figure" src="../img/{esc(name)}" '
                          f'alt="{esc(HEATMAP_METRIC)} by context length and needle depth">')
    curves = length_curve_numbers(pq, label, e.task, MAIN)
    if curves and len({tuple(c["lengths"]) for c in curves}) and max(len(c["lengths"]) for c in curves) > 1:
        name = f"{e.slug}-length.png"
        figures.length_curves_figure(curves, out / "img" / name, MAIN)
        html_parts.append(f'<h2>By length</h2><img class="figure" src="../img/{esc(name)}" alt="{MAIN} against context length">')
    return html_parts
