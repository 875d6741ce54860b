import random

import pytest

from mmbench.data.documents import Image, Text, Video
from mmbench.data.tokens import UnifiedTokenCounter, image_tokens
from mmbench.data.truncation import middle_truncate


@pytest.fixture(scope="module")
def tok():
    return UnifiedTokenCounter.default().tokenizer


def _count(segments, tok):
    return sum(len(tok.encode(s.text)) if isinstance(s, Text) else
               image_tokens(s.width, s.height) * (len(s.frames) if isinstance(s, Video) else 1) for s in segments)


def test_fits_untouched(tok):
    segs = [Text("short text"), Image("a", 64, 64)]
    kept, rep = middle_truncate(segs, 100, tok, image_tokens)
    assert kept == segs and not rep.truncated


def test_keeps_head_and_tail_text(tok):
    words = [f"w{i}" for i in range(400)]
    text = " ".join(words)
    kept, rep = middle_truncate([Text(text)], 200, tok, image_tokens)
    assert rep.truncated and rep.exact and rep.tokens_after <= 200
    assert len(kept) == 2
    assert kept[0].text.startswith("w0 w1") and kept[1].text.rstrip().endswith("w399")
    assert rep.cut_text_tokens == len(tok.encode(text)) - rep.tokens_after


def test_images_are_dropped_whole_and_reported(tok):
    segs = [Text("head"), *[Image(f"i{k}", 64, 64) for k in range(10)], Text("tail")]  # 4 tokens per image
    kept, rep = middle_truncate(segs, 14, tok, image_tokens)
    assert kept[0] == Text("head") and kept[-1] == Text("tail")
    n_images = sum(isinstance(s, Image) for s in kept)
    assert rep.dropped_images == 10 - n_images
    assert rep.tokens_after <= 14
    # reading order is preserved: head images come from the start, tail images from the end
    refs = [s.ref for s in kept if isinstance(s, Image)]
    assert refs == sorted(refs, key=lambda r: int(r[1:]))
    assert refs[0] == "i0" and refs[-1] == "i9"


def test_video_keeps_first_and_last_frames(tok):
    video = Video(tuple(f"f{k}" for k in range(20)), 1.0, 64, 64)  # 4 tokens per frame
    kept, rep = middle_truncate([video], 4 * 6, tok, image_tokens)
    frames = [f for s in kept for f in s.frames]
    assert frames == ["f0", "f1", "f2", "f17", "f18", "f19"]
    assert rep.dropped_frames == 14


def test_random_documents_respect_budget_and_order(tok):
    rng = random.Random(7)
    for trial in range(40):
        segs = []
        for k in range(rng.randint(1, 8)):
            r = rng.random()
            if r < 0.5:
                segs.append(Text(" ".join(f"t{trial}x{k}y{j}" for j in range(rng.randint(0, 60)))))
            elif r < 0.8:
                segs.append(Image(f"img{k}", rng.choice([32, 64, 128]), 64))
            else:
                segs.append(Video(tuple(f"v{k}f{j}" for j in range(rng.randint(1, 6))), 1.0, 64, 64))
        budget = rng.randint(0, 150)
        kept, rep = middle_truncate(segs, budget, tok, image_tokens)
        assert rep.tokens_after <= max(budget, _count(segs, tok))
        if rep.truncated:
            assert rep.tokens_after <= budget
            # re-tokenising the kept text may merge at most a token at each cut
            assert _count(kept, tok) <= budget + 2
        media = [s.ref for s in segs if isinstance(s, Image)]
        kept_media = [s.ref for s in kept if isinstance(s, Image)]
        assert kept_media == [m for m in media if m in kept_media]


