"""A backend parity certificate: the same probe set through a reference path and a second path, compared.

The probe set ships with mmbench (`mmbench/data/probe/`): short and long text, single images, text and
images interleaved, video frames, and query–document retrieval pairs. Each path encodes every probe item
the model can see (`model_view`: hidden modalities dropped, text middle-truncated to the window):

* the reference path encodes each item alone (batches of one), so no padding or batch neighbour touches it;
* the second path is another backend (an OpenAI-compatible server reached by the API embedder), the same
  backend loaded with other options (a dtype), or the same model fed whole batches in reverse order (the
  batch-composition check).

The certificate states the cosine between the two vectors of every item (minimum, median), the share of
retrieval pairs whose top-1 document (among the probe's documents) is the same under both paths, and
whether both clear the thresholds: those asked for, raised to the protocol's minimum for the comparison kind
(`mmbench.running.parity_thresholds`). Items one path cannot see at all are listed as skipped.
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from mmbench.data.documents import Document, segments_from_json
from mmbench.data.media import MediaStore
from mmbench.models.base import EmbeddingModel, Role
from mmbench.running.executors.threads import encode_threads
from mmbench.running.parity_thresholds import (DEFAULT_MIN_COSINE, DEFAULT_MIN_TOP1_AGREEMENT, applied_thresholds,
                                               comparison_kind, forged, protocol_minimum, verdict)
from mmbench.running.views import model_view

CERTIFICATE_KIND = "mmbench.backend_certificate"


class ProbeError(ValueError):
    """The probe set is unreadable or inconsistent; the message names the file and field."""


@dataclass
class Probe:
    documents: list[Document]
    roles: dict[str, Role]
    pairs: list[tuple[str, str]]
    media: MediaStore
    digest: str


def probe_folder() -> Path:
    return Path(str(resources.files("mmbench.data").joinpath("probe")))


def load_probe(folder: Path | None = None) -> Probe:
    """The probe set in `folder` (default: the one shipped with mmbench), with a digest of its files."""
    folder = Path(folder) if folder is not None else probe_folder()
    path = folder / "probe.json"
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ProbeError(f"{path}: unreadable probe set ({exc})") from None
    h = hashlib.sha256(path.read_bytes())
    docs, roles = [], {}
    for i, rec in enumerate(raw.get("documents") or []):
        try:
            doc = Document(id=str(rec["id"]), segments=segments_from_json(rec["segments"]))
            role = rec["role"]
        except (KeyError, TypeError, ValueError) as exc:
            raise ProbeError(f"{path}: documents[{i}]: {exc}") from None
        if role not in ("query", "document"):
            raise ProbeError(f"{path}: documents[{i}].role: {role!r} is neither 'query' nor 'document'")
        docs.append(doc)
        roles[doc.id] = role
    pairs = [(str(q), str(d)) for q, d in raw.get("pairs") or []]
    for q, d in pairs:
        if roles.get(q) != "query" or roles.get(d) != "document":
            raise ProbeError(f"{path}: pairs: ({q!r}, {d!r}) must name a query and a document of the probe")
    media = MediaStore(folder / "media")
    for ref in sorted((folder / "media").glob("*")):
        h.update(ref.name.encode() + b"\0" + ref.read_bytes())
    return Probe(docs, roles, pairs, media, h.hexdigest())


@dataclass
class PathVectors:
    """What one path gave: a vector per probe item it could see, and why the others are missing."""

    vectors: dict[str, np.ndarray] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)


def encode_path(model: EmbeddingModel, probe: Probe, batching: str = "single") -> PathVectors:
    """Encode the probe through `model`: 'single' (each item alone) or 'reversed' (each role in one batch, in
    reverse order, so every item sits beside others and among padding)."""
    out = PathVectors()
    for role in ("query", "document"):
        views = []
        for doc in probe.documents:
            if probe.roles[doc.id] != role:
                continue
            view, _ = model_view(doc, model)
            if not view.segments:
                out.skipped[doc.id] = f"the model sees none of its modalities ({', '.join(sorted(doc.modalities))})"
                continue
            views.append(view)
        groups = [[v] for v in views] if batching == "single" else [views[::-1]] if views else []
        for group in groups:
            with encode_threads():  # the runner's thread count: the same vectors a run computes
                mat = np.asarray(model.encode(group, role, probe.media), dtype=np.float64)
            for v, row in zip(group, mat):
                out.vectors[v.id] = row
    return out


def _unit(v: np.ndarray) -> np.ndarray:
    return v / max(float(np.linalg.norm(v)), 1e-300)


def _top1(vectors: dict[str, np.ndarray], query: str, docs: Sequence[str]) -> str | None:
    if query not in vectors or not docs:
        return None
    q = _unit(vectors[query])
    scores = [float(_unit(vectors[d]) @ q) for d in docs]
    return docs[int(np.argmax(scores))]


def compare_paths(probe: Probe, ref: PathVectors, other: PathVectors, min_cosine: float = DEFAULT_MIN_COSINE,
                  min_top1_agreement: float = DEFAULT_MIN_TOP1_AGREEMENT) -> dict[str, Any]:
    """Per-item cosines, their minimum and median, top-1 agreement on the retrieval pairs, and pass/fail."""
    items = []
    for doc in probe.documents:
        if doc.id in ref.vectors and doc.id in other.vectors:
            cos = (None if ref.vectors[doc.id].shape != other.vectors[doc.id].shape  # None: the widths differ
                   else float(_unit(ref.vectors[doc.id]) @ _unit(other.vectors[doc.id])))
            items.append({"id": doc.id, "role": probe.roles[doc.id], "cosine": cos})
    cosines = np.array([np.nan if i["cosine"] is None else i["cosine"] for i in items], dtype=float)
    both = [d.id for d in probe.documents if probe.roles[d.id] == "document" and d.id in ref.vectors
            and d.id in other.vectors]
    agreements = []
    for q, d in probe.pairs:
        a, b = _top1(ref.vectors, q, both), _top1(other.vectors, q, both)
        if a is None or b is None:
            continue
        agreements.append({"query": q, "expected": d, "reference_top1": a, "second_top1": b, "agree": a == b})
    finite = bool(len(cosines)) and bool(np.all(np.isfinite(cosines)))
    cos_min = float(np.min(cosines)) if finite else None
    top1 = float(np.mean([a["agree"] for a in agreements])) if agreements else None
    passed = (finite and cos_min is not None and cos_min >= min_cosine and top1 is not None
              and top1 >= min_top1_agreement)
    reasons = []
    if not finite:
        reasons.append("no item was encoded by both paths with vectors of one shape")
    elif cos_min is not None and cos_min < min_cosine:
        worst = items[int(np.argmin(cosines))]["id"]
        reasons.append(f"minimum cosine {cos_min:.6f} < {min_cosine} (item {worst!r})")
    if top1 is None:
        reasons.append("no retrieval pair could be ranked by both paths")
    elif top1 < min_top1_agreement:
        reasons.append(f"top-1 agreement {top1:.3f} < {min_top1_agreement}")
    return {"items": items, "n_items": len(items),
            "skipped": {"reference": dict(ref.skipped), "second": dict(other.skipped)},
            "cosine_min": cos_min, "cosine_median": float(np.median(cosines)) if finite else None,
            "top1_agreement": top1, "pairs": agreements,
            "thresholds": {"min_cosine": min_cosine, "min_top1_agreement": min_top1_agreement},
            "passed": bool(passed), "reasons": reasons}


def certificate(reference: EmbeddingModel, second: EmbeddingModel, second_kind: str, second_description: str,
                probe: Probe | None = None, min_cosine: float = DEFAULT_MIN_COSINE,
                min_top1_agreement: float = DEFAULT_MIN_TOP1_AGREEMENT,
                now: Callable[[], _dt.datetime] = lambda: _dt.datetime.now(_dt.timezone.utc)) -> dict[str, Any]:
    """Encode the probe through both paths and compare them. `second_kind`: 'api', 'options' or 'batching';
    with 'batching' the second path is the reference model fed reversed whole batches. The thresholds applied (and
    recorded) are the ones given, raised to the protocol's minimum for the comparison kind."""
    probe = probe or load_probe()
    kind = comparison_kind(second_kind, reference.card.settings, second.card.settings)
    need_cos, need_top1 = applied_thresholds(kind, min_cosine, min_top1_agreement)
    ref_vecs = encode_path(reference, probe, "single")
    other_vecs = encode_path(second, probe, "reversed" if second_kind == "batching" else "single")
    result = compare_paths(probe, ref_vecs, other_vecs, min_cosine if need_cos is None else need_cos,
                           min_top1_agreement if need_top1 is None else need_top1)
    floor = protocol_minimum(kind)
    from mmbench.running.provenance import package_version

    return {"kind": CERTIFICATE_KIND, "version": "1", "created": now().isoformat(timespec="seconds"),
            "mmbench_version": package_version("mmbench"),
            "reference": {"path": "the model's own adapter, one item per batch", "model": reference.card.identity()},
            "second": {"kind": second_kind, "path": second_description, "model": second.card.identity()},
            "probe": {"digest": probe.digest, "documents": len(probe.documents), "pairs": len(probe.pairs)},
            "comparison": kind, "protocol_minimum": {"min_cosine": floor[0], "min_top1_agreement": floor[1]},
            **result}


