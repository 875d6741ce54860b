"""Look-alike families from real needles, so stock NeedleBench and MM-NIAH files give the seed's design.

Text: each NeedleBench question keeps one needle (later lines asking the same question would be
second answering candidates, so they are dropped with that reason). The entity the question names
and the needle repeats ("the Moon" in "Which band was the first to perform on the Moon?") is found,
classified (a year, a number, a celestial body, a place with a head noun such as "Island", or a
name), and replaced by others of its kind in both needle and question. Each family holds the real
needle and `family_size - 1` look-alikes that read the same, differ only in that entity, and answer
only their own question. Substitutes never occur in any other needle or question of the source.

Images: each needle image is described by an integer descriptor, by default "thumbnail-histogram"
(a 4×4×4 colour histogram of a 32×32 thumbnail, plus an 8×8 RGB thumbnail), or "model:NAME" (a
registered image embedder's unit vectors, rounded); families are formed greedily in source order,
each the first unassigned image with its nearest unassigned neighbours (squared Euclidean
distance, exact in integers, ties by source order).
"""
from __future__ import annotations

import hashlib
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
from PIL import Image as PILImage

from mmbench.builders.parts.text_match import occurs as occurs_lower
from mmbench.data.drops import DropLog
from mmbench.builders.parts.validity import normalise_question
from mmbench.data.documents import Document
from mmbench.data.media import MediaStore

from mmbench.builders.sources.needles import ImageNeedleRecord, Needle, NeedleRecord, load_needle_image

IMAGE_DESCRIPTOR = "thumbnail-histogram"
QUESTION_WORDS = {"which", "what", "who", "whom", "whose", "where", "when", "why", "how", "in", "on", "at", "the",
                  "a", "an", "is", "are", "was", "were", "did", "do", "does", "name", "according", "tell", "please"}
CAPITALISED = re.compile(r"[A-Z][\w'’-]*(?:\s+(?:of\s+|the\s+)?[A-Z][\w'’-]*)*")
NUMBER = re.compile(r"(?<![\w.])\d+(?![\w.])")
CELESTIAL = ("Moon", "Sun", "Earth", "Mars", "Venus", "Mercury", "Jupiter", "Saturn", "Uranus", "Neptune", "Pluto",
             "Titan", "Europa", "Ganymede", "Callisto", "Enceladus", "Ceres", "Triton", "Io")
WITH_THE = ("Moon", "Sun", "Earth")   # read with "the"; their substitutes are not
CELESTIAL_SUBSTITUTES = ("Mars", "Venus", "Mercury", "Jupiter", "Saturn", "Neptune", "Titan", "Europa", "Ganymede",
                         "Callisto", "Enceladus", "Pluto", "Ceres", "Triton", "Io", "Uranus")
PLACE_HEADS = ("Island", "Islands", "Isle", "City", "Town", "Village", "Kingdom", "Empire", "Republic", "Mountain",
               "Mountains", "Lake", "River", "Bay", "Valley", "Forest", "Desert", "Sea", "Ocean", "Coast", "Harbour",
               "Harbor", "Point", "Street", "Lane", "Road", "Square", "Park", "Castle", "Tower", "Galaxy", "Nebula",
               "Planet", "Station", "Academy", "University", "Library", "Museum", "Temple", "Palace", "Cave")
PLACE_MODIFIERS = ("Emerald", "Crimson", "Silver", "Amber", "Obsidian", "Coral", "Ivory", "Cobalt", "Golden", "Misty",
                   "Willow", "Thistle", "Granite", "Saffron", "Juniper", "Heron", "Marble", "Copper", "Falcon", "Aspen")
TITLES = ("Professor", "Doctor", "Dr", "Mr", "Mrs", "Ms", "Miss", "Captain", "King", "Queen", "Prince", "Princess",
          "Lord", "Lady", "Sir", "Saint", "General", "President", "Chancellor", "Mayor", "Judge", "Uncle", "Aunt")
NAME_SUBSTITUTES = ("Ashdown", "Brackwater", "Calder", "Dunmore", "Everly", "Fairholm", "Greystone", "Halloran",
                    "Ivers", "Kingsley", "Larkin", "Merriden", "Northcote", "Oakhurst", "Pemberton", "Quinlan",
                    "Rowan", "Stanwick", "Thorne", "Underhill", "Vance", "Whitlock", "Yardley", "Zellner")


@dataclass(frozen=True)
class Entity:
    text: str
    kind: str   # year, number, celestial, place, name


