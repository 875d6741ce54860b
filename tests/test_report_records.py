"""The typed records report.md is written from: built from report_numbers' data, and naming what is missing."""
from __future__ import annotations

import pytest

from mmbench.reports.records import RunSummary, Settings, TaskReport

RUN = {"label": "a", "micro": {"n": 3, "precision_at_1": 0.5}, "macro": {"n_subsets": 1, "precision_at_1": 0.5},
       "subsets": {}, "bootstrap_ci": {"precision_at_1": {"estimate": 0.5, "low": 0.1, "high": 0.9}},
       "chance": {"precision_at_1": 0.2}, "n_failed_excluded": 0, "model": {}, "root": None}
TASK = {"task": "t", "content_hashes": ["h"], "runs": [RUN], "positional_bias": [{"label": "a", "rows": "all",
        "error": "not fitted: too few depths"}], "heatmaps": [], "length_curves": [], "easy_hard": [],
        "modality_robustness": []}


def test_a_task_record_reads_the_report_data_with_older_optional_parts_missing():
    t = TaskReport.of(TASK)
    assert t.runs[0].bootstrap_ci["precision_at_1"].high == 0.9
    assert t.positional_bias[0].result is None and t.positional_bias[0].error == "not fitted: too few depths"
    assert t.figures == {} and t.efficiency == [] and t.effective_length == []


def test_a_missing_field_is_named_where_the_record_is_built():
    with pytest.raises(KeyError, match="RunSummary: the report data lack n_failed_excluded"):
        RunSummary.of({k: v for k, v in RUN.items() if k != "n_failed_excluded"})
    with pytest.raises(KeyError, match="Settings: the report data lack seed"):
        Settings.of({"metric": "precision_at_1", "heatmap_metric": "precision_at_5", "ci_method": "m",
                     "ci_resamples": 10, "positional_model": "x", "robustness_thresholds": {}})


def test_the_text_of_a_fit_that_failed_names_why():
    from mmbench.reports.report_text import positional_row

    assert positional_row(TaskReport.of(TASK).positional_bias[0])[-1] == "not fitted: too few depths"
