"""Run mteb 2.26's Qwen-VL-family wrappers offline on tiny random weights; every change is kept in the tests.

GME (`mteb_gme`): mteb's GME wrapper (and GME's own published inference code it follows) was written for
transformers 4.45-4.51, where `AutoModelForVision2Seq` loaded a Qwen2-VL whose `.model` was the text
decoder (with `embed_tokens`) and whose `.visual` returned the merged image features as a tensor.
transformers 5 moved the decoder to `.model.language_model` and the vision tower to `.model.visual`,
which returns an output object (`pooler_output` holds the same merged features), and dropped
`AutoModelForVision2Seq`. `tf4_layout` gives the wrapper that layout over the same modules and weights.
It changes attribute paths and the vision tower's return shape only; the wrapper's prompts, image
resizing, processor call, truncation, positions, pooling and normalisation run as mteb wrote them. One
setting is the test's: `float32` replaces the wrapper's hard-coded `torch_dtype=float16` when `dtype`
says so (a precision choice mmbench records as `dtype`, not a protocol step), so tiny random weights
compare at 1e-5.

VLM2Vec-V2 (`mteb_vlm2vec2`): mteb's wrapper loads `Qwen/Qwen2-VL-2B-Instruct` from the hub and merges
the checkpoint's LoRA into it with peft (not installed here). The tiny folder stands for the merged
model: the base load is pointed at it and the LoRA step returns the base unchanged. The prompts,
processor call, forward (`output_hidden_states`, the last one) and pooling run as mteb wrote them.

Qwen3-VL-Embedding (`qwen3_st_folder`, `mteb_qwen3`): mteb's wrapper loads the checkpoint through
sentence-transformers, which reads the checkpoint's module files and chat template. A tiny model has
neither, so `qwen3_st_folder` writes them: the modules the checkpoint's sentence-transformers
integration names (a feature-extraction Transformer over the message format with the generation prompt,
last-token Pooling, Normalize) and `QWEN3_VL_CHAT_TEMPLATE`, the system, user and generation-prompt
branches of Qwen3-VL's chat template (its tool and assistant branches never run for an embedding input).
These files are the test's statement of the checkpoint's, not read from it; the wrapper's instruction
handling, image processor bounds, sentence-transformers' message building and pooling run unchanged.

Video (`video_file`, `FfmpegVideo`): mteb's collators decode a dataset's video column with torchcodec's
`VideoDecoder` (not installed here) and read three things from it: `metadata.num_frames`,
`metadata.end_stream_seconds` and `get_frames_at(indices).data` (uint8, frames x channels x height x
width). `video_file` writes a clip's frames losslessly (FFV1) with the ffmpeg program, and `FfmpegVideo`
decodes that file back with ffmpeg and answers those three reads; mteb's frame sampling, resizing and
prompts then run on the decoded frames as they would on torchcodec's.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator


def _modules():
    import torch

    class Tf4Visual(torch.nn.Module):
        """transformers 4's `Qwen2VisionTransformerPretrainedModel` call: returns the merged features."""

        def __init__(self, visual: torch.nn.Module) -> None:
            super().__init__()
            self.inner = visual

        def get_dtype(self) -> torch.dtype:
            return self.inner.get_dtype()

        def forward(self, pixel_values, grid_thw):
            return self.inner(pixel_values, grid_thw=grid_thw).pooler_output

    class Tf4Qwen2VL(torch.nn.Module):
        """transformers 4's Qwen2VLForConditionalGeneration layout over a transformers 5 model."""

        def __init__(self, generation_model: torch.nn.Module) -> None:
            super().__init__()
            self.generation_model = generation_model
            self.model = generation_model.model.language_model   # transformers 4: base.model (embed_tokens)
            self.visual = Tf4Visual(generation_model.model.visual)  # transformers 4: base.visual
            self.config = generation_model.config

        def get_input_embeddings(self):
            return self.model.get_input_embeddings()

    return Tf4Qwen2VL


