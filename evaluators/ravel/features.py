"""Visual patch features and LLM text features, cached on disk.

Visual: patch tokens of a transformers vision backbone (CLIP / SigLIP / SigLIP2 vision towers,
DINOv2 (+registers), DINOv3, and other ``AutoModel`` backbones). ``layer="last"`` (default) takes
``last_hidden_state`` (for models that apply a final norm there, e.g. DINOv2, it is included); an
integer takes ``hidden_states[layer]``. Special tokens are dropped *generically*: with Hp×Wp
patches from the processed image, the last Hp·Wp tokens are the patch tokens and everything before
them (CLS, register tokens) is excluded. 4-D conv feature maps (B, C, H, W) become H·W tokens.
Composite checkpoints (CLIPModel, SiglipModel, …) use their ``vision_model``.

Text: mean over real (attention-mask) tokens of the target LLM's penultimate hidden states
(``hidden_states[-2]``, i.e. the output of the second-to-last decoder block), raw caption text,
no chat template.

Arrays: ``.npy`` (n, P, d) patch arrays or (n, d) pooled arrays, or ``.npz`` with ``patches``
(and optional ``lengths``), can stand in for an encoder (``load_feature_array``).

Cache: ``FeatureCache(root)`` stores float32 ``.npy`` + a ``.json`` sidecar keyed by a SHA-256 of
(kind, model identity, layer, preprocessing, calibration fingerprint, extractor version); writes
are atomic (temp file + rename).
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch

from mmbench.evaluators.ravel.calibration import Calibration, load_image

EXTRACTOR_VERSION = 1
CLIP_MEAN, CLIP_STD = (0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711)
IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


# ----------------------------------------------------------------------------- cache
def model_identity(name_or_path: str) -> str:
    """Hub id, or for a local folder its resolved path + hash of its config and weight file sizes."""
    p = Path(name_or_path)
    if not p.exists():
        return str(name_or_path)
    h = hashlib.sha256(str(p.resolve()).encode())
    for f in sorted(p.glob("*")):
        if f.is_file():
            h.update(f.name.encode())
            h.update(str(f.stat().st_size).encode())
            if f.suffix == ".json":
                h.update(f.read_bytes())
    return f"{p.resolve()}#{h.hexdigest()[:16]}"


class FeatureCache:
    def __init__(self, root):
        self.root = Path(root) if root else None

    @staticmethod
    def key(**parts) -> str:
        return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:32]

    def _paths(self, kind: str, key: str):
        d = self.root / kind
        return d / f"{key}.npy", d / f"{key}.json"

    def get(self, kind: str, key: str) -> np.ndarray | None:
        if self.root is None:
            return None
        arr, meta = self._paths(kind, key)
        if arr.exists() and meta.exists():
            return np.load(arr, allow_pickle=False)
        return None

    def put(self, kind: str, key: str, value: np.ndarray, meta: dict) -> None:
        if self.root is None:
            return
        arr, side = self._paths(kind, key)
        arr.parent.mkdir(parents=True, exist_ok=True)
        tmp = arr.with_name(f".{arr.name}.{os.getpid()}.tmp")
        with open(tmp, "wb") as f:
            np.save(f, np.ascontiguousarray(value))
        os.replace(tmp, arr)
        tmp = side.with_name(f".{side.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(meta, indent=1, default=str))
        os.replace(tmp, side)


# ----------------------------------------------------------------------------- vision
class VisionEncoder:
    """A transformers vision backbone returning patch tokens (special tokens excluded)."""

    def __init__(self, name_or_path: str, *, device="cpu", dtype=torch.float32, layer="last",
                 local_files_only: bool = True, image_size: int | None = None):
        from transformers import AutoConfig, AutoModel

        self.name = str(name_or_path)
        self.device = torch.device(device)
        self.layer = layer
        config = AutoConfig.from_pretrained(name_or_path, local_files_only=local_files_only)
        model = AutoModel.from_pretrained(name_or_path, local_files_only=local_files_only, dtype=dtype)
        if hasattr(model, "vision_model") and getattr(config, "vision_config", None) is not None:
            model, config = model.vision_model, config.vision_config
        self.model = model.to(self.device).eval()
        self.config = config
        self.dtype = dtype
        self.processor = None
        try:
            from transformers import AutoImageProcessor

            self.processor = AutoImageProcessor.from_pretrained(name_or_path, local_files_only=local_files_only)
        except Exception:  # no processor saved: fall back to a plain resize + normalise
            self.processor = None
        size = image_size or getattr(config, "image_size", 224)
        self.image_size = tuple(size) if isinstance(size, (list, tuple)) else (int(size), int(size))
        mt = str(getattr(config, "model_type", ""))
        self.mean, self.std = ((0.5,) * 3, (0.5,) * 3) if mt.startswith("siglip") else \
            (CLIP_MEAN, CLIP_STD) if mt.startswith("clip") else (IMAGENET_MEAN, IMAGENET_STD)
        self.patch_size = getattr(config, "patch_size", None)

    def preprocess(self, images) -> torch.Tensor:
        if self.processor is not None:
            return self.processor(images=images, return_tensors="pt")["pixel_values"]
        h, w = self.image_size
        arrs = []
        for im in images:
            a = np.asarray(im.convert("RGB").resize((w, h), resample=3), dtype=np.float32) / 255.0
            arrs.append((a - np.array(self.mean, np.float32)) / np.array(self.std, np.float32))
        return torch.from_numpy(np.stack(arrs)).permute(0, 3, 1, 2).contiguous()

    def describe(self) -> dict:
        return {"model": model_identity(self.name), "layer": self.layer, "image_size": self.image_size,
                "processor": type(self.processor).__name__ if self.processor else "fallback",
                "dtype": str(self.dtype)}

    @torch.no_grad()
    def patch_tokens(self, pixel_values: torch.Tensor) -> torch.Tensor:
        pv = pixel_values.to(self.device, self.dtype)
        out = self.model(pixel_values=pv, output_hidden_states=self.layer != "last")
        hs = out.last_hidden_state if self.layer == "last" else out.hidden_states[int(self.layer)]
        if hs.ndim == 4:  # conv feature map
            return hs.flatten(2).transpose(1, 2).float()
        ps = self.patch_size
        if ps:
            ps = ps if isinstance(ps, (list, tuple)) else (ps, ps)
            n_patch = (pv.shape[-2] // ps[0]) * (pv.shape[-1] // ps[1])
            prefix = hs.shape[1] - n_patch
            if prefix < 0:
                raise ValueError(f"{self.name}: {hs.shape[1]} tokens < {n_patch} patches")
            hs = hs[:, prefix:]
        return hs.float()


def extract_visual(encoder: VisionEncoder, calibration: Calibration, *, batch_size: int = 16,
                   cache: FeatureCache | None = None, progress: Callable | None = None) -> np.ndarray:
    """(n, P, d) float32 patch tokens for the calibration images (cached)."""
    key = FeatureCache.key(kind="visual", enc=encoder.describe(), cal=calibration.fingerprint(), v=EXTRACTOR_VERSION)
    cache = cache or FeatureCache(None)
    hit = cache.get("visual", key)
    if hit is not None:
        return hit
    chunks = []
    pairs = calibration.pairs
    for s in range(0, len(pairs), batch_size):
        imgs = [load_image(p) for p in pairs[s: s + batch_size]]
        chunks.append(encoder.patch_tokens(encoder.preprocess(imgs)).cpu().numpy())
        if progress:
            progress(min(len(pairs), s + batch_size), len(pairs))
    feats = np.concatenate(chunks).astype(np.float32)
    cache.put("visual", key, feats, {"encoder": encoder.describe(), "calibration": calibration.fingerprint(),
                                     "shape": list(feats.shape)})
    return feats


# ----------------------------------------------------------------------------- text
class TextModel:
    """A causal/base LLM giving penultimate-layer hidden states, mean-pooled over real tokens (RAVEL) or
    at the last real token (`pool="last"`, the paper's post-processing diagnostic, Appendix J)."""

    def __init__(self, name_or_path: str, *, device="cpu", dtype=torch.float32, layer: int = -2,
                 local_files_only: bool = True, max_length: int = 256, pool: str = "mean"):
        from transformers import AutoModel, AutoTokenizer

        if pool not in ("mean", "last"):
            raise ValueError(f"text pooling must be 'mean' or 'last', not {pool!r}")
        self.pool = pool
        self.name = str(name_or_path)
        self.device = torch.device(device)
        self.layer = layer
        self.max_length = max_length
        self.dtype = dtype
        self.tokenizer = AutoTokenizer.from_pretrained(name_or_path, local_files_only=local_files_only)
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token or self.tokenizer.unk_token
        self.tokenizer.padding_side = "right"
        self.model = AutoModel.from_pretrained(name_or_path, local_files_only=local_files_only, dtype=dtype)
        self.model = self.model.to(self.device).eval()

    def describe(self) -> dict:
        return {"model": model_identity(self.name), "layer": self.layer, "pool": self.pool,
                "max_length": self.max_length, "dtype": str(self.dtype)}

    @torch.no_grad()
    def encode(self, texts: Sequence[str]) -> torch.Tensor:
        tok = self.tokenizer(list(texts), return_tensors="pt", padding=True, truncation=True, max_length=self.max_length)
        tok = {k: v.to(self.device) for k, v in tok.items()}
        out = self.model(**tok, output_hidden_states=True)
        hs = out.hidden_states[self.layer].float()
        if self.pool == "last":  # right padding: the last real token sits at length - 1
            last = tok["attention_mask"].sum(1).clamp_min(1) - 1
            return hs[torch.arange(hs.shape[0], device=hs.device), last]
        mask = tok["attention_mask"][..., None].float()
        return (hs * mask).sum(1) / mask.sum(1).clamp_min(1)


def extract_text(model: TextModel, calibration: Calibration, *, batch_size: int = 32,
                 cache: FeatureCache | None = None) -> np.ndarray:
    key = FeatureCache.key(kind="text", llm=model.describe(), cal=calibration.fingerprint(), v=EXTRACTOR_VERSION)
    cache = cache or FeatureCache(None)
    hit = cache.get("text", key)
    if hit is not None:
        return hit
    texts = calibration.texts
    feats = np.concatenate([model.encode(texts[s: s + batch_size]).cpu().numpy()
                            for s in range(0, len(texts), batch_size)]).astype(np.float32)
    cache.put("text", key, feats, {"llm": model.describe(), "calibration": calibration.fingerprint(),
                                   "shape": list(feats.shape)})
    return feats


# ----------------------------------------------------------------------------- arrays
def load_feature_array(path) -> tuple[np.ndarray, np.ndarray | None]:
    """Patch features from ``.npy`` ((n,P,d); (n,d) is treated as one token per image) or ``.npz``."""
    path = Path(path)
    if path.suffix == ".npz":
        z = np.load(path, allow_pickle=False)
        x = z["patches"] if "patches" in z else z[z.files[0]]
        lengths = z["lengths"] if "lengths" in z else None
    else:
        x, lengths = np.load(path, allow_pickle=False), None
    if x.ndim == 2:
        x = x[:, None, :]
    if x.ndim != 3:
        raise ValueError(f"{path}: expected (n, P, d) or (n, d), got {x.shape}")
    return x.astype(np.float32, copy=False), lengths


def pooled(patches: np.ndarray, lengths=None) -> np.ndarray:
    """Mean over (valid) patch tokens → (n, d)."""
    x = np.asarray(patches, dtype=np.float64)
    if lengths is None:
        return x.mean(1)
    m = (np.arange(x.shape[1])[None, :] < np.asarray(lengths)[:, None])[..., None]
    return (x * m).sum(1) / m.sum(1)
