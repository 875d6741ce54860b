"""Reading a submission folder as data only: known names, size caps, content sniffed, no links.

Nothing here executes or unpickles anything: JSON is parsed strictly (no NaN/Infinity, no
duplicate keys) and Parquet is only accepted when it carries Parquet's magic bytes. The bytes
read here are the bytes validated and the bytes stored, so a file changed after validation
cannot slip in.

Parquet is bounded before it is decoded: a small file can expand enormously (a 146 KB file of
dictionary- and run-length-encoded zeros holds 20 million rows and takes ~800 MB to read), so the
footer's size, then the row, column, row-group and value counts and the uncompressed size that
the metadata states are checked against `Limits` first, and the decoded size is counted batch by
batch while reading, so metadata that understates the contents is caught too.
"""
from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from mmbench.leaderboards.problems import Problem, SubmissionRejected

PARQUET_MAGIC = b"PAR1"
PICKLE_OPCODES = (b"\x80",)  # protocol 2+ pickles start with PROTO


@dataclass(frozen=True)
class Limits:
    """Caps on what a submission may hold; boards may tighten them."""

    max_file_bytes: int = 256 * 1024 * 1024
    max_json_bytes: int = 16 * 1024 * 1024
    max_name_chars: int = 200
    # Parquet contents, checked from the metadata before reading (the largest official pool set has a few
    # thousand items and documents, with at most a few thousand candidates each: far below these)
    max_rows: int = 1_000_000                          # rows of one table
    max_columns: int = 1_000
    max_row_groups: int = 10_000
    max_values: int = 50_000_000                       # values of all columns, list elements included
    max_uncompressed_bytes: int = 1024 * 1024 * 1024   # as the metadata states it (after encoding)
    max_decoded_bytes: int = 1024 * 1024 * 1024        # Arrow memory while reading, counted batch by batch
    max_footer_bytes: int = 16 * 1024 * 1024
    read_batch_rows: int = 65_536
    # JSON contents (results.json, ravel_scores.json): a real results.json is a few levels deep with a few
    # thousand values; a board renders every stored identity, so what it may hold is bounded at submit time
    max_json_depth: int = 32
    max_json_values: int = 200_000                     # strings, numbers, keys, ... of one file
    max_string_chars: int = 100_000                    # one string or key
    max_abs_score: float = 1e12                        # a RAVEL predictor score (its squares must stay finite)


def read_folder(folder: Path, accepted: dict[str, str], limits: Limits) -> dict[str, bytes]:
    """Bytes of every file in `folder`; `accepted` maps each allowed name to 'json', 'parquet' or 'derived' (a
    file made from the others, which may be present and is skipped)."""
    folder = Path(folder)
    if folder.is_symlink() or not folder.is_dir():
        raise SubmissionRejected([Problem("submission", f"{folder} is not a folder")])
    problems: list[Problem] = []
    files: dict[str, bytes] = {}
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        shown = ascii(entry.name)[1:-1]  # names never reach a message or path unescaped
        st = entry.stat(follow_symlinks=False)
        if stat.S_ISLNK(st.st_mode):
            problems.append(Problem(f"file {shown}", "is a symbolic link; submit plain files"))
            continue
        if not stat.S_ISREG(st.st_mode):
            problems.append(Problem(f"file {shown}", "is not a plain file (folders and devices are not accepted)"))
            continue
        if entry.name not in accepted:
            problems.append(Problem(f"file {shown}", f"not an accepted data file; accepted: {', '.join(sorted(accepted))}"
                                    + _pickle_hint(Path(entry.path))))
            continue
        kind = accepted[entry.name]
        if kind == "derived":   # written from the other files (a run's samples.jsonl): neither read nor stored
            continue
        cap = limits.max_json_bytes if kind == "json" else limits.max_file_bytes
        if st.st_size > cap:
            problems.append(Problem(f"file {shown}", f"is {st.st_size} bytes, over the limit of {cap} bytes"))
            continue
        with open(entry.path, "rb") as fh:
            data = fh.read(cap + 1)
        if len(data) > cap:  # grew after stat
            problems.append(Problem(f"file {shown}", f"is over the limit of {cap} bytes"))
            continue
        reason = _sniff(data, kind)
        if reason:
            problems.append(Problem(f"file {shown}", reason))
            continue
        files[entry.name] = data
    if problems:
        raise SubmissionRejected(problems)
    return files


