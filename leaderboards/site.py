"""The static leaderboard site: plain HTML, one small script for sorting, figures as PNG.

Layout of a built site::

    index.html                  the main board (one row per model, a column per task, filters), then
                                every per-task board; sortable, with CSV/JSON downloads
    models/<slug>-<id>.html     one page per submission: identity, scores, figures
    data/<table>.csv|json       the numbers behind each table (per model: data/models/...)
    img/*.png                   length x depth heatmaps and length curves
    assets/                     sort.js, filter.js, style.css, favicon.svg

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

from mmbench.reports import figures
from mmbench.reports.lengths import effective_length_entry
from mmbench.evaluators.stats.effective_length import effective_statement, strata_statement, tolerance_statement
from mmbench.reports.report import HEATMAP_METRIC, heatmap_numbers, length_curve_numbers
from mmbench.data.media import atomic_write_bytes
from mmbench.results.store import load_results
from mmbench.results.summary import human_figure
from mmbench.tasks import design_strata

from mmbench.leaderboards.boards import MAIN, Column, Table, aggregates_table, all_tables, is_mmlongembed, ravel_predictions_table
from mmbench.leaderboards.efficiency import certificate_cell, efficiency_table
from mmbench.leaderboards.matrix import main_score, overview_table, seen_shares
from mmbench.leaderboards.draw_spread import draws_section
from mmbench.leaderboards.overfit import overfit_section
from mmbench.leaderboards.rank_sets import rank_sets_section
from mmbench.leaderboards.reported_band import band_data, band_rows, band_section
from mmbench.leaderboards.modelmeta import MetadataError, ModelMeta, all_metadata, display_name, redact_paths
from mmbench.leaderboards.store import Board, Entry

ASSETS = ("sort.js", "filter.js", "style.css", "favicon.svg")
SCRIPTS = ("sort.js", "filter.js")
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
       "base-uri 'none'; form-action 'none'")


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def build_site(board: Board, out: Path | str, skipped: list[str] | None = None, reported: bool = True) -> Path:
    """Render `board` into `out` (replaced atomically: a reader never sees half a site). A stored entry
    that cannot be rendered is left out and described in `skipped` (id, model, task, why). With `reported`,
    the papers' reported numbers for the board's tasks follow the measured tables in a band of their own."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.building."))
    try:
        left_out = _render(board.entries(), tmp, board.root, reported)
        if skipped is not None:
            skipped.extend(left_out)
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


