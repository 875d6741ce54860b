"""Runs a board refuses although every number in them follows from their tables: runs whose model saw nothing,
and stated timings or CO₂ figures that cannot be true.

- Every document empty: when each document of the run reached the model with no token at all (cut to nothing
  by truncation, or made only of modalities the model does not see), its vectors describe nothing and its
  scores are chance; such a run is no measurement of the model.
- Truncation without a window: a model whose card states no context window (`max_tokens` null: BM25, a
  windowless API) cuts nothing, so a seen.parquet marking any of its documents truncated was not written by
  its run.
- Timings: every stated duration (`evaluation_time` and each `..._seconds` figure) is at most a year
  (`MAX_SECONDS`); a run longer than that is a typing error or a forgery, not a measurement.
- CO₂: `kg_co2_emissions` needs a stated `evaluation_time` and may not exceed what `MAX_KG_CO2_PER_HOUR`
  (a 100 kW rack on a 1 kg/kWh grid) emits in that time.
"""
from __future__ import annotations

import math
from typing import Any

import pandas as pd

from mmbench.results.store import SEEN, SUMMARY

from mmbench.leaderboards.problems import Problem

MAX_SECONDS = 366 * 24 * 3600.0
MAX_KG_CO2_PER_HOUR = 100.0


def plausibility_problems(summary: dict[str, Any], seen: pd.DataFrame) -> list[Problem]:
    return _empty_run(seen) + _windowless_truncation(summary, seen) + _timing(summary) + _co2(summary)


def _windowless_truncation(summary: dict[str, Any], seen: pd.DataFrame) -> list[Problem]:
    block = summary.get("mmbench") if isinstance(summary, dict) else None
    model = block.get("model") if isinstance(block, dict) else None
    if not isinstance(model, dict) or "max_tokens" not in model or model["max_tokens"] is not None:
        return []
    if seen.empty or "truncated" not in seen.columns:
        return []
    truncated = int(seen["truncated"].fillna(False).astype(bool).sum())
    if not truncated:
        return []
    return [Problem(f"{SEEN}: truncated", f"{truncated} of the {len(seen)} documents are marked truncated, but the "
                    "model states no context window (mmbench.model.max_tokens is null) and cuts nothing")]


def _empty_run(seen: pd.DataFrame) -> list[Problem]:
    if seen.empty or "seen_tokens" not in seen.columns:
        return []
    tokens = pd.to_numeric(seen["seen_tokens"], errors="coerce").fillna(0)
    if (tokens > 0).any():
        return []
    truncated = int(seen["truncated"].fillna(False).astype(bool).sum()) if "truncated" in seen.columns else 0
    return [Problem(f"{SEEN}: seen_tokens", f"every one of the {len(seen)} documents reached the model empty "
                    f"({truncated} truncated to nothing, the rest without a modality it sees): the run measures "
                    "nothing")]


def _durations(value: Any, path: str):
    """(path, number) for each stated duration: `evaluation_time` and keys ending in `seconds` or `_seconds_sum`."""
    if isinstance(value, dict):
        for k, v in value.items():
            sub = f"{path}.{k}" if path else str(k)
            if isinstance(v, (dict, list)):
                yield from _durations(v, sub)
            elif (k == "evaluation_time" or str(k).endswith(("seconds", "_seconds_sum"))) and _is_number(v):
                yield sub, float(v)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _durations(v, f"{path}[{i}]")


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _timing(summary: dict[str, Any]) -> list[Problem]:
    return [Problem(f"{SUMMARY}: {path}", f"{got!r} seconds is more than a year: not a duration a run can have")
            for path, got in _durations({k: v for k, v in summary.items() if k != "scores"}, "")
            if math.isfinite(got) and got > MAX_SECONDS]


def _co2(summary: dict[str, Any]) -> list[Problem]:
    kg, seconds = summary.get("kg_co2_emissions"), summary.get("evaluation_time")
    if not _is_number(kg) or not math.isfinite(kg) or kg <= 0:
        return []   # None, zero; negatives and non-finite numbers are refused with the other statistics
    where = f"{SUMMARY}: kg_co2_emissions"
    if not _is_number(seconds) or not math.isfinite(seconds) or seconds <= 0:
        return [Problem(where, f"{kg!r} kg stated without a positive evaluation_time to have emitted it in")]
    ceiling = MAX_KG_CO2_PER_HOUR * seconds / 3600
    if kg > ceiling:
        return [Problem(where, f"{kg!r} kg in {seconds:g} s is more than {MAX_KG_CO2_PER_HOUR:g} kg an hour "
                        f"(at most {ceiling:.3g} kg): not an emission a run can have")]
    return []