def run_block(cert: dict[str, Any]) -> dict[str, Any]:
    """What a run's results.json keeps of a certificate (`mmbench.backend_certificate`); `passed` is the protocol's
    verdict recomputed from the certificate's measurements, its thresholds and the protocol minimum of its kind."""
    thresholds = cert.get("thresholds") or {}
    return {"passed": certificate_verdict(cert), "cosine_min": cert.get("cosine_min"),
            "cosine_median": cert.get("cosine_median"), "top1_agreement": cert.get("top1_agreement"),
            "min_cosine": thresholds.get("min_cosine"), "min_top1_agreement": thresholds.get("min_top1_agreement"),
            "comparison": certificate_kind(cert),
            "second_path": (cert.get("second") or {}).get("path"), "probe_digest": (cert.get("probe") or {}).get("digest"),
            "created": cert.get("created")}


def certificate_kind(cert: dict[str, Any]) -> str | None:
    """The comparison kind, from what the certificate says of its two paths (not from its own `comparison` field)."""
    ref, second = cert.get("reference") or {}, cert.get("second") or {}
    settings = lambda part: ((part.get("model") or {}).get("settings") if isinstance(part, dict)  # noqa: E731
                             and isinstance(part.get("model"), dict) else None)
    return comparison_kind(second.get("kind") if isinstance(second, dict) else None, settings(ref), settings(second))