def _render(entries: Sequence[Entry], out: Path, board_root: Path | None = None, reported: bool = True) -> list[str]:
    """Write the site for `entries` into `out`; returns the entries left out, each as one line."""
    for sub in ("assets", "data/models", "img", "models"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    for name in ASSETS:
        (out / "assets" / name).write_bytes(resources.files("mmbench.leaderboards").joinpath("data", name).read_bytes())
    cache: dict[str, Any] = {}

    def loader(e: Entry):  # each results folder is read once per build
        if e.id not in cache:
            cache[e.id] = load_results(e.folder)
        return cache[e.id]

    skipped: list[str] = []

    def skip(e: Entry, why: str) -> None:
        skipped.append(f"{e.id} ({ascii(e.model_name)[1:-1][:80]!r} on {e.task}): {why}")

    metas: dict[str, ModelMeta] = {}
    pages: dict[str, str] = {}
    for e in entries:  # one entry that cannot be rendered costs its own rows and page, never the build
        try:
            if e.problem:
                raise ValueError(e.problem)
            if e.kind == "retrieval":
                loader(e)
            metas[e.id] = all_metadata([e.model], board_root)[0]
            pages[e.id] = _model_page(e, out, metas[e.id], loader)
        except MetadataError:
            raise  # the board's own metadata file: the operator fixes it, no entry is to blame
        except Exception as exc:  # noqa: BLE001 - stored content of any kind; the entry is named and left out
            skip(e, _one_line(exc))
    entries = [e for e in entries if e.id in pages]
    try:
        tables = all_tables(entries, loader)
    except Exception:  # noqa: BLE001 - find the entries the tables cannot take, leave them out, build again
        for e in list(entries):
            try:
                all_tables([e], loader)
            except Exception as exc:  # noqa: BLE001
                skip(e, _one_line(exc))
                entries.remove(e)
        tables = all_tables(entries, loader)
    overview = overview_table(entries, loader, lambda e: metas[e.id]) if any(e.kind == "retrieval" for e in entries) else None
    if overview is not None:
        tables.insert(0, overview)
    efficiency = efficiency_table(entries, loader)
    if efficiency is not None:
        tables.insert(1 if overview is not None else 0, efficiency)
    for t in tables:
        _write_table_data(t, out / "data")
    band = band_rows(e.task for e in entries) if reported else []  # never entries: nothing above counts them
    for name, data in (band_data(band) if band else {}).items():
        atomic_write_bytes(out / "data" / name, data)
    links = " ".join(f'<a href="#{esc(t.id)}">{esc(t.title)}</a>' for t in tables)
    links += ' <a href="#reported">Reported in the papers</a>' if band else ""
    body = [f"<nav>{links}</nav>"]
    if not tables:
        body.append("<p>No submissions yet.</p>")
    for t in tables:
        if t is overview:
            body.append(_filters(t))
        body.append(_table_section(t, "data", "", level=2))
        fig = _board_figure(t, entries, out, loader)
        if fig:
            body.append(fig)
    body.append(rank_sets_section(entries, loader, main_score))  # with two or more tasks
    info_of = lambda e: loader(e).info  # noqa: E731 - reports are checked against the runs they are shown beside
    body.append(overfit_section(board_root, entries, info_of))  # the keeper's fresh-draw tests, when the board holds any
    body.append(draws_section(board_root, entries, info_of))  # the keeper's draws reports: gaps within the spread
    body.append(band_section(band))  # the papers' numbers, apart from every measured table
    atomic_write_bytes(out / "index.html", _page("mmbench leaderboards", "\n".join(body), "").encode("utf-8"))
    for e in entries:
        atomic_write_bytes(out / "models" / f"{e.slug}.html", pages[e.id].encode("utf-8"))
    return skipped


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:300] + ("..." if len(text) > 300 else "")


def _filters(t: Table) -> str:
    """Controls of the main board (filter.js): a text filter, a modality filter and a size filter."""
    mods = sorted({m for r in t.rows for m in (r.get("modalities") or "").split()})
    sizes = [s for s in ("<1B", "1-3B", "3-10B", ">10B", "unknown") if any(r.get("_size") == s for r in t.rows)]
    mod_opts = "".join(f'<option value="{esc(m)}">{esc(m)}</option>' for m in mods)
    size_opts = "".join(f'<option value="{esc(s)}">{esc(s)}</option>' for s in sizes)
    return (f'<form class="filters" data-table="table-{esc(t.id)}" role="search">'
            '<label>Model <input type="search" id="filter-text" placeholder="filter by name" autocomplete="off"></label> '
            f'<label>Modality <select id="filter-modality"><option value="">any</option>{mod_opts}</select></label> '
            f'<label>Size <select id="filter-size"><option value="">any</option>{size_opts}</select></label> '
            '<output id="filter-count" aria-live="polite"></output></form>')


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
{"".join(f'<script src="{root}assets/{name}"></script>' for name in SCRIPTS)}
</body>
</html>
"""


def _write_table_data(t: Table, folder: Path) -> None:
    atomic_write_bytes(folder / f"{t.id}.csv", t.to_csv().encode("utf-8"))
    atomic_write_bytes(folder / f"{t.id}.json", (json.dumps(t.to_json(), indent=1, ensure_ascii=False) + "\n").encode("utf-8"))


def _breakable(label: str) -> str:
    """A header label that may wrap after its underscores (task names), not inside a word."""
    return esc(label).replace("_", "_<wbr>")


# The main board's HTML table keeps what a reader compares at a glance (rank, each task's score with its CI and
# rank interval, the mean, its rank interval and tier, the size); the rest of its columns stay in its CSV/JSON
# and on each model's page, so five tasks fit 1,400 px.
MAIN_DETAIL_SUFFIXES = (":easy", ":hard", ":seen", ":place")
MAIN_DETAIL_KEYS = frozenset({"protocol", "dim", "context", "modalities", "license", "weights"})


def shown_columns(t: Table) -> list[Column]:
    """The columns the HTML table of `t` renders: all of them, except the main board's details."""
    if t.id != "overview":
        return list(t.columns)
    return [c for c in t.columns if c.key not in MAIN_DETAIL_KEYS and not c.key.endswith(MAIN_DETAIL_SUFFIXES)]


