"""LLM rankers under hostile servers and bad flags: an echoed key never reaches results or the terminal,
Anthropic's 529 is retried, failed replies are not cached, and nonsense `rank` flags stop before any work."""
from __future__ import annotations

import json
import re

import pytest

from fake_llm_server import FakeLLMServer, anthropic_envelope, openai_envelope
from mmbench.cli import main
from mmbench.data.media import MediaStore
from mmbench.common.http_client import HttpClient, RetryPolicy
from mmbench.rankers import ResponseCache, load_ranker
from mmbench.rankers.base import request_key
from mmbench.tasks import get_task
from tiny_models import random_image

KEY = "sk-ant-ECHOED-secret-0123456789"


@pytest.fixture(scope="module")
def small_ps(tmp_path_factory):
    out = tmp_path_factory.mktemp("rankhard") / "fhn"
    get_task("flickr_hard_negatives").build("sample", out, seed=1, sample_images=30, pool_size=30, n_queries=4,
                                            n_negatives=3, progress=False)
    return out


def _echo(kind):
    def respond(req):
        creds = req.headers.get("x-api-key") or req.headers.get("authorization")
        if kind == "anthropic":
            return 401, {"type": "error", "error": {"type": "authentication_error", "message": f"invalid x-api-key {creds}"}}
        return 200, openai_envelope(f"I cannot use the key {creds}, sorry")   # garbage that quotes the key
    return respond