def test_long_text_windows_keep_exactly_what_full_tokenisation_keeps(tok):
    """A text far over budget is tokenised only at its ends; the kept pieces must not change."""
    import pydoc_data.topics as topics

    from mmbench.data.truncation import _Tokens

    text = "\n".join(topics.topics[k] for k in sorted(topics.topics))[:200_000]
    kept, rep = middle_truncate([Text("intro"), Text(text), Image("x", 64, 64), Text("outro")], 300, tok, image_tokens)
    assert not rep.exact and rep.tokens_after <= 300

    ids = tok.encode(text)
    full = _Tokens(ids, ids, len(ids), True)
    head_n = 150 - len(tok.encode("intro"))
    assert kept[1].text == tok.decode(full.slice(0, head_n))
    assert kept[-1] == Text("outro") and kept[-2] == Image("x", 64, 64)
    tail_n = rep.tokens_after - 150 - 4 - len(tok.encode("outro"))
    assert kept[2].text == tok.decode(ids[len(ids) - tail_n:])
    assert abs(rep.cut_text_tokens - (len(ids) - head_n - tail_n)) / len(ids) < 0.2


def test_video_cost_function_lets_merged_frames_fit(tok):
    """With two frames per token group a budget holds twice the frames it would hold one by one."""
    video = Video(tuple(f"f{k}" for k in range(40)), 1.0, 64, 64)  # 4 tokens per frame (or per pair)
    per_frame, _ = middle_truncate([video], 40, tok, image_tokens)
    paired, rep = middle_truncate([video], 40, tok, image_tokens, lambda n, w, h: -(-n // 2) * image_tokens(w, h))
    n_single = sum(len(s.frames) for s in per_frame)
    n_paired = sum(len(s.frames) for s in paired)
    assert n_single == 10 and n_paired == 20
    assert rep.tokens_after <= 40 and rep.dropped_frames == 20
    assert [s.frames[0] for s in paired] == ["f0", "f30"]


def test_edge_cases_empty_exact_budget_tiny_budget_and_special_tokens(tok):
    assert middle_truncate([], 0, tok, image_tokens)[1].tokens_after == 0
    kept, rep = middle_truncate([Text("")], 0, tok, image_tokens)
    assert kept == [Text("")] and not rep.truncated
    exact = [Text("hello world"), Image("a", 64, 64)]  # 2 + 4 tokens
    kept, rep = middle_truncate(exact, 6, tok, image_tokens)
    assert kept == exact and not rep.truncated
    kept, rep = middle_truncate([Image("big", 224, 224)], 48, tok, image_tokens)  # one image of 49 tokens
    assert kept == [] and rep.dropped_images == 1 and rep.tokens_after == 0 and rep.truncated
    kept, rep = middle_truncate([Text("<think>" * 10)], 3, tok, image_tokens)  # a special token is one unit
    assert "".join(s.text for s in kept) == "<think>" * 3 and rep.cut_text_tokens == 7


class _WordTok:
    """A transformers-like tokenizer (words -> ids) that counts how it is called: texts one at a time, or a batch."""

    def __init__(self):
        self.single, self.batches = 0, 0

    def __call__(self, text, **kwargs):
        def ids(t):
            return [sum(map(ord, w)) % 997 for w in t.split()]
        if isinstance(text, list):
            self.batches += 1
            return {"input_ids": [ids(t) for t in text]}
        self.single += 1
        return {"input_ids": ids(text)}

    def decode(self, ids, **kwargs):
        return " ".join(f"w{i}" for i in ids)


def test_views_prepared_from_one_batch_of_tokenisation_are_the_same(vg_tiny):
    """Issue 26 (performance): middle truncation tokenised each text of each document in its own call; the
    runner now tokenises what truncation will ask for in one batch first. The views and counts are unchanged."""
    from mmbench.data.poolset import load_poolset
    from mmbench.models.hf_common import HFTextTokenizer
    from mmbench.running.runner import _primed_tokenizer
    from mmbench.running.views import model_view
    from toy_models import HashingModel

    class Truncating(HashingModel):
        def __init__(self):
            super().__init__(max_tokens=40)
            self.tok = HFTextTokenizer(_WordTok())

        def budget_tokenizer(self):
            return self.tok

    docs = list(load_poolset(vg_tiny).candidates)
    model = Truncating()
    plain = [model_view(d, model) for d in docs]
    calls_plain = model.tok._tok.single
    assert calls_plain >= len(docs)
    model.tok._tok.single = 0
    primed = _primed_tokenizer(model, docs)
    again = [model_view(d, model) for d in docs]
    primed.forget()
    # one batch; only a text whose first end windows were too short is tokenised again, window by window
    assert model.tok._tok.batches == 1 and model.tok._tok.single < calls_plain / 4, (model.tok._tok.single, calls_plain)
    assert [(v.segments, r) for v, r in again] == [(v.segments, r) for v, r in plain]
    assert any(r.truncated for _, r in plain)


def test_head_truncation_keeps_the_start_only(tok):
    """`--truncation head` (what sentence-transformers does): the whole budget from the start, nothing from the
    end; exactly the first `budget` tokens of a long text, whole images while they fit, the report's counts."""
    from mmbench.data.truncation import truncate

    text = " ".join(f"w{i}" for i in range(400))
    ids = tok.encode(text)
    kept, rep = truncate([Text(text)], 200, tok, image_tokens, strategy="head")
    assert len(kept) == 1 and tok.encode(kept[0].text) == ids[:200]
    assert rep.truncated and rep.tokens_after == 200 and rep.cut_text_tokens == len(ids) - 200
    segs = [Text("head"), *[Image(f"i{k}", 64, 64) for k in range(10)], Text("tail")]  # 4 tokens per image
    kept, rep = truncate(segs, 14, tok, image_tokens, strategy="head")
    assert kept[0] == Text("head") and Text("tail") not in kept
    assert [s.ref for s in kept if isinstance(s, Image)] == ["i0", "i1", "i2"]  # 1 + 3 x 4 = 13 of 14 tokens
    assert rep.dropped_images == 7 and rep.tokens_after == 13
    video = Video(tuple(f"f{k}" for k in range(20)), 1.0, 64, 64)
    kept, rep = truncate([video], 4 * 6, tok, image_tokens, strategy="head")
    assert [f for s in kept for f in s.frames] == [f"f{k}" for k in range(6)] and rep.dropped_frames == 14
    assert truncate(segs, 100, tok, image_tokens, strategy="head")[0] == segs  # fits: untouched
    with pytest.raises(ValueError, match="one of middle, head"):
        truncate(segs, 14, tok, image_tokens, strategy="tail")


def _joins(segments, join_tokens):
    return join_tokens * sum(isinstance(a, Text) and isinstance(b, Text) for a, b in zip(segments, segments[1:]))


@pytest.mark.parametrize("strategy", ["middle", "head"])
def test_joins_between_texts_are_paid_from_the_budget_for_any_number_of_segments(tok, strategy):
    """A template that puts `join_tokens` between two texts (GME's "\\n"): the kept view's tokens plus its joins stay
    within the budget whatever the number of segments (before, 400 short texts overran it by a join each), the
    report counts the joins, the budget is used up to the joins' granularity, and join_tokens=0 changes nothing."""
    from mmbench.data.truncation import truncate

    rng = random.Random(11)
    for trial in range(60):
        join = rng.randint(1, 3)
        segs = []
        for k in range(rng.choice([1, 2, 5, 40, 150, 400])):
            if rng.random() < 0.85:
                segs.append(Text(" ".join(f"t{trial}x{k}y{j}" for j in range(rng.randint(0, 12)))))
            else:
                segs.append(Image(f"img{k}", rng.choice([32, 64]), 64))
        budget = rng.randint(0, 600)
        kept, rep = truncate(segs, budget, tok, image_tokens, strategy=strategy, join_tokens=join)
        assert rep.tokens_before == _count(segs, tok) + _joins(segs, join)
        if not rep.truncated:
            assert kept == segs and rep.tokens_before <= budget
            continue
        assert rep.tokens_after <= budget
        # re-tokenising a text cut in two may merge at most a token at each cut
        assert rep.tokens_after - 2 <= _count(kept, tok) + _joins(kept, join) <= rep.tokens_after
        if strategy == "middle" and all(isinstance(s, Text) for s in segs):
            assert rep.tokens_after >= budget - 2 * join   # the join where head and tail meet is reserved
        plain = truncate(segs, budget, tok, image_tokens, strategy=strategy)
        assert plain == truncate(segs, budget, tok, image_tokens, strategy=strategy, join_tokens=0)
