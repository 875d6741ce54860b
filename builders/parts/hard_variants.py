"""Multi-Source Reasoning Hard variants: which units to replace so the chain breaks, and with what.

`plan_variants` decides, per slot (first, last, random middle evidence span), the units to replace
(the span and the units that restate its fact), using the evidence-chain rule; `replacements_for`
draws length-matched donor text (whole sentences, else whole words) or donor images for them,
redrawing any that give the answer back; `audit_hard` asks the optional LLM auditor. All of it is
the same at every pool length; the builder checks each variant again once filler is in.
"""
from __future__ import annotations

import re
from typing import Sequence

from mmbench.data.documents import Image, Text
from mmbench.data.media import MediaStore
from mmbench.data.tokens import UnifiedTokenCounter

from mmbench.builders.parts.evidence_chain import ChainUnit, answer_parts, chain_leaks, has_phrase, norm, values
from mmbench.builders.parts.expansion import Unit, boundary_matched_text, image_unit
from mmbench.builders.checks.shingles import ShingleCoder
from mmbench.builders.parts.hard_auditor import HardAuditor
from mmbench.builders.parts.seeding import seeded_rng
from mmbench.builders.sources.hotpotqa import ReasoningRecord

MAX_EXTRA_REPLACED = 2      # units restating a replaced fact that may be replaced with it
DONOR_TRIES = 8             # redraws of a variant's replacements that gave the answer back
TEXT_TRIES = 40             # donor draws for one exact-length replacement text
_WORD = re.compile(r"\w+")


def chain_units(units: Sequence[Unit]) -> list[ChainUnit]:
    """What the evidence-chain test sees of a record's units (the checker reads the same from the pool set)."""
    out = []
    for u in units:
        seg = u.segment
        subject = str(u.info.get("title", "")) if u.role in ("context", "evidence") and u.source.startswith("hotpotqa:") \
            else ""
        out.append(ChainUnit(seg.text if isinstance(seg, Text) else None, seg.ref if isinstance(seg, Image) else None,
                             subject, u.is_evidence))
    return out


def _blanked(original: list[ChainUnit], removed: set[int]) -> list[ChainUnit]:
    return [ChainUnit("" if u.text is not None else None) if k in removed else u for k, u in enumerate(original)]


def plan_variants(r: ReasoningRecord, seed: int) -> tuple[dict[str, list[int]], dict[str, str]]:
    """Which units each Hard variant replaces, so that the evidence chain is broken.

    Each slot (first, last, random middle evidence span) starts from its span. Units that still
    give the replaced fact or the answer away (`chain_leaks`) are replaced with it, up to
    MAX_EXTRA_REPLACED more; a span the answer does not need, or one that cannot be repaired, is
    swapped for an evidence span no other slot uses. Returns {slot: unit indices} and
    {slot: why it was dropped}.
    """
    ev = r.evidence_indices
    if not ev:
        return {}, {}
    chosen = {"first": ev[0], "last": ev[-1]}
    if len(ev) >= 3:
        chosen["middle"] = ev[1 + int(seeded_rng(seed, "middle", r.dataset, r.id).integers(len(ev) - 2))]
    original = chain_units(r.units)
    plans: dict[str, list[int]] = {}   # slot -> [key evidence span, units restating it...]
    dropped: dict[str, str] = {}
    taken: set[int] = set()
    for which, span in chosen.items():
        spare = [i for i in ev if i not in chosen.values() and i not in taken]
        why = None
        for start in [span] + spare:
            removed, leaks = {start}, []
            for _ in range(MAX_EXTRA_REPLACED + 1):
                leaks = chain_leaks(original, _blanked(original, removed), sorted(removed), r.question, r.answer)
                fixable = {lk.unit for lk in leaks if lk.unit is not None and lk.unit not in removed}
                if not leaks or any(lk.unit is None for lk in leaks) or \
                        len(removed | fixable) > 1 + MAX_EXTRA_REPLACED:
                    break
                removed |= fixable
            if leaks:
                why = why or reason_kind(leaks[0].reason)
                continue
            if any(set(p) == removed for p in plans.values()):
                why = why or "duplicate: repairing it gives another variant's replacement"
                continue
            plans[which] = [start] + sorted(removed - {start})   # the key span first, then its restatements
            taken.add(start)
            break
        else:
            dropped[which] = why or "no evidence span left"
    return plans, dropped


