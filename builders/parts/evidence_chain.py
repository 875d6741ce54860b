"""Does a broken context still answer its question? A lexical test shared by builder and checker.

A Hard variant of Multi-Source Reasoning replaces a key evidence span. That breaks the chain only
if what the span contributed is gone from everything that is left (the other evidence, the rest
of the context, the filler and the replacement text itself). The test below names each way the
chain can survive:

* ``answer survives``: the span carried part of the answer (an answer part, split at ";", found in
  its text), and that part is still written in a remaining unit tied to it: one about the span's
  subject, or one sharing a distinctive value with the question or with the span (besides the
  answer itself); a river of the same name in an unrelated town is a coincidence. A short answer part (up to 6
  words) written in no text unit of the record is taken to be shown by the gold images; replacing
  one gold image then leaves it answered while another gold image remains. A longer part written
  nowhere (a free-form answer) is not searched for.
* ``fact restated``: a remaining unit about the same subject (same HotpotQA paragraph, or naming
  the paragraph's title; any unit for untitled sources) holds at least two of the span's
  distinctive values (numbers and capitalised names not in the question or the title; all of
  them when it has only one). "Rosa was born in Westermoor in 1970." is restated by "Rosa
  Gallowglass (born 1970) ... grew up in Westermoor." in the same paragraph.
* ``image survives``: the replaced image (content-addressed, so same pixels = same ref) is still
  in the candidate.
* ``answer reachable``: whatever the source marked, a remaining unit tied to the question (sharing two of
  its distinctive values) writes an answer part, or belongs to the paragraph the answer part names: the
  answer is reached from what is left (HotpotQA marks only a paragraph's first sentences as supporting).
* ``span not needed``: the answer is searchable, yet the span carries no part of it and shares
  no distinctive value with any other evidence unit: the remaining evidence answers without it.

* ``comparison decided``: for a comparison or yes/no question (the answer is "yes"/"no" or one of the
  names the question compares), what decides the comparison for the replaced span's entity must go with
  it: a remaining unit about that entity (its paragraph, or naming its title) that holds a number (a year,
  a date, a count: what "older", "earlier", "more" compare) or a word of the question's property (a
  question word, other than the compared names, sharing its first five letters: "members" and "member")
  still decides it, and so does one sharing a distinctive value with the replaced span ("an American
  director" restated as "Derrickson, an American, ..."). A remaining unit about any compared entity that writes the question's property
  values (its capitalised names and numbers besides the compared names; two of them, or all when
  there is one) decides it alone: "Which dog's ancestors include Gordon and Irish Setters?" is answered
  by "Other ancestors include the Gordon and Irish Setters." under either title.

Answers that are "yes"/"no" or written in the question are not searched for as answer parts; every
evidence span then counts as needed and the comparison rule above applies. Everything is a pure
function of the units' text, so the same data gives the same verdict everywhere.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import AbstractSet, Sequence

from mmbench.builders.parts.query_filter import STOPWORDS

TOKEN = re.compile(r"[A-Za-z\u00C0-\u024F][\w'\u00C0-\u024F-]*|\d[\d,.]*\d|\d")
NOT_NAMES = STOPWORDS | frozenset("our we us you your i my its it's one two three".split())
UNSEARCHABLE_ANSWERS = frozenset({"", "yes", "no", "none", "unknown"})
MAX_IMAGE_PART_WORDS = 6   # an answer part written in no text is taken to be shown by a gold image up to this length


@functools.lru_cache(maxsize=8192)
def norm(text: str) -> str:
    """Lower case, every run of non-alphanumerics one space (what phrases are matched on)."""
    return " ".join(re.findall(r"[0-9a-z\u00e0-\u024f]+", text.lower()))


def has_phrase(text_norm: str, phrase_norm: str) -> bool:
    return bool(phrase_norm) and f" {phrase_norm} " in f" {text_norm} "


@functools.lru_cache(maxsize=8192)
def _words(text: str) -> frozenset[str]:
    return frozenset(norm(text).split())


def values(text: str, exclude: AbstractSet[str]) -> set[str]:
    """Distinctive values of a sentence: numbers and capitalised names, lower-cased, minus `exclude`.

    The sentence's first word is a name only if it is capitalised again later ("During", "Its"
    are capitalised by position alone); a name that opens a sentence is mostly its subject, which
    `exclude` holds anyway.
    """
    out = set()
    toks = TOKEN.findall(text)
    for k, tok in enumerate(toks):
        if tok[0].isdigit():
            out.add(re.sub(r"[,.]", "", tok))
        elif tok[0].isupper() and tok.lower() not in NOT_NAMES and (k > 0 or tok in toks[1:]):
            out.update(norm(tok).split())
    return {v for v in out if (v.isdigit() or len(v) > 1) and v not in exclude}


@dataclass(frozen=True)
class ChainUnit:
    """What the test sees of one segment: its text (None for an image), image ref, subject, gold flag."""

    text: str | None
    ref: str | None = None
    subject: str = ""       # HotpotQA paragraph title; "" where a source has none (MMDocRAG, filler)
    gold: bool = False


def answer_parts(answer: str, question: str) -> list[str]:
    """The answer's searchable parts: split at ';', normalised, minus yes/no and parts in the question."""
    q = norm(question)
    parts = [norm(p) for p in str(answer).split(";")]
    return [p for p in parts if p not in UNSEARCHABLE_ANSWERS and not has_phrase(q, p)]


