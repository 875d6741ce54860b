"""What the board says about each model: a display name and the metadata columns of the main board.

Sources, first match wins per field:

1. the board's own ``model_metadata.json`` (written by ``mmbench leaderboard describe``: anyone may
   describe a model someone else submitted);
2. the model registry (`mmbench.models.registry.model_specs()`: hub id, parameters, dim, licence,
   context window, modalities), matched by registered name, hub id or the hub id's last part;
3. the submission's own model card (modalities, `dim`).

The context window is the one exception: the card's `max_tokens` (the window the run read through, the figure
its protocol line prints) comes before the registry's nominal one, so a model page and the run agree (MiniLM:
254 tokens of content, its 256 positions less [CLS] and [SEP]).

A local path never shows as a model name: a name that looks like a file-system path is shown by its
last component, and path-like strings in the identity shown on a model page are shortened the same way.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from mmbench.data.media import atomic_write_bytes
from mmbench.common.names import display_name, looks_like_path  # noqa: F401 - the board's names, shared with compare/report

METADATA_FILE = "model_metadata.json"
FIELDS = ("parameters", "dim", "context", "modalities", "license", "weights")
MODALITY_NAMES = ("text", "image", "video", "audio")


class MetadataError(ValueError):
    """A metadata value that cannot go on the board (one line naming field and value)."""


@dataclass(frozen=True)
class ModelMeta:
    parameters: int | None = None
    dim: int | None = None
    context: int | None = None
    modalities: tuple[str, ...] = ()
    license: str | None = None
    weights: str | None = None   # an https:// link to the weights or the API's reference page
    source: str = ""             # where the fields came from, e.g. "registry:minilm"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["modalities"] = list(self.modalities)
        return d


def redact_paths(value: Any) -> Any:
    """The identity shown on a model page with every path-like string shortened to its last component."""
    if isinstance(value, str):
        return display_name(value) if looks_like_path(value) else value
    if isinstance(value, Mapping):
        return {k: redact_paths(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_paths(v) for v in value]
    return value


def weights_url(hub_id: str | None) -> str | None:
    if not hub_id:
        return None
    if hub_id.startswith("https://"):
        return hub_id
    if re.fullmatch(r"[A-Za-z0-9][\w.-]*/[\w.-]+", hub_id):
        return f"https://huggingface.co/{hub_id}"
    return None


def _registry_index() -> dict[str, Any]:
    from mmbench.models.registry import model_specs

    index: dict[str, Any] = {}
    for spec in model_specs():
        for key in (spec.name, spec.hub_id, (spec.hub_id or "").rsplit("/", 1)[-1]):
            if key and not key.startswith("http"):
                index.setdefault(key.lower(), spec)
    return index


def _candidates(model: Mapping[str, Any]) -> list[str]:
    name = str(model.get("name", ""))
    settings = model.get("settings") or {}
    keys = [name, display_name(name).removesuffix(" (local)")]
    keys += [str(settings[k]) for k in ("model_id", "hub_id", "preset", "model") if isinstance(settings.get(k), str)]
    keys += [k.rstrip("/").rsplit("/", 1)[-1] for k in list(keys) if "/" in k]
    return [k.lower() for k in dict.fromkeys(keys) if k]


def resolve(model: Mapping[str, Any], board_meta: Mapping[str, Mapping[str, Any]] | None = None,
            registry: Mapping[str, Any] | None = None) -> ModelMeta:
    """Metadata of one submitted model identity (see the module docstring for the order of sources)."""
    registry = _registry_index() if registry is None else registry
    fields: dict[str, Any] = {}
    sources = []
    own = (board_meta or {}).get(str(model.get("name", "")))
    if own:
        fields.update({k: v for k, v in own.items() if k in FIELDS and v not in (None, "", [])})
        sources.append("board")
    window = model.get("max_tokens")   # the window this run read through: what its protocol line states
    if "context" not in fields and isinstance(window, int) and not isinstance(window, bool) and window > 0:
        fields["context"] = window
        sources.append("card")
    spec = next((registry[k] for k in _candidates(model) if k in registry), None)
    if spec is not None:
        from_spec = {"parameters": spec.parameters, "dim": spec.dim, "context": spec.context,
                     "modalities": tuple(spec.modalities), "license": spec.license, "weights": weights_url(spec.hub_id)}
        for k, v in from_spec.items():
            if v not in (None, "", ()) and k not in fields:
                fields[k] = v
        sources.append(f"registry:{spec.name}")
    card = {"dim": model.get("dim"), "context": model.get("max_tokens"), "modalities": tuple(model.get("modalities") or ())}
    for k, v in card.items():
        if v not in (None, "", ()) and k not in fields:
            fields[k] = v
            if "card" not in sources:
                sources.append("card")
    if "modalities" in fields:
        fields["modalities"] = tuple(sorted(set(fields["modalities"]), key=lambda m: (MODALITY_NAMES + (m,)).index(m)))
    return ModelMeta(**fields, source=", ".join(sources))


def load_board_metadata(board_root: Path) -> dict[str, dict[str, Any]]:
    path = Path(board_root) / METADATA_FILE
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MetadataError(f"{path}: not readable JSON ({exc})") from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise MetadataError(f"{path}: expected an object of model name -> metadata object")
    return {name: check_fields(fields, f"{path}: {name!r}") for name, fields in data.items()}


def _positive_int(value: Any, where: str, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value <= 0 or int(value) != value:
        raise MetadataError(f"{where}: field {field!r} must be a positive whole number, got {value!r}")
    return int(value)


def check_fields(fields: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The metadata fields, checked: counts are positive integers, modalities known, the link https."""
    out: dict[str, Any] = {}
    for key, value in fields.items():
        if key not in FIELDS:
            raise MetadataError(f"{where}: unknown field {key!r} (known: {', '.join(FIELDS)})")
        if value is None:
            continue
        if key in ("parameters", "dim", "context"):
            out[key] = _positive_int(value, where, key)
        elif key == "modalities":
            mods = value.split(",") if isinstance(value, str) else value
            if not isinstance(mods, (list, tuple)) or not all(isinstance(m, str) for m in mods):
                raise MetadataError(f"{where}: field 'modalities' must be a list of names, got {value!r}")
            mods = [m.strip() for m in mods if m.strip()]
            bad = [m for m in mods if m not in MODALITY_NAMES]
            if bad:
                raise MetadataError(f"{where}: field 'modalities' has unknown {bad} (known: {', '.join(MODALITY_NAMES)})")
            out[key] = mods
        elif key == "weights":
            url = weights_url(value) if isinstance(value, str) else None
            if url is None:
                raise MetadataError(f"{where}: field 'weights' must be an https:// link or a hub id, got {value!r}")
            out[key] = url
        else:  # license: short plain text
            if not isinstance(value, str) or not 0 < len(value) <= 64 or any(c in value for c in "<>\"'\n"):
                raise MetadataError(f"{where}: field 'license' must be a short licence name, got {value!r}")
            out[key] = value
    return out


def describe(board_root: Path, name: str, fields: Mapping[str, Any]) -> dict[str, Any]:
    """Add or update one model's metadata in the board's model_metadata.json (atomic write); returns its fields."""
    data = load_board_metadata(board_root)
    merged = {**data.get(name, {}), **check_fields(fields, f"model {name!r}")}
    data[name] = merged
    atomic_write_bytes(Path(board_root) / METADATA_FILE,
                       (json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8"))
    return merged


def all_metadata(models: Iterable[Mapping[str, Any]], board_root: Path | None) -> list[ModelMeta]:
    board_meta = load_board_metadata(board_root) if board_root is not None else {}
    registry = _registry_index()
    return [resolve(m, board_meta, registry) for m in models]
