"""`mmbench sweep`: task × model jobs run locally or on Ray give what `mmbench run` gives, report
failures per job, and resume by skipping finished jobs."""
import json

import pandas as pd

from mmbench.cli import main
from mmbench.running.sweep import Job, run_job


def _per_query(folder):
    frame = pd.read_parquet(folder / "per_query.parquet")
    return list(frame["item_id"]), [list(r) for r in frame["ranked_ids"]], [list(s) for s in frame["scores"]]


def _sweep(vg, out_root, *extra):
    return main(["sweep", "--task", "visual_grounding", "--model", "bm25", "--model", "no-such-model",
                 "--data", f"visual_grounding={vg}", "--out-root", str(out_root), "--limit", "20", "--no-cache",
                 "--quiet", *extra])


def test_local_sweep_matches_run_reports_failures_and_resumes(vg_tiny, tmp_path, capsys):
    assert _sweep(vg_tiny, tmp_path / "runs") == 1  # one job failed
    report = {r["model"]: r for r in json.loads((tmp_path / "runs" / "sweep.json").read_text())}
    assert report["bm25"]["status"] == "done" and report["no-such-model"]["status"] == "failed"
    assert "unknown model 'no-such-model'" in report["no-such-model"]["detail"]
    assert main(["run", "--task", "visual_grounding", "--model", "bm25", "--data", str(vg_tiny), "--limit", "20",
                 "--no-cache", "--quiet", "--output", str(tmp_path / "single")]) == 0
    swept = tmp_path / "runs" / "visual_grounding" / "bm25"
    assert _per_query(swept) == _per_query(tmp_path / "single")
    single = json.loads((tmp_path / "single" / "results.json").read_text())
    assert report["bm25"]["main_score"] == single["scores"]["test"][0]["main_score"]
    # a second sweep skips the finished job (its files untouched) and still reports its score
    stamp = (swept / "per_query.parquet").stat().st_mtime_ns
    capsys.readouterr()
    assert _sweep(vg_tiny, tmp_path / "runs") == 1
    again = {r["model"]: r for r in json.loads((tmp_path / "runs" / "sweep.json").read_text())}
    assert again["bm25"]["status"] == "skipped" and again["bm25"]["main_score"] == report["bm25"]["main_score"]
    assert (swept / "per_query.parquet").stat().st_mtime_ns == stamp
    assert "skipped" in capsys.readouterr().out
    # a finished folder whose table was damaged (e.g. a rewrite cut short) is not finished: it runs again
    table = swept / "per_query.parquet"
    table.write_bytes(table.read_bytes()[:100])
    assert _sweep(vg_tiny, tmp_path / "runs") == 1
    redone = {r["model"]: r for r in json.loads((tmp_path / "runs" / "sweep.json").read_text())}
    assert redone["bm25"]["status"] == "done" and _per_query(swept) == _per_query(tmp_path / "single")
    # other run options are another job: a different --limit is evaluated again
    assert main(["sweep", "--task", "visual_grounding", "--model", "bm25", "--data", f"visual_grounding={vg_tiny}",
                 "--out-root", str(tmp_path / "runs"), "--limit", "10", "--no-cache", "--quiet"]) == 0
    assert len(pd.read_parquet(swept / "per_query.parquet")) == 10


def test_sweep_argument_errors(vg_tiny, tmp_path, capsys):
    assert main(["sweep", "--task", "visual_grounding", "--model", "bm25", "--data", "nonsense",
                 "--out-root", str(tmp_path)]) == 2
    assert "expected TASK=DIR" in capsys.readouterr().err
    assert main(["sweep", "--task", "visual_grounding", "--model", "bm25", "--data", f"flickr_hard_negatives={vg_tiny}",
                 "--out-root", str(tmp_path)]) == 2
    assert "not among the swept tasks" in capsys.readouterr().err
    assert main(["sweep", "--task", "nope", "--model", "bm25"]) == 2


def test_a_job_never_raises(tmp_path):
    job = Job("visual_grounding", "bm25", str(tmp_path / "missing"), str(tmp_path / "out"), "0" * 64)
    outcome = run_job(job)
    assert outcome.status == "failed" and "missing" in outcome.detail and "manifest.json" in outcome.detail


def test_ray_sweep_gives_the_same_results(vg_tiny, tmp_path):
    assert main(["sweep", "--task", "visual_grounding", "--model", "bm25", "--model", "no-such-model",
                 "--data", f"visual_grounding={vg_tiny}", "--out-root", str(tmp_path / "ray"), "--limit", "20",
                 "--no-cache", "--quiet", "--executor", "ray", "--ray-num-cpus", "2"]) == 1
    report = {r["model"]: r for r in json.loads((tmp_path / "ray" / "sweep.json").read_text())}
    assert report["bm25"]["status"] == "done" and report["no-such-model"]["status"] == "failed"
    assert _sweep(vg_tiny, tmp_path / "local") == 1
    assert _per_query(tmp_path / "ray" / "visual_grounding" / "bm25") == \
        _per_query(tmp_path / "local" / "visual_grounding" / "bm25")
