"""The listwise reply parser on replies a reviewer found misread: brackets inside strings and prose,
string labels, ties between arrays, stray short arrays, pathological nesting, and repair counting."""
from __future__ import annotations

import json

import pytest

from fake_llm_server import FakeLLMServer, openai_envelope
from mmbench.media import MediaStore
from mmbench.rankers import Prices, load_ranker, parse_ranking
from tiny_models import random_image

N = 5
ANSWER = [3, 1, 2, 5, 4]


@pytest.mark.parametrize("text, repairs", [
    # one number per inner array, and string labels like the "[{id}]" prompt label: with or without prose
    ("[[3],[1],[2],[5],[4]]", {"coerced": 5}),
    ("Ranking: [[3],[1],[2],[5],[4]]", {"extracted": 1, "coerced": 5}),
    ('["[3]","[1]","[2]","[5]","[4]"]', {"coerced": 5}),
    ('Answer: ["[3]","[1]","[2]","[5]","[4]"]', {"extracted": 1, "coerced": 5}),
    # the default prompt's own label, and other ways of writing a number as a string
    ('["Image 3:", "Image 1:", "Image 2:", "Image 5:", "Image 4:"]', {"coerced": 5}),
    ('["3.", "(1)", "[2]", "5.0", "#4"]', {"coerced": 5}),
    # an echo of the presented order after the answer does not replace it
    ("[3, 1, 2, 5, 4]\nThe images were presented in the order [1, 2, 3, 4, 5].", {"extracted": 1}),
    # an answer cue beats an earlier draft with as many ids
    ("Presented as [1, 2, 3, 4, 5]. My final ranking: [3, 1, 2, 5, 4]", {"extracted": 1}),
    # a trailing comma, which JSON forbids but models write
    ("[3, 1, 2, 5, 4,]", {"syntax": 1}),
    ('Ranking: ["Image 3", "Image 1", "Image 2", "Image 5", "Image 4",\n]', {"extracted": 1, "syntax": 1, "coerced": 5}),
    ("Draft ranking: [1, 2, 3, 4, 5]. Final ranking: [3, 1, 2, 5, 4]", {"extracted": 1}),
])
def test_answers_in_every_form_parse_to_the_same_ranking(text, repairs):
    r = parse_ranking(text, N)
    assert not r.failed and r.order == ANSWER and r.repairs == repairs


def test_a_cut_off_answer_beats_a_stray_image_number_in_prose():
    r = parse_ranking("Image [5] is clearly worst. Ranking: [3, 1, 2", N)
    assert r.order == [3, 1, 2, 4, 5] and r.repairs == {"extracted": 1, "unterminated": 1, "missing": 2}
    r = parse_ranking("I compared [2] and [4] closely. [3, 1, 2, 5", N)    # more ids beat a closed array
    assert r.order == [3, 1, 2, 5, 4] and r.repairs == {"extracted": 1, "unterminated": 1, "missing": 1}


@pytest.mark.parametrize("text", ["Image [5] is clearly worst. Ranking: 3, 1, 2",
                                  "Images [2] and [4] both show a dog.", "I would rank image [3] first"])
def test_a_lone_image_reference_in_prose_is_not_a_ranking(text):
    r = parse_ranking(text, N)
    assert r.failed and r.order == [] and "no JSON array" in r.error


@pytest.mark.parametrize("text, order, repairs", [
    ("[4, 2]", [4, 2, 1, 3, 5], {"missing": 3}),                      # a bare partial answer is used
    ("Ranking: [4]", [4, 1, 2, 3, 5], {"extracted": 1, "missing": 4}),  # so is a short one after an answer cue
    ("```json\n[4]\n```", [4, 1, 2, 3, 5], {"extracted": 1, "missing": 4}),  # a code fence is not prose
    ("Here you go: [4, 2]", [4, 2, 1, 3, 5], {"extracted": 1, "missing": 3}),
])
def test_genuinely_partial_answers_stay_usable(text, order, repairs):
    r = parse_ranking(text, N)
    assert not r.failed and r.order == order and r.repairs == repairs


@pytest.mark.parametrize("text", ["[" * 5000 + "]" * 5000, "Ranking: " + "[" * 5000, "[" + "9" * 5000,
                                  "[" + "9" * 5000 + "]", '["' + "9" * 5000 + '"]'])
def test_pathological_replies_are_failures_not_exceptions(text):
    r = parse_ranking(text, N)
    assert r.failed and r.order == [] and r.error


def test_huge_numbers_next_to_an_answer_are_unknown_ids():
    r = parse_ranking("[3, 1, 2, 5, 4, " + "9" * 5000, N)
    assert not r.failed and r.order == ANSWER and r.repairs == {"unterminated": 1, "unknown": 1}


@pytest.mark.parametrize("text, repairs", [
    ("[3, 1", {"unterminated": 1, "missing": 3}),                       # nothing surrounded it
    ("[3, 1, 2, 5, 4", {"unterminated": 1}),
    ("  [3, 1, 2, 5, 4]\n", {}),                                        # whitespace is not surrounding text
    ("[[3, 1, 2, 5, 4]]", {"extracted": 1}),                            # unwrapped from an outer array
    ('{"ranking": [[3, 1, 2, 5, 4]]}', {"extracted": 2}),               # ... and from an object
])
def test_each_repair_is_counted_once(text, repairs):
    r = parse_ranking(text, N)
    assert not r.failed and r.order[:2] == [3, 1] and r.repairs == repairs and r.n_repairs == sum(repairs.values())


@pytest.mark.parametrize("break_parser", [False, True])
def test_a_parser_failure_keeps_tokens_and_cost(tmp_path, monkeypatch, break_parser):
    if break_parser:   # whatever goes wrong while parsing, the call was made and paid for
        monkeypatch.setattr("mmbench.rankers.base.parse_ranking", lambda text, n: [][1])
    media = MediaStore(tmp_path / "media")
    refs = [media.put_image(random_image(16, 16, i)).ref for i in range(3)]
    with FakeLLMServer(lambda req: (200, openai_envelope("[" * 5000))) as server:
        ranker = load_ranker("openai-chat", "m", base_url=server.url, prices=Prices(2.0, 8.0))
        r = ranker.rank("cap", ["x", "y", "z"], refs, media, item="q1")
    assert r.failed and r.ranked_ids == [] and r.error and r.raw_text.startswith("[[[")
    assert (r.input_tokens, r.output_tokens) == (1000, 50) and r.cost_usd == pytest.approx((1000 * 2 + 50 * 8) / 1e6)


def test_unclosed_brackets_after_the_answer_are_ignored():
    text = json.dumps([[i] for i in range(1, N + 1)]) + " [x" * 2000
    assert parse_ranking(text, N).order == [1, 2, 3, 4, 5]