def _about(u: ChainUnit, subject: str) -> bool:
    if not subject:
        return True
    return u.subject == subject or (u.text is not None and has_phrase(norm(u.text), norm(subject)))


@dataclass(frozen=True)
class Leak:
    """One way a variant still answers; `unit` is the index of the unit that gives it away, if one does."""

    reason: str
    unit: int | None = None


def chain_survives(original: Sequence[ChainUnit], variant: Sequence[ChainUnit], replaced: Sequence[int],
                   question: str, answer: str) -> list[str]:
    """Why `variant` (the units of `original` with indices `replaced` swapped) still answers; [] if broken."""
    return [leak.reason for leak in chain_leaks(original, variant, replaced, question, answer)]


def chain_leaks(original: Sequence[ChainUnit], variant: Sequence[ChainUnit], replaced: Sequence[int],
                question: str, answer: str) -> list[Leak]:
    """The leaks of `variant`: `original` and `variant` are aligned unit for unit (a replacement takes
    its span's place), `replaced` are the indices swapped."""
    replaced = sorted(set(replaced))
    gone = [original[i] for i in replaced]
    keep = [(k, u) for k, u in enumerate(variant) if k not in replaced]  # untouched units
    left_text = [(k, u, norm(u.text)) for k, u in enumerate(variant) if u.text is not None]  # and replacements
    reasons: list[Leak] = []
    q_words = _words(question)
    parts = answer_parts(answer, question)
    in_text = {p: [k for k, u in enumerate(original) if u.text is not None and has_phrase(norm(u.text), p)]
               for p in parts}
    gold_images = [k for k, u in enumerate(original) if u.gold and u.text is None]
    # a part written nowhere is searchable only if gold images can show it (a short value, not a
    # free-form sentence); otherwise it is left out, as yes/no answers are
    parts = [p for p in parts if in_text[p] or (gold_images and len(p.split()) <= MAX_IMAGE_PART_WORDS)]
    q_values = values(question, set())
    carried_by_gone = set()
    for p in parts:
        carriers = in_text[p] if in_text[p] else gold_images
        if not any(k in replaced for k in carriers):
            continue
        carried_by_gone.add(p)
        # written again where it is tied to the question or to the replaced fact, not by coincidence
        ties = q_values | {v for i in replaced if original[i].text is not None
                           for v in values(original[i].text, q_words | set(p.split()))}
        subjects = [original[i].subject for i in replaced     # the answer's own paragraph is no tie
                    if original[i].subject and not has_phrase(p, norm(original[i].subject))]
        where = next(((k, t) for k, u, t in left_text if has_phrase(t, p) and
                      (ties & _words(u.text) or any(_about(u, s) for s in subjects))), None)
        if where is not None:
            reasons.append(Leak(f"answer survives: {p!r} is still written in {_snip(where[1])!r}", where[0]))
        elif not in_text[p]:
            img = next((k for k in gold_images if k not in replaced), None)
            if img is not None:
                reasons.append(Leak(f"answer survives: {p!r} is shown by a gold image that remains", img))
    reasons += _reachable(variant, left_text, parts, q_values, reasons)
    for i, g in zip(replaced, gone):
        if g.text is None:
            same = next((k for k, u in enumerate(variant) if g.ref is not None and u.ref == g.ref), None)
            if same is not None:
                reasons.append(Leak(f"image survives: gold image {g.ref} is still in the candidate", same))
            continue
        vals = values(g.text, q_words | _words(g.subject))
        if not vals:
            continue
        need = min(2, len(vals))
        for k, u in keep:
            if u.text is None or not _about(u, g.subject):
                continue
            hit = vals & _words(u.text)
            if len(hit) >= need:
                reasons.append(Leak(f"fact restated: {sorted(hit)} of {_snip(g.text)!r} also in {_snip(u.text)!r}", k))
    if not parts and is_comparison(question, answer):
        reasons += _comparison_leaks(original, variant, replaced, question, answer)
    if parts and not carried_by_gone:
        others = [u for k, u in enumerate(original) if u.gold and k not in replaced and u.text is not None]
        linked = any(values(g.text, q_words | _words(g.subject)) & (_words(u.text) | _words(u.subject))
                     for g in gone if g.text is not None for u in others)
        if not linked:
            reasons.append(Leak("span not needed: it carries no part of the answer and no link to the other "
                                "evidence, which still answers"))
    return reasons


