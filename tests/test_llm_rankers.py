"""LLM listwise rankers against fake OpenAI-compatible and Anthropic servers on the loopback interface:
every repair path, failures that never crash, the response cache, bounded retries, keys kept out of results."""
from __future__ import annotations

import json
import re

import pytest

from fake_llm_server import FakeLLMServer, anthropic_envelope, openai_envelope
from mmbench.cli import main
from mmbench.data.media import MediaStore
from mmbench.common.http_client import HttpClient, RetryPolicy
from mmbench.data.poolset import load_poolset
from mmbench.rankers import DEFAULT_PROMPT, Prices, ResponseCache, load_prompt, load_ranker, parse_ranking
from mmbench.results.store import load_results
from mmbench.tasks import get_task
from tiny_models import random_image

KEY = "sk-fake-SECRET-42"
N = 5


@pytest.mark.parametrize("text, order, repairs", [
    ("[3, 1, 2, 5, 4]", [3, 1, 2, 5, 4], {}),
    ("Here you go: [3,1,2,5,4] hope it helps", [3, 1, 2, 5, 4], {"extracted": 1}),
    ("```json\n[2, 1, 3, 4, 5]\n```", [2, 1, 3, 4, 5], {"extracted": 1}),
    ('{"ranking": [5, 4, 3, 2, 1]}', [5, 4, 3, 2, 1], {"extracted": 1}),
    ("[3, 1, 3, 2, 1, 5, 4]", [3, 1, 2, 5, 4], {"duplicate": 2}),
    ("[4, 2]", [4, 2, 1, 3, 5], {"missing": 3}),
    ("[4, 9, 0, -1, \"cat\", null, true, 2, 1, 3, 5]", [4, 2, 1, 3, 5], {"unknown": 6}),
    ('["Image 2", "3", 1.0, "#5", 4]', [2, 3, 1, 5, 4], {"coerced": 4}),
    ("[[2, 1, 3, 4, 5]]", [2, 1, 3, 4, 5], {"extracted": 1}),   # unwrapped from an outer array: a repair
    ("I first thought [1] but the final answer is [5, 3, 1, 2, 4]", [5, 3, 1, 2, 4], {"extracted": 1}),
    ("Ranking: [4, 3, 1", [4, 3, 1, 2, 5], {"unterminated": 1, "extracted": 1, "missing": 2}),
    ("[2, 2, 7, 1]", [2, 1, 3, 4, 5], {"duplicate": 1, "unknown": 1, "missing": 3}),
])
def test_parse_repairs(text, order, repairs):
    r = parse_ranking(text, N)
    assert not r.failed and r.order == order and r.repairs == repairs
    assert sorted(r.order) == list(range(1, N + 1)) and r.n_repairs == sum(repairs.values())


@pytest.mark.parametrize("text", [None, "", "   ", "I'm sorry, but I can't help with ranking these images.",
                                  "[]", '["cat", "dog"]', "[0, 6, 7]", "Ranking: 3, 1, 2", "[1, 2, x"])
def test_parse_failures_are_recorded_not_raised(text):
    r = parse_ranking(text, N)
    assert r.failed and r.order == [] and r.error


def test_prompt_default_and_user_file(tmp_path):
    p = DEFAULT_PROMPT.render('two red {hexagons} "at" dusk', 3)
    assert 'two red {hexagons} "at" dusk' in p.intro and "3 candidate images" in p.intro and "all 3 image" in p.outro
    assert p.labels == ["Image 1:", "Image 2:", "Image 3:"] and "JSON array" in p.system
    f = tmp_path / "my_prompt.json"
    f.write_text(json.dumps({"system": "S", "intro": "Q={query} n={n}", "outro": "give {n} ids", "label": "[{id}]"}))
    t = load_prompt(f)
    assert t.render("cap", 2).labels == ["[1]", "[2]"] and t.render("cap", 2).intro == "Q=cap n=2"
    assert re.fullmatch(r"file:my_prompt\.json:sha256:[0-9a-f]{12}", t.version)
    f.write_text(json.dumps({"system": "S", "intro": "no query", "outro": "o"}))
    with pytest.raises(ValueError, match="my_prompt.json: field 'intro' must contain"):
        load_prompt(f)
    f.write_text(json.dumps({"system": "S", "outro": "o"}))
    with pytest.raises(ValueError, match="missing field"):
        load_prompt(f)
    f.write_text("{oops")
    with pytest.raises(ValueError, match="invalid JSON"):
        load_prompt(f)


