"""The reproduction matrix: the scores each official pool set must give each model that runs on CPU here.

For every task's official pool set (leaderboards/data/official_hashes.json, the task's current version) and
each condition of `conditions` (a model of `MODELS`, an item limit, fast or slow), the matrix
(``mmbench/leaderboards/data/reproduction_matrix.json``) holds the pool set's content hash, the run's protocol id,
the number of items, and the expected main score and a few secondary figures, each with a tolerance.
`mmbench reproduce` runs the conditions again and compares; a miss (another figure, another protocol, a pool
set the matrix does not know) names task, model, expected and got, and the command exits 1.

The models: BM25 and MiniLM (text only), two tiny random-weight models that see images (`tiny-clip`, CLIP's
dual encoder; `tiny-gme`, GME's Qwen2-VL adapter; built offline by `mmbench.models.tiny_random`), and an LLM
listwise ranker (`llm-ranker`: the openai-chat adapter against the loopback reference server of
`mmbench.rankers.reference`, on the task whose candidates are single images).

Tolerances: BM25 and the reference ranker are arithmetic on counts and hashes, so their figures must agree to
the 6 decimals scores are ranked by (`EXACT_TOLERANCE`) and their counts exactly; a neural model's float kernels
differ between CPUs, and a score within 1e-6 of another can round to a tie on one machine and not on another,
so one item may flip: its tolerance is one item's share of the figure (1 / n items).

`mmbench reproduce --write-matrix PATH` regenerates the rows from fresh builds (CONTRIBUTING: a re-issued hash
updates the matrix in the same change).
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from mmbench.data.media import atomic_write_bytes

FORMAT = "mmbench-reproduction/1"
REGENERATE = "mmbench reproduce --write-matrix leaderboards/data/reproduction_matrix.json"
SECONDARY = ("recall_at_5", "mrr_at_10", "ndcg_at_10")
# counts compared exactly: the items that failed (every run), and for a ranker's run the items whose reply was
# repaired and the input tokens
COUNTS = ("failed_items", "items_repaired", "input_tokens")
EXACT_TOLERANCE = 1e-6


@dataclass(frozen=True)
class MatrixModel:
    """A model of the matrix: the tasks it runs on and which conditions are fast (CI) or slow (before a release)."""

    name: str
    description: str
    tasks: tuple[str, ...] | None = None     # None: every task with an official pool set
    # tasks with a fast condition on a seeded `--limit` selection (its own protocol id, which pins the selection) as
    # well as the whole sample
    fast_limit: Mapping[str, int] = field(default_factory=dict)
    # tasks whose whole sample is a slow condition (`mmbench reproduce --slow`), kept out of the test suite
    slow: tuple[str, ...] = ()
    exact: bool = False                       # no float kernels: figures agree to EXACT_TOLERANCE


# Visual Grounding's sample has 7,200 items over 7,250 documents (6,000 with images); every item's pool spans the
# sample, so a `--limit` selection still encodes every document. Measured on the 2 cores of the development machine:
# MiniLM's whole-sample row took 71 s (`mmbench reproduce --task visual_grounding --model minilm` with the sample
# built: 123 s, load 2 to 4; 4.5 to 8.1 min when a dozen jobs shared the cores), under the ~5 min a test may take,
# so it is fast; tiny-clip's took 6.3 min (5.2 min of CPU), so it is slow; tiny-gme (a processor pass over every
# image at 256 to 1,280 tokens) does not run there.
# BM25's seeded selection of 300 items pins `--limit`'s sampling on an official pool set.
VG = "visual_grounding"
NOT_VG = ("flickr_hard_negatives", "logical_summarization", "multi_source_reasoning", "temporal_summarization")
MODELS = (
    MatrixModel("bm25", "Okapi BM25, text only", fast_limit={VG: 300}, exact=True),
    MatrixModel("minilm", "all-MiniLM-L6-v2, text only"),
    MatrixModel("tiny-clip", "tiny random CLIP dual encoder, text and images", tasks=(*NOT_VG, VG), slow=(VG,)),
    MatrixModel("tiny-gme", "tiny random Qwen2-VL through GME's adapter, text and images, 2,048-token window",
                tasks=NOT_VG),
    MatrixModel("llm-ranker", "openai-chat listwise ranker against the loopback reference server",
                tasks=("flickr_hard_negatives",), exact=True),
)
MODEL_NAMES = tuple(m.name for m in MODELS)
EXACT_MODELS = tuple(m.name for m in MODELS if m.exact)


class MatrixError(ValueError):
    """The matrix file is missing, unreadable or not in the expected format."""


@dataclass(frozen=True)
class Condition:
    """One reproduction: `model` on the official pool set of `task`, over all items or a seeded `limit`."""

    task: str
    model: str
    limit: int | None = None
    fast: bool = True

    @property
    def key(self) -> str:
        return f"{self.task}/{self.model}/{'all' if self.limit is None else self.limit}"


def conditions(tasks: Iterable[str]) -> list[Condition]:
    """Every condition for `tasks`: each model of `MODELS` on the tasks it runs on, over all items (fast, or slow
    where the model's `slow` names the task), and on its seeded selection where `fast_limit` gives one (fast)."""
    out = []
    for task in sorted(tasks):
        for model in MODELS:
            if model.tasks is not None and task not in model.tasks:
                continue
            out.append(Condition(task, model.name, None, fast=task not in model.slow))
            if task in model.fast_limit:
                out.append(Condition(task, model.name, model.fast_limit[task], fast=True))
    return out


def select(conds: Sequence[Condition], tasks: Sequence[str] = (), models: Sequence[str] = (),
           fast: bool = False, slow: bool = False) -> list[Condition]:
    """The conditions of these tasks and models (none given: all); `fast`: only the fast ones, `slow`: only the
    slow ones."""
    return [c for c in conds if (not tasks or c.task in tasks) and (not models or c.model in models)
            and (c.fast or not fast) and (not c.fast or not slow)]


@dataclass(frozen=True)
class Figure:
    value: float
    tolerance: float


@dataclass
class Row:
    """The expected result of one condition on one pool set."""

    task: str
    model: str
    limit: int | None
    fast: bool
    task_version: str
    content_hash: str
    protocol_id: str
    n_items: int
    main_metric: str
    figures: dict[str, Figure] = field(default_factory=dict)
    # what the model saw (not compared): documents encoded (queries and candidates), how many held content it
    # could not see, the modalities it took; `mmbench list tasks` prints it beside each model's runtime
    seen: dict[str, Any] | None = None

    @property
    def key(self) -> str:
        return Condition(self.task, self.model, self.limit).key

    def to_json(self) -> dict[str, Any]:
        return {"task": self.task, "model": self.model, "limit": self.limit, "fast": self.fast,
                "task_version": self.task_version, "content_hash": self.content_hash,
                "protocol_id": self.protocol_id, "n_items": self.n_items, "main_metric": self.main_metric,
                "figures": {k: {"value": f.value, "tolerance": f.tolerance} for k, f in self.figures.items()},
                "seen": self.seen}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Row":
        return cls(str(d["task"]), str(d["model"]), None if d.get("limit") is None else int(d["limit"]),
                   bool(d.get("fast", True)), str(d["task_version"]), str(d["content_hash"]), str(d["protocol_id"]),
                   int(d["n_items"]), str(d["main_metric"]),
                   {str(k): Figure(float(v["value"]), float(v["tolerance"])) for k, v in d["figures"].items()},
                   dict(d["seen"]) if isinstance(d.get("seen"), dict) else None)


def shipped_path() -> Path:
    return Path(str(resources.files("mmbench.leaderboards").joinpath("data", "reproduction_matrix.json")))


def load_matrix(path: Path | str | None = None) -> dict[str, Row]:
    """The matrix's rows by condition key (`task/model/limit`)."""
    path = Path(path or shipped_path())
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise MatrixError(f"reproduction matrix {path} does not exist (write it with `{REGENERATE}`)") from None
    except ValueError as exc:
        raise MatrixError(f"reproduction matrix {path}: invalid JSON ({exc})") from None
    if data.get("format") != FORMAT:
        raise MatrixError(f"reproduction matrix {path}: format {data.get('format')!r}, expected {FORMAT!r}")
    try:
        rows = [Row.from_json(r) for r in data["rows"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise MatrixError(f"reproduction matrix {path}: a row lacks or mistypes {exc}") from None
    return {r.key: r for r in rows}


def save_matrix(rows: Iterable[Row], path: Path | str, version: str) -> Path:
    """Write the rows (sorted by task, model, limit) with how they were made."""
    ordered = sorted(rows, key=lambda r: (r.task, r.model, -1 if r.limit is None else r.limit))
    data = {"format": FORMAT, "written_by": REGENERATE, "mmbench_version": version,
            "tolerances": {"exact": "EXACT_TOLERANCE (BM25, the reference ranker: scores are ranked to 6 decimals)",
                           "neural": "one item's share, 1 / n_items (CPU kernels may flip one near-tie)",
                           "counts": "0 (failed items; a ranker's repaired items and input tokens)"},
            "rows": [r.to_json() for r in ordered]}
    path = Path(path)
    atomic_write_bytes(path, (json.dumps(data, indent=1) + "\n").encode())
    return path


def tolerance_for(model: str, n_items: int) -> float:
    return EXACT_TOLERANCE if model in EXACT_MODELS else round(1.0 / max(n_items, 1), 6)


def figures_of(summary: Mapping[str, Any]) -> tuple[str, dict[str, float]]:
    """The main metric and the figures a matrix row holds, from a run's summary (the group over all items), with the
    items that failed (their metrics are not in the means); a ranker's run adds the items whose reply was repaired
    and the input tokens (`COUNTS`)."""
    info = summary["mmbench"]
    main = str(info["main_metric"])
    overall = next(g for g in info["groups"] if g.get("hf_subset") == "all")
    keys = [main, *(k for k in SECONDARY if k != main)]
    out = {k: float(overall[k]) for k in keys if overall.get(k) is not None}
    out["failed_items"] = float(info.get("n_failed_items") or 0)
    if isinstance(info.get("repairs"), dict):
        out["items_repaired"] = float(info["repairs"]["items_repaired"])
        out["input_tokens"] = float((info.get("tokens") or {}).get("input", 0))
    return main, out


def row_from_summary(cond: Condition, summary: Mapping[str, Any]) -> Row:
    info = summary["mmbench"]
    main, got = figures_of(summary)
    n = int(info["n_items"])
    tol = tolerance_for(cond.model, n)
    seen = {"documents": (info.get("encode") or {}).get("documents"),
            "unseen": info.get("documents_with_unseen_modalities"), "modalities": info.get("modalities_seen")}
    return Row(cond.task, cond.model, cond.limit, cond.fast, str(info["task_version"]), str(info["content_hash"]),
               str(info["protocol_id"]), n, main,
               {k: Figure(round(v, 9), 0.0 if k in COUNTS else tol) for k, v in got.items()}, seen)


def seen_note(row: Row | None, candidates: int | None = None) -> str:
    """What a model saw of a task's sample, for a line that lists its runtime or score: '' when it saw all."""
    seen = (row.seen or {}) if row else {}
    unseen, documents = seen.get("unseen"), seen.get("documents")
    if not unseen or not documents:
        return ""
    took = "/".join(seen.get("modalities") or ()) or "?"
    if row is not None and row.limit is not None:   # measured on a selection: its share, not the sample's counts
        return f"{took} only: {100 * unseen / documents:.0f} % of documents hold content it cannot see"
    if candidates is not None and unseen >= candidates:
        return f"{took} only: sees none of the {candidates:,} candidates, its ranking is chance"
    return f"{took} only: {unseen:,} of {documents:,} documents hold content it cannot see"


@dataclass
class Check:
    """One figure of one condition: expected (None when the matrix has no row), got, within tolerance."""

    condition: Condition
    figure: str
    expected: float | None
    got: float | None
    tolerance: float | None
    ok: bool
    why: str = ""


def compare(cond: Condition, expected: Row | None, got: Row) -> list[Check]:
    """Each figure of `got` against the matrix row; a missing row, another pool set or another protocol is a
    miss of its own (the numbers would not be comparable)."""
    if expected is None:
        return [Check(cond, got.main_metric, None, got.figures[got.main_metric].value, None, False,
                      f"the matrix has no row for {cond.key} (regenerate it: `{REGENERATE}`)")]
    if expected.content_hash != got.content_hash:
        return [Check(cond, "pool set", None, None, None, False,
                      f"pool set {got.content_hash[:12]} built here, the matrix has {expected.content_hash[:12]} "
                      f"(a re-issued hash updates the matrix: `{REGENERATE}`)")]
    out = []
    if expected.protocol_id != got.protocol_id:
        out.append(Check(cond, "protocol", None, None, None, False,
                         f"protocol {got.protocol_id}, the matrix has {expected.protocol_id}"))
    for name, fig in expected.figures.items():
        value = got.figures.get(name)
        value_f = None if value is None else value.value
        ok = value_f is not None and abs(value_f - fig.value) <= fig.tolerance + 1e-12
        out.append(Check(cond, name, fig.value, value_f, fig.tolerance, ok))
    return out


def _num(x: float | None, figure: str = "") -> str:
    if x is None:
        return "-"
    return f"{x:,.0f}" if figure in COUNTS else f"{x:.6f}"


def table(checks: Sequence[Check], rows: Mapping[str, Row], seconds: Mapping[str, float]) -> list[str]:
    """The printed table: one line per figure; the pool set and protocol on each condition's first line."""
    head = ["task", "model", "items", "pool set", "protocol", "figure", "expected", "got", "tolerance", "result"]
    body: list[list[str]] = []
    seen: set[str] = set()
    for c in checks:
        first = c.condition.key not in seen
        seen.add(c.condition.key)
        row = rows.get(c.condition.key)
        items = "all" if c.condition.limit is None else f"limit {c.condition.limit}"
        body.append([c.condition.task if first else "", c.condition.model if first else "", items if first else "",
                     row.content_hash[:12] if first and row else "", row.protocol_id if first and row else "",
                     c.figure, _num(c.expected, c.figure), _num(c.got, c.figure),
                     "-" if c.tolerance is None else f"±{c.tolerance:g}",
                     "ok" if c.ok else "MISS"])
    widths = [max(len(h), *(len(r[i]) for r in body)) if body else len(h) for i, h in enumerate(head)]
    fmt = lambda cells: "  ".join(x.ljust(w) for x, w in zip(cells, widths)).rstrip()  # noqa: E731
    return [fmt(head), *(fmt(r) for r in body)]


def miss_lines(checks: Sequence[Check]) -> list[str]:
    """One line per miss: task, model, figure, expected and got."""
    out = []
    for c in checks:
        if c.ok:
            continue
        where = f"{c.condition.task} / {c.condition.model}" + \
            ("" if c.condition.limit is None else f" (limit {c.condition.limit})")
        if c.why:
            out.append(f"MISS {where}: {c.why}")
        else:
            out.append(f"MISS {where}: {c.figure} expected {_num(c.expected, c.figure)}, got {_num(c.got, c.figure)} "
                       f"(tolerance ±{c.tolerance:g})")
    return out


Runner = Callable[[Condition], Mapping[str, Any]]


def run_conditions(conds: Sequence[Condition], runner: Runner, progress: Callable[[str], Any] | None = None,
                   on_row: Callable[[Row], Any] | None = None) -> tuple[dict[str, Row], dict[str, float]]:
    """Run each condition (`runner` returns the run's summary, results.json's layout) into a row; `on_row` is
    told each row as it is made (`--write-matrix` saves it then, so an interrupted regeneration keeps its rows)."""
    rows, seconds = {}, {}
    for cond in conds:
        start = time.perf_counter()
        summary = runner(cond)
        seconds[cond.key] = time.perf_counter() - start
        rows[cond.key] = row_from_summary(cond, summary)
        if on_row is not None:
            on_row(rows[cond.key])
        if progress is not None:
            progress(f"{cond.key}: {seconds[cond.key]:.1f} s")
    return rows, seconds
