"""The honest MiniLM pattern on Visual Grounding: a 256-token window under middle truncation."""
import pytest

from mmbench.data.poolset import load_poolset
from mmbench.running.runner import RunOptions, run_poolset


@pytest.fixture(scope="module")
def minilm_run(tmp_path_factory, minilm):
    from mmbench.tasks import get_task

    out = tmp_path_factory.mktemp("vgq") / "ps"
    get_task("visual_grounding").build("sample", out, seed=0, lengths=(4096,), backgrounds=("text",),
                                       needles_per_kind=10, progress=False)
    ps = load_poolset(out)
    image_docs = {c.id for c in ps.candidates if c.meta["anchor_kind"] == "image"}   # ids are opaque
    return (*run_poolset(ps, minilm, RunOptions(progress=False, use_cache=False)), image_docs)


def test_text_anchors_at_the_edges_are_found_middle_ones_lost(minilm_run):
    per_query = minilm_run[0]
    text = per_query[per_query["anchor_kind"] == "text"].groupby("depth")["precision_at_1"].mean()
    assert text[0.0] >= 0.7          # in the kept head
    assert text[1.0] >= 0.4          # in the kept tail
    assert text[[0.4, 0.6]].max() <= 0.3   # cut away: look-alikes tie, chance is 0.1
    assert min(text[0.0], text[1.0]) > text[[0.2, 0.4, 0.6, 0.8]].mean() + 0.3


def test_image_anchors_are_at_chance_and_the_results_say_why(minilm_run):
    per_query, seen, info, image_ids = minilm_run
    image = per_query[per_query["anchor_kind"] == "image"]
    assert image["precision_at_1"].mean() <= 0.3   # chance is 1/10
    image_docs = seen[seen["doc_id"].isin(image_ids)]
    assert len(image_docs) == len(image_ids) > 0
    assert (image_docs["unseen_images"] == 1).all()
    assert all(list(m) == ["image"] for m in image_docs["unseen_modalities"])
    assert info["modalities_seen"] == ["text"] and info["documents_with_unseen_modalities"] == len(image_docs)
    assert seen[seen["role"] == "document"]["truncated"].all()
