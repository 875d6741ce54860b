"""A pool set's tables as Parquet files: their schemas, a writer that streams rows a row group at a time, and a
reader that parses them a batch at a time (so a table of 128K-token documents is never held two or three times
over). `mmbench.data.poolset` lays the tables out in a folder and checks them.
"""
from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import pyarrow as pa
import pyarrow.parquet as pq
from mmbench.common.address_limit import is_out_of_memory

PROVENANCE_TABLE = "provenance"   # optional: pool sets that declare provenance columns
GROUP_BYTES = 8 * 2**20   # serialised characters per Parquet row group (see write_table)
GROUP_ROWS = 65536
READ_BATCH_ROWS = 64       # rows parsed at a time when a table is loaded (see read_rows)


class PoolSetError(RuntimeError):
    """A pool set folder is missing, incomplete or inconsistent; the message says where."""


def file_sha256(path: Path) -> bytes:
    """The SHA-256 of a file, read a megabyte at a time."""
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.digest()


def write_table(records: Iterator[dict[str, Any]], schema: pa.Schema, path: Path) -> str:
    """Write records (rows as `to_record` makes them) to one Parquet file a row group at a time; the file's
    digest ("sha256:<hex>") for the manifest's table digests.

    A row group closes once its serialised rows reach GROUP_BYTES (or GROUP_ROWS rows), so writing a table
    of 128K-token documents holds one group's JSON and Arrow buffers beside the documents, never a second
    and third copy of the whole table. The grouping depends only on the records, so the file is the same
    on every machine.
    """
    with pq.ParquetWriter(path, schema, compression="zstd") as writer:
        rows: list[dict[str, Any]] = []
        size, written = 0, 0
        for record in records:
            rows.append(record)
            size += sum(len(v) for v in record.values() if isinstance(v, str))
            if size >= GROUP_BYTES or len(rows) >= GROUP_ROWS:
                writer.write_table(pa.Table.from_pylist(rows, schema=schema))
                written += len(rows)
                rows, size = [], 0
        if rows or not written:   # an empty table is written as one empty row group, with its schema
            writer.write_table(pa.Table.from_pylist(rows, schema=schema))
    pa.default_memory_pool().release_unused()
    return "sha256:" + file_sha256(path).hex()


def split_provenance(row: dict[str, Any], table: str, columns: Iterable[str],
                     out: list[dict[str, Any]]) -> dict[str, Any]:
    """Take the provenance `columns` out of a record's meta (in place), adding their row for provenance.parquet
    to `out`; the record, for its own table."""
    meta = json.loads(row["meta"])
    apart = {k: v for k, v in meta.items() if k in columns}
    if apart:
        row["meta"] = json.dumps({k: v for k, v in meta.items() if k not in columns}, sort_keys=True,
                                 ensure_ascii=False)
        out.append({"table": table, "id": row["id"], "meta": json.dumps(apart, sort_keys=True, ensure_ascii=False)})
    return row


def read_rows(path: Path, raw: bytes, columns: list[str] | None = None) -> Iterator[dict[str, Any]]:
    """The rows of one Parquet table (only `columns`, if given), a batch at a time: parsing a table of 128K-token
    documents holds one batch of rows beside the parsed records, not the whole table as Arrow and again as
    Python rows."""
    try:
        for batch in pq.ParquetFile(pa.BufferReader(raw)).iter_batches(batch_size=READ_BATCH_ROWS, columns=columns):
            yield from batch.to_pylist()
    except Exception as exc:  # pyarrow raises several types for corrupt files
        if is_out_of_memory(exc):  # a healthy table that did not fit is no corrupt file
            raise
        raise PoolSetError(f"{path}: unreadable parquet ({exc})") from exc


def read_columns(path: Path, raw: bytes, columns: list[str]) -> dict[str, list[Any]]:
    """Whole columns of one Parquet table as Python lists, for columns of small cells (ids, meta, lists of ids):
    a column at a time is several times faster than a row at a time."""
    try:
        pf = pq.ParquetFile(pa.BufferReader(raw))
        missing = [c for c in columns if c not in pf.schema_arrow.names]
        if missing:
            raise PoolSetError(f"{path}: missing column {missing[0]!r}")
        table = pf.read(columns=columns)
        return {c: table.column(c).to_pylist() for c in columns}
    except PoolSetError:
        raise
    except Exception as exc:  # pyarrow raises several types for corrupt files
        if is_out_of_memory(exc):  # a healthy table that did not fit is no corrupt file
            raise
        raise PoolSetError(f"{path}: unreadable parquet ({exc})") from exc


class LazyColumn:
    """One column of a table kept as the table's bytes until a cell is first asked for, then read whole (a batch
    at a time) and held: decompressing the documents' segments was most of loading a pool set, and a warm run
    needs none of them."""

    def __init__(self, path: Path, raw: bytes, name: str) -> None:
        self.path, self.name = path, name
        self._raw: bytes | None = raw
        self._values: list[Any] | None = None
        self._reading = threading.Lock()  # ranker threads may ask for cells of an unread column together

    def value(self, index: int) -> Any:
        with self._reading:
            if self._values is None:
                assert self._raw is not None
                self._values = [row[self.name] for row in read_rows(self.path, self._raw, [self.name])]
                self._raw = None
        return self._values[index]


def parse_rows(path: Path, rows: Iterable[dict[str, Any]], parse: Callable[[dict[str, Any]], Any]) -> list[Any]:
    """Records of one table; a malformed row is a PoolSetError naming the file and the row."""
    out = []
    for i, row in enumerate(rows):
        try:
            out.append(parse(row))
        except (PoolSetError, KeyError, TypeError, ValueError, AttributeError) as exc:
            detail = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
            raise PoolSetError(f"{path}: row {i}: {detail}") from exc
    return out


_DOC_SCHEMA = pa.schema([("id", pa.string()), ("segments", pa.string()), ("tokens", pa.int64()), ("meta", pa.string())])
SCHEMAS = {
    "queries": _DOC_SCHEMA,
    "candidates": _DOC_SCHEMA,
    "pools": pa.schema([("id", pa.string()), ("query_id", pa.string()), ("subset", pa.string()),
                        ("candidate_ids", pa.list_(pa.string())), ("relevant_ids", pa.list_(pa.string())),
                        ("meta", pa.string())]),
    PROVENANCE_TABLE: pa.schema([("table", pa.string()), ("id", pa.string()), ("meta", pa.string())]),
}
