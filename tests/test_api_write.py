"""`Evaluation.write` follows `mmbench run`'s overwrite rules (it silently replaced another run's results before)."""
from __future__ import annotations

import pytest

import mmbench
from toy_models import HashingModel


def test_write_refuses_another_runs_results_and_keeps_the_same_run(vg_tiny, tmp_path):
    five = mmbench.evaluate(HashingModel(), "visual_grounding", data=vg_tiny, limit=5)
    six = mmbench.evaluate(HashingModel(), "visual_grounding", data=vg_tiny, limit=6)
    written = five.write(tmp_path)["visual_grounding"]
    stamp = (written / "per_query.parquet").stat().st_mtime_ns
    assert five.write(tmp_path)["visual_grounding"] == written  # the same run: left as it is
    assert (written / "per_query.parquet").stat().st_mtime_ns == stamp
    with pytest.raises(mmbench.ResultsExist, match=r"visual_grounding already holds results of another run: "
                                                   r"--limit differs \(5 there, 6 now\)"):
        six.write(tmp_path)
    assert (written / "per_query.parquet").stat().st_mtime_ns == stamp
    six.write(tmp_path, overwrite=True)
    from mmbench.results.store import load_results

    assert load_results(written).info["limit"] == 6
