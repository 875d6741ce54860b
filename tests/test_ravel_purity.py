"""`evaluators/ravel/` keeps RAVEL's scoring mathematics only: no model library, no file reader.

Models load through `mmbench.models` (feature_models, patch_encoder, llm_text), files are read by
`mmbench.builders.sources` (calibration_pairs, feature_arrays) and `mmbench.data.calibration`. torch stays
as the tensor library of the blocked Chamfer GEMMs and the whitening (its model-loading and file functions do
not). Every module is read with `ast`, function-level imports and calls included.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

RAVEL = Path(__file__).resolve().parents[1] / "evaluators" / "ravel"

MODEL_LIBRARIES = {"transformers", "open_clip", "sentence_transformers", "timm", "tokenizers", "huggingface_hub",
                   "safetensors", "accelerate", "diffusers", "torchvision", "peft", "vllm", "clip"}
FILE_READERS = {"PIL", "csv", "json", "pickle", "h5py", "pyarrow", "datasets", "imageio", "cv2", "io", "shutil",
                "tarfile", "zipfile", "gzip", "glob", "mmbench.builders", "mmbench.data.calibration", "importlib",
                "pathlib", "os", "tempfile"}
READER_CALLS = {"open", "read_text", "read_bytes", "read_csv", "read_json", "read_parquet", "read_table",
                "read_excel", "load", "loadtxt", "genfromtxt", "fromfile", "save", "savez", "to_csv", "to_json",
                "load_dataset", "from_pretrained", "write_text", "write_bytes", "iterdir", "glob", "listdir"}
TORCH_MODEL_PARTS = {"torch.nn", "torch.hub", "torch.jit", "torch.load", "torch.save", "torch.utils.data"}


def offences(source: str, name: str = "<module>") -> list[str]:
    """What a module imports or calls that belongs to model loading or file reading."""
    tree = ast.parse(source, filename=name)
    found = []
    for node in ast.walk(tree):
        modules: list[str] = []
        if isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        for m in modules:
            top = m.split(".")[0]
            if top in MODEL_LIBRARIES:
                found.append(f"{name}:{node.lineno} imports the model library {m}")
            if top in FILE_READERS or any(m == r or m.startswith(r + ".") for r in FILE_READERS):
                found.append(f"{name}:{node.lineno} imports the file reader {m}")
            if any(m == t or m.startswith(t + ".") for t in TORCH_MODEL_PARTS):
                found.append(f"{name}:{node.lineno} imports {m}")
        if isinstance(node, ast.Call):
            f = node.func
            called = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            if called in READER_CALLS:
                found.append(f"{name}:{node.lineno} calls {called}()")
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "torch" \
                and f"torch.{node.attr}" in TORCH_MODEL_PARTS:
            found.append(f"{name}:{node.lineno} uses torch.{node.attr}")
    return found


@pytest.mark.parametrize("source", [
    "from transformers import AutoModel",
    "def f():\n    import open_clip",
    "import json",
    "from PIL import Image",
    "import pandas as pd\ndef f(p):\n    return pd.read_csv(p)",
    "import numpy as np\ndef f(p):\n    return np.load(p)",
    "def f(p):\n    with open(p) as fh:\n        return fh.read()",
    "from pathlib import Path\ndef f(p):\n    return Path(p).read_text()",
    "import torch\nclass M(torch.nn.Module):\n    pass",
    "from mmbench.builders.sources.calibration_pairs import load_image",
])
def test_the_check_catches_each_kind(source: str) -> None:
    assert offences(source)


def test_the_check_lets_the_maths_through() -> None:
    assert offences("import numpy as np\nimport torch\nfrom scipy import stats\n"
                    "def f(x):\n    return torch.as_tensor(np.asarray(x)) @ torch.ones(3)") == []


def test_evaluators_ravel_imports_no_model_library_and_reads_no_file() -> None:
    files = sorted(RAVEL.glob("*.py"))
    assert len(files) >= 15
    found = [o for path in files for o in offences(path.read_text(encoding="utf-8"), path.name)]
    assert found == []