@contextmanager
def tf4_layout(monkeypatch, dtype: str | None = "float32") -> Iterator[None]:
    """While active, `transformers.AutoModelForVision2Seq.from_pretrained` loads a Qwen2-VL in transformers 4's
    layout (see the module text). `dtype` None keeps the wrapper's own dtype."""
    import torch
    import transformers
    from transformers import Qwen2VLForConditionalGeneration

    wrapper = _modules()

    class AutoModelForVision2Seq:
        @staticmethod
        def from_pretrained(name: str, *args: Any, torch_dtype=None, revision=None, **kw: Any):
            chosen = getattr(torch, dtype) if dtype else torch_dtype
            model = Qwen2VLForConditionalGeneration.from_pretrained(name, dtype=chosen, attn_implementation="sdpa")
            return wrapper(model.eval()).eval()

    monkeypatch.setattr(transformers, "AutoModelForVision2Seq", AutoModelForVision2Seq, raising=False)
    yield


def mteb_gme(monkeypatch, path: str, **kw: Any):
    """mteb 2.26's `GmeQwen2VL` on a local Qwen2-VL folder (its defaults: 4..1280 image tokens, max_length 1800)."""
    from mteb.models.model_implementations.gme_v_models import GmeQwen2VL

    with tf4_layout(monkeypatch):
        return GmeQwen2VL(path, revision=None, device="cpu", **kw)


def mteb_encode(wrapper, rows: list[dict[str, Any]], role: str, task: str = "mmbench-parity",
                instruction: str | None = None):
    """`wrapper.encode` over `rows` (one dict of columns per input, in the dataset's column order), batch size 1,
    as mteb's evaluator calls it: a task's metadata (its name, and `instruction` as its query prompt)."""
    from types import SimpleNamespace

    from datasets import Dataset
    from mteb.types import PromptType
    from torch.utils.data import DataLoader

    if "video" in rows[0]:  # a decoder object per row: a plain list with the dataset's `features`, as mteb reads it
        data: Any = _Rows(rows)
        data.features = dict.fromkeys(rows[0])
    else:
        data = Dataset.from_dict({k: [r[k] for r in rows] for k in rows[0]})
    loader = DataLoader(data, batch_size=1, collate_fn=lambda batch: {k: [b[k] for b in batch] for k in batch[0]})
    meta = SimpleNamespace(name=task, prompt={"query": instruction} if instruction else None, type="Any2AnyRetrieval")
    kind = PromptType.query if role == "query" else PromptType.document
    out = wrapper.encode(loader, task_metadata=meta, hf_split="test", hf_subset="default", prompt_type=kind,
                         show_progress_bar=False)
    return out.float().numpy() if hasattr(out, "numpy") else out


class _Rows(list):
    features: dict[str, Any]


def video_file(frames, path, fps: float = 1.0):
    """Write PIL `frames` to `path` (Matroska, FFV1, lossless RGB) at `fps` with the ffmpeg program."""
    import subprocess
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        for i, frame in enumerate(frames):
            frame.convert("RGB").save(Path(tmp) / f"{i:05d}.png")
        subprocess.run(["ffmpeg", "-loglevel", "error", "-y", "-framerate", f"{fps:g}", "-i",
                        str(Path(tmp) / "%05d.png"), "-c:v", "ffv1", "-pix_fmt", "bgr0", str(path)], check=True)
    return path


class FfmpegVideo:
    """The part of torchcodec's `VideoDecoder` mteb's collators use, decoding a file with the ffmpeg program."""

    def __init__(self, path) -> None:
        import json
        import subprocess
        from types import SimpleNamespace

        import numpy as np
        import torch

        probe = json.loads(subprocess.run(
            ["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries",
             "stream=width,height:format=duration", "-of", "json", str(path)],
            capture_output=True, check=True).stdout)
        width, height = int(probe["streams"][0]["width"]), int(probe["streams"][0]["height"])
        raw = subprocess.run(["ffmpeg", "-loglevel", "error", "-i", str(path), "-f", "rawvideo", "-pix_fmt", "rgb24",
                              "-"], capture_output=True, check=True).stdout
        frames = np.frombuffer(raw, np.uint8).reshape(-1, height, width, 3)
        self._frames = torch.from_numpy(frames.copy()).permute(0, 3, 1, 2)
        self.metadata = SimpleNamespace(num_frames=len(frames), end_stream_seconds=float(probe["format"]["duration"]))

    def get_frames_at(self, indices):
        from types import SimpleNamespace

        return SimpleNamespace(data=self._frames[list(indices)])


