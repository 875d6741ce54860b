"""Every encode runs at one intra-op thread count, whatever the caller's (issue 45 #1). A model whose float32 sums
follow torch's thread count (as MKL's do on an Intel Xeon) stands in for the other machine; the Ray side is in
tests/test_ray_encode.py."""
from __future__ import annotations

import json

import pytest
import torch

import toy_models
from mmbench.data.poolset import load_poolset
from mmbench.running.executors.threads import ENCODE_THREADS, encode_threads
from mmbench.running.runner import RunOptions, run_poolset


@pytest.fixture
def restore_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def _local(ps, threads):
    torch.set_num_threads(threads)
    scores, seen, info = run_poolset(ps, toy_models.ThreadSensitiveModel(), RunOptions(batch_tokens=512,
                                                                                       use_cache=False, progress=False))
    assert torch.get_num_threads() == threads   # given back after every batch
    return scores.to_parquet(), info


def test_the_model_really_follows_the_thread_count(vg_tiny, restore_threads):
    """Without the pin the stand-in gives other bits at another thread count (what the tests below guard)."""
    docs = load_poolset(vg_tiny).candidates[:30]
    model = toy_models.ThreadSensitiveModel()
    torch.set_num_threads(1)
    one = model.encode(docs, "document", None)
    torch.set_num_threads(4)
    assert not (model.encode(docs, "document", None) == one).all()


@pytest.mark.parametrize("threads", [1, 2, 4])
def test_local_runs_are_byte_identical_at_any_caller_thread_count(vg_tiny, restore_threads, threads):
    ps = load_poolset(vg_tiny)
    reference, _ = _local(ps, ENCODE_THREADS)
    table, info = _local(ps, threads)
    assert table == reference and info["encode"]["intra_op_threads"] == ENCODE_THREADS


def test_the_thread_count_is_recorded_in_the_protocol(vg_tiny, tmp_path):
    from mmbench.cli import main

    assert main(["run", "--task", "visual_grounding", "--data", str(vg_tiny), "--no-cache", "--quiet", "--model",
                 "toy_models:HashingModel", "--limit", "10", "--output", str(tmp_path / "run")]) == 0
    info = json.loads((tmp_path / "run" / "results.json").read_text())["mmbench"]
    assert info["protocol"]["numerics"] == {"encode_threads": ENCODE_THREADS}


def test_the_pin_is_restored_after_an_error(restore_threads):
    torch.set_num_threads(1)
    with pytest.raises(RuntimeError), encode_threads(3):
        assert torch.get_num_threads() == 3
        raise RuntimeError("a failing batch")
    assert torch.get_num_threads() == 1
