"""`mmbench prepare youku`: the official YoukuDenseCaption release -> the annotations JSONL the builder reads.

The release (OpenSearch-AI/Youku-Dense-Caption README, "Dataset Structure"; files on ModelScope
`os_ai/Youku_Dense_Caption`) is laid out as::

    ROOT/benchmark_files/generation.json   test set for caption generation
    ROOT/benchmark_files/grounding.json    test set for video moment retrieval
    ROOT/meta_files/<Category>.csv         per category: video file paths and complete captions
    ROOT/data_files/<Category>/{train,val,test}/   videos (train/ and val/ zipped, test/ ready)

The README names the files and what they hold but not their column or field names, so this reader
looks columns up by name from a stated list of candidates (case-insensitive; `--path-column`,
`--caption-column`, `--timestamp-column`, `--duration-column` override) and says which it used:

- path column: video_path, path, video, file_path, filepath, file, video_file, video_name
- caption column: captions, caption, dense_caption, dense_captions, sentences, annotations, annotation, text
- timestamp column (optional): timestamps, timestamp, times, time, segments
- duration column (optional): duration, video_duration, length

A caption cell is JSON (a list of sentences; a list of {sentence|caption|text, timestamp|[start, end]}
objects; or {sentences, timestamps}) or plain text, which is split into sentences at 。！？ (such a
video has no timestamps and is segmented by the shot detector). With `--from grounding`,
`grounding.json` is read instead: its moments (one sentence and one [start, end] each, same field
candidates) are grouped by video into time-ordered events. Any malformed cell stops with one line
naming the file, the line (or record) and the field. Videos are looked up under ROOT as the path
says, then under data_files/<Category>/ and data_files/<Category>/<split>/; the output records the
path found (relative to ROOT), so `--param video_root=ROOT` finds it.
"""
from __future__ import annotations

import argparse
import csv
import json
import re
import sys
from pathlib import Path, PurePosixPath
from typing import Any, Iterable, Sequence

from mmbench.data.media import atomic_write_bytes

PATH_COLUMNS = ("video_path", "path", "video", "file_path", "filepath", "file", "video_file", "video_name")
CAPTION_COLUMNS = ("captions", "caption", "dense_caption", "dense_captions", "sentences", "annotations",
                   "annotation", "text")
TIMESTAMP_COLUMNS = ("timestamps", "timestamp", "times", "time", "segments")
DURATION_COLUMNS = ("duration", "video_duration", "length")
SENTENCE_KEYS = ("sentence", "caption", "text", "query", "description")
SPLITS = ("test", "val", "train")
_SENTENCE_END = re.compile(r"(?<=[。！？!?])")


class ReleaseError(ValueError):
    """The release is not in the documented layout, or a record is malformed; one line naming where."""


def pick_column(header: Sequence[str], candidates: Sequence[str], override: str | None, what: str, where: str,
                required: bool = True) -> str | None:
    lower = {h.strip().lower(): h for h in header}
    if override is not None:
        if override.lower() not in lower:
            raise ReleaseError(f"{where}: no column {override!r} (columns: {', '.join(header)})")
        return lower[override.lower()]
    for c in candidates:
        if c in lower:
            return lower[c]
    if required:
        raise ReleaseError(f"{where}: no {what} column (looked for {', '.join(candidates)}; columns: "
                           f"{', '.join(header)}); name it with --{what}-column")
    return None


