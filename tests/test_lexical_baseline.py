"""The lexical baseline (issue 43, item 5): whole-text BM25 P@1 per subset beside the first-unit measure, equal to a
`bm25s` index of the pool's texts; a Hard group lexically easier than its Easy group and a pool set whose relevant
candidates hold their queries verbatim are refused (`lexical_baseline`); Easy pools may be lexical and refuse
nothing."""
from __future__ import annotations

import math

import numpy as np
import pytest

from mmbench.builders.checks import lexical
from mmbench.builders.parts.lookalikes import LookalikeIndex
from mmbench.builders.parts.validity import write_valid_poolset
from mmbench.data.documents import Document, Text
from mmbench.data.poolset import PoolItem, PoolSet, PoolSetError
from poolset_edits import rewrite, validate_cli


def test_whole_text_bm25_equals_a_bm25s_index_of_the_pool():
    """Random pools (an empty text, words repeated in the query, words no candidate holds): the vectorised scores
    equal those of `bm25s` indexing the pool's whole texts."""
    rng = np.random.default_rng(0)
    vocab = [f"w{i}" for i in range(30)]
    for _ in range(40):
        docs = [Document(id=f"d{k}", segments=[Text(" ".join(rng.choice(vocab, int(rng.integers(0, 80)))))],
                         tokens=1) for k in range(int(rng.integers(2, 9)))]
        q = " ".join(rng.choice(vocab + ["absent"], int(rng.integers(1, 9))))
        found = lexical._QueryGrams(set(lexical.tokenize(q)))
        mine = lexical.bm25_whole(q, [found.row(d) for d in docs], found)
        ref = LookalikeIndex([d.id for d in docs], [d.text for d in docs]).scores(q)
        assert np.allclose(mine, ref, rtol=1e-5, atol=1e-6), (q, mine, ref)


def test_the_hard_against_easy_test_is_fishers_exact_one_sided_tail():
    hard, easy = {"bm25_whole_text_hits": 10.7, "n": 12}, {"bm25_whole_text_hits": 5.2, "n": 14}
    h, e = 10, 6                                  # Hard rounded down, Easy rounded up
    total, n = h + e, 26
    direct = sum(math.comb(12, k) * math.comb(14, total - k) for k in range(h, min(12, total) + 1)) / \
        math.comb(n, total)
    assert lexical.hard_easier_p(hard, easy) == pytest.approx(direct, rel=1e-9)


def test_refusals_name_a_hard_group_easier_than_its_easy_one_and_verbatim_queries():
    def row(hits, n, verbatim=0):
        return {"bm25_whole_text": hits / n, "bm25_whole_text_hits": hits, "n": n, "verbatim": verbatim}

    per = {"a/easy/1k": row(3, 12), "a/hard/1k": row(12, 12),          # refused: p = 4e-4
           "b/easy/1k": row(6, 12), "b/hard/1k": row(8, 12),           # noise: p = 0.34
           "c/easy/1k": row(12, 12, verbatim=7), "c/hard/1k": row(2, 12, verbatim=6)}
    found = lexical.refusals(per)
    assert [g for g, _ in found] == ["a/hard/1k", "c/easy/1k"], found
    assert "one-sided Fisher exact p=" in found[0][1] and "7 of 12 pools" in found[1][1]


def _toy(rng, hard_holds_query: bool) -> PoolSet:
    """12 Easy and 12 Hard pools of 4 random-word candidates. In a Hard pool the relevant candidate may hold the
    query's five words, scattered (never as one run); no Easy candidate holds them."""
    queries, cands, pools = [], [], []
    for i in range(24):
        kind = "easy" if i < 12 else "hard"
        asked = [f"q{i}x{k}" for k in range(5)]
        queries.append(Document(id=f"q{i}", segments=[Text(" ".join(asked))], tokens=5))
        ids = []
        for k in range(4):
            words = [f"w{int(x)}" for x in rng.integers(0, 3000, 200)]
            if k == 0 and kind == "hard" and hard_holds_query:
                for j, w in enumerate(asked):
                    words[40 * j + 7] = w
            cands.append(Document(id=f"c{i}-{k}", segments=[Text(" ".join(words))], tokens=200))
            ids.append(cands[-1].id)
        pools.append(PoolItem(id=f"p{i}", query_id=f"q{i}", subset=f"toy/{kind}/1k", candidate_ids=ids,
                              relevant_ids=[ids[0]], meta={"dataset": "toy", "difficulty": kind}))
    return PoolSet(task="toy", task_version="0", queries=queries, candidates=cands, pools=pools, seed=0)


def test_a_hard_subset_easier_than_its_easy_one_refuses_the_build(tmp_path):
    """Hard 1.000 against Easy 0.250 (ties) over 12 pools each: refused for the subset and for the dataset and
    difficulty (the text probe also finds the planted words: both refuse)."""
    planted = _toy(np.random.default_rng(1), True)
    found = lexical.ceiling(planted)["refusals"]
    assert [line.split(":")[0] for line in found] == ["toy/hard", "toy/hard/1k"], found
    assert "whole-text BM25 finds the relevant candidate more often on toy/hard (P@1 1.000, n=12) than on " \
           "toy/easy (0.250, n=12): one-sided Fisher exact p=1.7e-04 < 0.01" in found[0]
    with pytest.raises(PoolSetError, match="lexical_baseline ×2"):
        write_valid_poolset(planted, tmp_path / "out", None)
    assert not (tmp_path / "out").exists()
    write_valid_poolset(_toy(np.random.default_rng(1), False), tmp_path / "ok", None)   # both at chance: passes


@pytest.fixture(scope="module")
def msr4(tmp_path_factory):
    from mmbench.tasks import get_task

    out = tmp_path_factory.mktemp("msr4") / "ps"
    get_task("multi_source_reasoning").build("sample", out, seed=0, progress=False, lengths=(2048,),
                                             candidates_per_query=4)
    return out


def test_relevant_candidates_holding_their_query_verbatim_refuse_validate(msr4, tmp_path, capsys):
    """Every relevant candidate gets its query appended, word for word (the issue's pool set passed `validate`)."""
    def plant(ps) -> None:
        queries, cands = ps.query_by_id(), ps.candidate_by_id()
        done = set()
        for p in ps.pools:
            r = cands[p.relevant_ids[0]]
            if r.id not in done:
                done.add(r.id)
                last = max(k for k, s in enumerate(r.segments) if isinstance(s, Text))
                r.segments[last] = Text(r.segments[last].text + " " + queries[p.query_id].text)

    rc, out = validate_cli(rewrite(msr4, tmp_path / "planted", plant), capsys)
    assert rc == 2, out[-2000:]
    assert "FAIL lexical_baseline" in out and "the relevant candidate alone holds its query verbatim in 12 of 12 " \
        "pools of hotpotqa/easy/2k" in out, out[-3000:]
    assert "BM25 whole text" in out and "query verbatim in 12 of 12" in out
