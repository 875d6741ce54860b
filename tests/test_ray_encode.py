"""One evaluation sharded over two local Ray actors gives byte-identical results to a local run,
also when a worker dies mid-run (its batch is re-queued and the other worker finishes the job)."""
import pandas as pd
import pytest

from mmbench.cli import main

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def _run(vg, out, *extra):
    return main(["run", "--task", "visual_grounding", "--model", "minilm", "--data", str(vg), "--output", str(out),
                 "--no-cache", "--quiet", "--batch-tokens", "2048", *extra])


def test_two_ray_workers_give_byte_identical_results(vg_tiny, tmp_path, local_ray):
    assert _run(vg_tiny, tmp_path / "local") == 0
    assert _run(vg_tiny, tmp_path / "ray", "--executor", "ray", "--workers", "2") == 0
    assert (tmp_path / "ray" / "per_query.parquet").read_bytes() == (tmp_path / "local" / "per_query.parquet").read_bytes()
    assert (tmp_path / "ray" / "seen.parquet").read_bytes() == (tmp_path / "local" / "seen.parquet").read_bytes()


def test_a_worker_killed_mid_run_loses_only_its_batch(vg_tiny, tmp_path, local_ray):
    import toy_models
    from ray import cloudpickle

    from mmbench.data.embedding_cache import EmbeddingCache, model_key
    from mmbench.running.executors.ray_actors import RayExecutor
    from mmbench.data.poolset import load_poolset
    from mmbench.running.runner import RunOptions, run_poolset

    cloudpickle.register_pickle_by_value(toy_models)  # the actors cannot import tests/ by name
    ps = load_poolset(vg_tiny)
    model = toy_models.HashingModel()
    local, _, _ = run_poolset(ps, model, RunOptions(batch_tokens=512, use_cache=False, progress=False))
    with RayExecutor(toy_models.HashingModel, 2, exit_after={0: 1}) as executor:  # worker 0 exits on its 2nd batch
        options = RunOptions(batch_tokens=512, cache_dir=tmp_path / "cache", progress=False, executor=executor)
        sharded, _, info = run_poolset(ps, model, options)
        assert executor.lost_workers == 1 and executor.requeued_batches >= 1
    assert info["encode"]["lost_workers"] == 1 and info["n_failed_items"] == 0
    assert info["encode"]["batches"] > 3  # enough batches that both workers took part
    pd.testing.assert_frame_equal(sharded, local)
    # every document the run needed is in the shared cache, whichever worker encoded it
    cache = EmbeddingCache(tmp_path / "cache", model_key(model.card.identity()))
    assert all(cache.get("document", d.content_hash()) is not None for d in ps.candidates)


def test_sweep_shards_each_job_over_workers(vg_tiny, tmp_path, local_ray):
    import json

    assert _run(vg_tiny, tmp_path / "local", "--limit", "20") == 0
    assert main(["sweep", "--task", "visual_grounding", "--model", "minilm", "--data", f"visual_grounding={vg_tiny}",
                 "--out-root", str(tmp_path / "sweep"), "--limit", "20", "--no-cache", "--quiet", "--batch-tokens",
                 "2048", "--executor", "ray", "--workers-per-job", "2", "--cpus-per-job", "0.5",
                 "--cpus-per-worker", "0.5"]) == 0
    job = tmp_path / "sweep" / "visual_grounding" / "minilm"
    assert (job / "per_query.parquet").read_bytes() == (tmp_path / "local" / "per_query.parquet").read_bytes()
    info = json.loads((job / "results.json").read_text())["mmbench"]["encode"]
    assert info["executor"] == "ray" and info["workers"] == 2


def _sharded_run(vg, tmp_path, **executor_kw):
    """A run of HashingModel over two Ray actors (test hooks in `executor_kw`); returns (per_query, info)."""
    import toy_models
    from ray import cloudpickle

    from mmbench.running.executors.ray_actors import RayExecutor
    from mmbench.data.poolset import load_poolset
    from mmbench.running.runner import RunOptions, run_poolset

    cloudpickle.register_pickle_by_value(toy_models)
    ps = load_poolset(vg)
    factory = executor_kw.pop("factory", toy_models.HashingModel)
    with RayExecutor(factory, 2, **executor_kw) as executor:
        options = RunOptions(batch_tokens=512, cache_dir=tmp_path / "cache", progress=False, executor=executor)
        scores, _, info = run_poolset(ps, toy_models.HashingModel(), options)
        return scores, info, executor


def _cached(ps, tmp_path):
    import toy_models

    from mmbench.data.embedding_cache import EmbeddingCache, model_key

    cache = EmbeddingCache(tmp_path / "cache", model_key(toy_models.HashingModel().card.identity()))
    queries = sum(cache.get("query", q.content_hash()) is not None for q in ps.queries)
    documents = sum(cache.get("document", d.content_hash()) is not None for d in ps.candidates)
    return queries + documents


