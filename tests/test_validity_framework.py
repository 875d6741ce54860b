"""The shared validity framework: question normalisation, drop logs and the CLI's parameter values."""
from __future__ import annotations

import pytest

from mmbench.data.drops import DropLog, summary_lines

from mmbench.builders.parts.validity import normalise_question
from mmbench.cli.commands_core import parse_params


def test_questions_of_any_script_are_told_apart():
    assert normalise_question("Which band played first?") == normalise_question("which band, played first")
    # Chinese (Youku) queries must not all normalise to the empty string
    assert normalise_question("一个人在厨房做饭") != normalise_question("两个孩子在公园踢球")
    assert normalise_question("一个人在厨房做饭") != ""


def test_boolean_words_are_booleans_not_truthy_strings():
    params = parse_params(["allow_missing=false", "audit_hard=True", "x=yes", "name=falsey", "n=3"])
    assert params == {"allow_missing": False, "audit_hard": True, "x": True, "name": "falsey", "n": 3}


def test_drop_log_counts_and_refuses_a_lossy_source():
    log = DropLog("videos")
    log.keep(8)
    for i in range(3):
        log.drop("missing file", f"v{i}")
    assert (log.read, log.kept, log.dropped) == (11, 8, 3)
    lines = summary_lines({"videos": log.to_dict()})
    assert lines[0].strip() == "videos: 11 read -> 8 kept" and "dropped 3: missing file" in lines[1]
    with pytest.raises(ValueError, match="3 of 11 videos unusable.*allow_missing=true"):
        log.check_share(0.1, allow_missing=False, source="annotations.json")
    log.check_share(0.1, allow_missing=True, source="annotations.json")  # allowed: no error
