"""Needles for Visual Grounding: the offline sample's anchor families and the real readers.

A needle is a query and its anchor. Needles come in look-alike families whose anchors
differ only in one core entity (a place, a year, a colour, a count), so a cell can only
be solved by reading that entity.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from PIL import Image as PILImage

from . import procedural
from .jsonl import read_jsonl


@dataclass(frozen=True)
class Needle:
    id: str
    kind: str          # "text" or "image"
    family: str
    entity: str        # what distinguishes it from its look-alikes
    query: str
    anchor_text: str = ""                                        # text needles
    anchor_image: Callable[[], PILImage.Image] | None = None     # image needles (lazy)
    caption: str = ""                                            # what the image shows


# Text families: the same sentence with one slot changed. Written for mmbench.
TEXT_FAMILIES = (
    ("quartet", "The first string quartet to give a concert on {x} was the Copper Finch Ensemble.",
     "Which string quartet was the first to give a concert on {x}?",
     ("the Moon", "Mars", "Venus", "Titan", "Europa")),
    ("lighthouse", "Every spring the lighthouse keeper of {x} paints the lamp-room door a deep saffron yellow.",
     "What does the lighthouse keeper of {x} paint every spring?",
     ("Port Elsmere", "Kestrel Point", "Harrow Bay", "Lindqvist Island", "Cape Morrow")),
    ("parade", "In {x}, the town's lantern parade was led by a grey llama called Biscuit.",
     "Who led the town's lantern parade in {x}?",
     ("1987", "1994", "2003", "2012", "2019")),
    ("orchid", "Doctor {x} found that the blue orchid in the greenhouse glows faintly under green light.",
     "Which plant did Doctor {x} find glowing under green light?",
     ("Okafor", "Lindgren", "Moreau", "Takahashi", "Alvarez")),
    ("bakery", "The secret ingredient in the rye bread of the {x} bakery is toasted fennel seed.",
     "What is the secret ingredient in the rye bread of the {x} bakery?",
     ("Blue Heron", "Old Mill", "Seventh Street", "Riverside", "Juniper Lane")),
)

# Image families: one synthetic object; variants differ only in colour or in count.
IMAGE_FAMILIES = (
    ("striped star", "colour", ("red", "blue", "green", "yellow", "purple")),
    ("hexagon", "count", (1, 2, 3, 4, 5)),
    ("three-eyed blob", "colour", ("orange", "pink", "teal", "green", "blue")),
    ("checkered sphere", "count", (1, 2, 3, 4, 5)),
    ("crescent", "colour", ("yellow", "red", "purple", "white", "orange")),
)
IMAGE_ANCHOR_SIZE = (224, 224)


def _image_caption(shape: str, colour: str, count: int) -> str:
    noun = shape if count == 1 else (shape + "s" if not shape.endswith("s") else shape)
    amount = "a" if count == 1 else procedural.NUMBER_WORDS[count]
    return f"{amount} {colour} {noun}"


def sample_needles() -> list[Needle]:
    """25 text and 25 image needles in families of five look-alikes."""
    needles: list[Needle] = []
    for family, anchor, query, entities in TEXT_FAMILIES:
        for i, x in enumerate(entities):
            needles.append(Needle(id=f"text-{family}-{i}", kind="text", family=family, entity=x,
                                  query=query.format(x=x), anchor_text=anchor.format(x=x)))
    w, h = IMAGE_ANCHOR_SIZE
    for f_index, (shape, varies, values) in enumerate(IMAGE_FAMILIES):
        base_seed = 10_000 + 97 * f_index
        fixed_colour = ("black", "orange", "green", "purple", "yellow")[f_index]
        for i, v in enumerate(values):
            colour = v if varies == "colour" else fixed_colour
            count = v if varies == "count" else 1
            caption = _image_caption(shape, colour, count)

            def render(shape=shape, colour=colour, count=count, base_seed=base_seed) -> PILImage.Image:
                # Same background and jitter for the whole family: only the varied attribute changes.
                return procedural.draw_object(procedural.scene(w, h, base_seed), shape, colour, count, base_seed)

            needles.append(Needle(id=f"image-{shape.replace(' ', '_')}-{i}", kind="image",
                                  family=shape, entity=str(v), query=f"A picture of {caption} on a natural background.",
                                  anchor_image=render, caption=caption))
    return needles


def sample_background_text() -> str:
    """Real long English text that ships with Python: the Language Reference topics."""
    import pydoc_data.topics as topics

    return "\n\n".join(topics.topics[k] for k in sorted(topics.topics))


# ---- real sources -------------------------------------------------------------------------

def read_needlebench(path: Path, language: str = "English") -> list[Needle]:
    """NeedleBench needles JSONL: one object per line with `needle` and `retrieval_question`.

    Optional `family` groups look-alikes; without it a record is its own family.
    """
    needles = []
    _exists(path)
    for where, lineno, rec in read_jsonl(path, fields={"language": str, "needle": str, "retrieval_question": str}):
        if language and rec.get("language", language) != language:
            continue
        for key in ("needle", "retrieval_question"):
            if not isinstance(rec.get(key), str) or not rec[key].strip():
                raise ValueError(f"{where}: field {key!r} missing or empty")
        nid = str(rec.get("id", f"nb{lineno}"))
        needles.append(Needle(id=f"text-{nid}", kind="text", family=str(rec.get("family", nid)),
                              entity=str(rec.get("entity", nid)), query=rec["retrieval_question"].strip(),
                              anchor_text=rec["needle"].strip()))
    if not needles:
        raise ValueError(f"{path}: no {language} needles found")
    return needles


def read_mmniah_image_needles(path: Path, image_root: Path) -> list[Needle]:
    """MM-NIAH retrieval-image-needle JSONL: `images_list` (the needle image is the last entry unless
    `meta.needle_image` names it), `question`, optional `id` and `family`. Images load lazily."""
    needles = []
    _exists(path)
    for where, lineno, rec in read_jsonl(path, fields={"images_list": list, "meta": dict, "question": str,
                                                       "query": str, "answer": (str, int, float)}):
        images = rec.get("images_list")
        meta = rec.get("meta") or {}
        rel = meta.get("needle_image") or (images[-1] if isinstance(images, list) and images else None)
        if not rel:
            raise ValueError(f"{where}: no needle image (`meta.needle_image` or `images_list`)")
        question = rec.get("query") or rec.get("question")
        if not isinstance(question, str) or not question.strip():
            raise ValueError(f"{where}: field 'question' missing or empty")
        img_path = Path(image_root) / rel
        if not img_path.is_file():
            raise FileNotFoundError(f"{where}: needle image {img_path} not found")
        nid = str(rec.get("id", f"mmniah{lineno}"))

        def render(p=img_path) -> PILImage.Image:
            with PILImage.open(p) as im:
                return im.convert("RGB").resize(IMAGE_ANCHOR_SIZE)

        needles.append(Needle(id=f"image-{nid}", kind="image", family=str(rec.get("family", nid)),
                              entity=nid, query=question.strip(), anchor_image=render,
                              caption=str(rec.get("answer", ""))))
    return needles


def _exists(path: Path) -> None:
    if not Path(path).is_file():
        raise FileNotFoundError(f"needle file {path} not found")
