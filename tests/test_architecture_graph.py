"""docs/img/architecture.svg, the Architecture page's picture of the stages and their imports, is drawn from
the code by ci/architecture_graph.py: checked against what the script draws now and against the layering
test's table (STAGES, ORDER, ALLOWED)."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("architecture_graph", ROOT / "ci" / "architecture_graph.py")
graph = sys.modules.setdefault("architecture_graph", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(graph)


def test_a_stage_stands_right_of_every_stage_it_imports():
    order = ("common", "data", "models", "cli")
    edges = {("data", "common"), ("models", "data"), ("cli", "models"), ("cli", "common")}
    assert graph.columns(order, edges) == [["common"], ["data"], ["models"], ["cli"]]
    assert graph.columns(order, {("cli", "common")}) == [["common", "data", "models"], ["cli"]]


def test_an_arrow_the_table_does_not_allow_is_named():
    svg = graph.draw(("common", "data"), {("data", "common"), ("common", "data")})
    assert graph.arrows(svg) == {("data", "common"), ("common", "data")}
    assert graph.disallowed_arrows(svg, {"common": set(), "data": {"common"}}) == ["common -> data"]


def test_the_checked_in_picture_is_the_code_s_and_keeps_the_table():
    table = graph.layering()
    svg = graph.SVG.read_text(encoding="utf-8")
    assert svg == graph.current(), "docs/img/architecture.svg is out of date: run python ci/architecture_graph.py"
    assert graph.stages_drawn(svg) == list(table.ORDER)
    assert set(table.ORDER) == set(table.ALLOWED)
    assert graph.disallowed_arrows(svg, table.ALLOWED, frozenset(table.EVERYONE_MAY_IMPORT)) == []
    assert graph.arrows(svg) == graph.stage_edges(table)


def test_the_architecture_page_shows_the_picture():
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert "](img/architecture.svg)" in page
