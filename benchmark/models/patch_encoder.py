"""RAVEL's vision adapter: a transformers vision backbone returning patch tokens, special tokens excluded.

CLIP / SigLIP / SigLIP2 vision towers, DINOv2 (+registers), DINOv3 and other `AutoModel` backbones.
`layer="last"` (default) takes `last_hidden_state` (for models that apply a final norm there, e.g. DINOv2, it
is included); an integer takes `hidden_states[layer]`. Special tokens are dropped *generically*: with Hp x Wp
patches from the processed image, the last Hp*Wp tokens are the patch tokens and everything before them (CLS,
register tokens) is excluded. 4-D conv feature maps (B, C, H, W) become H*W tokens. Composite checkpoints
(CLIPModel, SiglipModel, ...) use their `vision_model`. Without a saved image processor, images are resized to
`config.image_size` (bicubic) and normalised with the family's mean/std (SigLIP 0.5, CLIP's, else ImageNet).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch
from PIL import Image

from mmbench.models.feature_models import model_identity

CLIP_MEAN, CLIP_STD = (0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711)
IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


class VisionEncoder:
    """A transformers vision backbone returning patch tokens (special tokens excluded)."""

    def __init__(self, name_or_path: str, *, device: str = "cpu", dtype: torch.dtype = torch.float32,
                 layer: str | int = "last", local_files_only: bool = True, image_size: int | None = None) -> None:
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
        self.processor: Any = None
        try:
            from transformers import AutoImageProcessor

            self.processor = AutoImageProcessor.from_pretrained(  # type: ignore[no-untyped-call]
                name_or_path, local_files_only=local_files_only)
        except Exception:  # noqa: BLE001 - no processor saved: fall back to a plain resize + normalise
            self.processor = None
        size: Any = image_size or getattr(config, "image_size", 224)
        self.image_size = tuple(size) if isinstance(size, (list, tuple)) else (int(size), int(size))
        mt = str(getattr(config, "model_type", ""))
        self.mean, self.std = ((0.5,) * 3, (0.5,) * 3) if mt.startswith("siglip") else \
            (CLIP_MEAN, CLIP_STD) if mt.startswith("clip") else (IMAGENET_MEAN, IMAGENET_STD)
        self.patch_size = getattr(config, "patch_size", None)

    def preprocess(self, images: Sequence[Image.Image]) -> torch.Tensor:
        if self.processor is not None:
            pixels: torch.Tensor = self.processor(images=images, return_tensors="pt")["pixel_values"]
            return pixels
        h, w = self.image_size
        arrs = []
        for im in images:
            a = np.asarray(im.convert("RGB").resize((w, h), resample=3), dtype=np.float32) / 255.0
            arrs.append((a - np.array(self.mean, np.float32)) / np.array(self.std, np.float32))
        return torch.from_numpy(np.stack(arrs)).permute(0, 3, 1, 2).contiguous()

    def describe(self) -> dict[str, Any]:
        return {"model": model_identity(self.name), "layer": self.layer, "image_size": self.image_size,
                "processor": type(self.processor).__name__ if self.processor else "fallback",
                "dtype": str(self.dtype)}

    @torch.no_grad()
    def patch_tokens(self, pixel_values: torch.Tensor) -> torch.Tensor:
        pv = pixel_values.to(self.device, self.dtype)
        out = self.model(pixel_values=pv, output_hidden_states=self.layer != "last")
        hs: torch.Tensor = out.last_hidden_state if self.layer == "last" else out.hidden_states[int(self.layer)]
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
        tokens: torch.Tensor = hs.float()
        return tokens