@pytest.fixture(scope="module")
def small_ps(tmp_path_factory):
    out = tmp_path_factory.mktemp("rank") / "fhn"
    get_task("flickr_hard_negatives").build("sample", out, seed=1, sample_images=30, pool_size=30, n_queries=10,
                                            n_negatives=5, progress=False)
    return out


# Each query gets one kind of answer, chosen by its position in sorted item order.
MODES = ["good", "prose", "duplicated", "partial", "unknown", "malformed", "refused", "cut_off", "strings", "good"]


def _scripted(ps):
    order = {ps.query_by_id()[p.query_id].text: i for i, p in enumerate(sorted(ps.pools, key=lambda p: p.id))}

    def respond(req):
        mode = MODES[order[re.search(r'Caption: "(.*)"', req.intro).group(1)]]
        n = len(req.images)
        ids = list(range(n, 0, -1))
        return 200, {
            "good": openai_envelope(json.dumps(ids)),
            "prose": openai_envelope(f"Sure. The ranking is {json.dumps(ids)}. Let me know!"),
            "duplicated": openai_envelope(json.dumps(ids[:3] + ids[:2] + ids[3:])),
            "partial": openai_envelope(json.dumps(ids[:2])),
            "unknown": openai_envelope(json.dumps([99, 0] + ids + ["banana"])),
            "malformed": openai_envelope("The best image is the third one, then the first."),
            "refused": openai_envelope(None, refusal="I can't help with that."),
            "cut_off": openai_envelope(json.dumps(ids)[:6], finish="length"),
            "strings": openai_envelope(json.dumps([f"Image {i}" for i in ids])),
        }[mode]
    return respond


def test_openai_ranker_end_to_end_with_every_answer_kind(small_ps, tmp_path, monkeypatch):
    ps = load_poolset(small_ps)
    monkeypatch.setenv("FAKE_KEY", KEY)
    out, cache = tmp_path / "run", tmp_path / "cache"
    args = ["rank", "--task", "flickr_hard_negatives", "--ranker", "openai-chat", "--model", "fake-4",
            "--api-key-env", "FAKE_KEY", "--data", str(small_ps), "--output", str(out), "--cache-dir", str(cache),
            "--price-input", "2", "--price-output", "8", "--max-concurrency", "3", "--quiet"]
    with FakeLLMServer(_scripted(ps), delay=0.02) as server:
        server.url  # noqa: B018
        assert main(args + ["--base-url", server.url + "/v1"]) == 1     # failures -> exit code 1
        first = list(server.requests)
        assert len(first) == 10 and server.max_in_flight <= 3
        req = first[0]
        assert req.path == "/v1/chat/completions" and req.headers["authorization"] == f"Bearer {KEY}"
        assert req.labels == [f"Image {i}:" for i in range(1, 7)] and len(req.images) == 6
        assert all(m == "image/jpeg" for m in req.mimes) and req.body["temperature"] == 0.0
        assert req.system == DEFAULT_PROMPT.system
        # the second run is answered from the response cache, except the two failed replies (never cached),
        # which are asked again
        assert main(args + ["--base-url", server.url + "/v1", "--output", str(tmp_path / "run2")]) == 1
        assert len(server.requests) == 12
    res = load_results(out)
    pq = res.per_query.sort_values("item_id").reset_index(drop=True)
    by_mode = {m: pq.iloc[i] for i, m in enumerate(MODES[:-1])}
    reversed_ids = lambda row: list(row["presented_ids"])[::-1]  # noqa: E731
    assert list(by_mode["good"]["ranked_ids"]) == reversed_ids(by_mode["good"]) and by_mode["good"]["repairs"] == 0
    assert by_mode["prose"]["repair_extracted"] == 1 and list(by_mode["prose"]["ranked_ids"]) == reversed_ids(by_mode["prose"])
    assert by_mode["duplicated"]["repair_duplicate"] == 2
    assert by_mode["partial"]["repair_missing"] == 4
    presented = list(by_mode["partial"]["presented_ids"])
    assert list(by_mode["partial"]["ranked_ids"]) == [presented[5], presented[4]] + presented[:4]
    assert by_mode["unknown"]["repair_unknown"] == 3
    assert by_mode["cut_off"]["repair_unterminated"] == 1 and by_mode["cut_off"]["finish_reason"] == "length"
    assert by_mode["strings"]["repair_coerced"] == 6
    for mode in ("malformed", "refused"):
        row = by_mode[mode]
        assert row["failed"] and list(row["ranked_ids"]) == [] and math_isnan(row["recall_at_1"])
    assert by_mode["refused"]["error"].startswith("refused:") and "no JSON array" in by_mode["malformed"]["error"]
    ok = pq[~pq["failed"]]
    assert all(sorted(r) == sorted(p) for r, p in zip(ok["ranked_ids"], ok["presented_ids"]))
    info = res.info
    assert info["n_failed_items"] == 2 and info["repairs"]["items_repaired"] == 6
    assert info["tokens"] == {"input": 10_000, "output": 500, "items_without_usage": 0}
    assert info["cost_usd"] == pytest.approx((10_000 * 2 + 500 * 8) / 1e6)
    assert info["prompt"]["version"] == "mmbench-listwise-1" and info["model"]["settings"]["api_key_env"] == "FAKE_KEY"
    assert info["cache"] == {"hits": 0, "requests_sent": 10}
    again = load_results(tmp_path / "run2")
    assert again.info["cache"]["hits"] == 8 and again.info["cache"]["requests_sent"] == 2
    assert list(again.per_query.sort_values("item_id")["ranked_ids"].map(list)) == list(pq["ranked_ids"].map(list))
    # the key appears nowhere on disk: not in results, not in the response cache
    for folder in (out, tmp_path / "run2", cache):
        for f in folder.rglob("*"):
            if f.is_file():
                assert KEY.encode() not in f.read_bytes(), f


