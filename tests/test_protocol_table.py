"""The protocol-differences table (docs/models.md, `mmbench list models --details`) against the adapters' settings."""
from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from mmbench.models.protocol_table import ASPECTS, REFERENCES, markdown, mmbench_column, rows
from mmbench.models.qwen_vl import with_protocol
from mmbench.models.qwen_vl_presets import PRESETS

DOCS = Path(__file__).resolve().parents[1] / "docs" / "models.md"
COMPARABLE = ("image tokens", "max length", "positions")  # written in the mmbench column's own words


def _docs_table() -> str:
    text = DOCS.read_text(encoding="utf-8")
    found = re.search(r"<!-- protocol-table:start -->\n(.*)<!-- protocol-table:end -->", text, re.S)
    assert found, "docs/models.md has no protocol-table block"
    return found.group(1)


def test_the_models_page_carries_the_table_the_presets_give():
    assert _docs_table() == markdown(), "docs/models.md's protocol table is stale: paste protocol_table.markdown()"


def test_every_seed_preset_is_covered_with_every_aspect_and_a_source():
    covered = {name for ref in REFERENCES.values() for name in ref.presets}
    assumed = {"embed-rl", "mmemb-r1"}  # no public code: their notes keep UNVERIFIED with the reason
    assert covered == set(PRESETS) - assumed | {"e5-v", "doubao-seed-1.6-embedding"}
    for ref in REFERENCES.values():
        assert set(ref.claims) == set(ASPECTS) and ref.authors_source and ref.mteb_source
        if ref.column:
            assert set(ref.column()) == set(ASPECTS)
            continue
        columns = {tuple(mmbench_column(PRESETS[name]).items()) for name in ref.presets}
        if ref.presets[0] != "vlm2vec-2b":  # V1 and V2 share a row set, their differences named in the cells
            assert len(columns) == 1, f"{ref.presets} run different protocols under one table"


def test_a_departure_from_both_references_states_its_cause():
    for family in REFERENCES:
        for aspect, ours, authors, mteb, why in rows(family):
            if aspect in COMPARABLE and not any(c.startswith(ours) for c in (authors, mteb)):
                assert why, f"{family} {aspect}: mmbench runs {ours!r}, neither reference does, and no cause is given"


def test_gme_follows_its_authors_and_protocol_mteb_follows_mtebs_column():
    ref = REFERENCES["gme"].claims
    default, mteb = mmbench_column(PRESETS["gme-2b"]), mmbench_column(with_protocol(PRESETS["gme-2b"], "mteb"))
    assert ref["positions"].authors.startswith(default["positions"])
    assert ref["image tokens"].authors.startswith(default["image tokens"])
    for aspect in COMPARABLE:
        assert ref[aspect].mteb.startswith(mteb[aspect]), aspect
    assert ref["max length"].mteb == mteb["max length"]


def test_qwen3_and_vlm2vec_protocol_mteb_follow_mtebs_column():
    q3 = REFERENCES["qwen3-vl-embedding"].claims
    default, mteb = (mmbench_column(with_protocol(PRESETS["qwen3-vl-embedding-2b"], p)) for p in (None, "mteb"))
    for aspect in COMPARABLE:
        assert q3[aspect].mteb.startswith(mteb[aspect]), aspect
    assert not q3["max length"].mteb.startswith(default["max length"])  # the default reads the window
    assert "reading order" in mteb["instruction"] and "24 fps" in mteb["video"]
    v2 = REFERENCES["vlm2vec"].claims
    mteb = mmbench_column(with_protocol(PRESETS["vlm2vec-v2"], "mteb"))
    assert v2["video"].mteb.startswith("V2: " + mteb["video"].split(", ")[1].split(" (")[0])  # 8 frames evenly spaced
    assert "the processor resizes" in mteb["image tokens"] and "processor" in v2["image tokens"].mteb
    assert "Find a document image" in mteb["instruction"]


def test_a_changed_preset_shows_in_the_table():
    broken = replace(PRESETS["gme-2b"], positions="mrope", vision=replace(PRESETS["gme-2b"].vision, min_pixels=784))
    col = mmbench_column(broken)
    assert col["positions"] == "3-D M-RoPE" and col["image tokens"].startswith("1–1280")
    with pytest.raises(ValueError, match="no protocol 'mteb'"):
        with_protocol(PRESETS["ops-mm-embedding-2b"], "mteb")


def test_list_models_details_prints_the_rows(capsys):
    from mmbench.cli import main

    assert main(["list", "models", "--details"]) == 0
    out = capsys.readouterr().out
    assert "positions: mmbench 1-D (sequential) | authors 1-D (sequential)" in out
    assert "--protocol mteb: image tokens 4–1280 (factor 28); max length 1800 tokens" in out
    assert "--protocol mteb: instruction system turn; the user turn in reading order" in out
    protocol_lines = [line for line in out.splitlines() if line.strip().startswith("--protocol mteb:")]
    assert len(protocol_lines) == 5  # gme-2b, gme-7b, both Qwen3-VL-Embedding sizes, vlm2vec-v2
    assert out.count("normalisation: mmbench L2") == sum(len(r.presets) for r in REFERENCES.values())


def test_every_seed_model_has_every_input_kind_equal_by_a_named_test_or_a_stated_difference():
    from mmbench.models.protocol_table import INPUT_KINDS, PARITY, parity_markdown

    assert set(PARITY) == set(REFERENCES)
    root = DOCS.parents[1]
    for family, cells in PARITY.items():
        assert set(cells) == set(INPUT_KINDS), family
        for kind, cell in cells.items():
            assert cell.test or cell.difference, f"{family} {kind}: neither a test nor a difference"
            if cell.test:
                path, name = cell.test.split("::")
                source = (root / path).read_text(encoding="utf-8")
                assert re.search(rf"^def {name}\(", source, re.M), f"{family} {kind}: {cell.test} does not exist"
    text = DOCS.read_text(encoding="utf-8")
    found = re.search(r"<!-- parity-table:start -->\n(.*)<!-- parity-table:end -->", text, re.S)
    assert found and found.group(1) == parity_markdown(), "docs/models.md's parity list is stale"
