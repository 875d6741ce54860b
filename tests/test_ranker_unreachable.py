"""An API server that never answers stops `mmbench rank` at once (exit 2, nothing written), instead of
failing every query after all its retries; a server that answers, even with errors, never trips it."""
from __future__ import annotations

import socket

import pytest

from fake_llm_server import FakeLLMServer
from mmbench.cli import main
from mmbench.tasks import get_task


@pytest.fixture(scope="module")
def fhn(tmp_path_factory):
    out = tmp_path_factory.mktemp("unreachable") / "fhn"
    get_task("flickr_hard_negatives").build("sample", out, seed=1, sample_images=30, pool_size=30, n_queries=10,
                                            n_negatives=5, progress=False)
    return out


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]   # closed when the block ends: connecting is refused


def _args(fhn, tmp_path, base_url):
    return ["rank", "--task", "flickr_hard_negatives", "--ranker", "openai-chat", "--model", "m",
            "--base-url", base_url, "--data", str(fhn), "--output", str(tmp_path / "out"),
            "--cache-dir", str(tmp_path / "cache"), "--max-attempts", "2", "--max-concurrency", "2", "--quiet"]


def test_unreachable_server_stops_the_run_with_a_clear_error(fhn, tmp_path, capsys):
    url = f"http://127.0.0.1:{closed_port()}/v1"
    assert main(_args(fhn, tmp_path, url)) == 2
    err = capsys.readouterr().err
    assert "no answer from the API server" in err and "127.0.0.1" in err and "network error" in err
    assert "stopped after 2 of 10 queries" in err and "no results written" in err
    assert not (tmp_path / "out").exists()


def test_a_server_that_answers_with_errors_does_not_trip_it(fhn, tmp_path, capsys):
    with FakeLLMServer(lambda req: (400, {"error": {"message": "bad request"}})) as server:
        assert main(_args(fhn, tmp_path, server.url + "/v1")) == 1   # every query failed, each recorded
        assert len(server.requests) == 10
    assert (tmp_path / "out" / "results.json").is_file()
    assert "failed 10" in capsys.readouterr().out
