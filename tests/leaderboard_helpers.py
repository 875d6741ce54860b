"""Real results folders for leaderboard tests: toy models run on a small pool set, its hash official."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from mmbench.leaderboards.official import OfficialRegistry, entry_from_poolset
from mmbench.poolset import load_poolset
from mmbench.results import summary_json, write_results
from mmbench.runner import RunOptions, run_poolset

from toy_models import HashingModel

HOSTILE_NAME = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'


def make_results(poolset_dir: Path, out: Path, name: str = "hashing", dim: int = 64) -> Path:
    """Run a HashingModel of width `dim` named `name` over the whole pool set; write a results folder."""
    ps = load_poolset(poolset_dir)
    model = HashingModel(dim=dim)
    model.card = dataclasses.replace(model.card, name=name)
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
