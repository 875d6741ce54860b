"""Unknown names suggest the close one (issue 37, item 6)."""
from __future__ import annotations

import pytest

from mmbench.common.names import did_you_mean
from mmbench.models.registry import UnknownModelError, load_model
from mmbench.tasks import UnknownTaskError, get_task


def test_close_names_are_suggested_and_far_ones_are_not():
    assert did_you_mean("gme2b", ["gme-2b", "gme-7b", "bm25"]) == " (did you mean 'gme-2b'?)"
    assert did_you_mean("visual-grounding", ["visual_grounding", "logical_summarization"]) == \
        " (did you mean 'visual_grounding'?)"
    assert did_you_mean("zzz", ["gme-2b", "bm25"]) == ""
    assert did_you_mean("x", []) == ""


def test_unknown_model_and_task_errors_name_the_close_one():
    with pytest.raises(UnknownModelError, match=r"unknown model 'gme2b' \(did you mean 'gme-2b'\?\); known: "):
        load_model("gme2b")
    with pytest.raises(UnknownTaskError, match=r"did you mean 'multi_source_reasoning'\?"):
        get_task("multi_source_reasoner")

