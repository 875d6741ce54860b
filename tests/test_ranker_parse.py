"""The listwise reply parser on replies a reviewer found misread: brackets inside strings and prose,
string labels, ties between arrays, stray short arrays, pathological nesting, and repair counting."""
from __future__ import annotations

import json

import pytest

from fake_llm_server import FakeLLMServer, openai_envelope
from mmbench.data.media import MediaStore
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
        monkeypatch.setattr("mmbench.rankers.base.parse_ranking", lambda text, n: [][1])  # noqa: PLE0643 - the parser is meant to raise
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


# Hostile replies: the parser's work must grow linearly with the reply. The work is measured (characters the
# JSON decoder reads, from each try's start to where it stopped), not the wall time.
HOSTILE = {
    "open brackets": "[" * 20000,
    "balanced nesting": "[" * 20000 + "]" * 20000,
    "nested answer": "[" * 20000 + "3, 1, 2" + "]" * 20000,
    "open lists": "[1," * 20000,
    "many small arrays": "[1]" * 20000,
    "prose and brackets": "a [" * 20000,
    "open strings": '["' * 20000,
    "escapes": '["\\' * 20000,
    "broken arrays in arrays": "[x [" * 20000,
    "huge number": "[" + "9" * 100000 + "]",
    "long strings": '["' + "[" * 20000 + '"' + " [" * 2000,
}


class CountingDecoder:
    """Wraps the parser's JSON decoder and adds up how far each call read."""

    def __init__(self):
        self.read = 0
        self.inner = json.JSONDecoder()

    def raw_decode(self, text, start):
        try:
            value, end = self.inner.raw_decode(text, start)
        except json.JSONDecodeError as exc:
            self.read += exc.pos - start
            raise
        except (ValueError, RecursionError):      # no position: count it as reading to the end
            self.read += len(text) - start
            raise
        self.read += end - start
        return value, end


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_replies_cost_linear_work(name, monkeypatch):
    import mmbench.rankers.parse as parse

    text = HOSTILE[name]
    decoder = CountingDecoder()
    monkeypatch.setattr(parse, "_DECODER", decoder)
    r = parse_ranking(text, N)
    assert r.failed == (name not in ("open lists", "many small arrays"))
    if not r.failed:
        assert r.order == [1, 2, 3, 4, 5]
    assert decoder.read <= (parse.WORK_PER_CHAR + 2) * len(text) + 1000, decoder.read


def test_hostile_padding_around_a_real_answer_keeps_the_answer():
    for padding in ("[x " * 3000, "[1] " * 3000, '["a" ' * 3000):
        r = parse_ranking(padding + "Final ranking: [3, 1, 2, 5, 4]", N)
        assert not r.failed and r.order == ANSWER, padding[:10]
    # nesting deeper than the JSON decoder reads is garbage: a quick failure, whatever follows it
    assert parse_ranking("[" * 3000 + " Final ranking: [3, 1, 2, 5, 4]", N).failed


@pytest.mark.timeout(30)
@pytest.mark.parametrize("label", [" " * 2000, "Image" + " " * 2000 + "3", "#" + " " * 2000 + "(3)"])
def test_labels_full_of_blanks_are_unknown_and_fast(label):
    """The old label pattern backtracked polynomially on runs of blanks (160 blanks: 0.75 s; 2000: hours)."""
    r = parse_ranking(json.dumps([label, 3, 1, 2, 5, 4]), N)
    assert not r.failed and r.order == ANSWER and r.repairs == {"unknown": 1}