def _number(value: Any, where: str, field: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ReleaseError(f"{where}: field {field!r}: not a number: {value!r}") from None


def _pair(value: Any, where: str, field: str) -> list[float]:
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise ReleaseError(f"{where}: field {field!r}: expected [start, end], got {value!r}")
    start, end = (_number(v, where, field) for v in value)
    return [start, end]


def _sentence(obj: dict, where: str, field: str) -> str:
    for k in SENTENCE_KEYS:
        if isinstance(obj.get(k), str) and obj[k].strip():
            return obj[k].strip()
    raise ReleaseError(f"{where}: field {field!r}: an event has no sentence (looked for {', '.join(SENTENCE_KEYS)})")


def _event_span(obj: dict, where: str, field: str) -> list[float] | None:
    for k in ("timestamp", "timestamps", "time", "segment"):
        if k in obj:
            return _pair(obj[k], where, field)
    if "start" in obj and "end" in obj:
        return [_number(obj["start"], where, field), _number(obj["end"], where, field)]
    return None


def parse_captions(cell: str, stamps_cell: str | None, where: str, field: str,
                   stamps_field: str | None) -> tuple[list[str], list[list[float]] | None]:
    """(sentences, timestamps or None) from one caption cell (and its optional timestamp cell)."""
    text = (cell or "").strip()
    if not text:
        raise ReleaseError(f"{where}: field {field!r} is empty")
    data: Any = text
    if text[0] in "[{":
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ReleaseError(f"{where}: field {field!r}: invalid JSON ({exc})") from None
    stamps = None
    if isinstance(data, dict):
        sentences, stamps = data.get("sentences"), data.get("timestamps")
        if not isinstance(sentences, list) or not sentences:
            raise ReleaseError(f"{where}: field {field!r}: an object needs a non-empty 'sentences' list")
        data = sentences
    if isinstance(data, list):
        if all(isinstance(x, dict) for x in data) and data:
            sentences = [_sentence(x, where, field) for x in data]
            spans = [_event_span(x, where, field) for x in data]
            stamps = spans if all(s is not None for s in spans) else None
        elif all(isinstance(x, str) for x in data) and data:
            sentences = [x.strip() for x in data]
        else:
            raise ReleaseError(f"{where}: field {field!r}: expected a list of sentences or of event objects")
    else:
        sentences = [s.strip() for s in _SENTENCE_END.split(str(data)) if s.strip()]
    if stamps is None and stamps_cell is not None and stamps_cell.strip():
        try:
            stamps = json.loads(stamps_cell)
        except ValueError as exc:
            raise ReleaseError(f"{where}: field {stamps_field!r}: invalid JSON ({exc})") from None
    if stamps is not None:
        if not isinstance(stamps, list) or len(stamps) != len(sentences):
            raise ReleaseError(f"{where}: field {stamps_field or field!r}: expected one [start, end] per sentence "
                               f"({len(sentences)})")
        stamps = [_pair(s, where, stamps_field or field) for s in stamps]
    return sentences, stamps


def find_release_video(root: Path, rel: str, category: str) -> str | None:
    """The video's path relative to `root`, trying the documented data_files/<Category>[/<split>] folders."""
    p = PurePosixPath(rel.replace("\\", "/"))
    tries = [p, PurePosixPath("data_files") / p, PurePosixPath("data_files") / category / p]
    tries += [PurePosixPath("data_files") / category / s / p.name for s in SPLITS]
    for t in tries:
        if not t.is_absolute() and (root / t).is_file():
            return t.as_posix()
    return None


def read_meta_files(root: Path, args: argparse.Namespace,
                    columns: dict[str, dict[str, str | None]] | None = None) -> Iterable[dict[str, Any]]:
    """Rows of every meta_files/<Category>.csv; `columns` receives, per file, the columns used."""
    folder = root / "meta_files"
    if not folder.is_dir():
        raise ReleaseError(f"{folder} not found: expected the YoukuDenseCaption release layout "
                           f"(benchmark_files/, meta_files/<Category>.csv, data_files/)")
    files = sorted(folder.glob("*.csv"))
    if not files:
        raise ReleaseError(f"{folder}: no <Category>.csv file")
    wanted = {c.strip() for c in args.categories.split(",") if c.strip()} if args.categories is not None else None
    unknown = sorted(wanted - {p.stem for p in files}) if wanted is not None else []
    if wanted is not None and (unknown or not wanted):
        raise ReleaseError(f"--categories: no category {', '.join(map(repr, unknown)) or '(none given)'} in {folder}; "
                           f"its categories: {', '.join(p.stem for p in files)}")
    for path in files:
        category = path.stem
        if wanted is not None and category not in wanted:
            continue
        try:
            yield from _read_meta_file(path, category, args, columns)
        except (UnicodeDecodeError, csv.Error) as exc:  # a binary or otherwise broken file named, not a bare codec error
            raise ReleaseError(f"{path}: not a readable UTF-8 CSV file ({type(exc).__name__}: {exc})") from None


def _read_meta_file(path: Path, category: str, args: argparse.Namespace,
                    columns: dict[str, dict[str, str | None]] | None) -> Iterable[dict[str, Any]]:
    with path.open(encoding="utf-8-sig", newline="") as fh:
        reader = csv.DictReader(fh)
        header = reader.fieldnames or []
        where = str(path)
        pcol = pick_column(header, PATH_COLUMNS, args.path_column, "path", where)
        ccol = pick_column(header, CAPTION_COLUMNS, args.caption_column, "caption", where)
        tcol = pick_column(header, TIMESTAMP_COLUMNS, args.timestamp_column, "timestamp", where, required=False)
        dcol = pick_column(header, DURATION_COLUMNS, args.duration_column, "duration", where, required=False)
        if columns is not None:
            columns[path.name] = {"path": pcol, "caption": ccol, "timestamp": tcol, "duration": dcol}
        for row in reader:
            line = f"{path}, line {reader.line_num}"
            if None in row:
                raise ReleaseError(f"{line}: {len(header) + len(row[None])} fields for {len(header)} columns "
                                   f"(an unquoted comma in field {ccol!r}?)")
            rel = (row.get(pcol) or "").strip()
            if not rel:
                raise ReleaseError(f"{line}: field {pcol!r} is empty")
            sentences, stamps = parse_captions(row.get(ccol) or "", row.get(tcol) if tcol else None, line, ccol,
                                               tcol)
            duration = row.get(dcol) if dcol else None
            yield {"video_id": PurePosixPath(rel.replace("\\", "/")).stem, "category": category, "source_path": rel,
                   "duration": _number(duration, line, dcol) if duration not in (None, "") else None,
                   "timestamps": stamps, "sentences": sentences}


def read_grounding(root: Path, args: argparse.Namespace) -> Iterable[dict[str, Any]]:
    path = root / "benchmark_files" / "grounding.json"
    if not path.is_file():
        raise ReleaseError(f"{path} not found: expected the YoukuDenseCaption release layout")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ReleaseError(f"{path}: invalid JSON ({exc})") from None
    items = data if isinstance(data, list) else [dict(v, video=k) if isinstance(v, dict) else v
                                                 for k, v in data.items()] if isinstance(data, dict) else None
    if items is None:
        raise ReleaseError(f"{path}: expected a list of moments or an object keyed by video")
    videos: dict[str, dict[str, Any]] = {}
    for n, m in enumerate(items):
        where = f"{path}, record {n}"
        if not isinstance(m, dict):
            raise ReleaseError(f"{where}: not an object")
        key = next((k for k in (args.path_column, *PATH_COLUMNS, "video_id", "vid") if k and k in m), None)
        if key is None or not str(m[key]).strip():
            raise ReleaseError(f"{where}: no video field (looked for {', '.join(PATH_COLUMNS)}, video_id)")
        span = _event_span(m, where, "timestamp")
        if span is None:
            raise ReleaseError(f"{where}: field 'timestamp': missing [start, end]")
        rel = str(m[key]).strip()
        category = str(m.get("category", ""))
        v = videos.setdefault(rel, {"video_id": PurePosixPath(rel.replace("\\", "/")).stem, "category": category,
                                    "source_path": rel, "duration": None, "events": []})
        if "duration" in m:
            v["duration"] = _number(m["duration"], where, "duration")
        v["events"].append((span, _sentence(m, where, "sentence")))
    for v in videos.values():
        events = sorted(v.pop("events"), key=lambda e: (e[0][0], e[0][1]))
        yield {**v, "timestamps": [e[0] for e in events], "sentences": [e[1] for e in events]}


def prepare(root: Path, out: Path, args: argparse.Namespace) -> dict[str, Any]:
    columns: dict[str, dict[str, str | None]] = {}
    rows = list(read_grounding(root, args) if args.source == "grounding" else read_meta_files(root, args, columns))
    seen: dict[str, str] = {}
    lines, found = [], 0
    for r in rows:
        if r["video_id"] in seen:
            raise ReleaseError(f"video id {r['video_id']!r} appears twice ({seen[r['video_id']]} and "
                               f"{r['source_path']}); use --categories to prepare one category at a time")
        seen[r["video_id"]] = r["source_path"]
        r["video_path"] = find_release_video(root, r["source_path"], r["category"])
        found += r["video_path"] is not None
        lines.append(json.dumps(r, ensure_ascii=False, sort_keys=True))
    atomic_write_bytes(out, ("\n".join(lines) + "\n").encode("utf-8") if lines else b"")
    return {"records": len(rows), "with_video": found, "columns": columns,
            "with_timestamps": sum(r["timestamps"] is not None for r in rows)}


def prepare_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="mmbench prepare youku",
                                 description="Convert the YoukuDenseCaption release into the annotations JSONL of "
                                             "`mmbench build --task temporal_summarization --source youku`.")
    ap.add_argument("--root", required=True, type=Path, help="the release folder (benchmark_files/, meta_files/, "
                                                             "data_files/)")
    ap.add_argument("--out", required=True, type=Path, help="the JSONL file to write")
    ap.add_argument("--from", dest="source", choices=("meta", "grounding"), default="meta",
                    help="meta: meta_files/<Category>.csv (default); grounding: benchmark_files/grounding.json")
    ap.add_argument("--categories", help="comma-separated category names (CSV file stems); default: all")
    for name in ("path", "caption", "timestamp", "duration"):
        ap.add_argument(f"--{name}-column", default=None, help=f"the {name} column's name, if not a known one")
    args = ap.parse_args(argv)
    try:
        counts = prepare(args.root, args.out, args)
    except (ReleaseError, OSError) as exc:
        from mmbench.common.errors import CLIError

        raise CLIError(str(exc)) from None
    for name, cols in sorted(counts["columns"].items()):
        print(f"  {name}: " + ", ".join(f"{k} <- {v!r}" for k, v in cols.items() if v is not None))
    print(f"prepared {args.out}: {counts['records']} videos read, {counts['with_timestamps']} with event timestamps, "
          f"{counts['with_video']} with a video file under {args.root}")
    if counts["with_video"] < counts["records"]:
        print(f"  {counts['records'] - counts['with_video']} have no video file yet (train/ and val/ are zipped in "
              f"the release: unzip them); the build counts them as missing", file=sys.stderr)
    print(f"next: mmbench build --task temporal_summarization --source youku --param annotations={args.out} "
          f"--param video_root={args.root}")
    return 0