def _pickle_hint(path: Path) -> str:
    try:
        with open(path, "rb") as fh:
            head = fh.read(2)
    except OSError:
        return ""
    return " (it looks like a pickle: submissions are data only, JSON or Parquet)" if head[:1] in PICKLE_OPCODES else ""


def _sniff(data: bytes, kind: str) -> str | None:
    if kind == "parquet":
        if len(data) < 12 or data[:4] != PARQUET_MAGIC or data[-4:] != PARQUET_MAGIC:
            hint = " (it looks like a pickle)" if data[:1] in PICKLE_OPCODES else ""
            return f"is not a Parquet file{hint}; submissions are data only, JSON or Parquet"
        return None
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        hint = " (it looks like a pickle)" if data[:1] in PICKLE_OPCODES else ""
        return f"is not UTF-8 JSON{hint}; submissions are data only, JSON or Parquet"
    return None


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON (numbers must be finite)")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"duplicate key {k!r}")
        out[k] = v
    return out


def parse_json(data: bytes, name: str, limits: Limits = Limits()) -> Any:  # noqa: B008 - Limits is frozen
    """Strict JSON: rejects NaN/Infinity literals, duplicate keys and contents past `limits` (depth, values,
    string length), naming the file."""
    try:
        value = json.loads(data.decode("utf-8"), parse_constant=_no_constants, object_pairs_hook=_no_duplicates)
    except RecursionError:
        raise SubmissionRejected([Problem(name, f"is nested deeper than the limit of {limits.max_json_depth} levels")]) from None
    except ValueError as exc:
        raise SubmissionRejected([Problem(name, f"invalid JSON: {exc}")]) from None
    problem = json_shape_problem(value, limits)
    if problem:
        raise SubmissionRejected([Problem(name, problem)])
    return value


def json_shape_problem(value: Any, limits: Limits = Limits()) -> str | None:  # noqa: B008 - Limits is frozen
    """The first limit a parsed JSON value breaks (depth, number of values, a string's length), or None.
    Walks with an explicit stack, so no nesting makes it recurse."""
    stack: list[tuple[Any, int, str]] = [(value, 1, "")]
    count = 0
    while stack:
        item, depth, where = stack.pop()
        count += 1
        if count > limits.max_json_values:
            return f"holds more than {limits.max_json_values} values, over the limit"
        if depth > limits.max_json_depth:
            return f"is nested deeper than the limit of {limits.max_json_depth} levels (at {where[:80] or 'the top'})"
        if isinstance(item, str) and len(item) > limits.max_string_chars:
            return f"has a string of {len(item)} characters at {where[:80] or 'the top'}, over the limit of {limits.max_string_chars}"
        if isinstance(item, dict):
            for k, v in item.items():
                key = str(k)
                if len(key) > limits.max_string_chars:
                    return f"has a key of {len(key)} characters, over the limit of {limits.max_string_chars}"
                stack.append((v, depth + 1, f"{where}.{key[:40]}" if where else key[:40]))
        elif isinstance(item, list):
            stack.extend((v, depth + 1, f"{where}[{i}]") for i, v in enumerate(item))
    return None


def _over(what: str, value: int, cap: int) -> str | None:
    return f"{what} {value}, over the limit of {cap}" if value > cap else None