def _table_section(t: Table, data_href: str, root: str, level: int) -> str:
    shown = shown_columns(t)
    head = "".join(f'<th class="{esc(c.kind)}" data-type="{"number" if c.kind in ("number", "ci", "seen", "count", "place") else "text"}" '
                   f'data-key="{esc(c.key)}"{" data-low-first" if c.key == "rank" else ""} scope="col">'
                   f'<button type="button">{_breakable(c.label)}</button></th>'
                   for c in shown)
    rows = "\n".join(_row(t, shown, r, root) for r in [*t.rows, *t.baselines])
    cls = "sortable matrix" if t.id == "overview" else "sortable"
    more = ('<p class="desc" id="overview-details">Shown here: each task\'s score with its CI, rank interval and tier, '
            'the mean, its rank interval and tier, and the size. Easy and Hard, the truncated / unseen shares, the '
            'protocol and the model metadata are in the CSV and JSON below and on each model\'s page.</p>\n'
            if len(shown) < len(t.columns) else "")
    note = f'<p class="note" id="{esc(t.id)}-note">{esc(t.note)}</p>\n' if t.note else ""
    return (f'<section id="{esc(t.id)}"><h{level}>{esc(t.title)}</h{level}>\n{note}<p class="desc">{esc(t.description)}</p>\n'
            f'{more}'
            f'<div class="scroll"><table class="{cls}" id="table-{esc(t.id)}"><thead><tr>{head}</tr></thead>\n'
            f'<tbody>\n{rows}\n</tbody></table></div>\n'
            f'<p class="downloads">Download: <a href="{data_href}/{esc(t.id)}.csv" download>CSV</a> · '
            f'<a href="{data_href}/{esc(t.id)}.json" download>JSON</a></p></section>')


def _row(t: Table, shown: Sequence[Column], r: dict[str, Any], root: str) -> str:
    """A table row; main-board rows carry what the filters read (modalities, size bucket); cells carry their
    column label (shown beside the value when a phone stacks the cells). On the main board a task's rank
    interval and tier sit under its score."""
    attrs = ' class="baseline"' if r.get("_baseline") else ""
    if "_size" in r:
        attrs += f' data-modalities="{esc(r.get("modalities") or "")}" data-size="{esc(r["_size"])}"'
    cells = []
    for c in shown:
        cell = _cell(c, r, root).replace("<td", f'<td data-label="{esc(c.label)}"', 1)
        if t.id == "overview" and c.kind == "ci" and r.get(f"{c.key}:place"):
            cell = cell.replace("</td>", f'<span class="place">{_place(r[f"{c.key}:place"])}</span></td>')
        cells.append(cell)
    return f"<tr{attrs}>{''.join(cells)}</tr>"


