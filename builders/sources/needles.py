"""Needles for Visual Grounding: the offline sample's anchor families and the real readers.

A needle is a query and its anchor. Needles come in look-alike families whose anchors
differ only in one core entity (a place, a year, a colour, a count), so a cell can only
be solved by reading that entity.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from PIL import Image as PILImage

from mmbench.builders.sources.articles import with_article
from mmbench.data.drops import DropLog

from mmbench.builders.sources import hub, procedural
from mmbench.builders.sources.jsonl import read_jsonl


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
    answer: str = ""            # what the query asks for (NeedleBench `arg2`), where the source says
    origin: str = ""            # "file:line" of the source record, or "" for the sample
    derived: bool = False       # a look-alike made from a real needle by substituting its entity

    @property
    def image_query(self) -> bool:
        """An image needle without a text query is queried by its own picture."""
        return self.kind == "image" and not self.query


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
    if count == 1:
        return with_article(f"{colour} {shape}")
    noun = shape + "s" if not shape.endswith("s") else shape
    return f"{procedural.NUMBER_WORDS[count]} {colour} {noun}"


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


# Fresh needles (the overfitting test's fresh draws): the same five sentence templates and five object shapes,
# with entities and pictures no public draw holds. Text entities are made-up names from these syllables (the
# public families use real places, years and surnames); image families vary colour with two objects per picture,
# or count in a colour the public count family does not use, on a scene of the fresh seed.
_SYLLABLES = ("ka", "lo", "mir", "ven", "dra", "zu", "tor", "ba", "quel", "rin", "sa", "vo", "gel", "nu", "pha", "tre")


def _made_up_name(rng: Any) -> str:
    parts = rng.choice(len(_SYLLABLES), size=3)
    return "".join(_SYLLABLES[i] for i in parts).capitalize()


def fresh_sample_needles(seed: int) -> list[Needle]:
    """25 text and 25 image needles in families of five, drawn from `seed`, sharing no needle id, anchor sentence,
    query or (shape, colour, count) with `sample_needles()`."""
    import numpy as np

    rng = np.random.default_rng(int.from_bytes(hashlib.sha256(f"mmbench-fresh-needles:{seed}".encode()).digest()[:8],
                                               "little"))
    needles: list[Needle] = []
    taken: set[str] = set()
    for family, anchor, query, _ in TEXT_FAMILIES:
        names: list[str] = []
        while len(names) < 5:
            name = _made_up_name(rng)
            if name not in taken:
                taken.add(name)
                names.append(name)
        for i, x in enumerate(names):
            needles.append(Needle(id=f"text-{family}-fresh{seed}-{i}", kind="text", family=family, entity=x,
                                  query=query.format(x=x), anchor_text=anchor.format(x=x)))
    w, h = IMAGE_ANCHOR_SIZE
    public_fixed = ("black", "orange", "green", "purple", "yellow")
    colours = sorted(procedural.COLOURS)
    for f_index, (shape, varies, _) in enumerate(IMAGE_FAMILIES):
        base_seed = 20_000 + int(rng.integers(0, 10 ** 6))
        if varies == "colour":   # public colour families draw one object: two here
            values: tuple[Any, ...] = tuple(rng.choice(colours, size=5, replace=False))
            fixed_colour, fixed_count = "", 2
        else:                    # public count families use one fixed colour: another here
            values = (1, 2, 3, 4, 5)
            fixed_colour = str(rng.choice([c for c in colours if c != public_fixed[f_index]]))
            fixed_count = 0
        for i, v in enumerate(values):
            colour = str(v) if varies == "colour" else fixed_colour
            count = int(v) if varies == "count" else fixed_count
            caption = _image_caption(shape, colour, count)

            def render(shape=shape, colour=colour, count=count, base_seed=base_seed) -> PILImage.Image:
                return procedural.draw_object(procedural.scene(w, h, base_seed), shape, colour, count, base_seed)

            needles.append(Needle(id=f"image-{shape.replace(' ', '_')}-fresh{seed}-{i}", kind="image", family=shape,
                                  entity=str(v), query=f"A picture of {caption} on a natural background.",
                                  anchor_image=render, caption=caption))
    return needles


def sample_background_text() -> str:
    """Real long English text that ships with Python: the Language Reference topics."""
    import pydoc_data.topics as topics

    return "\n\n".join(topics.topics[k] for k in sorted(topics.topics))


# ---- real sources -------------------------------------------------------------------------
#
# NeedleBench (opencompass, `needles.jsonl`): one object per line with `needle`, `retrieval_question`
# (ending in an answer-format instruction, "Please answer in the format ..."), `arg2` (the keyword the
# answer is scored on) and `language`. Several lines may share one question with different answers.
# MM-NIAH (OpenGVLab/MM-NIAH README, "Data Format"): `id`, `images_list` (context and question images
# only), `context`, `question`, `answer` (an int for the choice tasks) and `meta` with `needles` (for
# image needles: image paths relative to the image root), `choices`, `choices_image_path`, `placed_depth`.

FORMAT_INSTRUCTION = re.compile(r"\s*(Before answering, please consider.*|Please answer in the format.*)$", re.S)
FORMAT_INSTRUCTION_ZH = re.compile(r"\s*(在回答之前.*|请按照.*)$", re.S)


@dataclass(frozen=True)
class NeedleRecord:
    """One usable NeedleBench line: the needle sentence, its question without the format instruction."""
    id: str
    where: str          # file:line
    needle: str
    question: str
    answer: str         # `arg2` ("" when absent)
    entity: str = ""    # explicit `entity` (an mmbench extension), else detected later
    family: str = ""    # explicit `family` (an mmbench extension), else derived later


@dataclass(frozen=True)
class ImageNeedleRecord:
    id: str
    where: str
    path: Path          # the needle image, resolved under the image root


# A question wrapped in an answer stem: "The answer to the question 'Which band ...?' was" (and "is", "What was
# the answer to the question '...'?", a trailing blank or colon), and the Chinese "问题“…”的答案是".
QUOTES = "'\"\u2018\u2019\u201c\u201d\u300c\u300d"
WRAPPED = re.compile(rf"^(?:what\s+(?:was|is)\s+)?the\s+answer\s+to\s+the\s+question\s*[:,]?\s*[{QUOTES}](?P<q>.+)"
                     rf"[{QUOTES}]\s*(?:(?:was|is)\b)?\s*[_.…:?]*\s*$", re.I | re.S)
WRAPPED_ZH = re.compile(rf"^问题\s*[{QUOTES}](?P<q>.+)[{QUOTES}]\s*的答案(?:是)?\s*[_.…:：？?]*\s*$", re.S)


def strip_wrapper(question: str) -> str:
    """The question inside an answer-stem wrapper (see WRAPPED), else the text as given."""
    q = question.strip()
    for pattern in (WRAPPED, WRAPPED_ZH):
        m = pattern.match(q)
        if m:
            return m.group("q").strip()
    return q


def strip_format_instruction(question: str) -> str:
    """NeedleBench appends how to phrase the answer, and some files wrap the question in an answer stem ("The answer
    to the question '…' was"); a retrieval query keeps only the question."""
    q = FORMAT_INSTRUCTION.sub("", question.strip())
    return strip_wrapper(FORMAT_INSTRUCTION_ZH.sub("", q).strip())


def _malformed(drops: DropLog | None, where: str, field_name: str, problem: str) -> None:
    """Strict readers (no drop log) stop at the first bad record; a build counts it and goes on."""
    if drops is None:
        raise ValueError(f"{where}: field {field_name!r} {problem}")
    drops.drop(f"field {field_name!r} {problem}", where)


NEEDLEBENCH_HUB = {"config": "retrieval_needles", "split": "test"}   # opencompass/NeedleBench: its needles.jsonl


def read_needlebench(path: str | Path, language: str = "English", drops: DropLog | None = None) -> list[NeedleRecord]:
    """The NeedleBench needles of one language, in file order (other languages are skipped, not dropped);
    `path` is `needles.jsonl` or `hf:opencompass/NeedleBench@<commit>` (builders/sources/hub.py)."""
    if hub.is_hub(path):
        lines = ((where, i + 1, rec) for i, (where, rec) in enumerate(hub.rows(str(path), "text_needles",
                                                                               **NEEDLEBENCH_HUB)))
    else:
        _exists(path)
        lines = read_jsonl(path)
    out: list[NeedleRecord] = []
    ids: set[str] = set()
    for where, lineno, rec in lines:
        if language and rec.get("language", language) != language:
            continue
        problem = next(((k, "missing or empty") for k in ("needle", "retrieval_question")
                        if not isinstance(rec.get(k), str) or not rec[k].strip()), None)
        if problem is None and rec.get("arg2") is not None and not isinstance(rec["arg2"], (str, int)):
            problem = ("arg2", f"is a {type(rec['arg2']).__name__}, expected a string")
        question = strip_format_instruction(rec["retrieval_question"]) if problem is None else ""
        if problem is None and not question:
            problem = ("retrieval_question", "holds only the answer-format instruction")
        nid = str(rec.get("id", f"nb{lineno}"))
        if problem is None and nid in ids:
            problem = ("id", f"repeats {nid!r}, the id of an earlier record")
        if problem is not None:
            _malformed(drops, where, *problem)
            continue
        if drops is not None:
            drops.keep()
        ids.add(nid)
        out.append(NeedleRecord(id=nid, where=where, needle=rec["needle"].strip(),
                                question=question, answer=str(rec.get("arg2") or "").strip(),
                                entity=str(rec.get("entity") or ""), family=str(rec.get("family") or "")))
    if not out:
        raise ValueError(f"{path}: no usable {language} needles found")
    return out


def needlebench_fingerprint(path: str | Path) -> str:
    """The manifest's name for the NeedleBench source: the file's fingerprint, or the hub dataset's."""
    return hub.fingerprint(str(path), "text_needles", **NEEDLEBENCH_HUB)


def read_mmniah_image_needles(path: Path, image_root: Path, drops: DropLog | None = None,
                              repeats: DropLog | None = None) -> list[ImageNeedleRecord]:
    """Needle images of MM-NIAH image-needle records (`meta.needles`), one per distinct image, in file order.

    `images_list` is the haystack (context and question images) and `meta.choices_image_path` the
    answer options, so neither is read as a needle. Images are checked to open, and load lazily later.
    MM-NIAH reuses needle images across records; a path or picture seen before is skipped (counted in
    `repeats`), since two queries with one picture would both be answered by either haystack.
    """
    _exists(path)
    out: list[ImageNeedleRecord] = []
    seen: set[Path] = set()
    digests: set[str] = set()
    ids: set[str] = set()
    for where, lineno, rec in read_jsonl(path):
        problem = _mmniah_problem(rec)
        rid = str(rec.get("id", f"mmniah{lineno}"))
        if problem is None and rid in ids:
            problem = ("id", f"repeats {rid!r}, the id of an earlier record (MM-NIAH ids restart per task file)")
        if problem is not None:
            _malformed(drops, where, *problem)
            continue
        for k, rel in enumerate(rec["meta"]["needles"]):
            img_path = Path(image_root) / rel
            if img_path in seen:
                if repeats is not None:
                    repeats.drop("same image as an earlier needle", f"{where} ({rel})")
                continue
            field_name = f"meta.needles[{k}]"
            if not img_path.is_file():
                _malformed(drops, where, field_name, f"names {img_path}, which does not exist")
                continue
            if not _opens(img_path):
                _malformed(drops, where, field_name, f"names {img_path}, which is not a readable image")
                continue
            seen.add(img_path)
            digest = hashlib.sha256(img_path.read_bytes()).hexdigest()
            if digest in digests:
                if repeats is not None:
                    repeats.drop("same image as an earlier needle", f"{where} ({rel})")
                continue
            digests.add(digest)
            if drops is not None:
                drops.keep()
            if repeats is not None:
                repeats.keep()
            suffix = f"-{k}" if len(rec["meta"]["needles"]) > 1 else ""
            ids.add(rid)
            out.append(ImageNeedleRecord(id=f"{rid}{suffix}", where=where, path=img_path))
    if not out:
        raise ValueError(f"{path}: no usable needle images found (MM-NIAH image needles are in `meta.needles`)")
    return out


def _mmniah_problem(rec: dict[str, Any]) -> tuple[str, str] | None:
    meta = rec.get("meta")
    if not isinstance(meta, dict):
        return "meta", f"is {'missing' if meta is None else 'a ' + type(meta).__name__}, expected an object"
    needles = meta.get("needles")
    if not isinstance(needles, list) or not needles:
        return "meta.needles", "missing or empty (a list of needle image paths)"
    if not all(isinstance(n, str) and n.strip() for n in needles):
        return "meta.needles", "must list image paths; this record's needles are not all paths (a text-needle file?)"
    if not isinstance(rec.get("images_list", []), list):
        return "images_list", "is not a list"
    choices = meta.get("choices_image_path")
    answer = rec.get("answer")
    if isinstance(choices, list) and choices:
        if not isinstance(answer, int) or isinstance(answer, bool) or not 0 <= answer < len(choices):
            return "answer", f"is {answer!r}, expected an index into the {len(choices)} `meta.choices_image_path`"
    return None


def _opens(path: Path) -> bool:
    try:
        with PILImage.open(path) as im:
            im.verify()
        return True
    except Exception:  # PIL raises many types for a broken file; any of them means unreadable
        return False


def load_needle_image(path: Path) -> PILImage.Image:
    with PILImage.open(path) as im:
        return im.convert("RGB").resize(IMAGE_ANCHOR_SIZE, PILImage.BICUBIC)


def _exists(path: Path) -> None:
    if not Path(path).is_file():
        raise FileNotFoundError(f"needle file {path} not found")
