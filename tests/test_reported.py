"""The seeds' published numbers shipped as data (issue 37, item 1): each one is found in the seed's own text,
at the table it cites, and is printed beside a run with the caveat, never as a measured result."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from mmbench.cli import main
from mmbench.leaderboards.reported import CAVEAT, load_reported, reported_for

SEEDS = Path(__file__).parent / "data" / "seeds"  # copies of ../shared/seeds (the three designs' full texts)
ROWS = load_reported()


def _seed_text(name: str) -> str:
    text = (SEEDS / name).read_text(encoding="utf-8")
    return re.sub(r"\\(.)", r"\1", text)  # the HTML-converted seed escapes punctuation (GPT\-4\.1)


def _as_printed(value: float) -> set[str]:
    return {f"{value:g}", f"{value:,.0f}" if value == int(value) else f"{value:g}", f"{value:.2f}", f"{value:.3f}",
            f"{value:.4f}"}


@pytest.mark.parametrize("row", ROWS, ids=[f"{r.paper[:10]}-{r.model}-{r.subset}-{r.metric}" for r in ROWS])
def test_every_reported_number_is_in_its_seed_text(row):
    text = _seed_text(row.seed)
    assert row.quote in text, f"quote not in {row.seed}: {row.quote!r}"
    assert any(v in row.quote for v in _as_printed(row.value)), (row.value, row.quote)


TABLE1 = re.compile(r"Table 1: FLOPs-controlled(.*?)Table 2:", re.S)


@pytest.mark.parametrize("row", [r for r in ROWS if r.where.startswith("Table 1")], ids=lambda r: f"{r.model}-{r.subset}-{r.metric}")
def test_ravel_table1_values_sit_in_their_method_row_and_column(row):
    """Table 1's rows print a method's six values run together (ρ, r per language model): the row's values
    follow the method's name inside Table 1, and this value is at its language model's and metric's place."""
    table = TABLE1.search(_seed_text(row.seed)).group(1)
    name = row.model.split()[0]
    start = table.index(row.quote)
    assert name in table[max(0, start - 60):start], (row.model, table[max(0, start - 60):start])
    values = re.findall(r"-?\d\.\d{3}", row.quote)
    column = ["Qwen3-1.7B", "Qwen2.5-1.5B", "SmolLM2-1.7B"].index(row.subset) * 2 + (row.metric == "pearson_r")
    assert float(values[column]) == row.value


def test_reported_rows_cover_the_three_seeds_and_tasks_filter():
    assert {r.seed[:3] for r in ROWS} == {"000", "002", "003"}
    msr = reported_for("multi_source_reasoning")
    assert {r.task for r in msr} == {"multi_source_reasoning", "mmlongembed"}
    assert any(r.subset == "mmdocrag/hard" and r.value == 32.29 for r in msr)


def test_cli_lists_them_with_the_caveat(capsys):
    assert main(["reported", "--task", "ravel"]) == 0
    out = capsys.readouterr().out
    assert CAVEAT.format(paper="RAVEL") in out and "0.82" in out
    assert main(["reported", "--task", "nope"]) == 2


def test_a_malformed_file_names_line_and_field(tmp_path):
    bad = tmp_path / "r.csv"
    lines = (SEEDS.parent.parent.parent / "leaderboards" / "data" / "reported_results.csv").read_text().splitlines()
    bad.write_text("\n".join([lines[0], lines[1].replace(",53.41,", ",fifty,")]) + "\n")
    with pytest.raises(ValueError, match=r"r\.csv:2: field 'value' is not a number"):
        load_reported(bad)


def test_show_and_compare_place_a_run_beside_them_with_the_caveat(tmp_path, capsys):
    from mmbench.tasks import get_task

    data = tmp_path / "msr"
    get_task("multi_source_reasoning").build("sample", data, seed=0, lengths=(2048,), datasets=("hotpotqa",),
                                             queries_per_dataset=6, candidates_per_query=4, progress=False)
    for model in ("bm25", "minilm"):
        assert main(["run", "--task", "multi_source_reasoning", "--data", str(data), "--model", model,
                     "--output", str(tmp_path / model), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["show", str(tmp_path / "bm25"), "--reported"]) == 0
    out = capsys.readouterr().out
    assert "reported numbers beside this run (bm25: precision_at_1" in out
    assert CAVEAT.format(paper="MMLongEmbed") in out and "32.29 %" in out
    assert main(["compare", str(tmp_path / "bm25"), str(tmp_path / "minilm"), "--reported", "--resamples", "200",
                 "--ci-resamples", "100"]) == 0
    out = capsys.readouterr().out
    assert out.count(CAVEAT.format(paper="MMLongEmbed")) == 2 and "(minilm: precision_at_1" in out