def audit_hard(auditor: HardAuditor, r: ReasoningRecord, variants: dict[str, list],
               refused: dict[str, str]) -> dict[str, dict]:
    """Ask the LLM auditor about each built variant (its original context, filler left out); drop what it
    says still answers, and what it could not judge. Returns the verdicts of the variants kept."""
    kept = {}
    for which in list(variants):
        units = list(r.units)
        for i, unit, _, _ in variants[which]:
            units[i] = unit
        verdict = auditor.audit(r, units)
        if verdict.answerable is not False:
            refused[which] = "auditor: still answers" if verdict.answerable else "auditor failed"
            del variants[which]
        else:
            kept[which] = {"answerable": False, "reason": verdict.reason}
    return kept


def reason_kind(reason: str) -> str:
    if reason.startswith("answer reachable"):
        return "answer reachable from what remains"
    return {"answer": "answer survives elsewhere", "fact": "replaced fact restated elsewhere",
            "image": "replaced gold image survives", "comparison": "comparison still decided by what remains",
            "span": "span not needed: the remaining evidence answers"
            }.get(reason.split()[0], reason.split(":")[0])


def replacements_for(r: ReasoningRecord, plans: dict[str, list[int]], pool: list[ReasoningRecord],
                     counter: UnifiedTokenCounter, media: MediaStore, seed: int,
                     dropped: dict[str, str]) -> dict[str, list[tuple[int, Unit, dict, str]]]:
    """For each planned variant: [(unit index, replacement unit, provenance, why replaced)]. Same at every length.

    A replacement that gives the answer or the fact back is redrawn (up to DONOR_TRIES times).
    """
    donors = [d for d in pool if d.id != r.id]
    original = chain_units(r.units)
    out = {}
    for which, removed in plans.items():
        rng = seeded_rng(seed, "donor", r.dataset, r.id, which)
        for _ in range(DONOR_TRIES):
            try:
                repl = [(i, *_replacement(r.units[i], donors, counter, media, rng)) for i in removed]
            except ValueError as exc:
                dropped[which] = str(exc).split(": ", 1)[-1]
                break
            variant = list(original)
            for i, unit, _ in repl:
                variant[i] = chain_units([unit])[0]
            if not chain_leaks(original, variant, removed, r.question, r.answer):
                why = {i: ("key evidence span" if k == 0 else "restates the replaced fact or the answer")
                       for k, i in enumerate(removed)}
                out[which] = [(i, unit, info, why[i]) for i, unit, info in repl]
                dropped.pop(which, None)
                break
            dropped[which] = "every donor drawn gives the answer or the fact back"
    return out


DECOY_SLACK = 0.25          # a mirrored unit's tokens may differ from the unit it mirrors by this share
DECOY_TRIES = 12            # decoy draws compared with the mirrored variant's shingle change
SHINGLE_WORDS = 5           # words per shingle, as the pool medoid reads them (`checks.pool_aware`)


def decoy_for(r: ReasoningRecord, variants: dict[str, list[tuple[int, Unit, dict, str]]],
              pool: list[ReasoningRecord], counter: UnifiedTokenCounter, media: MediaStore,
              seed: int) -> tuple[str, list[tuple[int, Unit, dict]]] | None:
    """The relevant candidate's own replaced units (issues 33 and 43), so that it is no centre of its family.

    The relevant candidate mirrors one of its Hard variants, drawn by seed: it replaces as many units outside the
    evidence chain as the variant replaces, each of the same kind (text for text, image for image) and of about
    the same length (within DECOY_SLACK, else the nearest), text with donor text of exactly its length and an image
    with a donor image resized to its pixels. Of DECOY_TRIES such draws it keeps the one whose change to the
    record's word shingles (the shingles it removes and adds, as the pool medoid counts them) is nearest the
    variant's, so the relevant candidate differs from each variant as the variants differ from each other. (Issue
    33's decoy replaced one sentence of about a variant's tokens; a variant that also replaced a restating unit,
    or an image, or a sentence of a template the record repeats, changed more or less, so the relevant
    HotpotQA-layout context was the centre of its family in 0.26 of Hard pools, chance 0.125, and the
    MMDocRAG-layout one in 0.02.) A spare unit belongs to no evidence paragraph, writes no answer part and no
    distinctive value of the question. Variants that cannot be mirrored are passed over; returns (the mirrored
    variant, [(unit index, replacement, provenance)]), or None when the record has no variant or none can be."""
    if not variants:
        return None
    rng = seeded_rng(seed, "decoy", r.dataset, r.id)
    spare, change = _spare_units(r, variants), _ShingleChange(r)
    donors = [d for d in pool if d.id != r.id]
    for which in [sorted(variants)[int(k)] for k in rng.permutation(len(variants))]:
        target = change({i: unit for i, unit, _, _ in variants[which]})
        best: tuple[int, list[tuple[int, Unit, dict]]] | None = None
        for _ in range(DECOY_TRIES):
            picked = _mirror(r, [i for i, _, _, _ in variants[which]], spare, rng)
            if picked is None:
                break
            try:
                repl = [(i, *_decoy_unit(r.units[i], donors, counter, media, rng, which)) for i in picked]
            except ValueError:
                continue
            gap = abs(change({i: unit for i, unit, _ in repl}) - target)
            if best is None or gap < best[0]:
                best = (gap, repl)
            if gap == 0:
                break
        if best is not None:
            return which, best[1]
    return None


