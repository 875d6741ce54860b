"""The efficiency record of a run: a model of known cost per token, API counts and cost, what boards accept.

No test here reads the wall clock: the meter and the lazy loader take a `clock`, and the fake models advance a
`FakeClock` by a known cost per token, so the recovered rates and load times are exact."""
import numpy as np
import pandas as pd
import pytest

from mmbench.data.documents import Text
from mmbench.data.poolset import load_poolset
from mmbench.models.base import EmbeddingModel, ModelCard
from mmbench.running.efficiency import EfficiencyMeter, bins_of_documents
from mmbench.running.runner import RunOptions, run_poolset

SECONDS_PER_TOKEN = 1e-4


class FakeClock:
    """Seconds that pass only when a fake model says so."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class PacedModel(EmbeddingModel):
    """Takes a fixed time per whitespace word (its seen tokens: it states no tokenizer) and per batch, on `clock`."""

    def __init__(self, clock: FakeClock, per_token: float = SECONDS_PER_TOKEN, per_batch: float = 0.0) -> None:
        self.card = ModelCard(name="paced", family="test", modalities=frozenset({"text"}), max_tokens=None, dim=8,
                              settings={"per_token": per_token})
        self.clock, self.per_token, self.per_batch = clock, per_token, per_batch

    def encode(self, documents, role, media):
        words = [sum(len(s.text.split()) for s in d.segments if isinstance(s, Text)) for d in documents]
        self.clock.advance(self.per_token * sum(words) + self.per_batch)
        out = np.ones((len(documents), 8), dtype=np.float32)
        out[:, 0] = np.arange(len(documents)) + np.asarray(words)
        return out


def test_a_model_of_known_cost_per_token_is_measured_within_five_percent(vg_tiny):
    ps = load_poolset(vg_tiny)
    clock = FakeClock()
    _, seen, info = run_poolset(ps, PacedModel(clock), RunOptions(use_cache=False, progress=False, batch_tokens=4096,
                                                                  clock=clock))
    eff = info["efficiency"]
    assert eff["tokens"] == int(seen["seen_tokens"].clip(lower=1).sum())
    assert eff["documents"] == len(seen)
    assert eff["tokens_per_second"] == pytest.approx(1 / SECONDS_PER_TOKEN, rel=0.05)   # the check
    assert eff["seconds"] == pytest.approx(clock.now, abs=1e-6)   # every second the model took, and only those
    assert eff["tokens_per_second"] == pytest.approx(eff["tokens"] / clock.now, rel=1e-3)
    assert eff["device"] == "cpu" and eff["backend"] == "test"
    assert eff["peak_rss_mb"] > 0 and eff["time_to_first_vector_seconds"] > 0
    assert eff["batches"]["count"] == info["encode"]["batches"]
    (label, per_bin), = eff["by_length_bin"].items()   # vg_tiny has one bin, holding every document
    assert label == "256" and per_bin["tokens"] == eff["tokens"]
    assert per_bin["tokens_per_second"] == pytest.approx(1 / SECONDS_PER_TOKEN, rel=0.05)
    assert "cost_per_1k_documents" not in eff and "api" not in eff


def test_load_time_is_reported_and_kept_out_of_the_encoding_rate(vg_tiny):
    """A lazily loaded model loads when the runner first needs it (its tokenizer, to measure the views):
    the load is reported, and the encoding rate does not carry it."""
    from mmbench.running.lazy_model import LazyModel

    clock = FakeClock()
    real = PacedModel(clock)

    def loader():
        clock.advance(0.5)
        return real

    lazy = LazyModel(real.card, loader, lambda m: None, clock=clock)
    _, _, info = run_poolset(load_poolset(vg_tiny), lazy, RunOptions(use_cache=False, progress=False, clock=clock))
    eff = info["efficiency"]
    assert eff["load_seconds"] == 0.5
    assert eff["tokens_per_second"] == pytest.approx(1 / SECONDS_PER_TOKEN, rel=0.05)
    assert eff["seconds"] == pytest.approx(clock.now - 0.5, abs=1e-6)   # the load is not encoding time
    assert eff["time_to_first_vector_seconds"] > 0.5


def test_weights_loading_inside_a_batch_are_taken_out_of_its_time():
    clock = FakeClock()
    model = PacedModel(clock, per_token=0)
    meter = EfficiencyMeter(model, {"a": "1k"}, clock=clock)
    meter.start()
    clock.advance(0.4)
    model.load_seconds = 0.3          # the adapter loaded its weights during this batch
    meter.batch(["a"], [1000], 1000)
    eff = meter.record()
    assert eff["load_seconds"] == 0.3
    assert eff["seconds"] == pytest.approx(0.1, abs=1e-9)
    assert eff["time_to_first_vector_seconds"] == pytest.approx(0.4, abs=1e-9)   # the first vector waited for the load


def test_cost_per_thousand_documents_follows_the_stated_price(vg_tiny):
    ps = load_poolset(vg_tiny)
    opts = RunOptions(use_cache=False, progress=False, price_per_token=2e-6)
    _, seen, info = run_poolset(ps, PacedModel(FakeClock(), per_token=0), opts)
    eff = info["efficiency"]
    want = 1000 * 2e-6 * seen["seen_tokens"].clip(lower=1).sum() / len(seen)
    assert eff["cost_per_1k_documents"] == pytest.approx(want)
    assert eff["price_per_token"] == 2e-6


class _Client:
    def __init__(self):
        self.requests_sent, self.retries = 0, 0


def test_api_requests_and_retries_are_counted_for_the_run_only():
    clock = FakeClock()
    model = PacedModel(clock, per_token=0)
    model.client = _Client()
    model.client.requests_sent, model.client.retries = 7, 1   # calls made before the run do not count
    meter = EfficiencyMeter(model, {"a": "1k", "b": "2k"}, clock=clock)
    meter.start()
    model.client.requests_sent, model.client.retries = 12, 3
    clock.advance(0.3)
    meter.batch(["a", "b"], [1000, 2000], 4000)
    eff = meter.record()
    assert eff["api"] == {"requests": 5, "retries": 2}
    assert eff["by_length_bin"]["1k"]["tokens"] == 1000 and eff["by_length_bin"]["2k"]["tokens"] == 2000
    assert list(eff["by_length_bin"]) == ["1k", "2k"]
    # the batch's time is shared by tokens: the 2k document took two thirds of it
    assert eff["by_length_bin"]["1k"]["seconds"] == pytest.approx(0.1) and eff["by_length_bin"]["2k"]["seconds"] == pytest.approx(0.2)


def test_bins_of_documents_takes_each_documents_first_pool():
    from mmbench.data.poolset import PoolItem

    items = [PoolItem("i1", "q1", "s", ["c1", "c2"], ["c1"], {"length_bin": "1k"}),
             PoolItem("i2", "q2", "s", ["c2", "c3"], ["c3"], {"length_bin": "2k"}),
             PoolItem("i3", "q3", "s", ["c4"], ["c4"], {})]
    assert bins_of_documents(items) == {"q1": "1k", "c1": "1k", "c2": "1k", "q2": "2k", "c3": "2k"}


def test_leaderboards_accept_the_efficiency_block_as_measured_and_refuse_bad_numbers():
    from mmbench.leaderboards.stated import stated_number_problems

    pq = pd.DataFrame({"error": [None]})
    seen = pd.DataFrame({"truncated": [False]})
    good = {"dataset_revision": "h", "mmbench": {"content_hash": "h", "n_items": 1,
                                                 "efficiency": {"device": "cpu", "tokens_per_second": 12.5,
                                                                "batches": {"count": 2},
                                                                "by_length_bin": {"1k": {"seconds": 0.2}}}}}
    assert stated_number_problems(good, pq, seen, 1) == []
    bad = {**good, "mmbench": {**good["mmbench"], "efficiency": {"by_length_bin": {"1k": {"seconds": -1.0}}}}}
    problems = stated_number_problems(bad, pq, seen, 1)
    assert len(problems) == 1 and "efficiency.by_length_bin.1k.seconds" in problems[0].field


def _results(vg_tiny, device: str = "cpu", name: str = "paced"):
    import dataclasses

    from mmbench.running.evaluation import evaluate_in_memory

    clock = FakeClock()
    model = PacedModel(clock, per_token=1e-6)
    model.card = dataclasses.replace(model.card, name=name)
    if device != "cpu":
        model.device = device
    return evaluate_in_memory("visual_grounding", load_poolset(vg_tiny), model,
                              RunOptions(use_cache=False, progress=False, clock=clock), name)


def test_show_compare_and_report_state_the_efficiency_record(vg_tiny):
    from mmbench.reports.compare import compare_runs, comparison_markdown
    from mmbench.reports.report import report_markdown, report_numbers
    from mmbench.results.summary import format_summary

    a, b = _results(vg_tiny), _results(vg_tiny, name="paced-b")
    shown = format_summary(a, ("length_bin",), "precision_at_1")
    assert "efficiency on cpu, backend test:" in shown and "tokens/s by length bin: 256" in shown
    data = compare_runs([a, b], resamples=200, ci_resamples=200)
    assert [r["label"] for r in data["efficiency"]] == ["paced", "paced-b"]
    text = comparison_markdown(data)
    assert "## Efficiency" in text and "not comparable" not in text
    report = report_markdown(report_numbers([a, b], ci_resamples=200))
    assert "### Efficiency" in report and "Tokens per second by length bin" in report


def test_rows_measured_on_different_devices_are_flagged(vg_tiny):
    from mmbench.reports.compare import compare_runs, comparison_markdown

    a, b = _results(vg_tiny), _results(vg_tiny, device="cuda:0", name="paced-gpu")
    assert b.info["efficiency"]["device"] == "cuda:0"
    text = comparison_markdown(compare_runs([a, b], resamples=200, ci_resamples=200))
    assert "Measured on different devices (cpu, cuda:0)" in text


def test_the_board_has_an_efficiency_table_naming_devices(vg_tiny, tmp_path):
    from mmbench.leaderboards.efficiency import efficiency_table
    from mmbench.leaderboards.store import Entry

    runs = {"e1": _results(vg_tiny), "e2": _results(vg_tiny, device="cuda:0", name="paced-gpu")}
    entries = [Entry(k, "retrieval", "visual_grounding", "1", r.content_hash, r.info["model"], tmp_path, "2026", {})
               for k, r in runs.items()]
    table = efficiency_table(entries, lambda e: runs[e.id])
    assert [r["device"] for r in table.rows] == ["cpu", "cuda:0"]
    assert all(r["tokens_per_second"] > 0 for r in table.rows)
    assert "measured on 2 devices" in table.description
    assert {"tokens_per_second", "peak_rss_mb", "cost_per_1k_documents"} <= {c.key for c in table.columns}
    assert efficiency_table(entries[:0], lambda e: runs[e.id]) is None


def test_the_api_records_the_load_time_of_a_model_it_loads(vg_tiny, monkeypatch):
    """`mmbench.evaluate` with a model by name times the load on its clock, as `mmbench run` does, and keeps it
    out of the encoding rate; a model object built by the caller has no load time to report."""
    import mmbench
    from mmbench.models import registry

    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))   # the test's model is gone afterwards
    clock = FakeClock()

    def slow_to_load():
        clock.advance(2.5)
        return PacedModel(clock)

    mmbench.register_model("paced-test", slow_to_load)
    ev = mmbench.evaluate("paced-test", "visual_grounding", data=vg_tiny, clock=clock)
    eff = ev["visual_grounding"].run.info["efficiency"]
    assert eff["load_seconds"] == 2.5
    assert eff["seconds"] == pytest.approx(clock.now - 2.5, abs=1e-6)
    assert eff["tokens_per_second"] == pytest.approx(1 / SECONDS_PER_TOKEN, rel=0.05)
    built = mmbench.evaluate(PacedModel(clock), "visual_grounding", data=vg_tiny, clock=clock)
    assert built["visual_grounding"].run.info["efficiency"]["load_seconds"] is None


def test_peak_rss_is_the_process_peak_over_the_whole_evaluation(vg_tiny, monkeypatch):
    """Issue 34: peak_rss_mb was read when encoding ended and missed what the tables and aggregates took after.
    Here building the summary holds a block of memory past the process's earlier peak: the record must see it."""
    from mmbench.running import evaluation
    from mmbench.running.efficiency import current_rss_mb, peak_rss_mb
    from toy_models import HashingModel

    real = evaluation.summary_json
    held = {}

    def heavy_summary(*args, **kwargs):
        extra = max(0.0, peak_rss_mb() - current_rss_mb()) + 150
        block = np.ones(int(extra * 2 ** 20 / 8))       # touched pages: resident
        held["peak"] = peak_rss_mb()
        del block
        return real(*args, **kwargs)

    monkeypatch.setattr(evaluation, "summary_json", heavy_summary)
    res = evaluation.evaluate_in_memory("visual_grounding", load_poolset(vg_tiny), HashingModel(),
                                        RunOptions(use_cache=False, progress=False), "hashing")
    assert res.summary["mmbench"]["efficiency"]["peak_rss_mb"] >= held["peak"] - 1
