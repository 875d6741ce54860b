"""The five official samples, built once per test session into a home every xdist worker shares."""
from __future__ import annotations

from pathlib import Path


def official_sample(home: Path, task: str):
    """The official sample of `task` (its current version, seed 0) under `home`, built there under a file lock
    by the first test that asks; returns the loaded pool set."""
    import fcntl

    from mmbench.data.poolset import load_poolset
    from mmbench.tasks import get_task

    spec = get_task(task)
    folder = home / "poolsets" / f"{task}-v{spec.version}-sample-seed0"
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(home / f".{task}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / "manifest.json").is_file():
            spec.build("sample", folder, seed=0, progress=False)
        return load_poolset(folder)
