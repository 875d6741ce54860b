"""Visual Grounding builder: needles hidden at controlled depths in length-binned haystacks.

For each anchor kind (text, image), background modality (text, mixed, image), length bin
and depth, a cell holds one haystack per needle of that kind, each with its own needle at
that depth. Each query is ranked against the candidates of its own cell only, so the four
look-alikes of its family are always among its distractors.

All needles of one look-alike family share one haystack per (kind, background, length), so
target and look-alike distractors differ only in their anchor; the haystack is also the same
at every depth (only the insertion point moves), which isolates the depth effect.

Real needles become look-alike families in `needle_families`; the task's invariants (one answering
candidate per query, shared haystacks, entity only in the target, length and depth) are checked on
the finished records by `mmbench.builders.checks.visual_grounding` before anything is written, and
what the sources lost is counted (DropLog) and recorded in the manifest.
"""
from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
from tqdm.auto import tqdm

from mmbench.builders.checks import visual_grounding as checks
from mmbench.data.documents import Document, Segment, Text
from mmbench.data.media import MediaStore
from mmbench.builders.checks.visual_grounding import DEPTH_TOLERANCE, LENGTH_TOLERANCE, tolerance_violations
from mmbench.builders.parts.text_match import occurs
from mmbench.data.tokens import length_label
from mmbench.data.drops import DropLog
from mmbench.builders.parts.validity import write_valid_poolset
from mmbench.data.poolset import build_scratch, PoolItem, PoolSet, source_fingerprint
from mmbench.data.tokens import UnifiedTokenCounter, image_tokens

from mmbench.builders.parts.needle_families import IMAGE_DESCRIPTOR, image_families, text_families
from mmbench.builders.sources.backgrounds import Background, obelics_background, sample_background, text_reach
from mmbench.builders.sources.needles import (Needle, fresh_sample_needles, needlebench_fingerprint,
                                              read_mmniah_image_needles, read_needlebench, sample_needles)
from mmbench.builders.designs.visual_grounding import DEPTHS, LENGTHS, TASK_NAME, TASK_VERSION

BACKGROUNDS = ("text", "mixed", "image")
KINDS = ("text", "image")
IMAGE_SIDES = (128, 192, 256, 320, 448)  # background image sizes: 16, 36, 64, 100, 196 tokens
SNAP_WINDOW = 8           # tokens searched around a text cut for a word boundary
MAX_DROP_SHARE = 0.10     # a real build fails when more of a source's records are unusable, unless allow_missing
HAYSTACK_DRAWS = 50       # background windows tried per family before giving up on one free of cell entities


@dataclass(frozen=True)
class VGParams:
    lengths: tuple[int, ...] = LENGTHS
    depths: tuple[float, ...] = DEPTHS
    backgrounds: tuple[str, ...] = BACKGROUNDS
    kinds: tuple[str, ...] = KINDS
    needles_per_kind: int = 25
    image_pool: int = 48
    family_size: int = 5
    image_descriptor: str = IMAGE_DESCRIPTOR