def _rng(*parts: object) -> np.random.Generator:
    digest = hashlib.sha256(":".join(map(str, parts)).encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def _pattern(entity: str) -> re.Pattern:
    """Whole-word occurrences of `entity`; "Moon" also takes a leading "the" with it."""
    core = r"(?<![\w])" + re.escape(entity) + r"(?![\w])"
    if entity in WITH_THE:
        core = r"(?:(?<![\w])[Tt]he\s+)?" + core
    return re.compile(core)


def occurs(entity: str, text: str) -> bool:
    """Whether `entity` occurs in `text` as whole words, ignoring case (the validity rule, in any case)."""
    return occurs_lower(entity.lower(), text.lower())


def classify(entity: str) -> str:
    if re.fullmatch(r"1[5-9]\d\d|20\d\d", entity):
        return "year"
    if entity.isdigit():
        return "number"
    if entity in CELESTIAL:
        return "celestial"
    if entity.split()[-1] in PLACE_HEADS and len(entity.split()) > 1:
        return "place"
    return "name"


def query_entity(question: str, needle: str, answer: str = "") -> Entity | None:
    """The entity the question names and the needle repeats (not the answer): the longest such span."""
    spans: list[str] = [m.group(0) for m in NUMBER.finditer(question)]
    for m in CAPITALISED.finditer(question):
        words = m.group(0).split()
        while words and words[0].lower() in QUESTION_WORDS:
            words = words[1:]
        if words:
            spans.append(" ".join(words))
    found = []
    for span in spans:
        if not re.search(r"(?<![\w])" + re.escape(span) + r"(?![\w])", needle):
            continue
        if answer and (occurs(span, answer) or occurs(answer, span)):
            continue
        found.append(span)
    if not found:
        return None
    best = max(found, key=len)   # max keeps the first of equal length
    return Entity(best, classify(best))


def _substitute_pool(entity: Entity, key: str) -> list[str]:
    rng = _rng("substitutes", key, entity.text)
    if entity.kind == "year":
        pool = [str(y) for y in range(1900, 2031)]
    elif entity.kind == "number":
        digits = len(entity.text)
        lo, hi = (0, 10) if digits == 1 else (10 ** (digits - 1), 10 ** digits)
        pool = [str(v) for v in range(lo, min(hi, lo + 2000))]
    elif entity.kind == "celestial":
        pool = list(CELESTIAL_SUBSTITUTES)
    elif entity.kind == "place":
        head = entity.text.split()[-1]
        pool = [f"{m} {head}" for m in PLACE_MODIFIERS]
    else:
        first = entity.text.split()[0]
        title = f"{first} " if first in TITLES and len(entity.text.split()) > 1 else ""
        pool = [title + n for n in NAME_SUBSTITUTES]   # "Professor Lindqvist" -> "Professor Calder"
    return [pool[i] for i in rng.permutation(len(pool))]


def _replace(text: str, entity: str, substitute: str) -> str:
    def sub(m: re.Match) -> str:
        at_start = m.start() == 0 or text[:m.start()].rstrip().endswith((".", "!", "?"))
        return substitute[0].upper() + substitute[1:] if at_start else substitute
    return _pattern(entity).sub(sub, text)


def text_families(records: Sequence[NeedleRecord], family_size: int, drops: DropLog) -> list[Needle]:
    """Needles in look-alike families, contiguous in source order (see the module docstring)."""
    if any(r.family for r in records):
        return _explicit_families(records)
    kept: list[tuple[NeedleRecord, Entity]] = []
    by_question: dict[str, str] = {}
    by_entity: dict[str, str] = {}
    for rec in records:
        q = normalise_question(rec.question)
        if q in by_question:
            drops.drop("shares its question with an earlier needle (a second candidate answering it)",
                       f"{rec.where} (first: {by_question[q]})")
            continue
        entity = Entity(rec.entity, classify(rec.entity)) if rec.entity else query_entity(rec.question, rec.needle,
                                                                                          rec.answer)
        if entity is None:
            drops.drop("the question names no entity that its needle repeats (nothing to vary)", rec.where)
            continue
        if entity.kind == "number" and len(entity.text) < 3:
            drops.drop("the entity it names is a short number, which any long haystack repeats",
                       f"{rec.where} ({entity.text})")
            continue
        if entity.text.lower() in by_entity:
            drops.drop("names the same entity as an earlier needle's question", f"{rec.where} ({entity.text})")
            continue
        by_question[q] = rec.where
        by_entity[entity.text.lower()] = rec.where
        kept.append((rec, entity))
    corpus = [t for rec, _ in kept for t in (rec.needle, rec.question)]
    taken = set(by_entity)
    needles: list[Needle] = []
    for rec, entity in kept:
        subs = []
        for cand in _substitute_pool(entity, rec.id):
            if len(subs) == family_size - 1:
                break
            if cand.lower() in taken or any(occurs(cand, t) for t in corpus):
                continue
            subs.append(cand)
        variants = [(entity.text, rec.needle, rec.question)]
        for s in subs:
            variants.append((s, _replace(rec.needle, entity.text, s), _replace(rec.question, entity.text, s)))
        if len(subs) < family_size - 1 or any(occurs(entity.text, a) or occurs(entity.text, q)
                                              for _, a, q in variants[1:]):
            drops.drop("too few substitutes of the entity's kind for a full family", f"{rec.where} ({entity.text})")
            continue
        taken.update(s.lower() for s in subs)
        drops.keep()
        for j, (ent, anchor, question) in enumerate(variants):
            needles.append(Needle(id=f"text-{rec.id}-{j}", kind="text", family=f"nb-{rec.id}", entity=ent,
                                  query=question, anchor_text=anchor, answer=rec.answer, origin=rec.where,
                                  derived=j > 0))
    return needles


def _explicit_families(records: Sequence[NeedleRecord]) -> list[Needle]:
    """Records that carry their own `family` (an mmbench extension): used as given, grouped in order."""
    order = list(dict.fromkeys(r.family or r.id for r in records))
    out = []
    for fam in order:
        for r in records:
            if (r.family or r.id) == fam:
                ent = r.entity or (query_entity(r.question, r.needle, r.answer) or Entity("", "name")).text
                out.append(Needle(id=f"text-{r.id}", kind="text", family=fam, entity=ent, query=r.question,
                                  anchor_text=r.needle, answer=r.answer, origin=r.where))
    return out


def image_descriptor(img: PILImage.Image) -> np.ndarray:
    """Integer descriptor: 4×4×4 colour histogram of a 32×32 thumbnail, then an 8×8 RGB thumbnail."""
    rgb = img.convert("RGB")
    small = np.asarray(rgb.resize((32, 32), PILImage.BOX), dtype=np.int64)
    bins = (small // 64).reshape(-1, 3)
    hist = np.bincount(bins[:, 0] * 16 + bins[:, 1] * 4 + bins[:, 2], minlength=64)
    thumb = np.asarray(rgb.resize((8, 8), PILImage.BOX), dtype=np.int64).reshape(-1)
    return np.concatenate([hist, thumb])


def describe_with_model(name: str, load_model: Callable[[str], Any] | None) -> Callable[[Sequence[PILImage.Image]], np.ndarray]:
    """A descriptor from a registered image embedder: unit vectors rounded to 1e-6, as integers.

    Grouping is then exact given the embeddings; the embeddings themselves are as reproducible
    as the model (the default descriptor does not depend on any model or BLAS).
    """
    if load_model is None:
        raise ValueError(f"image_descriptor model:{name} needs a model loader: build through the task "
                         "(`mmbench build`, TaskSpec.build), which passes the model registry's")
    model = load_model(name)
    if "image" not in model.card.modalities:
        raise ValueError(f"image_descriptor model:{name} does not embed images (modalities: "
                         f"{', '.join(sorted(model.card.modalities))})")

    def describe(images: Sequence[PILImage.Image]) -> np.ndarray:
        with tempfile.TemporaryDirectory() as tmp:
            media = MediaStore(Path(tmp))
            docs = [Document(id=f"needle{i}", segments=[media.put_image(im)]) for i, im in enumerate(images)]
            vecs = np.asarray(model.encode(docs, "document", media), dtype=np.float64)
        norms = np.linalg.norm(vecs, axis=1, keepdims=True)
        return np.rint(vecs / np.where(norms > 0, norms, 1.0) * 1e6).astype(np.int64)

    return describe


def thumbnail_histogram(images: Sequence[PILImage.Image]) -> np.ndarray:
    return np.stack([image_descriptor(im) for im in images])


def resolve_descriptor(spec: str, load_model: Callable[[str], Any] | None = None) -> Callable[[Sequence[PILImage.Image]], np.ndarray]:
    if spec == IMAGE_DESCRIPTOR:
        return thumbnail_histogram
    if spec.startswith("model:") and spec[len("model:"):]:
        return describe_with_model(spec[len("model:"):], load_model)
    raise ValueError(f"unknown image_descriptor {spec!r}; use {IMAGE_DESCRIPTOR!r} or 'model:NAME' (a registered "
                     "image embedder)")


def image_families(records: Sequence[ImageNeedleRecord], family_size: int, descriptor: str = IMAGE_DESCRIPTOR,
                   load_model: Callable[[str], Any] | None = None) -> list[Needle]:
    """Needle images grouped with their nearest neighbours under `descriptor`, contiguous."""
    descs = resolve_descriptor(descriptor, load_model)([load_needle_image(r.path) for r in records])
    unassigned = list(range(len(records)))
    groups: list[list[int]] = []
    while unassigned:
        head, rest = unassigned[0], unassigned[1:]
        dist = ((descs[rest] - descs[head]) ** 2).sum(axis=1) if rest else np.zeros(0, dtype=np.int64)
        order = np.lexsort((np.arange(len(rest)), dist))[:family_size - 1]
        group = [head] + [rest[int(i)] for i in order]
        groups.append(group)
        unassigned = [i for i in unassigned if i not in group]
    needles = []
    for group in groups:
        fam = f"mmniah-{records[group[0]].id}"
        for i in group:
            r = records[i]
            needles.append(Needle(id=f"image-{r.id}", kind="image", family=fam, entity=r.id, query="",
                                  anchor_image=(lambda p=r.path: load_needle_image(p)), origin=r.where))
    return needles