VLM2VEC2_BASE = "Qwen/Qwen2-VL-2B-Instruct"


def mteb_vlm2vec2(path: str):
    """mteb 2.26's `VLM2VEC2Wrapper` with the tiny Qwen2-VL at `path` standing for the merged V2 model (float32)."""
    import sys
    import types

    import pytest
    import torch
    from mteb.models.model_implementations.vlm2vec_models import VLM2VEC2Wrapper
    from transformers import Qwen2VLForConditionalGeneration

    class PeftModel:
        """The LoRA step: the tiny folder already is the merged model."""

        def __init__(self, base):
            self.base = base

        @classmethod
        def from_pretrained(cls, base, adapter, revision=None):
            return cls(base)

        def merge_and_unload(self):
            return self.base

    peft = types.ModuleType("peft")
    peft.PeftModel = PeftModel  # type: ignore[attr-defined]
    load = Qwen2VLForConditionalGeneration.from_pretrained

    def base_model(cls, name: str, *args: Any, torch_dtype=None, **kw: Any):
        assert name == VLM2VEC2_BASE, name
        with pytest.MonkeyPatch.context() as inner:  # transformers' own peft probe must not see the stand-in
            inner.delitem(sys.modules, "peft")
            return load(path, dtype=torch.float32, attn_implementation="sdpa")

    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(sys.modules, "peft", peft)
        mp.setattr(Qwen2VLForConditionalGeneration, "from_pretrained", classmethod(base_model))
        return VLM2VEC2Wrapper(path, device="cpu")


QWEN3_VL_CHAT_TEMPLATE = (
    "{%- if messages[0].role == 'system' -%}<|im_start|>system\n"
    "{% if messages[0].content is string %}{{ messages[0].content }}{% else %}"
    "{% for item in messages[0].content %}{% if 'text' in item %}{{ item.text }}{% endif %}{% endfor %}"
    "{% endif %}<|im_end|>\n{% endif -%}"
    "{%- for message in messages if message.role == 'user' -%}<|im_start|>user\n"
    "{% if message.content is string %}{{ message.content }}{% else %}{% for item in message.content %}"
    "{% if item.type == 'image' or 'image' in item or 'image_url' in item %}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif item.type == 'video' or 'video' in item %}<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in item %}{{ item.text }}{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor -%}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif -%}"
)


def qwen3_st_folder(model_dir, out) -> str:
    """A sentence-transformers folder at `out` over the tiny Qwen3-VL at `model_dir` (see the module text)."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules.normalize import Normalize
    from sentence_transformers.base.modules.transformer import Transformer
    from sentence_transformers.sentence_transformer.modules import Pooling
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(model_dir)
    processor.chat_template = QWEN3_VL_CHAT_TEMPLATE
    processor.save_pretrained(model_dir)
    module = Transformer(str(model_dir), processing_kwargs={"chat_template": {"add_generation_prompt": True}},
                         unpad_inputs=False)
    dim = module.get_embedding_dimension()
    SentenceTransformer(modules=[module, Pooling(dim, "lasttoken"), Normalize()]).save(str(out))
    return str(out)


def mteb_qwen3(path: str, **kw: Any):
    """mteb 2.26's `Qwen3VLEmbeddingWrapper` on a sentence-transformers folder (its defaults: 4..1800 image tokens
    at factor 32, 1 fps), weights in float32."""
    import torch
    from mteb.models.model_implementations.qwen3_vl_embedding_models import Qwen3VLEmbeddingWrapper

    return Qwen3VLEmbeddingWrapper(path, revision=None, device="cpu", model_kwargs={"dtype": torch.float32}, **kw)
