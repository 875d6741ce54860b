"""A results folder copied into mteb's results cache layout, so `mteb.ResultCache` loads it with mteb's own runs."""
from __future__ import annotations

import json
from pathlib import Path

from mmbench.data.media import atomic_write_bytes
from mmbench.results.aggregate import finite_json
from mmbench.results.mteb_layout import model_meta_dict
from mmbench.results.store import load_results


def write_mteb_cache(results_dir: Path, cache_dir: Path) -> Path:
    """Copy a results folder's aggregate into mteb's cache layout, `results/<model>/<revision>/<task>.json`
    with `model_meta.json` beside it, so `mteb.ResultCache(cache_dir).load_results()` finds it.
    Returns the task file written.

    A `--limit` run is not the full task: its dataset revision and its model revision folder get
    `-limit<N>-<selected items' hash>`, so mteb neither mistakes it for a full run nor files it with one."""
    res = load_results(Path(results_dir))
    identity = res.info.get("model") or {"name": res.model_name}
    meta = model_meta_dict(identity)
    mteb_part = {k: v for k, v in res.summary.items() if k != "mmbench"}
    suffix = limit_suffix(res.info)
    if suffix:
        meta["revision"] = f"{meta['revision']}-{suffix}"
        mteb_part["dataset_revision"] = f"{mteb_part.get('dataset_revision')}-{suffix}"
    folder = Path(cache_dir) / "results" / meta["name"].replace("/", "__").replace(" ", "_") / meta["revision"]
    target = folder / f"{res.summary['task_name']}.json"
    atomic_write_bytes(folder / "model_meta.json", (json.dumps(meta, indent=2, default=str) + "\n").encode())
    atomic_write_bytes(target, (json.dumps(finite_json(mteb_part), indent=2) + "\n").encode())
    return target


def limit_suffix(info: dict) -> str | None:
    """`limit<N>-<items hash>` for a run of a `--limit` selection, else None."""
    sel = ((info.get("protocol") or {}).get("evaluation") or {}).get("selection") or info.get("selection") or {}
    limit = sel.get("limit", info.get("limit"))
    if limit is None:
        return None
    return f"limit{limit}-{str(sel.get('items_hash') or 'unknown')[:12]}"