def build(source: str, out: Path, seed: int = 0, lengths: Sequence[int] = LENGTHS, depths: Sequence[float] = DEPTHS,
          backgrounds: Sequence[str] = BACKGROUNDS, kinds: Sequence[str] = KINDS, needles_per_kind: int = 25,
          image_pool: int = 48, text_needles: str | None = None, image_needles: str | None = None,
          image_root: str | None = None, haystack: str | None = None, tokenizer_json: str | None = None,
          family_size: int = 5, image_descriptor: str = IMAGE_DESCRIPTOR, allow_missing: bool = False,
          progress: bool = True, load_model: Callable[[str], Any] | None = None, needles: str = "source") -> PoolSet:
    """Build the task from `source` ("sample", or "real" with the needle and haystack paths) into `out`.

    `load_model` (name -> EmbeddingModel) is what `image_descriptor=model:NAME` embeds needle images with;
    the task passes the model registry's (`TaskSpec.services`), so this builder imports no model code.

    `needles="fresh"` (the overfitting test's fresh draws, `TaskSpec.fresh_params`) renews the needles: the sample
    source draws new look-alike families from the seed (`fresh_sample_needles`), a real source takes the next
    `needles_per_kind` needles of each kind after those every public draw uses; no needle is shared with a public
    draw. The default ("source") leaves the build, and its content hash, as it was.
    """
    if needles not in ("source", "fresh"):
        raise ValueError(f"needles={needles!r}: expected 'source' or 'fresh'")
    params = VGParams(tuple(int(x) for x in lengths), tuple(float(d) for d in depths), tuple(backgrounds),
                      tuple(kinds), int(needles_per_kind), int(image_pool), int(family_size),
                      str(image_descriptor))
    _check_params(params)
    allow_missing = _flag(allow_missing, "allow_missing")
    counter = UnifiedTokenCounter.default(tokenizer_json)
    out = Path(out)
    with build_scratch(out) as scratch:
        media = MediaStore(scratch)
        drops: dict[str, DropLog] = {}
        fresh = needles == "fresh"
        chosen, background, sources = _load_sources(source, counter, media, seed, params, text_needles,
                                                    image_needles, image_root, haystack, drops, load_model, fresh)
        paths = {"text_needle_records": text_needles, "image_needle_records": image_needles,
                 "haystack_images": haystack}
        for name, log in drops.items():
            if name in paths:
                log.check_share(MAX_DROP_SHARE, allow_missing, str(paths[name]))
        n_text = len(background.text_ids)
        reach = text_reach(n_text, params.lengths, f"haystack text ({n_text} tokens; a longer text haystack repeats "
                           "part of it)") if "text" in params.backgrounds else None
        if reach is not None:
            drops["haystack_text"] = reach
        ps = assemble(chosen, background, counter, media, params, seed, progress)
        check_tolerances(ps.candidates)
        ps.sources = sources
        ps.builder = {"name": "mmbench.builders.visual_grounding", "params": _jsonable(asdict(params)),
                      "source": source, "length_tolerance": LENGTH_TOLERANCE, "depth_tolerance": DEPTH_TOLERANCE,
                      "token_counter": getattr(counter.tokenizer, "name", "qwen3"),
                      "max_drop_share": MAX_DROP_SHARE, "allow_missing": allow_missing}
        if fresh:
            ps.builder["needles"] = "fresh"
        write_valid_poolset(ps, out, checks, media_from=scratch, drops=drops)
    return ps


def _flag(value: Any, name: str) -> bool:
    """A yes/no parameter given as a bool or as text from `--param` ("true", "false", "1", "0", "yes", "no")."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise ValueError(f"{name}={value!r}: expected true or false")


def _check_params(p: VGParams) -> None:
    for n in p.lengths:
        if n <= 0:
            raise ValueError(f"length {n} is not a positive number of tokens")
    for d in p.depths:
        if not 0.0 <= d <= 1.0:
            raise ValueError(f"depth {d} is outside [0, 1]")
    unknown = set(p.backgrounds) - set(BACKGROUNDS)
    if unknown:
        raise ValueError(f"unknown background modality {sorted(unknown)}; use {BACKGROUNDS}")
    if set(p.kinds) - set(KINDS):
        raise ValueError(f"unknown anchor kind in {p.kinds}; use {KINDS}")
    if p.needles_per_kind < 2:
        raise ValueError("needles_per_kind must be at least 2 (a cell needs distractors)")
    if p.family_size < 2:
        raise ValueError("family_size must be at least 2 (a needle and one look-alike)")


def check_tolerances(candidates: Sequence[Document]) -> None:
    """Refuse a build whose candidates miss their bin (±10 %) or depth (±0.05): the task's promises."""
    for v in tolerance_violations(candidates):
        nominal = next(d.meta["length_tokens"] for d in candidates if d.id == v.item)
        hint = (f"this {nominal}-token bin is too short for its anchor and background" if v.invariant == "length_bin"
                else f"the {nominal}-token bin is too coarse for this depth (use longer lengths)")
        raise ValueError(f"candidate {v.line()}; {hint}")