def test_a_stuck_worker_times_out_and_its_batches_go_to_the_other(vg_tiny, tmp_path, local_ray):
    import toy_models

    from mmbench.data.poolset import load_poolset
    from mmbench.running.runner import RunOptions, run_poolset

    local, _, _ = run_poolset(load_poolset(vg_tiny), toy_models.HashingModel(),
                              RunOptions(batch_tokens=512, use_cache=False, progress=False))
    # worker 0 answers one batch, then sleeps for an hour on its second: the driver must not wait for it
    scores, info, executor = _sharded_run(vg_tiny, tmp_path, timeout=3, start_timeout=300, hang_after={0: 1})
    assert executor.timed_out_workers == 1 and executor.lost_workers == 1 and executor.requeued_batches >= 1
    assert info["n_failed_items"] == 0
    pd.testing.assert_frame_equal(scores, local)


def test_when_every_worker_is_gone_the_run_stops_with_one_line_and_keeps_the_cache(vg_tiny, tmp_path, local_ray):
    from mmbench.data.poolset import load_poolset

    ps = load_poolset(vg_tiny)
    with pytest.raises(RuntimeError) as caught:  # each worker returns one batch, then its process exits
        _sharded_run(vg_tiny, tmp_path, exit_after={0: 1, 1: 1})
    message = str(caught.value)
    assert "\n" not in message and message.startswith("all 2 Ray workers are gone (last: worker ")
    assert "batches not encoded" in message and "run again to resume" in message
    kept = _cached(ps, tmp_path)
    assert 0 < kept < len(ps.queries) + len(ps.candidates)  # the two returned batches, not more


def test_a_worker_that_cannot_load_the_model_is_an_error_not_a_hang(vg_tiny, tmp_path, local_ray):
    import toy_models

    with pytest.raises(RuntimeError, match=r"all 2 Ray workers are gone \(last: worker \d failed to load the model: "
                                           r"OSError: weights missing: /nowhere/model.safetensors\)"):
        _sharded_run(vg_tiny, tmp_path, factory=toy_models.UnloadableModel)


def test_actors_whose_reservation_never_fits_time_out(vg_tiny, tmp_path, local_ray):
    # 3 CPUs per actor on a 2-CPU Ray: Ray never schedules them; without a timeout the run waits forever
    with pytest.raises(RuntimeError, match=r"all 2 Ray workers are gone \(last: worker 1 did not start within 2 s\)"):
        _sharded_run(vg_tiny, tmp_path, timeout=2, cpus=3)


def test_worker_timeout_must_be_positive(tmp_path, capsys):
    with pytest.raises(SystemExit) as caught:
        main(["run", "--task", "visual_grounding", "--model", "minilm", "--executor", "ray",
              "--worker-timeout", "0", "--output", str(tmp_path)])
    assert caught.value.code == 2 and "--worker-timeout: expected a positive integer" in capsys.readouterr().err


def test_a_renamed_driver_model_still_matches_its_workers(vg_tiny, tmp_path, local_ray):
    """`--model-name` renames the driver's card only; the workers load the same weights under the model's
    own name, which is the same model (another dim would not be)."""
    import dataclasses

    import toy_models
    from ray import cloudpickle

    from mmbench.running.executors.ray_actors import RayExecutor
    from mmbench.data.poolset import load_poolset
    from mmbench.running.runner import RunOptions, run_poolset

    cloudpickle.register_pickle_by_value(toy_models)
    ps = load_poolset(vg_tiny)
    model = toy_models.HashingModel()
    local, _, _ = run_poolset(ps, model, RunOptions(batch_tokens=512, use_cache=False, progress=False))
    model.card = dataclasses.replace(model.card, name="my-hashing")
    with RayExecutor(toy_models.HashingModel, 2) as executor:
        options = RunOptions(batch_tokens=512, use_cache=False, progress=False, executor=executor)
        sharded, _, _ = run_poolset(ps, model, options)
    pd.testing.assert_frame_equal(sharded, local)
    other = toy_models.HashingModel(dim=32)
    with RayExecutor(toy_models.HashingModel, 2) as executor, pytest.raises(RuntimeError, match="different model"):
        run_poolset(ps, other, RunOptions(batch_tokens=512, use_cache=False, progress=False, executor=executor))


