"""RayExecutor's scheduling against a simulated Ray (no processes): which batches count as attempted
when an actor dies. An actor runs its batches in order, so when it dies only the batch at the head of
its line was being encoded; the ones queued behind it never started and are not attempts."""
from __future__ import annotations

import sys
import types

import numpy as np

from mmbench.data.documents import Document, Text
from mmbench.running.executors.local import BatchResult
from mmbench.running.executors.ray_actors import RayExecutor


class FakeActorError(Exception):
    pass


class FakeRay:
    """Actors run their submitted batches in order; an actor handed a poison batch dies on it, and every
    batch in its line fails with an actor error. `wait` returns the first ready ref of the list given."""

    def __init__(self, poison: set[int]):
        self.poison, self.lines, self.dead, self.started = poison, {}, set(), []

    def actor(self, a):
        ray = self

        class Method:
            def remote(self, index, views, role, media):
                ref = (a, index, len(ray.started) + sum(len(v) for v in ray.lines.values()), object())
                ray.lines.setdefault(a, []).append(ref)
                return ref

        return types.SimpleNamespace(encode=Method())

    def _ready(self, ref):
        a = ref[0]
        line = self.lines[a]
        if a in self.dead:
            return True
        if line and line[0] is ref:
            if ref[1] in self.poison:
                self.dead.add(a)
            self.started.append((a, ref[1]))
            return True
        return False

    def wait(self, refs, num_returns=1, timeout=None):
        for ref in refs:
            if self._ready(ref):
                return [ref], [r for r in refs if r is not ref]
        return [], refs

    def get(self, ref):
        a = ref[0]
        self.lines[a].remove(ref)
        if a in self.dead:
            raise FakeActorError(f"actor {a} died")
        return BatchResult(ref[1], [(np.ones(2, dtype=np.float32), None)], 1)

    def kill(self, actor):
        pass


def test_batches_queued_behind_a_dying_batch_are_not_counted_as_attempts(monkeypatch):
    fake = FakeRay(poison={0})
    mod = types.ModuleType("ray")
    mod.wait, mod.get, mod.kill = fake.wait, fake.get, fake.kill
    exc = types.ModuleType("ray.exceptions")
    exc.RayActorError = FakeActorError
    exc.RayTaskError = type("FakeTaskError", (Exception,), {"cause": None})  # a worker's own error (none raised here)
    monkeypatch.setitem(sys.modules, "ray", mod)
    monkeypatch.setitem(sys.modules, "ray.exceptions", exc)

    ex = RayExecutor(lambda: None, workers=4, inflight=3, max_attempts=3)
    ex._actors = [fake.actor(a) for a in range(4)]
    batches = [[Document(f"d{b}", [Text(f"t{b}")])] for b in range(8)]
    model = types.SimpleNamespace(card=types.SimpleNamespace(identity=lambda: {}))
    results = {r.index: r for r in ex.encode(model, batches, "document", None, progress=False)}

    assert results[0].failures and "tried on 3 workers" in results[0].failures["d0"]  # the poison batch
    # batch 1 sat behind batch 0 on each actor that died (never started there); the fourth actor encodes it,
    # as every other batch: it was reported failed "tried on 3 workers" with a worker alive and idle
    assert sorted(results) == list(range(8))
    for b in range(1, 8):
        assert not results[b].failures and results[b].rows[0][0] is not None, (b, results[b].failures)
    assert ex.lost_workers == 3
    assert [b for _, b in fake.started].count(1) == 1  # batch 1 was started once, by the survivor
