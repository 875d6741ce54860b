"""The mteb bridge: mteb models on mmbench tasks, and the mapping of mmbench documents to mteb rows and
task metadata that `mmbench.interop.mteb_task` uses to export pool sets as mteb tasks.

mteb's encoder protocol gives a model one text and at most one image per input, so a document's
text segments are joined in reading order and only its first image is passed; what was dropped
(further images, videos) is recorded per document in `last_encode_info` / `export_report`.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from mmbench.data.documents import Document, Image, Video
from mmbench.data.media import MediaStore
from mmbench.models.base import EmbeddingModel, EncodeError, ModelCard, Role


def to_mteb_row(doc: Document, media: MediaStore | None, with_images: bool) -> tuple[dict[str, Any], dict[str, int]]:
    """One mteb input row (text + first image) and what the mapping dropped."""
    images = [s for s in doc.segments if isinstance(s, Image)]
    videos = [s for s in doc.segments if isinstance(s, Video)]
    row: dict[str, Any] = {"id": doc.id, "text": doc.text}
    dropped = {"images": len(images) - (1 if images and with_images else 0), "videos": len(videos)}
    if with_images:
        if images and media is None:
            raise EncodeError(f"document {doc.id!r} has images but no media store was given")
        row["image"] = media.load_image(images[0].ref, item=doc.id) if images else None
    return row, dropped


def task_metadata(name: str, with_images: bool, revision: str, main_score: str, description: str = ""):
    """The mteb `TaskMetadata` of a retrieval task over mmbench documents (an exported pool set, or the
    stand-in task an mteb encoder is called with)."""
    from mteb import TaskMetadata

    return TaskMetadata(
        name=name, description=description or name, reference=None,
        dataset={"path": f"mmbench/{name}", "revision": revision},
        type="Any2AnyRetrieval" if with_images else "Retrieval", category="it2it" if with_images else "t2t",
        modalities=["text", "image"] if with_images else ["text"], eval_splits=["test"], eval_langs=["eng-Latn"],
        main_score=main_score, date=None, domains=None, task_subtypes=None, license=None,
        annotations_creators=None, dialect=None, sample_creation=None, bibtex_citation=None)

class MtebEncoderModel(EmbeddingModel):
    """Any mteb encoder (an object with mteb's `encode(DataLoader, ...)`) as an mmbench model."""

    def __init__(self, encoder: Any, name: str | None = None, batch_size: int = 32) -> None:
        self.encoder = encoder
        self.batch_size = batch_size
        meta = getattr(encoder, "mteb_model_meta", None)
        mods = set(getattr(meta, "modalities", None) or ["text"]) & {"text", "image"}
        self._meta_name = getattr(meta, "name", None) or type(encoder).__name__
        self.card = ModelCard(
            name=name or f"mteb:{self._meta_name}", family="mteb", modalities=frozenset(mods or {"text"}),
            max_tokens=None, similarity="cosine", revision=str(getattr(meta, "revision", None) or "unknown"),
            dim=_embed_dim(encoder, meta),
            settings={"mteb_model": self._meta_name, "input": "text joined in reading order + first image"},
            notes=("through mteb's encoder protocol: one text and at most one image per document; further images "
                   "and videos are dropped and counted per document; no truncation by mmbench (mteb models "
                   "truncate inside their own tokenizer)"),
        )
        self.last_encode_info: list[dict[str, Any]] = []

    def encode(self, documents: Sequence[Document], role: Role, media: MediaStore | None) -> np.ndarray:
        from datasets import Dataset
        from mteb.types import PromptType
        from torch.utils.data import DataLoader

        with_images = "image" in self.card.modalities
        rows, info = [], []
        for doc in documents:
            row, dropped = to_mteb_row(doc, media, with_images)
            if role == "query":
                row["query"] = row["text"]
            else:
                row["title"], row["body"] = "", row["text"]
            rows.append(row)
            info.append({"id": doc.id, "dropped": dropped})
        groups = [[i for i, r in enumerate(rows) if (r.get("image") is not None) == has] for has in (False, True)]
        prompt = PromptType.query if role == "query" else PromptType.document
        parts: dict[int, np.ndarray] = {}
        for has_image, idx in zip((False, True), groups):
            if not idx:
                continue
            keep = [{k: v for k, v in rows[i].items() if k != "id" and (has_image or k != "image")} for i in idx]
            loader = DataLoader(Dataset.from_list(keep) if not has_image else _ListDataset(keep),
                                batch_size=self.batch_size, collate_fn=_collate)
            meta = task_metadata("mmbench_bridge", has_image, "1", "precision_at_1")
            vecs = np.asarray(self.encoder.encode(loader, task_metadata=meta, hf_split="test", hf_subset="default",
                                                  prompt_type=prompt), dtype=np.float32)
            if vecs.shape[0] != len(idx):
                raise EncodeError(f"{self.card.name}: mteb model returned {vecs.shape[0]} vectors for {len(idx)} "
                                  f"documents (first {documents[idx[0]].id!r})")
            for j, i in enumerate(idx):
                parts[i] = vecs[j]
        out = np.stack([parts[i] for i in range(len(rows))]).astype(np.float32)
        self.last_encode_info = info
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)


