"""Warm runs without loading the model: its card is remembered, the weights load only when needed.

A warm re-run finds every vector in the embedding cache, which is keyed by the model's card
(`card.identity()`), so it needs the card and nothing else. After each real load the card is
written to MMBENCH_HOME/model_cards/, keyed by what was asked for (name or path, options),
the installed package versions, and the size/time stamps of any local folder named in the
request. The next run with the same key gets a `LazyModel` that answers with that card and
loads the real model the first time something must be encoded (a cache miss needs the view,
hence the tokenizer). If the loaded model's card differs from the remembered one, the memo is
replaced and `ModelChanged` tells the runner to start over with the real model.

Only cacheable models with no corpus fitting are remembered (BM25 always loads).
"""
from __future__ import annotations

import time

import dataclasses
import hashlib
import json
import logging
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from mmbench.common.distributions import installed_distributions
from mmbench.common.url_redaction import redact_urls
from mmbench.data.documents import Document
from mmbench.data.media import MediaStore, atomic_write_bytes
from mmbench.data.tokens import TextTokenizer
from mmbench.models.base import EmbeddingModel, ModelCard, Role

log = logging.getLogger(__name__)


class ModelChanged(RuntimeError):
    """The model loaded for encoding has another card than the remembered one (weights changed)."""


def _path_stamp(value: Any) -> Any:
    """A local path in a request as its files' names, sizes and modification times (no reading)."""
    if not isinstance(value, str) or not value or len(value) > 4096:
        return None
    path = Path(value)
    try:
        if not path.exists():
            return None
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        return [(f.as_posix(), f.stat().st_size, f.stat().st_mtime_ns) for f in files]
    except OSError:
        return None


def memo_key(request: str, options: dict[str, Any]) -> str:
    packages = installed_distributions()
    stamps = {k: _path_stamp(v) for k, v in [("request", request), *sorted(options.items())]}
    payload = {"request": request, "options": options, "packages": packages, "paths": stamps}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:32]


WEIGHTS = "weights"  # memo field beside the card: the device and dtype the weights had when last loaded


def _card_from(d: dict[str, Any]) -> ModelCard:
    card = {k: v for k, v in d.items() if k != WEIGHTS}
    return ModelCard(**{**card, "modalities": frozenset(card["modalities"])})


def _card_record(model: EmbeddingModel) -> dict[str, Any]:
    from mmbench.running.provenance import model_device_dtype

    device, dtype = model_device_dtype(model)
    return {**model.card.identity(), "notes": model.card.notes, WEIGHTS: {"device": device, "dtype": dtype}}


def rememberable(model: EmbeddingModel) -> bool:
    return getattr(model, "cacheable", True) and type(model).fit is EmbeddingModel.fit


def with_settings(card: ModelCard, settings: dict[str, Any]) -> ModelCard:
    """`card` with `settings` added to (or replacing those of the same name in) its settings."""
    return dataclasses.replace(card, settings={**card.settings, **settings})


