"""Typed views of the numbers `report_numbers` computes (a JSON-ready dict, which report.json holds as is).

`report_markdown` reads the report through these records instead of string keys, so a misspelt or missing
field fails where the record is built, naming it, and each section of the text says what it takes.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Self


def _pick(cls: Any, data: dict[str, Any], **defaults: Any) -> Any:
    """A record of dataclass `cls` from the keys of `data` named like its fields (`defaults`: keys older data
    lack)."""
    names = [f.name for f in fields(cls)]
    missing = [n for n in names if n not in data and n not in defaults]
    if missing:
        raise KeyError(f"{cls.__name__}: the report data lack {', '.join(missing)}")
    return cls(**{n: data.get(n, defaults.get(n)) for n in names})


class _Record:
    """A record read from the report data by `of`: `_nested` turns the fields that hold records of their own (and
    those older data lack) into their values; every other field is taken as it is."""

    @classmethod
    def _nested(cls, data: dict[str, Any]) -> dict[str, Any]:
        return {}

    @classmethod
    def of(cls, data: dict[str, Any]) -> Self:
        return _pick(cls, {**data, **cls._nested(data)})


@dataclass(frozen=True)
class Settings(_Record):
    metric: str
    heatmap_metric: str
    ci_method: str
    ci_resamples: int
    seed: int
    positional_model: str
    robustness_thresholds: dict[str, float]


@dataclass(frozen=True)
class Interval:
    estimate: float | None
    low: float | None
    high: float | None


@dataclass(frozen=True)
class RunSummary(_Record):
    """One run's averages: micro and macro means (with their counts), per-subset means, CIs and chance."""

    label: str
    micro: dict[str, Any]
    macro: dict[str, Any]
    subsets: dict[str, dict[str, Any]]
    bootstrap_ci: dict[str, Interval]
    chance: dict[str, float]
    n_failed_excluded: int

    @classmethod
    def _nested(cls, data: dict[str, Any]) -> dict[str, Any]:
        return {"bootstrap_ci": {m: _pick(Interval, c) for m, c in data["bootstrap_ci"].items()}}


@dataclass(frozen=True)
class PositionalFit:
    """A positional-bias fit of one run over some rows, or why it is missing (`error`)."""

    label: str
    rows: str
    result: dict[str, Any] | None = None
    error: str | None = None


@dataclass(frozen=True)
class LengthCurve:
    label: str
    group: str
    difficulty: str
    lengths: list[str]
    values: list[float]
    ci_low: list[float | None]
    ci_high: list[float | None]
    steps: list[dict[str, Any]]


@dataclass(frozen=True)
class EasyHard:
    label: str
    group: str
    easy: float | None
    hard: float | None
    easy_ci: list[float | None]
    hard_ci: list[float | None]
    drop: float | None
    relative_drop: float | None
    n_easy: int
    n_hard: int
    chance_easy: float | None
    chance_hard: float | None


@dataclass(frozen=True)
class Robustness:
    label: str
    scores: dict[str, float]
    ci: dict[str, list[float | None]]
    mean: float
    sd: float
    kind: str


@dataclass(frozen=True)
class Figure:
    path: str
    panels: list[str]


@dataclass(frozen=True)
class TaskReport(_Record):
    """Everything the report says about one task."""

    task: str
    content_hashes: list[str]
    runs: list[RunSummary]
    positional_bias: list[PositionalFit]
    heatmaps: list[dict[str, Any]]
    length_curves: list[LengthCurve]
    easy_hard: list[EasyHard]
    modality_robustness: list[Robustness]
    effective_length: list[dict[str, Any]] = field(default_factory=list)
    truncated_share: list[Any] = field(default_factory=list)
    efficiency: list[dict[str, Any]] = field(default_factory=list)
    figures: dict[str, Figure] = field(default_factory=dict)

    @classmethod
    def _nested(cls, data: dict[str, Any]) -> dict[str, Any]:
        return {
            "runs": [RunSummary.of(r) for r in data["runs"]],
            "positional_bias": [_pick(PositionalFit, e, result=None, error=None) for e in data["positional_bias"]],
            "length_curves": [_pick(LengthCurve, c, steps=[]) for c in data["length_curves"]],
            "easy_hard": [_pick(EasyHard, r) for r in data["easy_hard"]],
            "modality_robustness": [_pick(Robustness, r, ci={}) for r in data["modality_robustness"]],
            "effective_length": data.get("effective_length") or [],
            "truncated_share": data.get("truncated_share") or [],
            "efficiency": data.get("efficiency") or [],
            "figures": {k: _pick(Figure, f, panels=[]) for k, f in (data.get("figures") or {}).items()},
        }
