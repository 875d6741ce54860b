"""The protocol of a result: everything that changes what a number means beyond the pool set and the weights.

A score depends on more than the model and the data: which items were evaluated (`--limit`), the
instructions each role was given, how many pixels and frames the model was shown, where long
documents were cut, how vectors were pooled and normalised, the dtype, and whether the vectors came
from local weights, an API or a served engine. results.json keeps all of that in `mmbench.protocol`
with a short `mmbench.protocol_id` of two parts, `<evaluation>.<setup>`:

* evaluation — the item selection and the harness's truncation rule. Every run
  that is joined with another (compare, report, a leaderboard) must share it.
* setup — how this model was run (instructions, visual budgets, window, pooling, dtype, backend, tie-breaking).
  Different models naturally differ here; two runs of the same model must not.

`protocol_differences` names the fields on which two records differ; `join_problems` applies the two
rules above to a list of runs.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any, Sequence

from mmbench.data.truncation import strategy_of

ID_CHARS = 8
TRUNCATION_RULE = "middle: keep head and tail, whole images and frames, to the model's token budget"
# `mmbench run --truncation head`: another rule, hence another evaluation id (not joined with the protocol's runs)
TRUNCATION_RULES = {"middle": TRUNCATION_RULE,
                    "head": "head: keep the start, whole images and frames, to the model's token budget"}
INSTRUCTION_KEYS = ("template", "query_instruction", "document_instruction", "system_fallback", "prompts")
VISUAL_KEYS = ("vision", "video", "video_input", "max_pixels", "min_pixels", "fps", "max_frames", "image_size",
               "positions", "visual_handling")
WINDOW_KEYS = ("context", "max_seq_length", "max_length", "truncation_side", "window_fit")
POOLING_KEYS = ("pooling", "normalize", "fusion", "dimensions")


def backend_of(identity: dict[str, Any]) -> str:
    """local weights, an API, a served engine, or a lexical scorer, from the model's card."""
    settings = identity.get("settings") or {}
    family = str(identity.get("family") or "")
    if family == "lexical":
        return "lexical (no weights)"
    if settings.get("served_engine") or settings.get("engine"):
        return f"served engine: {settings.get('served_engine') or settings.get('engine')}"
    if family.startswith("api:") or settings.get("base_url"):
        return f"api: {settings.get('base_url') or family[4:]}"
    if family == "mteb":
        return "local weights via mteb"
    return "local weights"


def protocol_record(identity: dict[str, Any], selection: dict[str, Any], *, dtype: str | None = None,
                    tie_break: str | None = None, encode_threads: int | None = None) -> dict[str, Any]:
    """The protocol block of one run from the model's card identity and the run's selection.

    `selection` holds limit, n_items, n_items_total, items_hash and strata (`mmbench.data.selection.selection_record`);
    `dtype` is the loaded weights' dtype when the card does not state one. `encode_threads`: torch's intra-op thread
    count every forward pass ran with (`mmbench.running.executors.threads`), kept under `numerics`, outside the id:
    it moves the last bits of a score on some CPUs, never what a score means."""
    settings = identity.get("settings") or {}
    pick = lambda keys: {k: settings[k] for k in keys if k in settings}  # noqa: E731
    setup = {
        "instructions": pick(INSTRUCTION_KEYS) or None,
        "visual_budget": pick(VISUAL_KEYS) or None,
        "truncation": {"window_tokens": identity.get("max_tokens"), **pick(WINDOW_KEYS)},
        "pooling": {"similarity": identity.get("similarity"), **pick(POOLING_KEYS)},
        "dtype": settings.get("dtype") or dtype,
        "backend": backend_of(identity),
        "tie_break": tie_break,  # how a scorer orders equal scores: differs between embedders and LLM rankers
    }
    if "protocol" in settings:  # a model run under a named protocol (mmlongembed, mteb): only where it offers several
        setup["protocol"] = settings["protocol"]
    evaluation = {"selection": {k: selection.get(k) for k in ("limit", "n_items", "n_items_total", "items_hash")},
                  "truncation_rule": TRUNCATION_RULES[strategy_of(settings)]}
    record = {"evaluation": evaluation, "setup": setup, "strata": selection.get("strata")}
    if encode_threads is not None:
        record["numerics"] = {"encode_threads": encode_threads}
    return record


def _digest(part: Any) -> str:
    return hashlib.sha256(json.dumps(part, sort_keys=True, default=str).encode()).hexdigest()[:ID_CHARS]


def protocol_id(record: dict[str, Any]) -> str:
    """`<evaluation>.<setup>`: 8 hex characters of each part's canonical JSON."""
    return f"{_digest(record.get('evaluation'))}.{_digest(record.get('setup'))}"


def flatten(block: Any, prefix: str = "") -> dict[str, Any]:
    """Dotted field names to leaf values."""
    if isinstance(block, dict) and block:
        out: dict[str, Any] = {}
        for k, v in block.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: block}


def protocol_differences(a: dict[str, Any], b: dict[str, Any], part: str | None = None) -> list[str]:
    """'field: A vs B' for each field where two protocol records differ (within `part` when given)."""
    fa, fb = flatten(a.get(part) if part else {k: a.get(k) for k in ("evaluation", "setup")}, part or ""), \
        flatten(b.get(part) if part else {k: b.get(k) for k in ("evaluation", "setup")}, part or "")
    return [f"{k}: {json.dumps(fa.get(k), default=str)} vs {json.dumps(fb.get(k), default=str)}"
            for k in sorted(set(fa) | set(fb)) if fa.get(k) != fb.get(k)]


def join_problems(runs: Sequence[tuple[str, str, str, dict[str, Any] | None]]) -> list[str]:
    """Why the runs `(label, model name, pool set, protocol record)` may not be joined: runs on the same pool
    set must share the evaluation part, and runs of the same model the setup part. Empty when they may.

    A run written before protocols were recorded (record None) cannot be checked; see `unrecorded`."""
    problems: list[str] = []
    first: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}
    for label, model, poolset, rec in runs:
        if not rec:
            continue
        for part, key, what in (("evaluation", poolset, "evaluation protocol"), ("setup", model, f"setup of {model}")):
            if (part, key) not in first:
                first[(part, key)] = (label, rec)
                continue
            other_label, other = first[(part, key)]
            diff = protocol_differences(other, rec, part)
            if diff:
                problems.append(f"{other_label} vs {label}: {what} differs: " + "; ".join(diff))
    return problems


def unrecorded(runs: Sequence[tuple[str, str, str, dict[str, Any] | None]]) -> list[str]:
    """Labels of runs without a protocol record (written before mmbench recorded one): not checkable."""
    return [label for label, _, _, rec in runs if not rec]