PROPERTY_PREFIX = 5          # a question's property word matches a unit word sharing its first five letters
QUESTION_WORDS = frozenset("which who whom whose what when where why how both either same more most less least "
                           "older younger earlier later first last".split())


def is_comparison(question: str, answer: str) -> bool:
    """A comparison or yes/no question: the answer is yes/no or one of the names written in the question."""
    a = norm(str(answer))
    return a in ("yes", "no") or (bool(a) and has_phrase(norm(question), a))


def _property_words(question: str, names: set[str]) -> set[str]:
    """The question's own words for what it compares: content words (4+ letters) other than the compared names."""
    return {w[:PROPERTY_PREFIX] for w in norm(question).split()
            if len(w) >= 4 and not w.isdigit() and w not in names and w not in NOT_NAMES and w not in QUESTION_WORDS}


def _comparison_leaks(original: Sequence[ChainUnit], variant: Sequence[ChainUnit], replaced: Sequence[int],
                      question: str, answer: str) -> list[Leak]:
    """What still decides a comparison once the spans `replaced` are gone (see the module's rule)."""
    subjects = {u.subject for u in original if u.gold and u.subject}
    names = {w for s in subjects for w in _words(s)} | set(norm(str(answer)).split())
    prop_values = values(question, names)
    prop_words = _property_words(question, names)
    gone = {original[i].subject for i in replaced if original[i].subject}
    spans: dict[str, set[str]] = {}     # the replaced spans' own distinctive values, per entity
    for i in replaced:
        if original[i].subject and original[i].text is not None:
            spans.setdefault(original[i].subject, set()).update(values(original[i].text, names | _words(question)))
    out: list[Leak] = []
    for k, u in enumerate(variant):
        if u.text is None or (k in replaced and u.text != original[k].text):
            continue
        u = original[k] if k in replaced else u     # a "replacement" that gives the original text back
        words = _words(u.text)
        hit = prop_values & words
        if prop_values and len(hit) >= min(2, len(prop_values)) and any(_about(u, s) for s in subjects):
            out.append(Leak(f"comparison decided: {_snip(u.text)!r} writes {sorted(hit)} of the question", k))
            continue
        about = next((s for s in gone if _about(u, s)), None)
        if about is None:
            continue
        numbers = sorted(w for w in words if w[0].isdigit())
        props = sorted(w for w in words if w[:PROPERTY_PREFIX] in prop_words)
        shared = sorted(spans.get(about, set()) & words)
        if numbers or props or shared:
            what = f"number {numbers[0]}" if numbers else repr(props[0]) if props else repr(shared[0])
            out.append(Leak(f"comparison decided: {_snip(u.text)!r} still gives {about!r} its {what}", k))
    return out


def _reachable(variant: Sequence[ChainUnit], left_text, parts: list[str], q_values: set[str],
               found: list[Leak]) -> list[Leak]:
    """Answers reachable from what is left, whatever the source marked as supporting: a remaining unit tied to
    the question (it shares at least two of the question's distinctive values, all of them when it has only one)
    that writes an answer part, or that sits in a paragraph whose title is the answer part. HotpotQA marks only
    some sentences of a paragraph; the fact a question needs can sit in one it left unmarked."""
    out = []
    said = {k for lk in found if lk.reason.startswith("answer") for k in [lk.unit]}
    for p in parts:
        qv = q_values - set(p.split())
        if not qv:
            continue
        need = min(2, len(qv))
        for k, u, t in left_text:
            if k in said or len(qv & _words(u.text)) < need:
                continue
            if has_phrase(t, p) or (u.subject and norm(u.subject) == p):
                tie = sorted(qv & _words(u.text))
                out.append(Leak(f"answer reachable: {_snip(u.text)!r} ties {tie} of the question to {p!r}", k))
                break
    return out


def _snip(text: str, n: int = 70) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[:n - 1] + "…"