def _place(v: dict[str, Any]) -> str:
    """A rank interval, always as a range ("1–1" too), and the tier as a labelled badge explained on hover."""
    low, high, tier = int(v["low"]), int(v["high"]), int(v["tier"])
    tied = ("alone in its tier: no other model is statistically tied with it" if v.get("tier_size") == 1
            else f"statistically tied with the best model of tier {tier}")
    title = (f"Rank interval {low}–{high}: the ranks this model takes in 95 % of bootstrap resamples of the items. "
             f"Tier {tier}: {tied} (paired tests, Holm-corrected).")
    return (f'<span class="range" title="{esc(title)}">{low}–{high}</span> '
            f'<span class="tier tier-{min(tier, 4)}" title="{esc(title)}">tier\u00a0{tier}</span>')


def _cell(c: Column, row: dict[str, Any], root: str) -> str:
    v = row.get(c.key)
    if c.kind == "seen":
        if not v or v.get("truncated_share") is None and v.get("unseen_share") is None:
            return '<td class="seen" data-value="">–</td>'
        pct = lambda x: "–" if x is None else f"{100 * x:.0f}%"
        title = (f"{v.get('truncated')} of {v.get('documents')} documents truncated; "
                 f"{v.get('unseen')} with content the model cannot see")
        return (f'<td class="seen" data-value="{v.get("truncated_share")!r}" title="{esc(title)}">'
                f'{pct(v.get("truncated_share"))} / {pct(v.get("unseen_share"))}</td>')
    if c.kind == "place":
        if not v:
            return '<td class="place" data-value="">–</td>'
        return f'<td class="place" data-value="{1000 * int(v["tier"]) + int(v["low"])}">{_place(v)}</td>'
    if c.kind == "count":
        if v is None:
            return '<td class="meta" data-value="">–</td>'
        return f'<td class="meta" data-value="{int(v)}">{esc(_count(c.key, int(v)))}</td>'
    if c.kind == "link":
        if not v:
            return '<td class="meta text" data-value="">–</td>'
        return (f'<td class="meta text" data-value="{esc(v)}"><a href="{esc(v)}" rel="noopener noreferrer nofollow" '
                f'target="_blank">weights</a></td>')
    if c.kind == "model":
        return (f'<td class="model" data-value="{esc(v)}"><a href="{root}{esc(row["_page"])}">{esc(v)}</a></td>'
                if "_page" in row else f'<td class="model" data-value="{esc(v)}">{esc(v)}</td>')
    if c.kind == "text":
        return f'<td class="text" data-value="{esc("" if v is None else v)}">{esc("–" if v is None else v)}</td>'
    if c.kind == "ci":
        if not v:
            return '<td data-value=""></td>'
        if v.get("estimate") is None:
            return '<td data-value="">–</td>'
        ci = "" if v.get("low") is None else f' <span class="ci">[{_num(v["low"])}, {_num(v["high"])}]</span>'
        return f'<td data-value="{float(v["estimate"])!r}"><span class="num">{_num(v["estimate"])}{ci}</span></td>'
    if c.unit and isinstance(v, (int, float)) and not isinstance(v, bool) and v == v:
        return f'<td data-value="{float(v)!r}">{esc(human_figure(v, c.digits))}\u00a0{esc(c.unit)}</td>'
    if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v:
        shown = str(int(v)) if c.key == "n" or float(v).is_integer() and abs(v) > 1 else _num(v)
        return f'<td data-value="{float(v)!r}">{shown}</td>'
    return '<td data-value="">–</td>'


def _num(v: Any) -> str:
    return "–" if v is None else f"{float(v):.3f}"


def _count(key: str, v: int) -> str:
    """Parameters as 22.7M / 2.21B; context windows as 8k; dimensions as they are."""
    if key == "parameters":
        return f"{v / 1e9:.2f}B" if v >= 1e9 else f"{v / 1e6:.1f}M"
    if key == "context" and v >= 1000:
        return f"{v / 1000:.0f}k" if v % 1000 == 0 or v >= 10_000 else f"{v / 1000:.1f}k"
    return str(v)