def math_isnan(x) -> bool:
    return x != x


def _media_with_images(tmp_path, n=4):
    media = MediaStore(tmp_path / "media")
    return media, [media.put_image(random_image(16, 16, i)).ref for i in range(n)]


def test_anthropic_ranker_blocks_refusal_and_cost(tmp_path, monkeypatch):
    media, refs = _media_with_images(tmp_path)
    ids = ["a", "b", "c", "d"]
    replies = [anthropic_envelope("[2, 4, 1, 3]"), anthropic_envelope("I won't rank these.", stop="refusal"),
               anthropic_envelope("Ranking: [4, 4, 1]")]
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    with FakeLLMServer(lambda req: (200, replies.pop(0)), kind="anthropic") as server:
        ranker = load_ranker("anthropic", "claude-fake", base_url=server.url, prices=Prices(3.0, 15.0))
        ok = ranker.rank("a caption", ids, refs, media, item="q1")
        refused = ranker.rank("another caption", ids, refs, media, item="q2")
        repaired = ranker.rank("third caption", ids, refs, media, item="q3")
        req = server.requests[0]
    assert ok.ranked_ids == ["b", "d", "a", "c"] and not ok.failed and ok.n_repairs == 0
    assert ok.input_tokens == 2000 and ok.cost_usd == pytest.approx((2000 * 3 + 40 * 15) / 1e6)
    assert refused.failed and refused.error.startswith("refused") and refused.ranked_ids == []
    assert repaired.ranked_ids == ["d", "a", "b", "c"]
    assert repaired.repairs == {"extracted": 1, "duplicate": 1, "missing": 2}
    assert req.path == "/v1/messages" and req.headers["x-api-key"] == KEY and req.headers["anthropic-version"] == "2023-06-01"
    assert req.system == DEFAULT_PROMPT.system and req.body["max_tokens"] == 1024
    assert req.images[0] == media.path(refs[0]).read_bytes() and req.mimes == ["image/png"] * 4
    assert KEY not in json.dumps(ranker.card.identity())


