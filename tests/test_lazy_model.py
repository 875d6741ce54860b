"""Warm runs: with every vector cached the model is never loaded; a stale remembered card is caught."""
import json

import pandas as pd

from mmbench.running.lazy_model import LazyModel, load_model_lazily
from mmbench.data.poolset import load_poolset
from mmbench.running.runner import RunOptions, run_poolset
from toy_models import HashingModel


def test_warm_run_does_not_load_the_model(vg_tiny, tmp_path):
    loads = []

    def loader(name, options):
        loads.append(name)
        return HashingModel(**options)

    ps = load_poolset(vg_tiny)
    options = RunOptions(cache_dir=tmp_path / "cache", progress=False)
    first = load_model_lazily("hashing", {"dim": 32}, tmp_path, loader)
    assert not isinstance(first, LazyModel) and loads == ["hashing"]  # nothing remembered yet: a real load
    cold, _, _ = run_poolset(ps, first, options)
    second = load_model_lazily("hashing", {"dim": 32}, tmp_path, loader)
    assert isinstance(second, LazyModel)
    warm, _, info = run_poolset(ps, second, options)
    assert loads == ["hashing"] and info["model_loaded"] is False and info["encode"]["encoded"] == 0
    pd.testing.assert_frame_equal(warm, cold)
    # other options are another memo (and another model): loaded
    assert not isinstance(load_model_lazily("hashing", {"dim": 16}, tmp_path, loader), LazyModel)
    # a cache miss (here: no cache) loads the real model on demand and gives the same results
    third = load_model_lazily("hashing", {"dim": 32}, tmp_path, loader)
    again, _, info = run_poolset(ps, third, RunOptions(use_cache=False, progress=False))
    assert info["model_loaded"] is True and len(loads) == 3
    pd.testing.assert_frame_equal(again, cold)


def test_a_stale_remembered_card_is_replaced_and_the_run_redone(vg_tiny, tmp_path):
    ps = load_poolset(vg_tiny)
    load_model_lazily("hashing", {}, tmp_path, lambda n, o: HashingModel(dim=32))
    memo = next((tmp_path / "model_cards").glob("*.json"))
    record = json.loads(memo.read_text())
    memo.write_text(json.dumps({**record, "dim": 48, "settings": {"dim": 48}}))  # as if the weights had changed
    lazy = load_model_lazily("hashing", {}, tmp_path, lambda n, o: HashingModel(dim=32))
    assert lazy.card.dim == 48
    fresh, _, _ = run_poolset(ps, HashingModel(dim=32), RunOptions(use_cache=False, progress=False))
    out, _, info = run_poolset(ps, lazy, RunOptions(cache_dir=tmp_path / "cache", progress=False))
    pd.testing.assert_frame_equal(out, fresh)
    assert lazy.card.dim == 32 and json.loads(memo.read_text())["dim"] == 32


def test_model_name_given_on_the_command_line_survives_a_load(vg_tiny, tmp_path, caplog):
    """`--model-name` on a remembered model: the weights load for a missing vector; the results keep
    the given name, the load is not taken for a changed model, and the memo keeps the model's own card."""
    import logging

    from mmbench.data.embedding_cache import EmbeddingCache, model_key
    from mmbench.cli.commands_run import rename_model
    from mmbench.running.evaluation import evaluate_to_folder
    from mmbench.results.store import load_results

    loads = []

    def loader(name, options):
        loads.append(name)
        return HashingModel(dim=32)

    ps = load_poolset(vg_tiny)
    load_model_lazily("hashing", {}, tmp_path, loader)  # remembered under its own name
    memo = next((tmp_path / "model_cards").glob("*.json"))
    lazy = load_model_lazily("hashing", {}, tmp_path, loader)
    assert isinstance(lazy, LazyModel)
    rename_model(lazy, "my-hashing")
    options = RunOptions(cache_dir=tmp_path / "cache", progress=False)  # an empty cache: the weights must load
    with caplog.at_level(logging.WARNING):
        summary = evaluate_to_folder("visual_grounding", ps, lazy, options, tmp_path / "out", "hashing")
    assert lazy.loaded and loads == ["hashing", "hashing"]
    assert "stale" not in caplog.text  # a rename is not a changed model: no second pass
    assert summary["mmbench"]["model"]["name"] == "my-hashing"
    assert load_results(tmp_path / "out").model_name == "my-hashing"
    assert lazy.card.name == "my-hashing" and lazy.real.card.name == "my-hashing"
    assert json.loads(memo.read_text())["name"] == "hashing"  # what was remembered is the model's own card
    # the vectors were stored under the identity the run reports, so a warm re-run finds them all
    cache = EmbeddingCache(tmp_path / "cache", model_key(lazy.card.identity()))
    assert all(cache.get("document", d.content_hash()) is not None for d in ps.candidates)
    again = load_model_lazily("hashing", {}, tmp_path, loader)
    rename_model(again, "my-hashing")
    _, _, info = run_poolset(ps, again, options)
    assert info["model_loaded"] is False and len(loads) == 2