@pytest.mark.parametrize("kind", ["anthropic", "openai-chat"])
def test_an_echoed_key_reaches_neither_results_nor_the_terminal(kind, small_ps, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ECHO_KEY", KEY)
    out = tmp_path / "run"
    with FakeLLMServer(_echo(kind), kind="anthropic" if kind == "anthropic" else "openai") as server:
        code = main(["rank", "--task", "flickr_hard_negatives", "--ranker", kind, "--model", "m", "--api-key-env",
                     "ECHO_KEY", "--base-url", server.url, "--data", str(small_ps), "--output", str(out),
                     "--cache-dir", str(tmp_path / "cache"), "--max-attempts", "1", "--quiet"])
    captured = capsys.readouterr()
    assert code == 1                                                     # every item failed, and says so
    shown = (out / "results.json").read_text()
    assert ("invalid x-api-key" in shown) if kind == "anthropic" else ("I cannot use the key" in shown)
    assert "[REDACTED]" in shown
    for f in [*out.rglob("*"), *(tmp_path / "cache").rglob("*")]:
        if f.is_file():
            assert KEY.encode() not in f.read_bytes(), f
    assert KEY not in captured.out and KEY not in captured.err


def _media(tmp_path, n=3):
    media = MediaStore(tmp_path / "media")
    return media, [media.put_image(random_image(16, 16, i)).ref for i in range(n)]


def test_anthropic_overloaded_is_retried_by_the_ranker(tmp_path):
    media, refs = _media(tmp_path)
    replies = [(529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
               (200, anthropic_envelope("[3, 1, 2]"))]
    with FakeLLMServer(lambda req: replies.pop(0), kind="anthropic") as server:
        ranker = load_ranker("anthropic", "claude-fake", base_url=server.url)
        ranker.client = HttpClient(retry=RetryPolicy(max_attempts=3), timeout=5, sleep=lambda s: None)
        r = ranker.rank("cap", ["x", "y", "z"], refs, media)
    assert not r.failed and r.ranked_ids == ["z", "x", "y"] and len(server.requests) == 2


@pytest.mark.parametrize("first", [openai_envelope("I'd rather not say."), openai_envelope(None, refusal="No."),
                                   {"unexpected": True}])
def test_failed_replies_are_not_cached_and_are_asked_again(tmp_path, first):
    media, refs = _media(tmp_path)
    replies = [first, openai_envelope("[2, 3, 1]")]
    with FakeLLMServer(lambda req: (200, replies.pop(0))) as server:
        ranker = load_ranker("openai-chat", "m", base_url=server.url, cache_dir=tmp_path / "c")
        bad = ranker.rank("cap", ["x", "y", "z"], refs, media)
        assert bad.failed and not list((tmp_path / "c").rglob("*.json"))     # nothing stored
        good = ranker.rank("cap", ["x", "y", "z"], refs, media)
        assert not good.failed and not good.cached and good.ranked_ids == ["y", "z", "x"]
        assert ranker.rank("cap", ["x", "y", "z"], refs, media).cached      # the good reply is
        assert len(server.requests) == 2


def test_a_failure_in_an_old_cache_is_asked_again(tmp_path):
    """Caches written before this rule hold failed replies; they are retried, then replaced."""
    media, refs = _media(tmp_path)
    with FakeLLMServer(lambda req: (200, openai_envelope("[1, 3, 2]"))) as server:
        ranker = load_ranker("openai-chat", "m", base_url=server.url, cache_dir=tmp_path / "c")
        images = [(media.path(r).read_bytes(), "image/png") for r in refs]
        key = request_key(ranker.url(), ranker.payload(ranker.prompt.render("cap", 3), images))
        ResponseCache(tmp_path / "c").put(key, {"response": openai_envelope("no idea"), "seconds": 1.0, "model": "m"})
        r = ranker.rank("cap", ["x", "y", "z"], refs, media)
        assert not r.failed and not r.cached and r.ranked_ids == ["x", "z", "y"] and len(server.requests) == 1
        assert ResponseCache(tmp_path / "c").get(key)["response"]["choices"][0]["message"]["content"] == "[1, 3, 2]"


BASE = ["rank", "--task", "flickr_hard_negatives", "--ranker", "openai-chat", "--model", "m",
        "--base-url", "http://127.0.0.1:9/v1", "--quiet"]


@pytest.mark.parametrize("flag, value", [
    ("--timeout", "0"), ("--timeout", "-1"), ("--timeout", "nan"), ("--timeout", "inf"), ("--timeout", "soon"),
    ("--max-output-tokens", "0"), ("--max-concurrency", "0"), ("--max-attempts", "0"), ("--limit", "0"),
    ("--limit", "-3"), ("--temperature", "-0.5"), ("--temperature", "nan"), ("--temperature", "3"),
    ("--requests-per-second", "0"), ("--requests-per-second", "-2"), ("--price-input", "-1"),
    ("--price-output", "inf"),
])
def test_nonsense_rank_flags_exit_2_before_any_work(flag, value, capsys, monkeypatch):
    monkeypatch.setattr("mmbench.cli.rank.resolve_poolset", lambda *a, **k: pytest.fail("built before checking"))
    with pytest.raises(SystemExit) as exc:
        main(BASE + [flag, value])
    assert exc.value.code == 2
    assert re.search(re.escape(flag) + r".*expected", capsys.readouterr().err)


def test_image_detail_is_checked_up_front(monkeypatch):
    monkeypatch.setattr("mmbench.cli.rank.resolve_poolset", lambda *a, **k: pytest.fail("built before checking"))
    assert main(BASE + ["--image-detail", "ultra"]) == 2


def test_the_cache_still_serves_good_replies_in_a_rerun(small_ps, tmp_path):
    """Control: a rerun of successful replies sends nothing (the cache rule drops only failures)."""
    args = ["rank", "--task", "flickr_hard_negatives", "--ranker", "openai-chat", "--model", "m", "--data",
            str(small_ps), "--cache-dir", str(tmp_path / "c"), "--quiet"]
    with FakeLLMServer(lambda req: (200, openai_envelope(json.dumps(list(range(1, len(req.images) + 1)))))) as s:
        assert main(args + ["--base-url", s.url, "--output", str(tmp_path / "a")]) == 0
        assert main(args + ["--base-url", s.url, "--output", str(tmp_path / "b")]) == 0
        assert len(s.requests) == 4