class LazyModel(EmbeddingModel):
    """The remembered card now; the real model (from `loader`) on first use of anything else."""

    cacheable = True  # only cacheable models are remembered

    def __init__(self, card: ModelCard, loader: Callable[[], EmbeddingModel], on_load: Callable[[EmbeddingModel], None],
                 remembered_weights: dict[str, Any] | None = None, clock: Callable[[], float] = time.perf_counter):
        self.card = card
        self._clock = clock  # times the load (`load_seconds`); injectable for tests
        self._loader, self._on_load = loader, on_load
        self._real: EmbeddingModel | None = None
        self._name: str | None = None  # --model-name: given to the loaded model's card too
        self._settings: dict[str, Any] = {}  # --truncation head: given to the loaded model's card too
        # what provenance records while the weights are not loaded: their device and dtype at the last load
        self.remembered_weights = dict(remembered_weights or {})

    def rename(self, name: str) -> None:
        """Show the model as `name` (results, folders), now and after the weights load."""
        self._name = name
        self.card = dataclasses.replace(self.card, name=name)
        if self._real is not None:
            self._real.card = dataclasses.replace(self._real.card, name=name)

    def set_settings(self, settings: dict[str, Any]) -> None:
        """Add `settings` to the card, now and after the weights load."""
        self._settings.update(settings)
        self.card = with_settings(self.card, settings)
        if self._real is not None:
            self._real.card = with_settings(self._real.card, settings)

    @property
    def loaded(self) -> bool:
        return self._real is not None

    @property
    def real(self) -> EmbeddingModel:
        if self._real is None:
            start = self._clock()
            self._real = self._loader()
            self.load_seconds = self._clock() - start  # measured here: the efficiency record reads it
            self._on_load(self._real)  # remembers the model's own card (the memo is keyed by the request)
            if self._name is not None:  # renamed: compared, cached and reported under the given name
                self._real.card = dataclasses.replace(self._real.card, name=self._name)
            if self._settings:
                self._real.card = with_settings(self._real.card, self._settings)
            if self._real.card.identity() != self.card.identity():
                self.card = self._real.card
                raise ModelChanged(f"model {self.card.name!r} now has another card than remembered; re-running with it")
        return self._real

    def encode(self, documents: Sequence[Document], role: Role, media: MediaStore | None) -> np.ndarray:
        return self.real.encode(documents, role, media)

    def prepare(self, documents: Sequence[Document], role: Role, media: MediaStore | None) -> Any:
        return self.real.prepare(documents, role, media)

    def encode_prepared(self, prepared: Any) -> np.ndarray:
        return self.real.encode_prepared(prepared)

    def budget_tokenizer(self) -> TextTokenizer | None:
        return self.real.budget_tokenizer()

    def visual_tokens(self, width: int, height: int) -> int:
        return self.real.visual_tokens(width, height)

    def video_tokens(self, n_frames: int, width: int, height: int) -> int:
        return self.real.video_tokens(n_frames, width, height)

    # no `fit` of its own: only models without corpus fitting are remembered, and a `fit` here would make
    # the runner take the wrapper for a corpus-fitted model that cannot be sharded (issue 26: --executor ray
    # then ran in the driver on every run after the first)

    def __getattr__(self, name: str) -> Any:  # adapter extras (last_encode_info, ...) come from the real model
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.real, name)


def rename_model(model: EmbeddingModel, name: str) -> None:
    """Give `model` the name results and folders show (`--model-name`), a `LazyModel` included: its
    weights, when they load, get the same name, so the load is not taken for another model."""
    if isinstance(model, LazyModel):
        model.rename(name)
    else:
        model.card = dataclasses.replace(model.card, name=name)


def set_truncation(model: EmbeddingModel, strategy: str) -> None:
    """Cut `model`'s documents to its window by `strategy` (`mmbench.data.truncation.STRATEGIES`): kept in its card's
    settings, so vectors of another strategy are cached apart and the protocol names the rule. The default,
    "middle", leaves the card as it is (and its cache entries and protocol ids with it)."""
    from mmbench.data.truncation import STRATEGIES

    if strategy not in STRATEGIES:
        raise ValueError(f"truncation {strategy!r}: one of {', '.join(STRATEGIES)}")
    if strategy == "middle":
        return
    if isinstance(model, LazyModel):
        model.set_settings({"truncation": strategy})
    else:
        model.card = with_settings(model.card, {"truncation": strategy})


def load_model_lazily(request: str, options: dict[str, Any], home: Path,
                      loader: Callable[[str, dict[str, Any]], EmbeddingModel]) -> EmbeddingModel:
    """A `LazyModel` when this request's card is remembered under `home`, else the loaded model (remembered)."""
    path = Path(home) / "model_cards" / f"{memo_key(request, options)}.json"

    def remember(model: EmbeddingModel) -> None:
        if rememberable(model):
            try:
                atomic_write_bytes(path, (json.dumps(redact_urls(_card_record(model)), sort_keys=True, default=str) + "\n").encode())
            except OSError as exc:  # a read-only home only costs the next run a model load
                log.warning("could not remember the model card in %s: %s", path, exc)

    weights: Any = None
    try:
        record = json.loads(path.read_text())
        card, weights = _card_from(record), record.get(WEIGHTS)
    except FileNotFoundError:
        card = None
    except (OSError, ValueError, TypeError, KeyError) as exc:
        log.warning("ignoring unreadable model card memo %s: %s", path, exc)
        card = None
    if card is None:
        model = loader(request, options)
        remember(model)
        return model
    return LazyModel(card, lambda: loader(request, options), remember,
                     weights if isinstance(weights, dict) else None)