class _ShingleChange:
    """How many distinct word shingles (SHINGLE_WORDS words, casefolded, within one unit; an image one shingle)
    a record's context loses and gains when some of its units are replaced."""

    def __init__(self, r: ReasoningRecord) -> None:
        self.coder = ShingleCoder(SHINGLE_WORDS)
        self.units = [self._codes(u) for u in r.units]
        self.whole = set().union(*self.units)

    def _codes(self, u: Unit) -> set[int]:
        if isinstance(u.segment, Image):
            return {self.coder.media(u.segment.ref)}
        if isinstance(u.segment, Text):
            return set(self.coder.codes(_WORD.findall(u.segment.text.casefold())).tolist())
        return set()

    def __call__(self, replaced: dict[int, Unit]) -> int:
        after = set().union(*(self._codes(replaced[k]) if k in replaced else c for k, c in enumerate(self.units)))
        return len(after ^ self.whole)


def family_size(C: int) -> int:
    """The most candidates one record's family (its relevant candidate and its Hard variants) may take in a Hard
    pool of C: half the pool, so every Hard pool holds at least two families of one shape and a reader that never
    sees the query cannot tell the query's family by its overlap with the rest of the pool (issue 43); a pool of
    two is one family of two, alike by symmetry. Three candidates leave room for one family of two beside a
    stranger, found by its overlap (P@1 1/2 against chance 1/3): refused."""
    if C == 3:
        raise ValueError("candidates_per_query=3 cannot be made centre-free: a Hard pool would hold the query's "
                         "family of two beside one stranger, which a query-blind reader tells apart by overlap "
                         "(P@1 0.500 against chance 0.333, above chance + 0.08); the smallest shape that works "
                         "is candidates_per_query=4 (two families of two; or 2, one family)")
    return C if C < 4 else C // 2


def family_variants(variants: dict[str, list], decoy: tuple[str, list] | None, C: int) -> tuple[dict, dict]:
    """The variants a record's Hard pools use, the one its relevant candidate mirrors first, at most
    `family_size(C) - 1`; and {slot: why} for those left out."""
    first = [decoy[0]] if decoy is not None and decoy[0] in variants else []
    order = first + [w for w in variants if w not in first]
    room = family_size(C) - 1
    kept = {w: variants[w] for w in order[:room]}
    return kept, {w: f"no room: a Hard pool of {C} holds families of at most {room + 1}" for w in order[room:]}


def _decoy_unit(target: Unit, donors: list[ReasoningRecord], counter, media, rng, which: str) -> tuple[Unit, dict]:
    unit, info = _replacement(target, donors, counter, media, rng)
    return unit, {**info, "matched_to": which}


