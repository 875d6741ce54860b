"""Issue 35 #5, the older small holes, one test each: `--param lengths=abc` names the parameter; `prepare obelics`
refuses a `../` path; an `hf:../../etc` source is refused; concurrent runs sharing a home keep every digest
memo entry; the board refuses a run whose model saw nothing and timings or CO2 figures that cannot be true;
under a 400 MB address-space limit a build ends (in one line, or done) within a minute instead of hanging."""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from leaderboard_helpers import edit_summary, make_results, official_registry
from mmbench.cli import main
from mmbench.leaderboards.problems import SubmissionRejected
from mmbench.leaderboards.schema import validate_submission

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.mark.parametrize("param, says", [
    ("lengths=abc", "--param lengths: expected a list of integers, e.g. [256,512], got 'abc'"),
    ("lengths=[256,abc]", "--param lengths: expected a list of integers"),
    ("needles_per_kind=many", "--param needles_per_kind: expected an integer, got 'many'"),
    ("allow_missing=maybe", "--param allow_missing: expected true or false"),
])
def test_a_bad_build_parameter_is_named(param, says, tmp_path, capsys):
    assert main(["build", "--task", "visual_grounding", "--param", param, "--out", str(tmp_path / "ps")]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1
    assert not (tmp_path / "ps").exists()


@pytest.mark.parametrize("layout", ["tsv", "json"])
def test_prepare_obelics_refuses_a_path_that_climbs_out(layout, tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq
    from PIL import Image

    src = tmp_path / "obelics.parquet"
    pq.write_table(pa.table({"images": [["https://x/a.jpg", None]], "texts": [[None, "some text"]],
                             "metadata": ["{}"], "general_metadata": ["{}"]}), src)
    (tmp_path / "maps").mkdir()
    Image.new("RGB", (8, 8)).save(tmp_path / "secret.jpg")
    url_map = tmp_path / "maps" / f"map.{layout}"
    url_map.write_text("https://x/a.jpg\t../secret.jpg\n" if layout == "tsv" else
                       json.dumps({"https://x/a.jpg": "../secret.jpg"}))
    out = tmp_path / "out.parquet"
    assert main(["prepare", "obelics", str(src), "--url-map", str(url_map), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert str(url_map) in err and "'../secret.jpg' leaves the map's folder" in err and len(err.splitlines()) == 1
    assert not out.exists()
    url_map.write_text("https://x/a.jpg\t" + str(tmp_path / "secret.jpg") + "\n" if layout == "tsv" else
                       json.dumps({"https://x/a.jpg": str(tmp_path / "secret.jpg")}))
    assert main(["prepare", "obelics", str(src), "--url-map", str(url_map), "--out", str(out)]) == 0  # absolute: fine


@pytest.mark.parametrize("dataset", ["../../etc", "a/../../etc", "./data", "rel/dir/deeper", "/abs/../etc"])
def test_a_hub_source_that_is_a_relative_or_climbing_path_is_refused(dataset, tmp_path):
    from mmbench.builders.sources import hub
    from mmbench.builders.sources.govreport import read_govreport

    with pytest.raises(hub.HubSourceError, match="neither a hub dataset id"):
        hub.parse(f"hf:{dataset}@{COMMIT}", "govreport")
    with pytest.raises(ValueError, match=r"^govreport=.*neither a hub dataset id"):
        read_govreport(f"hf:{dataset}@{COMMIT}")
    assert hub.parse(f"hf:ccdv/govreport-summarization@{COMMIT}").dataset == "ccdv/govreport-summarization"
    assert hub.parse(f"hf:{tmp_path}@{COMMIT}").dataset == str(tmp_path)   # an absolute mirror folder


WRITER = textwrap.dedent("""
    import logging, os, sys
    from pathlib import Path
    from mmbench.data import digests
    problems = []
    handler = logging.Handler()
    handler.emit = lambda record: problems.append(record.getMessage())
    logging.getLogger("mmbench.data.digests").addHandler(handler)
    folder = Path(sys.argv[1])
    folder.mkdir()
    for i in range(int(sys.argv[2])):
        f = folder / f"f{i}"
        f.write_bytes(os.urandom(32))
        digests._loaded_from = None   # read the memo again each time, as a fresh run would
        digests.file_digests([f])
    print(len(problems))
""")


def test_concurrent_runs_sharing_a_home_keep_every_digest(tmp_path):
    env = {**os.environ, "MMBENCH_HOME": str(tmp_path / "home")}
    n, writers = 80, 3
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path / f"files{k}"), str(n)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for k in range(writers)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    assert [o.strip() for o, _ in outs] == ["0"] * writers     # no unreadable memo was ever met
    memo = json.loads((tmp_path / "home" / "file-digests.json").read_text())
    assert len(memo) == n * writers     # before: each writer overwrote the others' entries (about half were lost)
    assert not [p for p in (tmp_path / "home").iterdir() if p.name.endswith(".tmp")]


@pytest.fixture(scope="module")
def board_setup(vg_tiny, tmp_path_factory):
    root = tmp_path_factory.mktemp("plausible")
    return official_registry(vg_tiny, root / "official.json"), make_results(vg_tiny, root / "good", name="m", dim=16)


def _reasons(folder, registry) -> dict[str, str]:
    with pytest.raises(SubmissionRejected) as info:
        validate_submission(folder, registry)
    return {p.field: p.reason for p in info.value.problems}


@pytest.mark.parametrize("edit, field, says", [
    (lambda s: s.update(evaluation_time=1e12), "results.json: evaluation_time", "more than a year"),
    (lambda s: s["mmbench"]["encode"].update(seconds=4e9), "results.json: mmbench.encode.seconds", "more than a year"),
    (lambda s: s.update(kg_co2_emissions=5000.0, evaluation_time=10.0), "results.json: kg_co2_emissions",
     "more than 100 kg an hour"),
    (lambda s: s.update(kg_co2_emissions=1.0, evaluation_time=None), "results.json: kg_co2_emissions",
     "without a positive evaluation_time"),
])
def test_the_board_refuses_timings_and_co2_that_cannot_be_true(edit, field, says, board_setup, tmp_path):
    registry, good = board_setup
    folder = Path(shutil.copytree(good, tmp_path / "r"))
    edit_summary(folder, edit)
    got = _reasons(folder, registry)
    assert field in got and says in got[field], got
    honest = Path(shutil.copytree(good, tmp_path / "honest"))
    edit_summary(honest, lambda s: s.update(kg_co2_emissions=0.02, evaluation_time=3600.0))
    assert validate_submission(honest, registry).scores["all"]["n"] == 60


def test_the_board_refuses_a_run_whose_documents_were_all_cut_to_nothing(vg_tiny, board_setup, tmp_path):
    from mmbench.data.poolset import load_poolset
    from mmbench.results.mteb_layout import summary_json
    from mmbench.results.store import write_results
    from mmbench.running.runner import RunOptions, run_poolset
    from toy_models import HashingModel

    from mmbench.data.tokens import UnifiedTokenCounter

    class Blind(HashingModel):   # a window of nothing: every text cut away
        def budget_tokenizer(self):
            return UnifiedTokenCounter.default().tokenizer

    registry, _ = board_setup
    ps = load_poolset(vg_tiny)
    model = Blind(dim=16, modalities=("text",), max_tokens=0)
    model.card = dataclasses.replace(model.card, name="blind")
    per_query, seen, info = run_poolset(ps, model, RunOptions(use_cache=False, progress=False))
    assert (seen["seen_tokens"] == 0).all()
    folder = write_results(tmp_path / "blind", per_query, seen,
                           summary_json(ps.task, ps.task_version, ps.content_hash, model.card.identity(), per_query,
                                        info, 0.1))
    got = _reasons(folder, registry)
    assert "reached the model empty" in got["seen.parquet: seen_tokens"], got


LIMIT_MB = 400


def _limit_address_space():
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (LIMIT_MB * 2**20, LIMIT_MB * 2**20))


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS as Linux applies it")
def test_a_build_under_a_400mb_address_limit_ends_within_a_minute(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
                                                             "MKL_NUM_THREADS")}
    env["MMBENCH_HOME"] = str(tmp_path / "home")
    try:
        done = subprocess.run([sys.executable, "-m", "mmbench", "build", "--task", "visual_grounding", "--out",
                               str(tmp_path / "ps")], env=env, capture_output=True, text=True, timeout=60,
                              preexec_fn=_limit_address_space)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the build hung for a minute under a {LIMIT_MB} MB address-space limit")
    if done.returncode != 0:
        err = done.stderr.strip()
        assert done.returncode == 2 and len(err.splitlines()) == 1, err
        assert err.startswith("mmbench: error:") and f"address-space limit of {LIMIT_MB} MB (ulimit -v)" in err


def test_out_of_memory_errors_are_told_in_one_line():
    from mmbench.common.address_limit import MIN_ADDRESS_SPACE, out_of_memory_message, too_small_message

    assert "raise it" in too_small_message(400 * 2**20) and too_small_message(MIN_ADDRESS_SPACE) is None
    assert too_small_message(None) is None
    shared = ImportError("/x/_propack.so: failed to map segment from shared object")
    assert out_of_memory_message(shared).startswith("out of memory under") and out_of_memory_message(MemoryError())
    assert out_of_memory_message(ValueError("bad value")) is None


# --- issue 45, item 6 -----------------------------------------------------------------------------------------

def _windowless_results(good: Path, out: Path, truncated: bool) -> Path:
    """A copy of `good` re-sealed as a windowless model's run (max_tokens null), its documents marked truncated
    or not, every stated count consistent with its tables."""
    from mmbench.results.store import load_results, write_results

    res = load_results(good)
    seen = res.seen.copy()
    seen["truncated"] = truncated
    summary = json.loads(json.dumps(res.summary))
    summary["mmbench"]["model"]["max_tokens"] = None
    summary["mmbench"]["documents_truncated"] = int(seen["truncated"].sum())
    return write_results(out, res.per_query, seen, summary)


def test_the_board_refuses_a_windowless_run_marked_truncated(board_setup, tmp_path):
    registry, good = board_setup
    got = _reasons(_windowless_results(good, tmp_path / "forged", truncated=True), registry)
    assert "model states no context window" in got.get("seen.parquet: truncated", ""), got
    honest = _windowless_results(good, tmp_path / "honest", truncated=False)
    try:
        validate_submission(honest, registry)
    except SubmissionRejected as exc:  # whatever else it may say, never that
        assert not any(p.field == "seen.parquet: truncated" for p in exc.problems), exc.problems


def _bad_index_reply(indexes):
    return {"data": [{"index": i, "embedding": [float(k + 1)] * 4} for k, i in enumerate(indexes)]}


@pytest.mark.parametrize("indexes", [[0, 0], [1, 1], [0, 2], [-1, 0], [0, None], [True, False]])
def test_an_api_reply_with_duplicate_or_stray_indexes_is_refused(indexes):
    from mmbench.models.api_openai import OpenAIEmbeddingModel
    from mmbench.models.output_check import BadModelOutput
    from mmbench.data.documents import Document, Text

    model = OpenAIEmbeddingModel(model="m", base_url="http://127.0.0.1:9/v1")
    model.client = _Reply(_bad_index_reply(indexes))   # the server's reply, without a server
    docs = [Document("a", [Text("x")]), Document("b", [Text("y")])]
    with pytest.raises(BadModelOutput, match="'index' fields"):
        model._call(([0, 1], {}), docs)
    model.client = _Reply(_bad_index_reply([1, 0]))   # out of order but whole: put back in order
    assert model._call(([0, 1], {}), docs) == [[2.0] * 4, [1.0] * 4]
    model.client = _Reply({"data": [{"embedding": [1.0] * 4}, {"embedding": [2.0] * 4}]})   # no index: as sent
    assert model._call(([0, 1], {}), docs) == [[1.0] * 4, [2.0] * 4]


class _Reply:
    def __init__(self, body):
        self.body = body

    def post_json(self, url, payload, headers):
        return self.body


def test_a_removed_media_folder_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("MMBENCH_HOME", str(tmp_path / "home"))
    ps = tmp_path / "ps"
    assert main(["build", "--task", "visual_grounding", "--out", str(ps), "--param", "lengths=[256]",
                 "--param", "backgrounds=[image]", "--param", "kinds=[text]", "--param", "needles_per_kind=2"]) == 0
    shutil.rmtree(ps / "media")
    capsys.readouterr()
    assert main(["run", "--task", "visual_grounding", "--model", "bm25", "--data", str(ps),
                 "--output", str(tmp_path / "out")]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and "its media folder is missing" in err[0] and str(ps / "media") in err[0], err
    assert not (tmp_path / "out").exists()


def test_a_zeroed_checkpoint_is_one_line_naming_file_and_model(tmp_path, capsys, monkeypatch):
    from mmbench.models.sentence_transformer import packaged_minilm_path

    monkeypatch.setenv("MMBENCH_HOME", str(tmp_path / "home"))
    weights = tmp_path / "weights"
    shutil.copytree(packaged_minilm_path(), weights)
    size = (weights / "model.safetensors").stat().st_size
    (weights / "model.safetensors").write_bytes(b"\0" * size)
    for request in (["--model", str(weights)], ["--model", "minilm", "--model-path", str(weights)]):
        out = tmp_path / "runs" / "out"
        assert main(["run", "--task", "visual_grounding", *request, "--data", "/nonexistent-is-not-read-first",
                     "--output", str(out)]) == 2
        err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
        assert len(err) == 1 and str(weights / "model.safetensors") in err[0] and "is damaged" in err[0], err
        assert repr(request[1]) in err[0]
        assert not (tmp_path / "runs").exists()


def test_damaged_torch_files_are_told_from_whole_ones(tmp_path):
    from mmbench.running.model_loading import _damage

    (tmp_path / "a.bin").write_bytes(b"\0" * 64)
    (tmp_path / "b.bin").write_bytes(b"PK\x03\x04rest")
    (tmp_path / "c.pt").write_bytes(b"")
    (tmp_path / "d.safetensors").write_bytes(b"\x08\0\0\0\0\0\0\0{}      ")
    assert "neither a zip archive nor a pickle" in _damage(tmp_path / "a.bin")
    assert _damage(tmp_path / "b.bin") is None and _damage(tmp_path / "c.pt") == "empty"
    assert _damage(tmp_path / "d.safetensors") is None


@pytest.mark.parametrize("command", ["draws", "overfit"])
def test_draws_and_overfit_fail_fast_on_an_unknown_model(command, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("MMBENCH_HOME", str(tmp_path / "home"))
    extra = ["--secret-seed", "s", "--fresh", "2"] if command == "overfit" else ["--seeds", "0..1"]
    assert main([command, "--task", "visual_grounding", "--model", "nosuchmodel", "--out", str(tmp_path / "out"),
                 "--param", "lengths=[256]", *extra]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and "unknown model 'nosuchmodel'" in err[0], err
    assert not (tmp_path / "home" / "draws").exists() and not (tmp_path / "out").exists()  # nothing was built


@pytest.mark.parametrize("command", ["draws", "overfit"])
def test_draws_and_overfit_name_a_bad_parameter(command, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("MMBENCH_HOME", str(tmp_path / "home"))
    extra = ["--secret-seed", "s", "--fresh", "2", "--model", "bm25"] if command == "overfit" else ["--seeds", "0"]
    assert main([command, "--task", "visual_grounding", "--param", "lengths=abc", "--out", str(tmp_path / "out"),
                 *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert "--param lengths: expected a list of integers, e.g. [256,512], got 'abc'" in err and \
        len(err.splitlines()) == 1, err
    assert not (tmp_path / "home" / "draws").exists()
