"""results.json in mteb's `TaskResult` layout, read back by mmbench and by mteb alike.

mteb averages the `main_score` of every entry under every split (`TaskResult.get_score`), so the
mteb-visible part holds exactly one entry: split "test", hf_subset "default", the metrics over all
scored items, and `main_score` set to the task's main metric. That is also the split and subset the
exported mteb task (`mmbench.interop.mteb_task.export_mteb_task`) reports, so both paths line up.

The facets (macro over subsets, each subset, each length bin, depth, ...) overlap, so averaging them
would be meaningless; they live in the `mmbench` block (`mmbench.groups`), which mteb ignores.
mteb drops unknown top-level keys when it rewrites a file (`from_disk` -> `to_disk`), so the block is
also kept beside results.json as `mmbench.json`, from which `load_results` restores it.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from mmbench.evaluators.metrics import MAIN_METRIC
from mmbench.results.aggregate import aggregate
from mmbench.results.protocol import protocol_id, protocol_record

MTEB_SPLIT = "test"
MTEB_SUBSET = "default"
LANGUAGES = ["eng-Latn"]
SIDECAR = "mmbench.json"


def summary_json(task: str, task_version: str, content_hash: str, model_identity: dict[str, Any],
                 per_query: pd.DataFrame, run_info: dict[str, Any], evaluation_time: float,
                 main_metric: str = MAIN_METRIC) -> dict[str, Any]:
    """The aggregate JSON: one mteb entry (all items), the facets in the `mmbench` block."""
    groups = []
    for row in aggregate(per_query):
        groups.append({"hf_subset": row.group, "languages": LANGUAGES,
                       "main_score": row.metrics.get(main_metric, float("nan")), "n_items": row.n, **row.metrics})
    overall = groups[0]  # aggregate() puts the micro average over all items first
    main = {**overall, "hf_subset": MTEB_SUBSET}
    protocol: dict[str, Any] = {}
    if isinstance(run_info.get("selection"), dict):
        record = protocol_record(model_identity, run_info["selection"],
                                 dtype=(run_info.get("provenance") or {}).get("dtype"), tie_break=run_info.get("tie_break"),
                                 encode_threads=(run_info.get("encode") or {}).get("intra_op_threads"))
        protocol = {"protocol_id": protocol_id(record), "protocol": record}
    return {
        "dataset_revision": content_hash,
        "task_name": task,
        "mteb_version": mteb_version(),
        "scores": {MTEB_SPLIT: [main]},
        "evaluation_time": evaluation_time,
        "kg_co2_emissions": None,
        "mmbench": {"task": task, "task_version": task_version, "content_hash": content_hash,
                    "model": model_identity, "main_metric": main_metric, **protocol, **run_info, "groups": groups},
    }


def mteb_version() -> str:
    """The installed mteb's version, read from its metadata folder's name (importing mteb takes seconds)."""
    from mmbench.common.distributions import distribution_versions

    return distribution_versions(("mteb",))["mteb"] or "2.0.0"


def group_entries(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Aggregate entries by group name ("all", "macro_over_subsets", "subset=...", "length_bin=...").

    Results written before the facets moved to `mmbench.groups` kept them under `scores.test`.
    """
    groups = (summary.get("mmbench") or {}).get("groups")
    if not isinstance(groups, list):
        groups = (summary.get("scores") or {}).get(MTEB_SPLIT) or []
    return {e["hf_subset"]: e for e in groups if isinstance(e, dict) and isinstance(e.get("hf_subset"), str)}


def group_list(summary: dict[str, Any]) -> list[Any]:
    """The facet entries as written (a list, possibly malformed: the leaderboard checks each one)."""
    groups = (summary.get("mmbench") or {}).get("groups")
    return groups if isinstance(groups, list) else list((summary.get("scores") or {}).get(MTEB_SPLIT) or [])


# --- the mmbench block beside results.json, for files mteb rewrote ---------------------------

def sidecar_bytes(summary: dict[str, Any]) -> bytes:
    return (json.dumps({"mmbench": summary.get("mmbench", {})}, indent=2) + "\n").encode()


def restore_block(root: Path, summary: dict[str, Any]) -> dict[str, Any]:
    """`summary` with its `mmbench` block, taken from `mmbench.json` when mteb's rewrite dropped it."""
    if "mmbench" in summary:
        return summary
    side = Path(root) / SIDECAR
    if not side.is_file():
        return summary
    try:
        block = json.loads(side.read_text()).get("mmbench")
    except (ValueError, AttributeError):
        return summary
    if not isinstance(block, dict) or block.get("task") != summary.get("task_name"):
        return summary
    return {**summary, "mmbench": block}


# --- mteb's results cache --------------------------------------------------------------------

def cache_revision(model_identity: dict[str, Any]) -> str:
    """The revision folder: the model's own revision when it states one, else a hash of its identity
    (so two settings of one model never share a folder)."""
    from mmbench.data.embedding_cache import model_key

    rev = str(model_identity.get("revision") or "unknown")
    return rev if rev not in ("unknown", "") else f"mmbench-{model_key(model_identity)[:12]}"


def mteb_model_name(name: str) -> str:
    """mteb wants 'organization/model': a hub id stays, a registry name becomes 'mmbench/<name>'."""
    parts = str(name).split("/")
    if len(parts) == 2 and all(parts):
        return str(name)
    return "mmbench/" + "__".join(p for p in parts if p)


def model_meta_dict(model_identity: dict[str, Any]) -> dict[str, Any]:
    """mteb's `ModelMeta` of an mmbench model, as `model_meta.json` holds it."""
    from mteb.models.model_meta import ModelMeta, ScoringFunction

    modalities = [m for m in model_identity.get("modalities", ["text"]) if m in ("text", "image", "video", "audio")]
    meta = ModelMeta(
        loader=None, name=mteb_model_name(model_identity["name"]), revision=cache_revision(model_identity), release_date=None,
        languages=None, n_parameters=None, memory_usage_mb=None, max_tokens=model_identity.get("max_tokens"),
        embed_dim=model_identity.get("dim"), license=None, open_weights=None, public_training_code=None,
        public_training_data=None, framework=[], similarity_fn_name=ScoringFunction(model_identity.get("similarity") or "cosine"),
        use_instructions=None, training_datasets=None, modalities=modalities or ["text"])
    return meta.to_dict()
