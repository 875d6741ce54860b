"""Garbage from a model (NaN, infinity, wrong row count, wrong rank, strings, ragged rows, a changing dimension)
stops the run at the first bad batch, from a local model and from the OpenAI-compatible, Gemini and Doubao
adapters: exit 2, one line naming the model and the batch's first document, no traceback (not even with -v),
nothing written. Before: one error per document, exit 1, a results folder with every item failed."""
from __future__ import annotations

import json

import numpy as np
import pytest

from loopback_server import LoopbackServer
from mmbench.cli import main
from mmbench.models.output_check import BadModelOutput, batch_rows
from mmbench.data.documents import Document, Text
from toy_models import garbage

KINDS = ["nan", "inf", "rows", "rank", "strings", "ragged", "dimension"]
DOUBAO_DIM = 2048


class GarbageServer(LoopbackServer):
    """Answers embeddings in the OpenAI, Gemini or Ark layout (by path); from the second request on, the vectors
    are spoilt as `kind` says."""

    def __init__(self, kind: str):
        self.kind, self.count = kind, 0
        super().__init__()

    def handle(self, path, headers, body):
        with self.lock:
            self.count += 1
            spoil = self.count > 1
        if path.endswith("/embeddings/multimodal"):   # Ark: one document per request
            texts, dim = [json.dumps(body["input"])], DOUBAO_DIM
        elif path.endswith(":batchEmbedContents"):
            texts, dim = [json.dumps(r["content"]) for r in body["requests"]], 8
        else:
            texts, dim = [json.dumps(x) for x in body.get("input", [body.get("messages")])], 8
        rng = np.random.default_rng(len(texts[0]))
        good = rng.normal(size=(len(texts), dim)).astype(np.float64)
        vecs = _listed(garbage(self.kind, good)) if spoil else good.tolist()
        if path.endswith("/embeddings/multimodal"):
            data = {"embedding": vecs[0]} if len(vecs) == 1 else [{"embedding": v} for v in vecs]
            return 200, {}, {"data": data}
        if path.endswith(":batchEmbedContents"):
            return 200, {}, {"embeddings": [{"values": v} for v in vecs]}
        return 200, {}, {"data": [{"index": i, "embedding": v} for i, v in enumerate(vecs)]}


def _listed(value):
    return value.tolist() if isinstance(value, np.ndarray) else [list(map(_plain, row)) for row in value]


def _plain(x):
    return x if isinstance(x, str) else float(x)


ADAPTERS = {
    "local": ("toy_models:GarbageModel", "garbage-local", lambda url, kind: [f"kind={kind}"]),
    "openai": ("openai-embeddings", "openai:text-embedding-3-small",
               lambda url, kind: [f"base_url={url}/v1", "batch_size=4"]),
    "gemini": ("gemini-embedding", "gemini:gemini-embedding-001", lambda url, kind: [f"base_url={url}/v1beta",
                                                                                     "batch_size=4"]),
    "doubao": ("doubao-seed-1.6-embedding", "doubao-seed-1.6-embedding", lambda url, kind: [f"base_url={url}/api/v3"]),
}


@pytest.mark.parametrize("verbose", [False, True], ids=["plain", "verbose"])
@pytest.mark.parametrize("adapter", list(ADAPTERS))
@pytest.mark.parametrize("kind", KINDS)
def test_garbage_stops_the_run_with_one_line(kind, adapter, verbose, vg_tiny, tmp_path, capsys, monkeypatch):
    if verbose and adapter in ("gemini", "doubao"):
        pytest.skip("-v is checked on the local and OpenAI adapters (the same code path)")
    for var in ("OPENAI_API_KEY", "GEMINI_API_KEY", "ARK_API_KEY", "OPENAI_BASE_URL", "ARK_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    spec, name, options = ADAPTERS[adapter]
    out = tmp_path / "out"
    with GarbageServer(kind) as server:
        args = ["run", "--task", "visual_grounding", "--model", spec, "--data", str(vg_tiny), "--limit", "4",
                "--output", str(out), "--no-cache", "--quiet", "--batch-tokens", "400"]
        for opt in options(server.url, kind) + ["max_attempts=1"] * (adapter != "local"):
            args += ["--model-option", opt]
        code = main((["-v"] if verbose else []) + args)
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("mmbench: error:")]
    assert len(lines) == 1 and f"{name!r}" in lines[0], err
    if not verbose:
        assert err.strip() == lines[0]
    elif kind == "ragged":   # -v adds the cause, in one line
        assert [line for line in err.splitlines() if line.startswith("mmbench: cause: ValueError:")]
    assert not (out / "results.json").exists() and not (out / "per_query.parquet").exists()


DOCS = [Document(f"d{i}", [Text("x")]) for i in range(3)]


@pytest.mark.parametrize("kind, what", [("nan", "NaN in the vector of document 'd2'"), ("inf", "infinite values"),
                                        ("rows", "4 rows for 3 documents"), ("rank", "rank 3"),
                                        ("strings", "strings instead of numbers"), ("ragged", "rows of different lengths"),
                                        ("dimension", "9-dimensional vectors; expected 8")])
def test_each_kind_is_named(kind, what):
    with pytest.raises(BadModelOutput) as exc:
        batch_rows("m", garbage(kind, np.ones((3, 8), np.float32)), DOCS, "document", 8)
    message = str(exc.value)
    assert what in message and "'m'" in message and "'d0'" in message and "\n" not in message
    assert len(batch_rows("m", np.ones((3, 8), np.float64), DOCS, "document", 8)) == 3