def _figure_label(name: str) -> str:
    """Model names go into matplotlib text; keep them literal ('$' would start mathtext)."""
    label = name if len(name) <= 40 else name[:37] + "..."
    return label.replace("\\", "\\\\").replace("$", r"\$")


def _board_figure(t: Table, entries: Sequence[Entry], out: Path, loader) -> str:
    """Under the MMLongEmbed table: the main metric against length, one line per model."""
    if t.id != "mmlongembed":
        return ""
    curves = []
    for e in entries:
        if e.kind == "retrieval" and is_mmlongembed(e.task):
            pq = loader(e).per_query
            curves += length_curve_numbers(pq, _figure_label(display_name(e.model_name)), e.task, MAIN)
    if not curves:
        return ""
    figures.length_curves_figure(curves, out / "img" / "mmlongembed_length_curves.png", MAIN)
    return _figure("img/mmlongembed_length_curves.png", "P@1 against context length, one line per model")


def _figure(src: str, alt: str) -> str:
    """A figure at a readable size: scrolled sideways on a narrow screen, a tap opens it full size."""
    return (f'<div class="figure-wrap"><a href="{esc(src)}"><img class="figure" src="{esc(src)}" alt="{esc(alt)}">'
            '</a></div>')


def _model_page(e: Entry, out: Path, meta: ModelMeta, loader) -> str:
    name = display_name(e.model_name)
    parts = ['<p><a href="../index.html">← all boards</a></p>',
             '<table class="identity"><tbody>',
             f'<tr><th class="text">Model</th><td class="text" id="model-name">{esc(name)}</td></tr>',
             f'<tr><th class="text">Task</th><td class="text">{esc(e.task)} v{esc(e.task_version)}</td></tr>',
             f'<tr><th class="text">Data</th><td class="text"><code>{esc(e.content_hash)}</code></td></tr>',
             f'<tr><th class="text">Submitted</th><td class="text">{esc(e.submitted_at)}</td></tr>',
             f'<tr><th class="text">Submission id</th><td class="text"><code>{esc(e.id)}</code></td></tr>',
             *([f'<tr><th class="text">Protocol</th><td class="text"><code>{esc(loader(e).info.get("protocol_id") or "–")}'
                '</code></td></tr>'] if e.kind == "retrieval" else []),
             '</tbody></table>', _metadata_block(meta)]
    if e.kind == "retrieval":
        parts.append(_seen_block(seen_shares(loader(e)), loader(e).info.get("modalities_seen")))
        parts.append('<p class="certificate">Backend certificate: <strong id="backend-certificate">'
                     f'{esc(certificate_cell(loader(e).info.get("backend_certificate")))}</strong></p>')
    parts.append(f'<h2>Identity and settings</h2><pre>{esc(json.dumps(redact_paths(e.model), indent=1, sort_keys=True, ensure_ascii=False))}</pre>')
    tables = [aggregates_table(e)]
    if e.kind == "ravel":
        tables.append(ravel_predictions_table(e))
    for t in tables:
        t.id = f"{e.slug}-{t.id.split('-')[0]}"
        _write_table_data(t, out / "data" / "models")
        parts.append(_table_section(t, "../data/models", "../", level=2))
    if e.kind == "retrieval":
        parts += _model_figures(e, out, loader)
    return _page(f"{name} — {e.task}", "\n".join(parts), "../")


