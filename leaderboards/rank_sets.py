"""The overview's rank sets across tasks: for the models with a result on every retrieval task of the board,
simultaneous rank sets per task and over all tasks, and each model's rank interval on a new task
(mmbench.results.benchmark_ranks; the method is on the docs page *Beyond one draw*)."""
from __future__ import annotations

import html
from typing import Callable, Sequence

from mmbench.results.benchmark_ranks import BenchmarkIncomplete, benchmark_ranks
from mmbench.results.store import RunResults
from mmbench.leaderboards.store import Entry

RESAMPLES = 1_000


def complete_runs(entries: Sequence[Entry], loader: Callable[[Entry], RunResults]) -> list[RunResults]:
    """The latest run of each model on each task, for the models that have every task."""
    src = [e for e in entries if e.kind == "retrieval"]
    tasks = {e.task for e in src}
    latest: dict[tuple[str, str], Entry] = {}
    for e in sorted(src, key=lambda e: (e.submitted_at, e.id)):
        latest[(e.model_name, e.task)] = e
    models = {m for m, _ in latest}
    full = [m for m in models if all((m, t) in latest for t in tasks)]
    return [loader(latest[(m, t)]) for m in sorted(full) for t in sorted(tasks)]


def rank_sets_section(entries: Sequence[Entry], loader: Callable[[Entry], RunResults],
                      main_score: Callable[[str], str]) -> str:
    """HTML of the section ('' with fewer than two tasks or two complete models)."""
    runs = complete_runs(entries, loader)
    if len({r.task for r in runs}) < 2 or len({str(r.model_name) for r in runs}) < 2:
        return ""
    try:
        data = benchmark_ranks(runs, main_score, resamples=RESAMPLES)
    except (BenchmarkIncomplete, ValueError, KeyError) as exc:  # stored results of any kind: say why, build the rest
        return f"<section id=\"rank-sets\"><h2>Rank sets across tasks</h2><p>Not shown: {html.escape(str(exc))}</p></section>"
    s, p = data["rank_sets"], data["new_task"]
    head = "".join(f"<th>{html.escape(t)}: rank [within] [all tasks]</th>" for t in s["tasks"])
    rows = []
    for j, model in enumerate(s["models"]):
        cells = "".join(f"<td>{s['ranks'][t][j]} [{s['per_task_low'][t][j]}–{s['per_task_high'][t][j]}] "
                        f"[{s['low'][t][j]}–{s['high'][t][j]}]</td>" for t in range(len(s["tasks"])))
        rows.append(f"<tr><td class=\"text\">{html.escape(model)}</td>{cells}<td>{p['low'][j]}–{p['high'][j]}</td></tr>")
    return ("<section id=\"rank-sets\"><h2>Rank sets across tasks</h2>"
            f"<p>Models with a result on every task, on each task's main score: simultaneous {1 - s['alpha']:.0%} rank "
            "sets within each task and over all tasks at once (bootstrap-t over the items, Mogstad et al. 2024), and the "
            f"rank on a new task of this kind (order statistics of the per-task ranks; guaranteed coverage "
            f"{p['coverage']:.0%}).</p><table><thead><tr><th class=\"text\">model</th>{head}<th>rank on a new task</th>"
            f"</tr></thead><tbody>{''.join(rows)}</tbody></table></section>")