def test_cli_exits_1_with_one_line_when_every_worker_is_gone(vg_tiny, tmp_path, local_ray, monkeypatch, capsys):
    """Through `mmbench run`: the same exit code as other run failures, one line on stderr, and the batches
    the workers returned are in the cache for the next run."""
    import mmbench.running.executors as executors

    real = executors.make_executor

    def dying(*args, **kwargs):  # the run's own executor, with each worker exiting after one batch
        executor = real(*args, **kwargs)
        executor._exit_after.update({0: 1, 1: 1})
        return executor

    monkeypatch.setattr(executors, "make_executor", dying)
    cache = tmp_path / "cache"
    code = main(["run", "--task", "visual_grounding", "--model", "minilm", "--data", str(vg_tiny), "--output",
                 str(tmp_path / "out"), "--cache-dir", str(cache), "--quiet", "--batch-tokens", "512",
                 "--executor", "ray", "--workers", "2"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and err[-1].startswith("mmbench: error: all 2 Ray workers are gone (last: worker ")
    assert any(cache.rglob("*.npz"))  # what finished was stored


def test_a_model_run_before_is_still_sharded_over_ray(vg_tiny, tmp_path, monkeypatch, local_ray):
    """Issue 26 #1: after a first run under one MMBENCH_HOME the model's card is remembered; every later
    `--executor ray` run then encoded in the driver and recorded executor 'local'."""
    import json

    monkeypatch.setenv("MMBENCH_HOME", str(tmp_path / "home"))
    base = ["run", "--task", "visual_grounding", "--model", "minilm", "--data", str(vg_tiny), "--quiet",
            "--batch-tokens", "2048", "--limit", "20"]
    assert main([*base, "--output", str(tmp_path / "first")]) == 0
    assert list((tmp_path / "home" / "model_cards").glob("*.json"))  # the card is remembered
    assert main([*base, "--output", str(tmp_path / "ray"), "--cache-dir", str(tmp_path / "other-cache"),
                 "--executor", "ray", "--workers", "2"]) == 0
    info = json.loads((tmp_path / "ray" / "results.json").read_text())["mmbench"]["encode"]
    assert info["executor"] == "ray" and info["workers"] == 2 and info["encoded"] > 0
    assert (tmp_path / "ray" / "per_query.parquet").read_bytes() == (tmp_path / "first" / "per_query.parquet").read_bytes()


def test_garbage_from_a_worker_stops_the_run_like_a_local_one(vg_tiny, tmp_path, local_ray):
    """Issue 35 #2 over Ray: a worker's bad batch reaches the driver as the same one-line BadModelOutput."""
    import functools

    import toy_models
    from ray import cloudpickle

    from mmbench.data.poolset import load_poolset
    from mmbench.models.output_check import BadModelOutput
    from mmbench.running.executors.ray_actors import RayExecutor
    from mmbench.running.runner import RunOptions, run_poolset

    cloudpickle.register_pickle_by_value(toy_models)
    with RayExecutor(functools.partial(toy_models.GarbageModel, kind="nan"), 2) as executor:
        options = RunOptions(batch_tokens=512, use_cache=False, progress=False, executor=executor)
        with pytest.raises(BadModelOutput) as exc:
            run_poolset(load_poolset(vg_tiny), toy_models.GarbageModel(kind="nan"), options)
    message = str(exc.value)
    assert "'garbage-local'" in message and "NaN" in message and "\n" not in message and "Traceback" not in message


@pytest.mark.parametrize("local_threads,worker_threads", [(1, 4), (2, 1), (4, 2)])
def test_one_result_whatever_the_thread_count(vg_tiny, tmp_path, local_ray, local_threads, worker_threads):
    """Issue 45 #1: the driver limited to `local_threads` and the Ray actors to `worker_threads` (another machine's
    default, Ray's OMP_NUM_THREADS) give the same per_query bytes, because every encode runs at ENCODE_THREADS. A
    model whose float32 sums follow the thread count stands in for MKL on an Intel Xeon: before the fix the local
    and Ray tables differed in the scores' last digits."""
    import functools

    import torch
    import toy_models
    from ray import cloudpickle

    from mmbench.data.poolset import load_poolset
    from mmbench.running.executors.ray_actors import RayExecutor
    from mmbench.running.executors.threads import ENCODE_THREADS
    from mmbench.running.runner import RunOptions, run_poolset

    cloudpickle.register_pickle_by_value(toy_models)
    ps = load_poolset(vg_tiny)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(local_threads)
        local, _, _ = run_poolset(ps, toy_models.ThreadSensitiveModel(), RunOptions(batch_tokens=512, use_cache=False,
                                                                                    progress=False))
        assert torch.get_num_threads() == local_threads   # the caller's count is given back
        with RayExecutor(functools.partial(toy_models.ThreadSensitiveModel, threads=worker_threads), 2) as executor:
            options = RunOptions(batch_tokens=512, use_cache=False, progress=False, executor=executor)
            sharded, _, info = run_poolset(ps, toy_models.ThreadSensitiveModel(), options)
    finally:
        torch.set_num_threads(before)
    assert info["encode"]["executor"] == "ray" and info["encode"]["intra_op_threads"] == ENCODE_THREADS
    assert local.to_parquet() == sharded.to_parquet()
