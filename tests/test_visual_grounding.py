"""Visual Grounding construction: bins, depths, look-alikes, backgrounds, determinism."""
from collections import defaultdict

import pytest

from mmbench.builders.visual_grounding import DEPTH_TOLERANCE, LENGTH_TOLERANCE
from mmbench.data.documents import Image, Text
from mmbench.data.poolset import load_poolset
from mmbench.data.tokens import UnifiedTokenCounter


@pytest.fixture(scope="module")
def ps(vg_small):
    return load_poolset(vg_small, verify=True)


def test_every_cell_has_its_own_corpus(ps):
    cells = defaultdict(set)
    for item in ps.pools:
        m = item.meta
        cells[(m["anchor_kind"], m["background_modality"], m["length_bin"], m["depth"])].add(tuple(item.candidate_ids))
    assert len(cells) == 2 * 3 * 2 * 6
    for key, corpora in cells.items():
        assert len(corpora) == 1, key                      # all queries of a cell share its corpus
        (corpus,) = corpora
        assert len(corpus) == 10
        cands = ps.candidate_by_id()
        assert all(cands[c].meta["depth"] == key[3] and cands[c].meta["length_bin"] == key[2] for c in corpus)


def test_lengths_land_in_their_bins(ps):
    counter = UnifiedTokenCounter.default()
    for c in ps.candidates:
        nominal = c.meta["length_tokens"]
        assert abs(c.tokens - nominal) <= LENGTH_TOLERANCE * nominal, (c.id, c.tokens)
    for c in ps.candidates[::37]:  # the stored count is the real unified count
        assert counter.document(c) == c.tokens


def test_anchor_depth_matches_requested_depth(ps):
    counter = UnifiedTokenCounter.default()
    for c in ps.candidates:
        assert abs(c.meta["depth_measured"] - c.meta["depth"]) <= DEPTH_TOLERANCE, c.id
    # recompute the measured depth from the segments for a spread of candidates
    needles = {q.meta["needle_id"]: q for q in ps.queries}
    for c in ps.candidates[::23]:
        counts = [counter.segment(s) for s in c.segments]
        offset = c.meta["anchor_token_offset"]
        idx = next(i for i in range(len(counts)) if sum(counts[:i]) == offset and _is_anchor(c.segments[i], c, needles))
        assert offset / (sum(counts) - counts[idx]) == pytest.approx(c.meta["depth_measured"])


def _is_anchor(seg, cand, needles):
    from mmbench.builders.sources.needles import sample_needles

    anchor = {n.id: n for n in sample_needles()}[cand.meta["needle_id"]]
    return (isinstance(seg, Text) and seg.text == anchor.anchor_text) or (isinstance(seg, Image) and anchor.kind == "image")


def test_lookalikes_differ_only_by_their_anchor(ps):
    """Within a cell, candidates of one family are identical except for the anchor segment."""
    groups = defaultdict(list)
    for c in ps.candidates:
        m = c.meta
        groups[(m["anchor_kind"], m["background_modality"], m["length_bin"], m["depth"], m["family"])].append(c)
    checked = 0
    for members in groups.values():
        assert len(members) == 5
        base = members[0]
        for other in members[1:]:
            assert len(other.segments) == len(base.segments)
            diffs = [i for i, (a, b) in enumerate(zip(base.segments, other.segments)) if a != b]
            assert len(diffs) == 1, (base.id, other.id, diffs)
            checked += 1
    assert checked > 100
    # and the query names exactly one family member's entity
    for q in ps.queries:
        if q.meta["anchor_kind"] == "text":
            assert q.meta["entity"] in q.segments[0].text


def test_background_modality_mix(ps):
    for c in ps.candidates:
        kinds = [s.kind for s in c.segments]
        bg = c.meta["background_modality"]
        anchor_kind = c.meta["anchor_kind"]
        n_images = kinds.count("image") - (anchor_kind == "image")
        n_texts = kinds.count("text") - (anchor_kind == "text")
        if bg == "text":
            assert n_images == 0 and n_texts >= 1
        elif bg == "image":
            assert n_texts == 0 and n_images >= 1
        else:
            image_tokens = sum(UnifiedTokenCounter.default().segment(s) for s in c.segments if s.kind == "image")
            assert n_texts >= 1 and n_images >= 1
            assert 0.25 <= image_tokens / c.tokens <= 0.75, c.id


def test_queries_and_relevance(ps):
    queries = ps.query_by_id()
    cands = ps.candidate_by_id()
    for item in ps.pools:
        (rel,) = item.relevant_ids
        assert cands[rel].meta["needle_id"] == queries[item.query_id].meta["needle_id"] == item.meta["needle_id"]


def test_build_is_deterministic(tmp_path, vg_tiny):
    from mmbench.tasks import get_task

    ps2 = get_task("visual_grounding").build("sample", tmp_path / "again", seed=0, lengths=(256,), backgrounds=("text",),
                                             kinds=("text",), needles_per_kind=10, progress=False)
    assert ps2.manifest["content_hash"] == load_poolset(vg_tiny).manifest["content_hash"]
    ps3 = get_task("visual_grounding").build("sample", tmp_path / "other", seed=1, lengths=(256,), backgrounds=("text",),
                                             kinds=("text",), needles_per_kind=10, progress=False)
    assert ps3.manifest["content_hash"] != ps2.manifest["content_hash"]


def test_image_anchors_are_lookalike_pictures(ps):
    """Family members share a background scene; the pictures differ (colour or count), not wholly."""
    import numpy as np

    media = ps.media
    by_family = defaultdict(dict)
    for c in ps.candidates:
        if c.meta["anchor_kind"] == "image" and c.meta["background_modality"] == "text":
            img = next(s for s in c.segments if isinstance(s, Image))
            by_family[c.meta["family"]][c.meta["needle_id"]] = img.ref
    for family, refs in by_family.items():
        arrays = [np.asarray(media.load_image(r), dtype=np.float32) for r in sorted(set(refs.values()))]
        assert len(arrays) == 5, family
        for a in arrays[1:]:
            changed = np.abs(a - arrays[0]).max(axis=2) > 30
            assert 0.005 < changed.mean() < 0.6, family  # same scene, different object


@pytest.mark.parametrize("params,needle", [
    ({"lengths": (-256,)}, "length -256"),
    ({"lengths": (0,)}, "length 0"),
    # a 64-token mixed haystack has too few insertion points for depth 0.4 (measured 0.35 before the check)
    ({"lengths": (64,), "backgrounds": ("mixed",), "depths": (0.4,)}, "vg-text-mixed-64-d040-"),
])
def test_bins_that_cannot_keep_the_length_or_depth_promise_are_refused(params, needle, tmp_path):
    from mmbench.tasks import get_task

    out = tmp_path / "vg"
    with pytest.raises(ValueError, match=needle):
        get_task("visual_grounding").build("sample", out, seed=0, **{"kinds": ("text",), "backgrounds": ("text",),
                                                                   "needles_per_kind": 2, **params}, progress=False)
    assert not out.exists()
