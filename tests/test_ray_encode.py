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

    from mmbench.cache import EmbeddingCache, model_key
    from mmbench.executors.ray_actors import RayExecutor
    from mmbench.poolset import load_poolset
    from mmbench.runner import RunOptions, run_poolset

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