def parquet_metadata_problems(data: bytes, limits: Limits) -> tuple[str | None, Any]:
    """(the first limit the file's metadata breaks or None, the metadata); reads the footer only."""
    footer = int.from_bytes(data[-8:-4], "little") if len(data) >= 12 else 0
    if footer > limits.max_footer_bytes or footer > len(data) - 12:
        return f"has a {footer}-byte footer, over the limit of {limits.max_footer_bytes} bytes (or past the file)", None
    meta = pq.ParquetFile(pa.BufferReader(data)).metadata
    groups = [meta.row_group(i) for i in range(meta.num_row_groups)] if meta.num_row_groups <= limits.max_row_groups else []
    chunks = [g.column(j) for g in groups for j in range(g.num_columns)]
    checks = [("has rows:", meta.num_rows, limits.max_rows),
              ("has columns:", meta.num_columns, limits.max_columns),
              ("has row groups:", meta.num_row_groups, limits.max_row_groups),
              ("holds values (list elements included):", sum(c.num_values for c in chunks), limits.max_values),
              ("states an uncompressed size of (bytes)", sum(c.total_uncompressed_size for c in chunks),
               limits.max_uncompressed_bytes)]
    for what, value, cap in checks:
        reason = _over(what, value, cap)
        if reason:
            return reason, meta
    return None, meta


def read_parquet(data: bytes, name: str, limits: Limits) -> pd.DataFrame:
    """A submitted Parquet table, refused (naming the file and the limit) if it would expand past `limits`."""
    def refuse(reason: str) -> SubmissionRejected:
        return SubmissionRejected([Problem(f"file {name}", reason)])

    try:
        reason, _ = parquet_metadata_problems(data, limits)
    except Exception as exc:  # pyarrow raises several types for corrupt footers
        raise refuse(f"unreadable Parquet ({type(exc).__name__}: {exc})") from None
    if reason:
        raise refuse(reason + "; refused before reading it")
    try:
        schema = pq.ParquetFile(pa.BufferReader(data)).schema_arrow
        # text columns are read as dictionaries (a value's bytes once, an index per row), so a short file whose
        # few distinct strings repeat a million times is measured, not decoded: memory stays near the file's
        pf = pq.ParquetFile(pa.BufferReader(data), read_dictionary=[f.name for f in schema if _is_text(f.type)])
        batches, decoded = [], 0
        for batch in pf.iter_batches(batch_size=limits.read_batch_rows, use_pandas_metadata=True):
            decoded += sum(_decoded_bytes(col) for col in batch.columns)
            if decoded > limits.max_decoded_bytes:
                raise refuse(f"decodes to more than {limits.max_decoded_bytes} bytes (its metadata understates its "
                             "contents); refused while reading it")
            batches.append(batch)
        table = pa.Table.from_batches(batches, schema=batches[0].schema) if batches else schema.empty_table()
        return _undictionary(table, schema).to_pandas()
    except SubmissionRejected:
        raise
    except Exception as exc:  # pyarrow raises several types for corrupt files
        raise refuse(f"unreadable Parquet ({type(exc).__name__}: {exc})") from None


def _is_text(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t)


def _decoded_bytes(col: pa.Array) -> int:
    """Bytes `col` takes once decoded: a dictionary column's values counted once per row that uses them."""
    if not pa.types.is_dictionary(col.type) or not _is_text(col.type.value_type):
        return col.nbytes
    lengths = pc.binary_length(col.dictionary)
    used = pc.sum(pc.take(lengths, col.indices)).as_py() or 0
    return int(used) + 8 * len(col)  # the values and their offsets


def _undictionary(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """`table` with the columns read as dictionaries back in the types the file declares (metadata kept)."""
    fields = []
    for f in table.schema:
        want = schema.field(f.name).type if f.name in schema.names else f.type
        fields.append(f.with_type(want) if pa.types.is_dictionary(f.type) and not pa.types.is_dictionary(want) else f)
    return table.cast(pa.schema(fields, metadata=table.schema.metadata))
