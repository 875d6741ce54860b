"""Issue 26 #6: a model whose vector length changes within a run is stopped with one line naming the
model and a document, and nothing is written (before: numpy's 'all input arrays must have the same
shape' or a matmul error, naming neither)."""
import numpy as np
import pytest

from mmbench.data.poolset import load_poolset
from mmbench.running.evaluation import evaluate_to_folder
from mmbench.models.output_check import BadModelOutput
from mmbench.running.runner import RunOptions
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
    with pytest.raises(BadModelOutput) as exc:   # the card says 64 (QueryDimModel), or earlier batches did
        evaluate_to_folder("visual_grounding", ps, model_cls(), options, out, "hashing")
    message = str(exc.value)
    assert "\n" not in message and "'hashing'" in message and "dimension" in message
    assert any(d.id in message for d in list(ps.candidates) + list(ps.queries))
    assert not out.exists() or not any(out.iterdir())


def test_a_text_model_that_sees_no_frames_is_not_called_broken():
    """Issue 26 #8: a text model on Temporal Summarization (video-only candidates) was told its vectors
    "point the same way ... (a broken model, pooling or checkpoint?)"."""
    from mmbench.running.runner import vector_warnings

    same = {f"d{i}": np.ones(4, np.float32) for i in range(3)}
    blind = {k: {"seen_tokens": 0, "unseen_modalities": ["video"]} for k in same}
    [line] = vector_warnings(same, "document", "cosine", blind)
    assert "broken" not in line and "sees nothing of the 3 documents" in line and "video" in line
    # a model that does see the documents and still gives one direction is the broken case, as before
    seeing = {k: {"seen_tokens": 12, "unseen_modalities": []} for k in same}
    assert "broken" in vector_warnings(same, "document", "cosine", seeing)[0]
    assert "broken" in vector_warnings(same, "document", "cosine")[0]


def test_preparing_views_shows_progress(vg_tiny, capsys):
    """Issue 26 #8: minutes passed silently between loading the weights and the first encode bar while every
    document was tokenised for middle truncation."""
    from mmbench.running.runner import run_poolset

    run_poolset(load_poolset(vg_tiny), HashingModel(), RunOptions(use_cache=False, progress=True))
    err = capsys.readouterr().err
    assert "prepare documents" in err and "prepare queries" in err
    assert err.index("prepare documents") < err.index("encode documents")