def _spare_units(r: ReasoningRecord, variants: dict[str, list[tuple[int, Unit, dict, str]]]) -> list[int]:
    """Units a decoy may replace: no evidence, no unit a variant replaces, no paragraph title, no sentence of an
    evidence paragraph, none that writes an answer part or a distinctive value of the question."""
    used = {i for repl in variants.values() for i, _, _, _ in repl}
    gold_subjects = {str(r.units[i].info.get("title", "")) for i in r.evidence_indices}
    parts = answer_parts(r.answer, r.question)
    q_values = values(r.question, set())
    spare = []
    for i, u in enumerate(r.units):
        if u.is_evidence or i in used or u.role not in ("context", "evidence") \
                or ("title" in u.info and "sent_id" not in u.info):
            continue
        if u.info.get("title") and str(u.info["title"]) in gold_subjects:
            continue
        if isinstance(u.segment, Text):
            t = norm(u.segment.text)
            if any(has_phrase(t, p) for p in parts) or q_values & set(t.split()):
                continue
        elif not isinstance(u.segment, Image):
            continue
        spare.append(i)
    return spare


def _mirror(r: ReasoningRecord, replaced: list[int], spare: list[int], rng) -> list[int] | None:
    """One distinct spare unit per replaced unit, of its kind and about its length (see `decoy_for`)."""
    left, picked = list(spare), []
    for k in replaced:
        target = r.units[k]
        same = [i for i in left if isinstance(r.units[i].segment, type(target.segment))]
        if not same:
            return None
        near = [i for i in same if abs(r.units[i].tokens - target.tokens) <= DECOY_SLACK * target.tokens]
        if not near:
            best = min(abs(r.units[i].tokens - target.tokens) for i in same)
            near = [i for i in same if abs(r.units[i].tokens - target.tokens) == best]
        i = near[int(rng.integers(len(near)))]
        picked.append(i)
        left.remove(i)
    return picked


def _replacement(target: Unit, donors: list[ReasoningRecord], counter, media, rng) -> tuple[Unit, dict]:
    if isinstance(target.segment, Image):
        return _image_replacement(target, donors, media, rng)
    return _text_replacement(target, donors, counter, rng)


def _text_replacement(target: Unit, donors: list[ReasoningRecord], counter, rng) -> tuple[Unit, dict]:
    """Whole sentences (else whole words) of another record's non-evidence text, exactly `target.tokens` long.

    Paragraph titles are not used (a bare title mid-sentence reads as noise). Several draws are
    tried; the first that ends a sentence wins, else the first that ends a word.
    """
    word = None
    for _ in range(TEXT_TRIES):
        d = donors[int(rng.integers(len(donors)))]
        texts = [(u.source, u.segment.text) for u in d.units if not u.is_evidence and isinstance(u.segment, Text)
                 and not ("title" in u.info and "sent_id" not in u.info)]
        if not texts:
            continue
        start = int(rng.integers(len(texts)))
        span = texts[start:]
        fit = boundary_matched_text(counter.tokenizer, [t for _, t in span], target.tokens)
        if fit is None:
            continue
        text, boundary = fit
        found = (d, span, text, boundary)
        if boundary == "sentence":
            word = found
            break
        word = word or found
    if word is None:
        raise ValueError(f"record {target.source}: no donor text fits {target.tokens} tokens at a word boundary")
    d, span, text, boundary = word
    return (Unit(Text(text), target.tokens, "replacement", span[0][0]),
            {"kind": "text", "from_record": f"{d.dataset}:{d.id}", "from_units": _used_sources(span, text),
             "tokens": target.tokens, "text": text, "boundary": boundary})


def _used_sources(span: list[tuple[str, str]], text: str) -> list[str]:
    """Sources of the donor units the replacement text is made of (in order)."""
    used, pos = [], 0
    for source, t in span:
        if pos >= len(text):
            break
        used.append(source)
        pos += len(" ".join(t.split())) + 1
    return used


def _image_replacement(target: Unit, donors: list[ReasoningRecord], media: MediaStore, rng) -> tuple[Unit, dict]:
    """Another record's non-evidence image, resized to the target's pixels (identical token count)."""
    pool = [(d, u) for d in donors for u in d.units if isinstance(u.segment, Image) and not u.is_evidence]
    if not pool:
        raise ValueError(f"record {target.source}: no donor images to replace an image evidence span")
    d, u = pool[int(rng.integers(len(pool)))]
    seg = target.segment
    img = media.load_image(u.segment.ref, item=u.source).resize((seg.width, seg.height))
    stored = media.put_image(img, format="JPEG")
    return (image_unit(stored, role="replacement", source=u.source),
            {"kind": "image", "from_record": f"{d.dataset}:{d.id}", "from_units": [u.source],
             "tokens": target.tokens, "resized_from": [u.segment.width, u.segment.height],
             "description": u.info.get("description", "")})
