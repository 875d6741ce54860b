"""Real results folders for leaderboard tests: toy models run on a small pool set, its hash official."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from mmbench.leaderboards.official import OfficialRegistry, entry_from_poolset
from mmbench.data.poolset import load_poolset
from mmbench.results.mteb_layout import summary_json
from mmbench.results.store import write_results
from mmbench.running.runner import RunOptions, run_poolset

from toy_models import HashingModel

HOSTILE_NAME = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'


def make_results(poolset_dir: Path, out: Path, name: str = "hashing", dim: int = 64,
                 modalities: tuple[str, ...] = ("text", "image"), settings: dict | None = None) -> Path:
    """Run a HashingModel of width `dim` named `name` over the whole pool set; write a results folder.
    `settings` are added to its card (e.g. a dtype, which the protocol's setup records)."""
    ps = load_poolset(poolset_dir)
    model = HashingModel(dim=dim, modalities=modalities)
    model.card = dataclasses.replace(model.card, name=name, settings={**model.card.settings, **(settings or {})})
    per_query, seen, info = run_poolset(ps, model, RunOptions(use_cache=False, progress=False))
    summary = summary_json(ps.task, ps.task_version, ps.content_hash, model.card.identity(), per_query, info, 0.1)
    return write_results(out, per_query, seen, summary)


def official_registry(poolset_dir: Path, path: Path) -> OfficialRegistry:
    """A test-local registry in which `poolset_dir` is the official pool set of its task version."""
    reg = OfficialRegistry()
    reg.add(entry_from_poolset(load_poolset(poolset_dir)))
    reg.save(path)
    return reg


def edit_summary(folder: Path, edit) -> None:
    """Apply `edit(summary_dict)` to a results folder's results.json in place."""
    path = folder / "results.json"
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data, allow_nan=True))


def edit_per_query(folder: Path, edit, resummarise: bool = True) -> None:
    """Apply `edit(per_query) -> per_query` and, if `resummarise`, rewrite results.json consistently with it,
    so only the check under test can object. The table digest in results.json is always updated (as a
    deliberate forger would), so the file-digest check does not mask the check under test."""
    import hashlib

    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = folder / "per_query.parquet"
    frame = edit(pq.read_table(path).to_pandas())
    pq.write_table(pa.Table.from_pandas(pd.DataFrame(frame), preserve_index=False), path)
    if resummarise:
        old = json.loads((folder / "results.json").read_text())
        info = dict(old["mmbench"])
        task, version, content_hash, model = (info.pop(k) for k in ("task", "task_version", "content_hash", "model"))
        info.pop("main_metric", None)
        summary = summary_json(task, version, content_hash, model, frame, info, old["evaluation_time"])
        summary["mmbench"]["files"] = info.get("files", {})
        (folder / "results.json").write_text(json.dumps(summary, allow_nan=True))
    edit_summary(folder, lambda s: s["mmbench"].setdefault("files", {}).update(
        {"per_query.parquet": hashlib.sha256(path.read_bytes()).hexdigest()}))
