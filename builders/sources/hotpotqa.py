"""HotpotQA (distractor setting) as multi-source reasoning records.

Accepted layouts, read from local files (the hub's loading script is not supported by current
`datasets`, so the raw files are read directly):

* the original JSON (`hotpot_dev_distractor_v1.json`): a list of objects with `_id`, `question`,
  `answer`, `supporting_facts` as `[[title, sent_id], ...]` and `context` as
  `[[title, [sentence, ...]], ...]`;
* the hub's parquet or JSONL (`hotpotqa/hotpot_qa`, config `distractor`): `id`, `question`,
  `answer`, `supporting_facts` as `{title: [...], sent_id: [...]}` and `context` as
  `{title: [...], sentences: [[...], ...]}`.

Every paragraph becomes a title unit followed by one unit per sentence; the sentences named by
`supporting_facts` are the evidence units.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from mmbench.data.tokens import UnifiedTokenCounter

from mmbench.builders.sources.records import Unit, text_unit
from mmbench.builders.sources import hub
from mmbench.builders.sources.jsonl import read_json, read_jsonl

# Types of the fields a record may have (checked when read, so a wrong one is named with its line).
RECORD_FIELDS = {"question": str, "context": (dict, list), "supporting_facts": (dict, list), "answer": (str, int, float)}


@dataclass
class ReasoningRecord:
    """A question with its context as units; evidence units are the key evidence spans."""

    id: str
    dataset: str
    question: str
    answer: str
    units: list[Unit]
    problems: list[str] = field(default_factory=list)   # what the loader could not resolve
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def evidence_indices(self) -> list[int]:
        return [i for i, u in enumerate(self.units) if u.is_evidence]

    @property
    def tokens(self) -> int:
        return sum(u.tokens for u in self.units)


HUB_DEFAULTS = {"config": "distractor", "split": "validation"}   # hotpotqa/hotpot_qa's distractor dev set


def read_hotpotqa(path: str | Path, counter: UnifiedTokenCounter, limit: int | None = None) -> list[ReasoningRecord]:
    """Records from a HotpotQA JSON, JSONL or parquet file (layouts in the module docstring), or from
    the hub (`hf:hotpotqa/hotpot_qa@<commit>`, builders/sources/hub.py; distractor/validation by default)."""
    if hub.is_hub(path):
        source = hub.rows(str(path), "hotpotqa", **HUB_DEFAULTS)
    else:
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"HotpotQA file {path} not found")
        source = _rows(path)
    out = []
    for where, rec in source:
        out.append(hotpot_record(rec, counter, where))
        if limit is not None and len(out) >= limit:
            break
    if not out:
        raise ValueError(f"{path}: no HotpotQA records found")
    return out


def hotpotqa_fingerprint(path: str | Path) -> str:
    """The manifest's name for the source: the file's fingerprint, or the hub dataset's (revision, digest)."""
    return hub.fingerprint(str(path), "hotpotqa", **HUB_DEFAULTS)


def _rows(path: Path) -> Iterator[tuple[str, dict]]:
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            rows = pq.read_table(path).to_pylist()
        except (pa.ArrowException, OSError) as exc:
            raise ValueError(f"{path}: not a readable parquet file ({str(exc).splitlines()[0]})") from None
        for i, rec in enumerate(rows):
            yield f"{path}: row {i}", rec
    elif suffix == ".jsonl":
        for where, _, rec in read_jsonl(path, fields=RECORD_FIELDS):
            yield where, rec
    else:
        data = read_json(path)  # errors name the file and the line
        if not isinstance(data, list):
            raise ValueError(f"{path}: expected a JSON list of HotpotQA records")
        for i, rec in enumerate(data):
            if not isinstance(rec, dict):
                raise ValueError(f"{path}: record {i}: expected a JSON object, got {type(rec).__name__}")
            yield f"{path}: record {i}", rec


def _context(rec: dict, where: str) -> list[tuple[str, list[str]]]:
    ctx = rec.get("context")
    if isinstance(ctx, dict):
        titles, sents = ctx.get("title"), ctx.get("sentences")
        if not isinstance(titles, list) or not isinstance(sents, list) or len(titles) != len(sents):
            raise ValueError(f"{where}: field 'context' needs equal-length 'title' and 'sentences' lists")
        pairs = list(zip(titles, sents))
    elif isinstance(ctx, list):
        if not all(isinstance(p, (list, tuple)) and len(p) == 2 for p in ctx):
            raise ValueError(f"{where}: field 'context' must be [[title, [sentences]], ...]")
        pairs = [tuple(p) for p in ctx]
    else:
        raise ValueError(f"{where}: field 'context' missing or malformed")
    for k, (title, sentences) in enumerate(pairs):
        # a bare string would otherwise be read as one "sentence" per character
        if not isinstance(title, str) or not isinstance(sentences, (list, tuple)) \
                or not all(isinstance(x, str) for x in sentences):
            raise ValueError(f"{where}: field 'context' paragraph {k} must be a title and a list of sentence strings")
    return [(t, list(ss)) for t, ss in pairs]


def _supporting(rec: dict, where: str) -> list[tuple[str, int]]:
    sf = rec.get("supporting_facts")
    if isinstance(sf, dict):
        titles, ids = sf.get("title"), sf.get("sent_id")
        if not isinstance(titles, list) or not isinstance(ids, list) or len(titles) != len(ids):
            raise ValueError(f"{where}: field 'supporting_facts' needs equal-length 'title' and 'sent_id' lists")
        try:
            return [(str(t), int(i)) for t, i in zip(titles, ids)]
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{where}: field 'supporting_facts' needs integer 'sent_id' values") from exc
    if isinstance(sf, list):
        try:
            return [(str(t), int(i)) for t, i in sf]
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{where}: field 'supporting_facts' must be [[title, sent_id], ...]") from exc
    raise ValueError(f"{where}: field 'supporting_facts' missing or malformed")


def hotpot_record(rec: dict, counter: UnifiedTokenCounter, where: str = "record",
                  dataset: str = "hotpotqa") -> ReasoningRecord:
    """One HotpotQA record (either layout) as units; unresolved supporting facts go to `problems`."""
    rid = rec.get("_id", rec.get("id"))
    question = rec.get("question")
    if rid is None or not isinstance(question, str) or not question.strip():
        raise ValueError(f"{where}: fields 'id'/'_id' and 'question' are required")
    context = _context(rec, where)
    facts = _supporting(rec, where)
    wanted = set(facts)
    units: list[Unit] = []
    found: set[tuple[str, int]] = set()
    for title, sentences in context:
        units.append(text_unit(counter, title, source=f"{dataset}:{rid}#{title}", title=title))
        for k, sent in enumerate(sentences):
            key = (title, k)
            role = "evidence" if key in wanted else "context"
            found.add(key) if key in wanted else None
            units.append(text_unit(counter, sent, role=role, source=f"{dataset}:{rid}#{title}/{k}", title=title,
                                   sent_id=k))
    problems = [f"supporting fact ({t!r}, {k}) not found in the context" for t, k in facts if (t, k) not in found]
    return ReasoningRecord(id=str(rid), dataset=dataset, question=question.strip(), answer=str(rec.get("answer", "")),
                           units=units, problems=problems,
                           info={"type": rec.get("type"), "level": rec.get("level"),
                                 "supporting_titles": sorted({t for t, _ in facts})})
