"""One "is this flock free?" probe (mmbench.common.flocks) for build folders and board staging folders, and one
entry-point reader for the model and task registries."""
import os
import sys
import time

import pytest

from mmbench.common import flocks, plugins, scratch
from mmbench.leaderboards import store

pytestmark = pytest.mark.skipif(not flocks.SUPPORTED, reason="needs flock (POSIX)")


def test_is_free_sees_a_lock_held_through_another_descriptor(tmp_path):
    lock = tmp_path / "lockfile"
    lock.write_text("")
    assert flocks.is_free(lock)
    fd = os.open(lock, os.O_RDWR)
    try:
        flocks.hold(fd, wait=False)
        assert not flocks.is_free(lock)  # flock is per open file: another open sees it held
        with pytest.raises(OSError):
            other = os.open(lock, os.O_RDONLY)
            try:
                flocks.hold(other, wait=False)
            finally:
                os.close(other)
    finally:
        os.close(fd)
    assert flocks.is_free(lock)  # closing the descriptor released it
    folder = tmp_path / "folder"
    folder.mkdir()
    fd = os.open(folder, os.O_RDONLY)
    try:
        flocks.hold(fd, wait=True)
        assert not flocks.is_free(folder)
    finally:
        os.close(fd)
    assert flocks.is_free(folder) and not flocks.is_free(tmp_path / "missing")


def test_build_and_staging_folders_ask_the_same_probe(tmp_path, monkeypatch):
    asked = []
    monkeypatch.setattr(flocks, "is_free", lambda path: asked.append(path) or True)
    build = tmp_path / ".out.scratch.abc"
    build.mkdir()
    (build / scratch.LOCK_NAME).write_text("1\n")
    assert scratch._abandoned(build, time.time())
    staging = tmp_path / ".staging-xyz"
    staging.mkdir()
    old = time.time() - 3600
    os.utime(staging, (old, old))
    assert store._Staging.is_dead(staging)
    assert asked == [build / scratch.LOCK_NAME, staging]  # each keeps its own target: a file, the folder
    # and each keeps its own grace rule: a staging folder younger than the grace is never probed
    young = tmp_path / ".staging-young"
    young.mkdir()
    assert not store._Staging.is_dead(young) and len(asked) == 2


def test_a_live_build_lock_keeps_its_folder(tmp_path):
    out = tmp_path / "pool"
    with scratch.locked_workdir(out, "scratch") as work:
        assert not scratch._abandoned(work, time.time())
        assert scratch.clean_stale(out) == []
    assert scratch._abandoned(work, time.time())


def test_both_registries_read_their_entry_points_through_one_helper(monkeypatch):
    from mmbench import tasks
    from mmbench.models import registry

    groups = []
    real = plugins.new_entry_points

    def spy(owner, group):
        groups.append((owner.__name__, group))
        return real(owner, group)

    monkeypatch.setattr(plugins, "new_entry_points", spy)
    monkeypatch.setattr(registry, "_entry_points_loaded", False)
    monkeypatch.setattr(tasks, "_entry_points_loaded", False)
    registry.model_specs()
    tasks.task_specs()
    assert groups == [("mmbench.models.registry", "mmbench.models"), ("mmbench.tasks", "mmbench.tasks")]
    assert registry._entry_points_loaded and tasks._entry_points_loaded
    assert real(sys.modules["mmbench.tasks"], "mmbench.tasks") == []  # read once: the second ask gets nothing
