"""The dataset card of a pool set folder: a `README.md` that `datasets.load_dataset` understands.

Without a card, `datasets.load_dataset(<pool set folder>)` guesses a loader from the files and
returns an ImageFolder of `media/`. The card's YAML front matter declares one config per table
(``queries``, ``candidates``, ``pools``, each a ``test`` split), so::

    datasets.load_dataset("<folder>", "queries", split="test")

gives the table itself. A fourth config, ``default``, is what the call without a config name loads:
the documents, as a DatasetDict with the splits ``queries`` and ``candidates``. Those two tables share
one schema by construction (poolset's document schema); ``pools`` has other columns, and `datasets`
refuses splits of different columns within one config (a cast error when it generates the split), so
the pools stay in their own config.
The card also states the task, its version, the content hash and the licence of each source.
It is written from the manifest alone, is byte-identical for identical builds, and is not part
of the content hash (which covers the records only).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from mmbench.data.audit_lines import pool_aware_lines
from mmbench.data.media import atomic_write_bytes

CARD = "README.md"
SPLIT = "test"
TABLE_HELP = {
    "queries": "one row per query document",
    "candidates": "one row per candidate document",
    "pools": "one row per evaluation item: the candidates a query is ranked against and the relevant ones",
}
DEFAULT_CONFIG = "default"
DOCUMENT_TABLES = ("queries", "candidates")  # one schema, so they can be the splits of one config

# Licences of the public releases the builders read, by the source name a manifest uses; a source
# not listed here is "unknown" on the card (check its release before redistributing a build).
SOURCE_LICENCES: dict[str, str] = {
    "hotpotqa": "cc-by-sa-4.0",
    "haystack": "cc-by-4.0",          # OBELICS (HuggingFaceM4/OBELICS)
    "flickr30k": "other",             # Flickr terms of use; captions for non-commercial research
    "text_needles": "mit",            # NeedleBench (opencompass/NeedleBench)
}
SAMPLE_LICENCE = "apache-2.0"          # mmbench's own sample data (templated text, procedural images)
PYDOC = re.compile(r"pydoc_data|Python Language Reference")


def source_licences(manifest: dict[str, Any]) -> dict[str, str]:
    """Licence of each source named in the manifest (HF ids; "unknown" when mmbench does not know it)."""
    out = {}
    for name, fingerprint in sorted((manifest.get("sources") or {}).items()):
        text = str(fingerprint)
        if text == "unused":
            continue
        hub = re.search(r"\blicen[cs]e=(\S+)", text)   # hub sources record the licence their card states
        if hub:
            out[name] = hub.group(1)
        elif PYDOC.search(text):
            out[name] = "psf-2.0"
        elif text.startswith("mmbench sample"):
            out[name] = SAMPLE_LICENCE
        else:
            out[name] = SOURCE_LICENCES.get(name, "unknown")
    return out


def card_text(manifest: dict[str, Any]) -> str:
    """The README.md for a pool set with this manifest (front matter, then a short description)."""
    licences = source_licences(manifest)
    distinct = sorted(set(licences.values()))
    licence = distinct[0] if len(distinct) == 1 else ("unknown" if "unknown" in distinct else "other")
    task, version, digest = manifest["task"], manifest["task_version"], manifest["content_hash"]
    front = {
        "pretty_name": f"mmbench {task} {version}",
        "license": licence,
        "tags": ["mmbench", "retrieval", task],
        "configs": [{"config_name": DEFAULT_CONFIG,
                     "data_files": [{"split": t, "path": f"{t}.parquet"} for t in DOCUMENT_TABLES]},
                    *({"config_name": t, "data_files": [{"split": SPLIT, "path": f"{t}.parquet"}]}
                      for t in TABLE_HELP)],
        "mmbench": {"task": task, "task_version": version, "content_hash": digest,
                    "format": manifest.get("format", ""), "source_licences": licences},
    }
    counts = manifest.get("counts", {})
    lines = [
        "---", yaml.safe_dump(front, sort_keys=False, allow_unicode=True).rstrip(), "---", "",
        f"# mmbench pool set: {task} (version {version})", "",
        f"Content hash `{digest}` (SHA-256 over the task identity and every record; `mmbench validate` "
        "recomputes it).", "",
        "| config | rows | what |", "|---|---|---|",
        *(f"| `{t}` | {counts.get(t, '?')} | {h} |" for t, h in TABLE_HELP.items()), "",
        "```python",
        "import datasets",
        f'queries = datasets.load_dataset("<this folder>", "queries", split="{SPLIT}")',
        f'pools = datasets.load_dataset("<this folder>", "pools", split="{SPLIT}")',
        'documents = datasets.load_dataset("<this folder>")  # splits: queries, candidates',
        "```", "",
        f"Without a config name, `load_dataset` loads the `{DEFAULT_CONFIG}` config: the query and candidate "
        "documents as two splits of one DatasetDict (they share their columns). `pools` has other columns, so "
        "it is only its own config.", "",
        "`segments` is a JSON list of a document's parts in order: `{\"kind\": \"text\", \"text\": ...}`, "
        "`{\"kind\": \"image\", \"ref\": ...}` or `{\"kind\": \"video\", \"frames\": [...], ...}`. Image and frame "
        "refs are paths relative to this folder's `media/`. `meta` is a JSON object. In `pools`, "
        "`candidate_ids` and `relevant_ids` name rows of `candidates` and `query_id` a row of `queries`.", "",
        "Sources and their licences:", "",
        *(f"- `{name}`: {lic} ({manifest['sources'][name]})" for name, lic in licences.items()), "",
        *_floor_lines(manifest.get("resolution_floors")),
        *_audit_lines((manifest.get("validity") or {}).get("leak_audit")),
        *shortcut_lines((manifest.get("validity") or {}).get("leak_audit") or {}),
        "Builder parameters, seed and drop counts are in `manifest.json`.", "",
    ]
    return "\n".join(lines)


def _floor_lines(floors: dict[str, Any] | None) -> list[str]:
    """The design-time resolution floor of all items, and where the per-group floors are."""
    if floors is None:
        return []
    overall = (floors.get("groups") or {}).get("all") or {}
    if overall.get("mde") is None:
        return []
    return [f"Resolution floor: with all {overall['n']} items, two models' main scores (0/1 per item) must differ "
            f"by at least {overall['mde']:.3f} to be told apart with {floors['power']:.0%} power at alpha "
            f"{floors['alpha']}; per subset, axis value and cell in `manifest.json` (`resolution_floors`).", ""]


def _audit_lines(leak_audit: dict[str, Any] | None) -> list[str]:
    """The leak audit: the label-blind baseline furthest from chance over all items, and each pool-aware one."""
    if not leak_audit:
        return []
    out = ["Leak audit (`mmbench validate` repeats it; details in `manifest.json`, `validity` -> `leak_audit`): "
           "rankers that never read the query, scored by P@1 against chance with an exact binomial test.", ""]
    worst = (leak_audit.get("worst_per_subset") or {}).get("all")
    if worst:
        out.append(f"- label-blind (one candidate at a time: stored position, ids, length, one metadata column): "
                   f"furthest from chance `{worst['baseline']}`, P@1 {worst['score']:.3f} over {worst['n']} items "
                   f"(chance {worst['chance']:.3f}, p={worst['p_value']:.2g}); {len(leak_audit.get('leaks', []))} "
                   "leaks")
    out += [f"- pool-aware {line}" for line in pool_aware_lines(leak_audit)]
    return [*out, ""]


def shortcut_lines(audit: dict[str, Any]) -> list[str]:
    """The learned shortcut probe's held-out P@1 over all items, its top features, and the lexical baseline per
    subset (Hard above Easy and verbatim queries refused), from a validity report's leak audit."""
    out: list[str] = []
    probe = audit.get("shortcut_probe") or {}
    for name, fs in sorted((probe.get("feature_sets") or {}).items()):
        row = (fs.get("per_subset") or {}).get("all")
        if row:
            top = ", ".join(f"`{k}` {v:.2f}" for k, v in fs.get("importances") or [])   # largest first
            out.append(f"- shortcut probe ({name} features{'' if fs.get('enforced') else ', reported only'}): "
                       f"held-out P@1 {row['score']:.3f} over {row['n']} items (chance {row['chance']:.3f}, binomial "
                       f"p {row['p_chance']:.2g}); importances: {top or 'none'}")
    if out:
        out = [f"Learned shortcut probe: {probe['model']}; a build {probe['rule']}.", "", *out, ""]
    lexical = audit.get("lexical_ceiling") or {}
    rows = lexical.get("per_subset") or {}
    if rows:
        out += [f"Lexical baseline per subset ({lexical['note']}):", "",
                "| subset | BM25 on the whole text | BM25 on the first text unit | query 4-grams | chance |",
                "|---|---|---|---|---|",
                *(f"| `{k}` | {_maybe(v.get('bm25_whole_text'))} | {v['bm25_first_unit']:.3f} | "
                  f"{v['query_ngrams']:.3f} | {v['chance']:.3f} |" for k, v in rows.items()), ""]
    return out


def _maybe(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"     # a report written before the whole-text baseline


def is_mmbench_card(path: Path) -> bool:
    """Whether `path` is a card this module wrote (front matter with an `mmbench.content_hash`)."""
    try:
        text = path.read_text(encoding="utf-8")
        front = yaml.safe_load(text.split("---\n")[1]) if text.startswith("---\n") else None
    except (OSError, UnicodeDecodeError, IndexError, yaml.YAMLError):
        return False
    return isinstance(front, dict) and isinstance(front.get("mmbench"), dict) and "content_hash" in front["mmbench"]


def add_card(folder: Path, manifest: dict[str, Any]) -> Path:
    """Give a pool set built before cards existed its card; a README.md that is not ours is left alone."""
    path = Path(folder) / CARD
    if path.exists() and not is_mmbench_card(path):
        raise ValueError(f"{path} exists and is not an mmbench dataset card; move it away to add the card")
    return write_card(folder, manifest)


def write_card(folder: Path, manifest: dict[str, Any]) -> Path:
    """Write the card into a pool set folder (atomically) and return its path."""
    path = Path(folder) / CARD
    atomic_write_bytes(path, card_text(manifest).encode("utf-8"))
    return path