def _embed_dim(encoder: Any, meta: Any) -> int | None:
    """The vector size mteb's metadata states, else the wrapped sentence-transformers model's."""
    dim = getattr(meta, "embed_dim", None)
    if isinstance(dim, int):
        return dim
    inner = getattr(encoder, "model", None)
    get = getattr(inner, "get_embedding_dimension", None) or getattr(inner, "get_sentence_embedding_dimension", None)
    dim = get() if callable(get) else None
    return dim if isinstance(dim, int) else None


class _ListDataset:
    """Rows holding PIL images, kept as Python objects (no Arrow round trip)."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return self.rows[i]


def _collate(batch: list[dict[str, Any]]) -> dict[str, list[Any]]:
    return {k: [item[k] for item in batch] for k in batch[0]}


def load_mteb_model(name: str, device: str | None = None, revision: str | None = None, batch_size: int = 32,
                    **_: Any) -> MtebEncoderModel:
    """`--model mteb:<name>`: an mteb registry name or hub id through `mteb.get_model`, or a local
    sentence-transformers folder through mteb's own sentence-transformers wrapper.

    When the hub cannot be reached, loading runs in the hub's offline mode (cached weights still load),
    so a model that is not cached fails at once instead of after minutes of retries. Failures to
    reach weights are raised as OSError (the CLI turns them into exit 2 with a hint).
    """
    from pathlib import Path

    folder = Path(name).expanduser()
    if folder.is_dir():
        from mmbench.models.hf_common import folder_revision

        tag = folder_revision(str(folder)).removeprefix("local-")[:8]  # a path is not a public model name
        return MtebEncoderModel(_local_encoder(folder, device), name=f"mteb:{folder.resolve().name}@{tag}",
                                batch_size=batch_size)
    import mteb

    with _offline_if_unreachable() as offline:
        try:
            encoder = mteb.get_model(name, revision=revision, device=device)
        except KeyError as exc:  # not in mteb's registry (and, offline, not looked up on the hub)
            raise OSError(f"mteb knows no model {name!r}{' and the hub is unreachable' if offline else ''} "
                          f"({exc.args[0] if exc.args else exc})") from None
        except Exception as exc:  # mteb raises several types (no network, missing extras, bad revision)
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise OSError(f"through mteb: {type(exc).__name__}: {first}"
                          f"{' (the hub is unreachable)' if offline else ''}") from exc
    return MtebEncoderModel(encoder, name=f"mteb:{name}", batch_size=batch_size)


def _local_encoder(folder: Any, device: str | None):
    if not ((folder / "modules.json").is_file() or (folder / "config_sentence_transformers.json").is_file()):
        raise OSError(f"{folder}: not a sentence-transformers folder (no modules.json); "
                      "mteb:<folder> loads local sentence-transformers models")
    from mteb.models.sentence_transformer_wrapper import SentenceTransformerEncoderWrapper

    return SentenceTransformerEncoderWrapper(str(folder), device=device)


def hub_reachable(timeout: float = 3.0) -> bool:
    """Whether a TCP connection to the Hugging Face endpoint opens within `timeout` seconds."""
    import socket
    from urllib.parse import urlparse

    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return False
    url = urlparse(constants.ENDPOINT)
    try:
        socket.create_connection((url.hostname, url.port or (443 if url.scheme == "https" else 80)), timeout).close()
    except OSError:
        return False
    return True


class _offline_if_unreachable:
    """Within the block, the hub's offline mode is on when the hub cannot be reached; yields whether it is."""

    def __enter__(self) -> bool:
        from huggingface_hub import constants

        self._saved = constants.HF_HUB_OFFLINE
        constants.HF_HUB_OFFLINE = self._saved or not hub_reachable()
        return constants.HF_HUB_OFFLINE

    def __exit__(self, *exc: Any) -> None:
        from huggingface_hub import constants

        constants.HF_HUB_OFFLINE = self._saved