def _load_sources(source, counter, media, seed, params, text_needles, image_needles, image_root, haystack, drops,
                  load_model=None, fresh=False):
    if source == "sample":
        needles = fresh_sample_needles(seed) if fresh else sample_needles()
        background = sample_background(counter.tokenizer, media, seed, params.image_pool)
        sources = {"needles": f"mmbench fresh sample families of seed {seed} (25 text, 25 image)" if fresh else
                   "mmbench sample families (25 text, 25 image)",
                   "haystack": "pydoc_data.topics (Python Language Reference) + procedural images"}
        return needles, background, sources
    if source != "real":
        raise ValueError(f"unknown source {source!r} for {TASK_NAME}; use 'sample' or 'real'")
    wanted = {"text_needles": "text" in params.kinds, "image_needles": "image" in params.kinds,
              "image_root": "image" in params.kinds, "haystack": True}
    given = {"text_needles": text_needles, "image_needles": image_needles, "image_root": image_root,
             "haystack": haystack}
    missing = [n for n, need in wanted.items() if need and given[n] is None]
    if missing:
        raise ValueError(f"source 'real' needs parameters: {', '.join(missing)}")
    needles: list[Needle] = []
    if "text" in params.kinds:
        drops["text_needle_records"] = DropLog("NeedleBench lines")
        records = read_needlebench(text_needles, drops=drops["text_needle_records"])   # a path or hf:<id>@<rev>
        drops["text_needle_questions"] = DropLog("NeedleBench questions made into families")
        needles += text_families(records, params.family_size, drops["text_needle_questions"])
    if "image" in params.kinds:
        drops["image_needle_records"] = DropLog("MM-NIAH needle images")
        drops["image_needle_repeats"] = DropLog("MM-NIAH distinct needle images")
        records = read_mmniah_image_needles(Path(image_needles), Path(image_root), drops=drops["image_needle_records"],
                                            repeats=drops["image_needle_repeats"])
        needles += image_families(records, params.family_size, params.image_descriptor, load_model)
    if fresh:  # past the needles every public draw selects (the first needles_per_kind of each kind)
        needles = [n for kind in params.kinds for n in [x for x in needles if x.kind == kind][params.needles_per_kind:]]
    drops["haystack_images"] = DropLog("OBELICS images")
    drops["haystack_paragraphs"] = DropLog("OBELICS text paragraphs")
    background = obelics_background(Path(haystack), counter.tokenizer, media, pool_size=params.image_pool,
                                    drops=drops["haystack_images"], leave_out=_names_a_needle(needles, params),
                                    left_out=drops["haystack_paragraphs"])
    sources = {name: source_fingerprint(path) if path else "unused" for name, path in
               (("image_needles", image_needles), ("haystack", haystack))}
    sources["text_needles"] = needlebench_fingerprint(text_needles) if text_needles else "unused"
    return needles, background, sources


def _names_a_needle(needles: Sequence[Needle], params: VGParams):
    """A test for haystack paragraphs that would name a selected text needle's entity or hold its sentence
    (left out of real haystacks up front; every window is still checked, see `clean_background`)."""
    if "text" not in params.kinds or not any(n.kind == "text" for n in needles):
        return None
    chosen = select_needles(needles, "text", params.needles_per_kind)
    entities = [n.entity.lower() for n in chosen if n.entity]
    sentences = [n.anchor_text.lower() for n in chosen]

    def test(paragraph: str) -> bool:
        low = paragraph.lower()
        return any(occurs(e, low) for e in entities) or any(a in low for a in sentences)

    return test


def _jsonable(d: dict[str, Any]) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}