def test_provenance_of_a_warm_run_does_not_load_the_model(vg_tiny, tmp_path):
    """results.json's provenance names the weights' device and dtype; a warm run takes them from the memo
    (asking the stand-in for `device` used to load the whole model just to write that field)."""
    from mmbench.running.evaluation import evaluate_in_memory

    class OnDevice(HashingModel):
        device = "cpu:7"

    loads = []

    def loader(name, options):
        loads.append(name)
        return OnDevice()

    ps = load_poolset(vg_tiny)
    options = RunOptions(cache_dir=tmp_path / "cache", progress=False)
    cold = evaluate_in_memory("visual_grounding", ps, load_model_lazily("dev", {}, tmp_path, loader), options, "dev")
    lazy = load_model_lazily("dev", {}, tmp_path, loader)
    warm = evaluate_in_memory("visual_grounding", ps, lazy, options, "dev")
    assert isinstance(lazy, LazyModel) and not lazy.loaded and loads == ["dev"]
    assert warm.summary["mmbench"]["provenance"]["device"] == "cpu:7" == cold.summary["mmbench"]["provenance"]["device"]
    pd.testing.assert_frame_equal(warm.per_query, cold.per_query)


class _CountingExecutor:
    """An executor other than local (as Ray is): encodes in this process but counts the batches it was given."""

    name, workers, lost_workers, requeued_batches = "counting", 3, 0, 0

    def __init__(self):
        from mmbench.running.executors import LocalExecutor

        self.batches, self._local = 0, LocalExecutor()

    def encode(self, model, batches, role, media, progress=True):
        self.batches += len(batches)
        return self._local.encode(model, batches, role, media, progress=False)

    def close(self):
        pass


def test_a_remembered_model_is_encoded_by_the_executor_asked_for(vg_tiny, tmp_path):
    """Issue 26 #1: the remembered-model wrapper used to count as corpus-fitted, so every run after the
    first encoded in the driver and recorded executor 'local' although another executor was asked for."""
    ps = load_poolset(vg_tiny)
    load_model_lazily("hashing", {"dim": 32}, tmp_path, lambda n, o: HashingModel(**o))  # remembers the card
    lazy = load_model_lazily("hashing", {"dim": 32}, tmp_path, lambda n, o: HashingModel(**o))
    assert isinstance(lazy, LazyModel)
    executor = _CountingExecutor()
    _, _, info = run_poolset(ps, lazy, RunOptions(use_cache=False, progress=False, executor=executor))
    assert executor.batches > 0
    assert info["encode"]["executor"] == "counting" and info["encode"]["workers"] == 3


def test_a_corpus_fitted_model_with_another_executor_stops_with_one_line(vg_tiny):
    import pytest

    from mmbench.common.errors import CLIError
    from mmbench.models.bm25 import BM25Model

    with pytest.raises(CLIError, match="BM25|fitted") as exc:
        run_poolset(load_poolset(vg_tiny), BM25Model(), RunOptions(use_cache=False, progress=False,
                                                                    executor=_CountingExecutor()))
    assert "\n" not in str(exc.value) and "--executor local" in str(exc.value)
