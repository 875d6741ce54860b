"""The work cache (issue 49): what a build counts is remembered by content, a changed text or tokenizer is counted
afresh, damaged entries are ignored, and a build gives the same pool set and the same validity report with the
cache cold, warm and off."""
from __future__ import annotations

import json

import numpy as np
import pytest

from mmbench.data import tokens, work_cache


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """An empty MMBENCH_HOME and no table of this process remembered from an earlier test (nor a shared tokenizer
    whose long texts' ids an earlier build left in its memo, which would spare this home its token-ids files)."""
    monkeypatch.setenv("MMBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.delenv(work_cache.ENV, raising=False)
    monkeypatch.setattr(work_cache, "_tables", {})
    tokens._shared_qwen3.cache_clear()
    return tmp_path / "home" / "work-cache"


class Counting:
    """The Qwen3 tokenizer, counting the texts it actually tokenises."""

    def __init__(self) -> None:
        self.inner = tokens.Qwen3Tokenizer()
        self.seen: list[str] = []
        self.inner._encode = self._encode

    def _encode(self, text: str) -> list[int]:
        self.seen.append(text)
        return tokens.Qwen3Tokenizer._encode(self.inner, text)


def test_counts_are_remembered_and_a_changed_text_is_counted_afresh(fresh, monkeypatch):
    first = Counting()
    counter = tokens.UnifiedTokenCounter(first.inner)
    texts = ["The haystack sentence. " * 60, "Another one, with 12 words or so in it. " * 40]
    want = [len(first.inner._encode(t)) for t in texts]
    first.seen.clear()
    assert [counter.text(t) for t in texts] == want and first.seen == texts
    assert [counter.text(t) for t in texts] == want and first.seen == texts   # this process: no second tokenising
    work_cache.flush()
    assert len(list(fresh.glob("token-counts/*/*.pack"))) == 1

    monkeypatch.setattr(work_cache, "_tables", {})      # a new process: read from disk
    second = Counting()
    again = tokens.UnifiedTokenCounter(second.inner)
    edited = texts[1].replace("12", "13")
    assert [again.text(t) for t in texts] == want and second.seen == []
    assert again.text(edited) == len(second.inner._encode(edited)) and second.seen[0] == edited


def test_another_tokenizer_or_changed_code_reads_none_of_the_entries(fresh, monkeypatch):
    counter = tokens.UnifiedTokenCounter(tokens.Qwen3Tokenizer())
    counter.text("a sentence to count " * 80)
    work_cache.flush()
    monkeypatch.setattr(work_cache, "code_digest", lambda *files: "edited code")
    other = tokens.Qwen3Tokenizer()
    assert other.identity != counter.tokenizer.identity
    assert work_cache.table("token-counts", other.identity).get(
        work_cache.text_key(other.identity, "a sentence to count " * 80)) is None


def test_a_damaged_pack_is_ignored_and_many_packs_are_merged(fresh, monkeypatch):
    version = work_cache.version("test")
    keys = [work_cache.text_key(version, f"text {k}") for k in range(work_cache.MAX_PACKS + 3)]
    for k, key in enumerate(keys):                   # one pack per flush, merged into one past MAX_PACKS
        table = work_cache.table("t", version)
        table.put(key, k)
        table.flush()
    packs = list(fresh.glob("t/*/*.pack"))
    assert 1 <= len(packs) <= 3
    monkeypatch.setattr(work_cache, "_tables", {})
    assert [work_cache.table("t", version).get(key) for key in keys] == list(range(len(keys)))
    data = bytearray(packs[0].read_bytes())
    data[-1] ^= 1                                    # one bit of one count flipped: the pack no longer matches its name
    packs[0].write_bytes(bytes(data))
    monkeypatch.setattr(work_cache, "_tables", {})
    table = work_cache.table("t", version)
    assert sum(table.get(key) is not None for key in keys) < len(keys)


def test_long_texts_ids_come_back_whole_and_damage_is_a_miss(fresh):
    tok = Counting()
    text = "word " * (tokens.LONG_TEXT // 5 + 10)
    ids = tok.inner.encode(text)
    tok.inner._long.clear()
    assert tok.inner.encode(text) == ids and len(tok.seen) == 1     # the second from the work cache
    (entry,) = fresh.glob("token-ids/*/*/*.npy")
    entry.write_bytes(entry.read_bytes()[:-8] + np.int64(7).tobytes())
    tok.inner._long.clear()
    assert tok.inner.encode(text) == ids and len(tok.seen) == 2     # damaged: tokenised again


def test_off_reads_and_writes_nothing(fresh, monkeypatch):
    monkeypatch.setenv(work_cache.ENV, "off")
    tokens.UnifiedTokenCounter(tokens.Qwen3Tokenizer()).text("nothing kept " * 100)
    work_cache.flush()
    assert not fresh.exists()


def test_a_build_is_the_same_with_the_cache_cold_warm_and_off(fresh, monkeypatch, tmp_path):
    from mmbench.tasks import get_task

    spec = get_task("visual_grounding")
    params = dict(lengths=(256,), backgrounds=("text", "mixed"), kinds=("text",), needles_per_kind=10, progress=False)
    built = []
    for name, env in (("cold", None), ("warm", None), ("off", "off")):
        if env:
            monkeypatch.setenv(work_cache.ENV, env)
        monkeypatch.setattr(work_cache, "_tables", {})   # each build as a new process would see the disk
        spec.build("sample", tmp_path / name, seed=0, **params)
        manifest = json.loads((tmp_path / name / "manifest.json").read_text())
        built.append((manifest["content_hash"], manifest["validity"]))
    assert list(fresh.glob("token-counts/*/*.pack")) and list(fresh.glob("token-ids/*/*/*.npy"))
    assert built[0] == built[1] == built[2]
