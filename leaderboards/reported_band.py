"""The board's band of numbers the seed papers report, set apart from the measured runs (never ranked with them).

A built board shows, under its measured tables, the shipped reported numbers (`reported.py`) about the board's
tasks and the benchmarks they belong to: one table per paper, headed by the caveat ("reported in <paper>, not
reproduced here; protocol may differ"). The band has no rank, no tier, no interval and no link to a model page;
its rows are not entries, so no rank interval, tier, mean or macro average of the board ever counts them. Its
numbers are downloadable as `data/reported.csv|json` (every field of the shipped file, and the caveat).
"""
from __future__ import annotations

import csv
import html
import io
import json
from dataclasses import asdict
from typing import Any, Iterable

from mmbench.leaderboards.reported import CAVEAT, ReportedResult, format_value, load_reported, reported_for

BAND_ID = "reported"
DATA_NAME = "reported"
# (key, label): the band's columns; the value is shown as the paper's scale reads
COLUMNS = (("model", "System (the paper's name)"), ("mmbench_model", "mmbench name"), ("task", "Task"),
           ("subset", "Subset"), ("metric", "Metric"), ("value", "Value"), ("where", "Where in the paper"))


def band_rows(tasks: Iterable[str], rows: list[ReportedResult] | None = None) -> list[ReportedResult]:
    """The reported rows about any of `tasks` (or the benchmark each belongs to), once each, in file order."""
    rows = load_reported() if rows is None else rows
    keep = {id(r) for t in set(tasks) for r in reported_for(t, rows)}
    return [r for r in rows if id(r) in keep]


def band_records(rows: list[ReportedResult]) -> list[dict[str, Any]]:
    """The band's downloadable records: every field of the shipped file, and the caveat that goes with it."""
    return [{**asdict(r), "caveat": r.caveat} for r in rows]


def band_data(rows: list[ReportedResult]) -> dict[str, bytes]:
    """File name -> bytes of the band's CSV and JSON (written under the site's `data/`)."""
    records = band_records(rows)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(records[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(records)
    payload = {"id": BAND_ID, "ranked": False,
               "description": "numbers the seed papers report; not reproduced here, not ranked with measured runs",
               "rows": records}
    return {f"{DATA_NAME}.csv": buf.getvalue().encode("utf-8"),
            f"{DATA_NAME}.json": (json.dumps(payload, indent=1, ensure_ascii=False) + "\n").encode("utf-8")}


def band_section(rows: list[ReportedResult]) -> str:
    """HTML of the band ('' without rows): a section of its own, one table per paper under its caveat."""
    if not rows:
        return ""
    esc = lambda v: html.escape(str(v), quote=True)
    parts = [f'<section id="{BAND_ID}" class="reported-band" aria-labelledby="{BAND_ID}-title">',
             f'<h2 id="{BAND_ID}-title">Reported in the papers <span class="band-label">not ranked</span></h2>',
             '<p class="desc">What the seed papers publish for this board\'s tasks, to read the measured runs above '
             'beside. mmbench did not produce these numbers: they come with no rank, tier or interval, and no rank '
             'interval, tier or mean above counts them. The papers\' protocols (data, sample sizes, model versions) '
             'may differ from the board\'s.</p>']
    kind = lambda key: "value" if key == "value" else "text"  # the value stays on one line, right-aligned
    head = "".join(f'<th class="{kind(key)}" scope="col">{esc(label)}</th>' for key, label in COLUMNS)
    for n, paper in enumerate(dict.fromkeys(r.paper for r in rows)):
        body = []
        for r in (r for r in rows if r.paper == paper):
            cells = {**asdict(r), "value": format_value(r), "mmbench_model": r.mmbench_model or "–"}
            body.append("<tr>" + "".join(f'<td class="{kind(key)}" data-label="{esc(label)}">'
                                         f'{esc(cells[key]).replace("_", "_<wbr>")}</td>'
                                         for key, label in COLUMNS) + "</tr>")
        parts.append(f'<h3 class="caveat">{esc(CAVEAT.format(paper=paper))}</h3>'
                     f'<div class="scroll"><table class="reported" id="table-{BAND_ID}-{n}" data-paper="{esc(paper)}">'
                     f'<thead><tr>{head}</tr></thead>\n<tbody>\n' + "\n".join(body) + '\n</tbody></table></div>')
    parts.append(f'<p class="downloads">Download: <a href="data/{DATA_NAME}.csv" download>CSV</a> · '
                 f'<a href="data/{DATA_NAME}.json" download>JSON</a> (with the quote each number was checked '
                 'against)</p></section>')
    return "\n".join(parts)
