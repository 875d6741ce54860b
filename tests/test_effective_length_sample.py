"""Effective context on a real (reduced) Visual Grounding build with the sample's strata (issue 34): BM25 reads
every length it is given, MiniLM (a 256-token window) stops between the 256 and 1k bins. Before the strata,
both read 16-23 tokens: the pooled order put text anchors in image-only haystacks first."""
import pytest

from mmbench.cli import main
from mmbench.evaluators.stats.effective_length import AT_LEAST, DROP, effective_statement
from mmbench.reports.lengths import effective_length_entry
from mmbench.models.sentence_transformer import packaged_minilm_path
from mmbench.results.store import load_results
from mmbench.tasks import design_strata, get_task


@pytest.fixture(scope="module")
def vg_lengths(tmp_path_factory):
    """Every anchor kind and background of the sample, three bins up to 32k, five needles per kind."""
    out = tmp_path_factory.mktemp("vg") / "vg_lengths"
    get_task("visual_grounding").build("sample", out, seed=0, lengths=(256, 1024, 32768), needles_per_kind=5,
                                       progress=False)
    return out


def _effective(data, model, tmp_path):
    out = tmp_path / model
    assert main(["run", "--task", "visual_grounding", "--data", str(data), "--model", model, "--output", str(out),
                 "--quiet"]) == 0
    res = load_results(out)
    return effective_length_entry(res.per_query, res.seen, model, "precision_at_1", strata=design_strata(res.task))


def test_bm25_reads_at_least_the_32k_bin(vg_lengths, tmp_path):
    e = _effective(vg_lengths, "bm25", tmp_path)
    assert e["strata_axes"] == ["anchor_kind", "background_modality"] and len(e["strata"]) >= 5
    assert e["status"] == AT_LEAST and e["effective_bin"] == "32k"
    assert effective_statement(e).startswith("at least ") and "32k bin" in effective_statement(e)


@pytest.mark.skipif(packaged_minilm_path() is None, reason="needs the packaged MiniLM weights")
def test_minilm_stops_between_256_and_1k(vg_lengths, tmp_path):
    e = _effective(vg_lengths, "minilm", tmp_path)
    assert e["status"] == DROP and e["effective_bin"] in ("256", "512", "1k")
    assert 128 <= e["effective_tokens"] <= 1024