def _rng(seed: int, *parts: Any) -> np.random.Generator:
    digest = hashlib.sha256(":".join(map(str, (seed, *parts))).encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def select_needles(needles: Sequence[Needle], kind: str, n: int) -> list[Needle]:
    """The first `n` needles of a kind in source order (sources list a family's members together, so a
    multiple of the family size keeps every look-alike group whole)."""
    available = [x for x in needles if x.kind == kind]
    if n > len(available):
        raise ValueError(f"needles_per_kind={n}, but the source gives only {len(available)} {kind} needles (for real "
                         "text needles: distinct usable questions × family_size); pass --param "
                         f"needles_per_kind={len(available)} or fewer")
    chosen = available[:n]
    if len(chosen) < 2:
        raise ValueError(f"need at least 2 {kind} needles, got {len(chosen)}")
    return chosen


def assemble(needles: Sequence[Needle], background: Background, counter: UnifiedTokenCounter, media: MediaStore,
             params: VGParams, seed: int, progress: bool = True) -> PoolSet:
    queries: list[Document] = []
    candidates: list[Document] = []
    pools: list[PoolItem] = []
    anchors: dict[str, Segment] = {}
    for kind in params.kinds:
        for nd in select_needles(needles, kind, params.needles_per_kind):
            anchors[nd.id] = Text(nd.anchor_text) if kind == "text" else media.put_image(nd.anchor_image())
            query = [anchors[nd.id]] if nd.image_query else [Text(nd.query)]
            meta = {"needle_id": nd.id, "anchor_kind": kind, "family": nd.family, "entity": nd.entity,
                    "query_modality": "image" if nd.image_query else "text"}
            meta.update({k: v for k, v in (("answer", nd.answer), ("origin", nd.origin)) if v})
            if nd.derived:
                meta["derived"] = True
            queries.append(Document(id=f"q-{nd.id}", segments=query, tokens=sum(counter.segment(s) for s in query),
                                    meta=meta))
    cells = [(k, b, L) for k in params.kinds for b in params.backgrounds for L in params.lengths]
    for kind, bg, length in tqdm(cells, desc="build cells", disable=not progress):
        cell_needles = select_needles(needles, kind, params.needles_per_kind)
        # What no haystack of the cell may hold: any query's entity (whole words) or anchor sentence.
        forbidden = ([nd.entity.lower() for nd in cell_needles if nd.entity] if kind == "text" else [],
                     [nd.anchor_text.lower() for nd in cell_needles if kind == "text"])
        # One haystack per look-alike family: a family's candidates differ only in their anchor.
        units_by_family = {}
        for family in dict.fromkeys(nd.family for nd in cell_needles):
            anchor_cost = max(counter.segment(anchors[nd.id]) for nd in cell_needles if nd.family == family)
            rng = _rng(seed, kind, bg, length, family)
            units, segments = clean_background(background, bg, length - anchor_cost, length, rng, forbidden,
                                               f"{kind}/{bg}/{length_label(length)}/{family}")
            units_by_family[family] = Haystack.of(units, segments, counter)
        for depth in params.depths:
            cell_ids = []
            for nd in cell_needles:
                doc = place_anchor(units_by_family[nd.family], anchors[nd.id], depth, background, counter)
                doc.id = f"vg-{kind}-{bg}-{length_label(length)}-d{round(depth * 100):03d}-{nd.id}"
                doc.meta.update({"length_bin": length_label(length), "length_tokens": length, "depth": depth,
                                 "anchor_kind": kind, "background_modality": bg, "needle_id": nd.id,
                                 "family": nd.family, "entity": nd.entity})
                candidates.append(doc)
                cell_ids.append(doc.id)
            for nd, cid in zip(cell_needles, cell_ids):
                pools.append(PoolItem(
                    id=f"{kind}/{bg}/{length_label(length)}/d{round(depth * 100):03d}/{nd.id}", query_id=f"q-{nd.id}",
                    subset=f"{kind}_anchor/{bg}_background", candidate_ids=list(cell_ids), relevant_ids=[cid],
                    meta={"length_bin": length_label(length), "length_tokens": length, "depth": depth,
                          "anchor_kind": kind, "background_modality": bg, "needle_id": nd.id,
                          "family": nd.family}))
    return PoolSet(task=TASK_NAME, task_version=TASK_VERSION, queries=queries, candidates=candidates, pools=pools,
                   seed=seed)


def image_side_for(length: int) -> int:
    """Largest background image whose token cost is at most 1/16 of the bin (fine depth steps)."""
    fitting = [s for s in IMAGE_SIDES if image_tokens(s, s) <= length / 16]
    return fitting[-1] if fitting else IMAGE_SIDES[0]


def clean_background(bg: Background, modality: str, target: int, length: int, rng: np.random.Generator,
                     forbidden: tuple[list[str], list[str]], where: str) -> tuple[list, list[Segment]]:
    """`background_units`, redrawn until its text holds none of the cell's entities or anchor sentences; the
    units and each unit as a segment (text decoded once, for this check and for the candidates)."""
    entities, sentences = forbidden
    for _ in range(HAYSTACK_DRAWS):
        units = background_units(bg, modality, target, length, rng)
        segments = [Text(bg.tokenizer.decode(payload)) if kind == "text" else payload for kind, payload in units]
        texts = [s.text.lower() for s in segments if isinstance(s, Text)]
        hit = next((e for e in entities for t in texts if occurs(e, t)), None) or \
            next((a for a in sentences for t in texts if a in t), None)
        if hit is None:
            return units, segments
    raise ValueError(f"{where}: every one of {HAYSTACK_DRAWS} background windows contains {hit!r}, which a query "
                     "names; the haystack text cannot hide this needle's look-alikes")


def background_units(bg: Background, modality: str, target: int, length: int, rng: np.random.Generator) -> list:
    """Background as a list of units: ("text", ids) or ("image", Image), about `target` tokens."""
    if modality == "text":
        return [("text", bg.text_window(rng, target))]
    side = image_side_for(length)
    cost = image_tokens(side, side)
    if modality == "image":
        n = max(1, round(target / cost))
        return [("image", bg.image(int(rng.integers(1 << 30)), side)) for _ in range(n)]
    units: list = []  # mixed: alternate text chunks and images of equal token cost
    used = 0
    while used < target:
        chunk = min(cost, target - used)
        units.append(("text", bg.text_window(rng, chunk)))
        used += chunk
        if target - used >= cost / 2:
            units.append(("image", bg.image(int(rng.integers(1 << 30)), side)))
            used += cost
    return units


@dataclass(frozen=True)
class Haystack:
    """A family's background, prepared once for all its candidates (every depth, every member).

    Each unit is decoded and counted once; the candidates share these segment objects and only the unit
    the anchor cuts is decoded again. At 128K tokens this keeps one copy of a family's background text in
    memory instead of one per candidate, and counts its tokens once instead of thirty times.
    """
    units: list               # ("text", token ids) or ("image", Image), as drawn
    costs: list[int]          # background tokens of each unit (ids for text, the image's cost for images)
    segments: list[Segment]   # each whole unit as a segment
    counts: list[int]         # unified tokens of each whole-unit segment

    @classmethod
    def of(cls, units: list, segments: list[Segment], counter: UnifiedTokenCounter) -> "Haystack":
        """From the drawn units and their segments (as `clean_background` returns them)."""
        costs = [len(u[1]) if u[0] == "text" else image_tokens(u[1].width, u[1].height) for u in units]
        return cls(units, costs, segments, [counter.segment(s) for s in segments])


def place_anchor(hay: Haystack, anchor: Segment, depth: float, bg: Background,
                 counter: UnifiedTokenCounter) -> Document:
    """Insert `anchor` at `depth` of the background (token position, cut at a word boundary)."""
    target = round(depth * sum(hay.costs))
    segments: list[Segment] = []
    counts: list[int] = []
    pos = 0
    placed = False
    for i, ((kind, payload), cost) in enumerate(zip(hay.units, hay.costs)):
        if not placed and pos + cost >= target:
            if kind == "text":
                cut = _snap(payload, target - pos, bg)
                pieces = [Text(bg.tokenizer.decode(payload[:cut])) if cut > 0 else None, anchor,
                          Text(bg.tokenizer.decode(payload[cut:])) if cut < len(payload) else None]
                new = [p for p in pieces if p is not None]
            else:
                new = [anchor, payload] if target - pos <= cost / 2 else [payload, anchor]
            segments += new
            counts += [hay.counts[i] if s is payload else counter.segment(s) for s in new]
            placed = True
        else:
            segments.append(hay.segments[i])
            counts.append(hay.counts[i])
        pos += cost
    if not placed:
        segments.append(anchor)
        counts.append(counter.segment(anchor))
    index = next(i for i, s in enumerate(segments) if s is anchor)
    before_tokens = sum(counts[:index])
    total_tokens = sum(counts)
    rest = total_tokens - counts[index]
    return Document(id="", segments=segments, tokens=total_tokens,
                    meta={"anchor_token_offset": before_tokens, "depth_measured": before_tokens / rest if rest else 0.0,
                          "anchor_tokens": counts[index], "anchor_segment": index})


def _snap(ids: list[int], cut: int, bg: Background) -> int:
    """Move a cut to the nearest token that starts a word, within SNAP_WINDOW tokens."""
    if cut <= 0 or cut >= len(ids):
        return max(0, min(cut, len(ids)))
    for delta in range(SNAP_WINDOW + 1):
        for c in (cut - delta, cut + delta):
            if 0 < c < len(ids):
                piece = bg.tokenizer.decode([ids[c]])
                if piece[:1].isspace():
                    return c
    return cut