def _stated(cert: dict[str, Any]) -> tuple[Any, Any]:
    stated = cert.get("thresholds")
    thresholds: dict[str, Any] = stated if isinstance(stated, dict) else {}
    return thresholds.get("min_cosine"), thresholds.get("min_top1_agreement")


def certificate_verdict(cert: dict[str, Any]) -> bool:
    """Whether the certificate passes: its measurements against its thresholds raised to the protocol's minimum."""
    return verdict(cert.get("cosine_min"), cert.get("top1_agreement"),
                   *applied_thresholds(certificate_kind(cert), *_stated(cert)))


def certificate_problem(cert: dict[str, Any]) -> str | None:
    """Why the certificate's stated figures cannot be believed: its summary figures differ from those its own items
    and pairs give, or its `passed` from the verdict they give (by the protocol, or, for a certificate written
    before the protocol's minimums, by its own thresholds). None for an honest certificate."""
    items, pairs = cert.get("items"), cert.get("pairs")
    if not isinstance(items, list) or not isinstance(pairs, list):
        return "items / pairs: missing; not a certificate written by `mmbench verify-backend`"
    try:
        cosines = [float("nan") if i.get("cosine") is None else float(i["cosine"]) for i in items]
        agree = [bool(p["agree"]) for p in pairs]
    except (AttributeError, KeyError, TypeError, ValueError):
        return "items / pairs: malformed entries"
    low = min(cosines) if cosines and all(np.isfinite(cosines)) else None
    top1 = float(np.mean(agree)) if agree else None
    for field_name, stated, want in (("cosine_min", cert.get("cosine_min"), low),
                                     ("top1_agreement", cert.get("top1_agreement"), top1)):
        if (stated is None) != (want is None) or (want is not None and not (
                isinstance(stated, (int, float)) and np.isclose(stated, want, rtol=0, atol=1e-9))):
            return f"{field_name}: states {stated!r}, but its own items give {want!r}; refused as forged"
    return forged(cert.get("passed"), certificate_verdict(cert),
                  verdict(cert.get("cosine_min"), cert.get("top1_agreement"), *_stated(cert)))


def certificate_covers(cert: dict[str, Any], identity: dict[str, Any]) -> bool:
    """Whether the certificate was made for a model of this identity (either of its two paths)."""
    def plain(value: Any) -> Any:
        return json.loads(json.dumps(value, sort_keys=True, default=str))

    return plain(identity) in (plain((cert.get("reference") or {}).get("model")),
                               plain((cert.get("second") or {}).get("model")))


def read_certificate(path: Path) -> dict[str, Any]:
    try:
        cert = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ProbeError(f"{path}: unreadable backend certificate ({exc})") from None
    if not isinstance(cert, dict) or cert.get("kind") != CERTIFICATE_KIND:
        raise ProbeError(f"{path}: kind: not an mmbench backend certificate (expected {CERTIFICATE_KIND!r})")
    problem = certificate_problem(cert)
    if problem is not None:
        raise ProbeError(f"{path}: {problem}")
    return cert
