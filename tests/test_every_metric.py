"""Every registered metric runs through `show`, `compare` and `report` on reduced builds of all five samples
(issue 34: `--metric precision_at_5` crashed with `f(a) and f(b) must have different signs` where P@5 was 0.2
on every item)."""
import pytest

from mmbench.cli import main
from mmbench.evaluators.metrics import metric_names
from mmbench.tasks import get_task

SMALL = {
    "visual_grounding": dict(lengths=(256, 1024), needles_per_kind=3),
    "multi_source_reasoning": dict(lengths=(2048, 4096), queries_per_dataset=4, candidates_per_query=4),
    "logical_summarization": dict(lengths=(2048, 4096), queries_per_dataset=4, candidates_per_query=4),
    "temporal_summarization": dict(videos=8, lengths=[128, 256], frame_size=[64, 64], distractors=3),
    "flickr_hard_negatives": dict(sample_images=30, pool_size=30, n_queries=6),
}


@pytest.fixture(scope="module", params=sorted(SMALL))
def two_runs(request, tmp_path_factory):
    """A reduced build of one task, BM25's run on it and a second BM25 run under another name."""
    task = request.param
    root = tmp_path_factory.mktemp(task)
    get_task(task).build("sample", root / "ps", seed=0, progress=False, **SMALL[task])
    runs = []
    for name in ("bm25-a", "bm25-b"):
        assert main(["run", "--task", task, "--model", "bm25", "--model-name", name, "--data", str(root / "ps"),
                     "--output", str(root / name), "--quiet"]) == 0
        runs.append(str(root / name))
    return root, runs


def test_every_metric_runs_through_show_compare_and_report(two_runs, capsys):
    root, runs = two_runs
    for metric in metric_names():
        assert main(["show", runs[0], "--metric", metric]) == 0, metric
        assert main(["compare", *runs, "--metric", metric, "--resamples", "50", "--ci-resamples", "20"]) == 0, metric
    capsys.readouterr()
    for metric in ("precision_at_5", "recall_at_10", "mrr"):    # figures are the slow part: three metrics
        assert main(["report", *runs, "--metric", metric, "--heatmap-metric", metric, "--ci-resamples", "20",
                     "--out", str(root / f"rep-{metric}")]) == 0, metric
        assert (root / f"rep-{metric}" / "report.md").is_file()


def test_every_metric_gives_a_report_without_figures(two_runs):
    """The report's statistics (positional model, heatmaps and their floors, curves, Easy/Hard, robustness,
    effective context) for every registered metric; figures are drawn for three metrics above."""
    from pathlib import Path

    from mmbench.reports.report import report_numbers
    from mmbench.reports.report_text import report_markdown
    from mmbench.results.store import load_results

    _, runs = two_runs
    loaded = [load_results(Path(r)) for r in runs]
    for metric in metric_names():
        data = report_numbers(loaded, metric=metric, heatmap_metric=metric, ci_resamples=20)
        text = report_markdown(data)
        assert f"Main metric `{metric}`" in text, metric