def test_bounded_retries_and_api_errors_become_failures(tmp_path, monkeypatch):
    media, refs = _media_with_images(tmp_path, 3)
    sleeps: list[float] = []
    with FakeLLMServer(lambda req: (503, {"error": "overloaded"})) as server:
        ranker = load_ranker("openai-chat", "m", base_url=server.url)
        ranker.client = HttpClient(retry=RetryPolicy(max_attempts=3), timeout=5, sleep=sleeps.append)
        r = ranker.rank("cap", ["x", "y", "z"], refs, media)
        assert r.failed and "after 3 attempts" in r.error and len(server.requests) == 3 and len(sleeps) == 2
        server.responder = lambda req: (400, {"error": {"message": "bad image"}})
        r = ranker.rank("cap", ["x", "y", "z"], refs, media)
        assert r.failed and "HTTP 400" in r.error and len(server.requests) == 4   # no retry on a client error
        server.responder = lambda req: (200, {"unexpected": True})
        r = ranker.rank("cap", ["x", "y", "z"], refs, media)
        assert r.failed and "unexpected response shape" in r.error


def test_cache_keys_atomic_and_damaged_entries(tmp_path):
    media, refs = _media_with_images(tmp_path, 3)
    calls = []
    with FakeLLMServer(lambda req: (calls.append(1), (200, "[1, 2, 3]"))[1]) as server:
        ranker = load_ranker("openai-chat", "m", base_url=server.url, cache_dir=tmp_path / "c")
        assert not ranker.rank("cap", ["x", "y", "z"], refs, media).cached
        assert ranker.rank("cap", ["x", "y", "z"], refs, media).cached and len(calls) == 1
        assert not ranker.rank("other cap", ["x", "y", "z"], refs, media).cached       # the query is in the key
        assert not ranker.rank("cap", ["x", "z", "y"], [refs[0], refs[2], refs[1]], media).cached  # so is the order
        files = sorted((tmp_path / "c").rglob("*.json"))
        assert len(files) == 3 and not list((tmp_path / "c").rglob("*.tmp"))
        files[0].write_text("{damaged")
        assert ResponseCache(tmp_path / "c").get(files[0].stem) is None
        assert len(calls) == 3


def test_key_required_for_vendor_urls_only(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        load_ranker("openai-chat", "gpt-4.1")
    with pytest.raises(ValueError, match="ANTHROPIC_API_KEY"):
        load_ranker("anthropic", "claude-sonnet-4-6")
    assert load_ranker("openai-chat", "local", base_url="http://127.0.0.1:9/v1").headers() == {}
    with pytest.raises(ValueError, match="unknown ranker"):
        load_ranker("gemini", "x")
    assert main(["rank", "--task", "flickr_hard_negatives", "--ranker", "openai-chat", "--model", "gpt-4.1",
                 "--quiet"]) == 2


def test_limit_ranks_the_items_an_embedding_run_evaluates(small_ps, tmp_path, monkeypatch):
    """`rank --limit` takes the seeded stratified sample of `run --limit`: the same items, and it sends exactly
    the candidate images they need."""
    from mmbench.data.selection import select_sample

    ps = load_poolset(small_ps)
    monkeypatch.setenv("FAKE_KEY", KEY)
    images = lambda items: len({c for p in items for c in p.candidate_ids})  # noqa: E731

    def respond(req):
        return 200, openai_envelope(json.dumps(list(range(len(req.images), 0, -1))))

    sent = []
    with FakeLLMServer(respond) as server:
        for limit in (2, 3, 5):
            out = tmp_path / f"run{limit}"
            assert main(["rank", "--task", "flickr_hard_negatives", "--ranker", "openai-chat", "--model", "fake-4",
                         "--api-key-env", "FAKE_KEY", "--data", str(small_ps), "--output", str(out), "--no-cache",
                         "--base-url", server.url + "/v1", "--limit", str(limit), "--quiet"]) == 0
            chosen = select_sample(ps.pools, limit, 0)
            res = load_results(out)
            assert sorted(res.per_query["item_id"]) == [p.id for p in chosen] and res.info["limit"] == limit
            assert len(res.seen[res.seen["role"] == "document"]) == images(chosen)
            sent.append(images(chosen))
    assert sent[0] < sent[-1]
