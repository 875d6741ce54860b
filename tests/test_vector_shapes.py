"""Issue 26 #6: a model whose vector length changes within a run is stopped with one line naming the
model and a document, and nothing is written (before: numpy's 'all input arrays must have the same
shape' or a matmul error, naming neither)."""
import numpy as np
import pytest

from mmbench.data.poolset import load_poolset
from mmbench.running.evaluation import evaluate_to_folder
from mmbench.running.runner import RunOptions, VectorShapeError
from toy_models import HashingModel


class QueryDimModel(HashingModel):
    """Documents get 64 dimensions, queries 32 (a server that answers queries with another model)."""

    def encode(self, documents, role, media):
        out = super().encode(documents, role, media)
        return out[:, :32] if role == "query" else out


class DriftingModel(HashingModel):
    """The second batch and later have one dimension more (a plugin that pads differently per batch)."""

    def encode(self, documents, role, media):
        out = super().encode(documents, role, media)
        return out if len(self.calls) == 1 else np.hstack([out, np.ones((len(out), 1), np.float32)])


@pytest.mark.parametrize("model_cls", [QueryDimModel, DriftingModel])
def test_a_changing_dimension_is_named_and_nothing_is_written(vg_tiny, tmp_path, model_cls):
    ps = load_poolset(vg_tiny)
    out = tmp_path / "out"
    options = RunOptions(use_cache=False, progress=False, batch_tokens=512)
    with pytest.raises(VectorShapeError) as exc:
        evaluate_to_folder("visual_grounding", ps, model_cls(), options, out, "hashing")
    message = str(exc.value)
    assert "\n" not in message and "'hashing'" in message and "dimension" in message
    assert any(d.id in message for d in list(ps.candidates) + list(ps.queries))
    assert not out.exists() or not any(out.iterdir())