def _metadata_block(m: ModelMeta) -> str:
    rows = [("Parameters", _count("parameters", m.parameters) if m.parameters else "–"),
            ("Embedding dim", m.dim or "–"), ("Context window", _count("context", m.context) if m.context else "–"),
            ("Modalities", ", ".join(m.modalities) or "–"), ("Licence", m.license or "–")]
    cells = "".join(f'<tr><th class="text">{esc(k)}</th><td class="text">{esc(v)}</td></tr>' for k, v in rows)
    link = (f'<tr><th class="text">Weights</th><td class="text"><a href="{esc(m.weights)}" rel="noopener noreferrer nofollow" '
            f'target="_blank">{esc(m.weights)}</a></td></tr>') if m.weights else '<tr><th class="text">Weights</th><td class="text">–</td></tr>'
    source = f'<p class="desc">Metadata from: {esc(m.source or "nowhere (no registry entry or board metadata)")}.</p>'
    return f'<h2>Model</h2><table class="identity" id="model-meta"><tbody>{cells}{link}</tbody></table>{source}'


def _seen_block(shares: dict[str, Any], modalities_seen: Any) -> str:
    pct = lambda x: "–" if x is None else f"{100 * x:.1f}%"
    rows = [("Documents represented (encoded or from the cache)", shares["documents"] if shares["documents"] is not None else "–"),
            ("Truncated to the model's window", f'{shares["truncated"] if shares["truncated"] is not None else "–"} '
                                                f'({pct(shares["truncated_share"])})'),
            ("With content the model cannot see", f'{shares["unseen"] if shares["unseen"] is not None else "–"} '
                                                  f'({pct(shares["unseen_share"])})'),
            ("Modalities the model sees", ", ".join(modalities_seen) if modalities_seen else "–")]
    cells = "".join(f'<tr><th class="text">{esc(k)}</th><td class="text">{esc(v)}</td></tr>' for k, v in rows)
    return f'<h2>What the model saw</h2><table class="identity" id="model-seen"><tbody>{cells}</tbody></table>'


def effective_context_html(eff: dict, metric: str, figure: str | None) -> str:
    """A model page's effective-context section: the value, how it was read (strata, references, tolerance and
    how it was chosen) and the figure at `figure` (None: no curve to draw)."""
    reference = "" if eff.get("reference") is None else f" (item-weighted reference {eff['reference']:.3f})"
    tolerance = "" if eff.get("tolerance") is None else f" Tolerance: {esc(tolerance_statement(eff))}."
    shown = _figure(figure, f"{metric} against consumed tokens") if figure else ""
    return (f'<h2>Effective context</h2><p class="desc" id="effective-context">{esc(effective_statement(eff))}: '
            f'the longest consumed length before the mean {metric} falls by more than its resolution floor below the '
            f'reference, read {esc(strata_statement(eff))}{reference}.{tolerance}</p>{shown}')


def _model_figures(e: Entry, out: Path, loader) -> list[str]:
    pq = loader(e).per_query
    label = _figure_label(display_name(e.model_name))
    html_parts = []
    heat = heatmap_numbers(pq, label, HEATMAP_METRIC)
    if heat:
        name = f"{e.slug}-heatmap.png"
        figures.heatmap_figure(heat, out / "img" / name, HEATMAP_METRIC, title=f"{HEATMAP_METRIC} by length and depth")
        html_parts.append(f'<h2>Length × depth</h2>{_figure(f"../img/{name}", f"{HEATMAP_METRIC} by context length and needle depth")}')
    curves = length_curve_numbers(pq, label, e.task, MAIN)
    if curves and len({tuple(c["lengths"]) for c in curves}) and max(len(c["lengths"]) for c in curves) > 1:
        name = f"{e.slug}-length.png"
        figures.length_curves_figure(curves, out / "img" / name, MAIN)
        html_parts.append(f'<h2>By length</h2>{_figure(f"../img/{name}", f"{MAIN} against context length")}')
    eff = effective_length_entry(pq, loader(e).seen, label, MAIN, strata=design_strata(e.task))
    if eff["status"] != "no items":
        curve_name: str | None = f"{e.slug}-effective-length.png" if eff["curve"] else None
        if curve_name:
            figures.effective_length_figure([eff], out / "img" / curve_name, MAIN)
        html_parts.append(effective_context_html(eff, MAIN, f"../img/{curve_name}" if curve_name else None))
    return html_parts
