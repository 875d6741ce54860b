"""Real sources named on the Hugging Face hub instead of as local files.

A source parameter may be ``hf:<dataset id>@<revision>``, optionally followed by
``?config=<name>&split=<name>``, e.g.::

    --param hotpotqa='hf:hotpotqa/hotpot_qa@<commit>?config=distractor&split=validation'

The table is loaded through ``datasets.load_dataset`` with that revision (a commit hash pins
it; a branch or tag is accepted and said so), and the manifest's source fingerprint records the
dataset, revision, config, split, row count, a SHA-256 over the rows as read, and the licence the
dataset's card states. The digest is computed from the records, not from files, so the same data
gives the same fingerprint on any machine and whatever `datasets` cached.

Readers ask `is_hub(value)` and take `rows(value, ...)` instead of opening a file; builders call
`fingerprint(value, ...)` where they called `source_fingerprint(path)`. A local path is passed
through to those, unchanged.
"""
from __future__ import annotations

import hashlib
import json
import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import parse_qsl

PREFIX = "hf:"
COMMIT = re.compile(r"[0-9a-f]{40}")
SPEC = re.compile(r"hf:(?P<dataset>[^@?\s]+)(?:@(?P<revision>[^?\s]+))?(?:\?(?P<query>\S*))?")


class HubSourceError(ValueError):
    """A hub source name that cannot be parsed or loaded; the message names the parameter."""


@dataclass(frozen=True)
class HubSpec:
    dataset: str
    revision: str
    config: str | None = None
    split: str | None = None

    def __str__(self) -> str:
        query = "&".join(f"{k}={v}" for k, v in (("config", self.config), ("split", self.split)) if v)
        return f"{PREFIX}{self.dataset}@{self.revision}" + (f"?{query}" if query else "")


def is_hub(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(PREFIX)


def parse(value: str, what: str = "source", config: str | None = None, split: str | None = None) -> HubSpec:
    """`hf:<id>@<revision>[?config=..&split=..]`; `config`/`split` are the reader's defaults."""
    m = SPEC.fullmatch(value.strip())
    if not m:
        raise HubSourceError(f"{what}={value!r}: expected hf:<dataset id>@<revision>[?config=NAME&split=NAME]")
    if not m["revision"]:
        raise HubSourceError(f"{what}={value!r}: name the revision (hf:{m['dataset']}@<commit>) so a rebuild "
                             "reads the same data")
    if not _dataset_id_ok(m["dataset"]):
        raise HubSourceError(f"{what}={value!r}: {m['dataset']!r} is neither a hub dataset id (owner/name) nor an "
                             "absolute folder (a local mirror); '..', a relative path or an id that names a folder here is "
                             "refused, since `datasets` would read that folder instead of the hub's dataset")
    options = dict(parse_qsl(m["query"] or "", keep_blank_values=True))
    unknown = sorted(set(options) - {"config", "split"})
    if unknown:
        raise HubSourceError(f"{what}={value!r}: unknown option {unknown[0]!r} (known: config, split)")
    return HubSpec(m["dataset"], m["revision"], options.get("config") or config, options.get("split") or split)


HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?")


def _dataset_id_ok(dataset: str) -> bool:
    """A hub id (`name` or `owner/name`), or an absolute local folder (a mirror in the hub's layout); never a
    path with a `..` part."""
    if ".." in Path(dataset).parts or ".." in dataset.split("/"):
        return False
    return Path(dataset).is_absolute() or (HUB_ID.fullmatch(dataset) is not None and not Path(dataset).exists())


def load_dataset(spec: HubSpec):
    """The one call to the hub (tests replace it to read a local folder in the hub's layout)."""
    import datasets

    return datasets.load_dataset(spec.dataset, spec.config, split=spec.split, revision=spec.revision)


def card_licence(spec: HubSpec) -> str | None:
    """The `license` of the dataset's card (README.md front matter) at that revision, when it can be read.

    The dataset id may also be a local folder in the hub's layout (a mirror); its README.md is read."""
    try:
        from huggingface_hub import DatasetCard

        local = Path(spec.dataset) / "README.md"
        card = DatasetCard.load(local) if local.is_file() else DatasetCard.load(spec.dataset, revision=spec.revision)
        licence = card.data.to_dict().get("license")
    except Exception:  # no card, offline without a cached card: the licence is simply not known
        return None
    if isinstance(licence, list):
        licence = "+".join(str(x) for x in licence)
    return str(licence) if licence else None


@lru_cache(maxsize=8)
def _load(spec: HubSpec):
    if spec.split is None:
        raise HubSourceError(f"{spec}: name the split (?split=NAME)")
    try:
        ds = load_dataset(spec)
    except HubSourceError:
        raise
    except Exception as exc:  # datasets / huggingface_hub raise many types; one line naming the source
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise HubSourceError(f"{spec}: could not load it through datasets ({type(exc).__name__}: {first})") from None
    if not COMMIT.fullmatch(spec.revision):
        print(f"mmbench: note: {spec} names revision {spec.revision!r}, not a commit hash; the manifest records "
              "a digest of the rows read, but a later build may read other data", file=sys.stderr)
    return ds


def dataset(value: str, what: str = "source", config: str | None = None, split: str | None = None):
    """The `datasets.Dataset` a hub source names (loaded once per build)."""
    return _load(parse(value, what, config, split))


def rows(value: str, what: str = "source", config: str | None = None,
         split: str | None = None) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, record) for every row, `where` naming the source and the row for error messages.

    A field the row does not have is left out, as in the release's own JSON (`datasets` gives every row
    every column of the table, None where a record lacked it)."""
    spec = parse(value, what, config, split)
    ds = _load(spec)
    for i, rec in enumerate(_plain(ds)):
        yield f"{spec}: row {i}", {k: v for k, v in rec.items() if v is not None}


def _plain(ds):
    """Rows with media columns left encoded (bytes and path), as the readers' local files hold them."""
    import datasets

    for name, feature in ds.features.items():
        if isinstance(feature, (datasets.Image, datasets.Audio)) and getattr(feature, "decode", False):
            ds = ds.cast_column(name, type(feature)(decode=False))
    return ds


def _jsonable(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"sha256": hashlib.sha256(bytes(value)).hexdigest()}
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)


@lru_cache(maxsize=8)
def _digest(spec: HubSpec) -> tuple[int, str]:
    h = hashlib.sha256()
    n = 0
    for rec in _plain(_load(spec)):
        h.update(json.dumps(rec, sort_keys=True, ensure_ascii=False, default=_jsonable).encode("utf-8") + b"\n")
        n += 1
    return n, h.hexdigest()


def fingerprint(value: str, what: str = "source", config: str | None = None, split: str | None = None,
                pattern: str = "*") -> str:
    """The manifest's name for a source: hub id, revision, config, split, rows, digest, licence;
    a local path gets `mmbench.data.poolset.source_fingerprint(path, pattern)`."""
    if not is_hub(value):
        from mmbench.data.poolset import source_fingerprint

        return source_fingerprint(value, pattern)
    spec = parse(value, what, config, split)
    n, digest = _digest(spec)
    licence = getattr(_load(spec).info, "license", None) or card_licence(spec) or "unknown"
    licence = re.sub(r"\s+", "-", str(licence).strip()) or "unknown"
    return f"{spec} rows={n} sha256:{digest[:16]} license={licence}"
