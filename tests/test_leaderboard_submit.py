"""Leaderboard submissions: valid results are accepted; malformed and hostile ones are refused or
neutralised, each with its own assertion; nothing partial is stored; concurrent submitters are safe."""
from __future__ import annotations

import json
import os
import pickle
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from leaderboard_helpers import HOSTILE_NAME, edit_per_query, edit_summary, make_results, official_registry
from mmbench.cli import main
from mmbench.leaderboards.files import Limits
from mmbench.leaderboards.official import OfficialRegistry
from mmbench.leaderboards.problems import DuplicateSubmission, SubmissionRejected
from mmbench.leaderboards.schema import validate_submission
from mmbench.leaderboards.site import build_site
from mmbench.leaderboards.store import Board
from mmbench.results.store import load_results


@pytest.fixture(scope="module")
def setup(vg_tiny, tmp_path_factory):
    root = tmp_path_factory.mktemp("lbsubmit")
    registry = official_registry(vg_tiny, root / "official.json")
    good = make_results(vg_tiny, root / "good", name="model-a", dim=16)
    return registry, good, root / "official.json"


@pytest.fixture
def registry(setup) -> OfficialRegistry:
    return setup[0]


@pytest.fixture
def results(setup, tmp_path) -> Path:
    """A fresh copy of a valid results folder, free to vandalise."""
    return Path(shutil.copytree(setup[1], tmp_path / "results"))


def rejected(folder: Path, registry: OfficialRegistry, **kwargs) -> SubmissionRejected:
    with pytest.raises(SubmissionRejected) as info:
        validate_submission(folder, registry, **kwargs)
    return info.value


def problem(exc: SubmissionRejected, field: str) -> str:
    """The reason given for `field`; fails if the field was not named."""
    for p in exc.problems:
        if p.field == field:
            return p.reason
    raise AssertionError(f"{field!r} not among the problems: {exc}")


def test_valid_results_are_accepted_with_scores_recomputed(results, registry, tmp_path):
    sub = validate_submission(results, registry)
    entry = Board(tmp_path / "board").submit(sub)
    pq = load_results(results).per_query
    assert entry.scores["all"]["precision_at_1"] == pytest.approx(pq["precision_at_1"].mean())
    assert entry.scores["depth=0.2"]["n"] == (pq["depth"] == 0.2).sum()
    for name in ("results.json", "per_query.parquet", "seen.parquet"):  # stored byte for byte
        assert (entry.folder / name).read_bytes() == (results / name).read_bytes()


def test_wrong_content_hash_is_rejected(results, registry):
    edit_summary(results, lambda s: s["mmbench"].update(content_hash="0" * 64))
    assert "not the official pool set" in problem(rejected(results, registry), "results.json: mmbench.content_hash")


def test_other_data_under_the_official_hash_is_rejected(results, registry):
    # per-query rows claim the official hash but one item's relevance differs from the official pool
    def swap(pq):
        pq.at[0, "relevant_ids"] = [pq.at[0, "ranked_ids"][-1]]
        return pq

    edit_per_query(results, swap)
    exc = rejected(results, registry)
    assert "differ from the official pool set" in problem(exc, "per_query.parquet: subset")


def test_unknown_task_and_version_are_rejected(results, registry, tmp_path):
    other = Path(shutil.copytree(results, tmp_path / "other"))
    edit_summary(results, lambda s: s["mmbench"].update(task_version="99"))
    assert "not official" in problem(rejected(results, registry), "results.json: mmbench.task_version")
    edit_summary(other, lambda s: (s["mmbench"].update(task="../../nope"), s.update(task_name="../../nope")))
    assert "no official pool set" in problem(rejected(other, registry), "results.json: mmbench.task")


def test_missing_queries_are_rejected(results, registry):
    edit_per_query(results, lambda pq: pq.iloc[1:].reset_index(drop=True))
    exc = rejected(results, registry)
    assert "records are missing" in problem(exc, "per_query.parquet: item_id")
    assert "59 of 60 items present" in problem(exc, "per_query.parquet: subset")


def test_limited_run_is_rejected(vg_tiny, registry, tmp_path):
    from mmbench.data.poolset import load_poolset
    from mmbench.results.mteb_layout import summary_json
    from mmbench.results.store import write_results
    from mmbench.running.runner import RunOptions, run_poolset
    from toy_models import HashingModel

    ps, model = load_poolset(vg_tiny), HashingModel(dim=16)
    per_query, seen, info = run_poolset(ps, model, RunOptions(use_cache=False, progress=False, limit=10))
    out = write_results(tmp_path / "limited", per_query, seen,
                        summary_json(ps.task, ps.task_version, ps.content_hash, model.card.identity(), per_query, info, 0.1))
    assert "--limit" in problem(rejected(out, registry), "results.json: mmbench.limit")


def test_nan_metric_in_per_query_records_is_rejected(results, registry):
    def nan(pq):
        pq.loc[3, "precision_at_1"] = np.nan
        return pq

    edit_per_query(results, nan, resummarise=False)
    assert "not a finite number" in problem(rejected(results, registry), "per_query.parquet: precision_at_1")


def test_tables_that_do_not_match_the_recorded_digests_are_rejected(results, registry):
    """A per_query.parquet swapped after the run (or half-rewritten) no longer matches results.json."""
    table = results / "per_query.parquet"
    data = table.read_bytes()
    mid = len(data) // 2
    table.write_bytes(data[:mid] + bytes([data[mid] ^ 1]) + data[mid + 1:])
    assert "per_query.parquet does not match the digest" in problem(rejected(results, registry),
                                                                     "results.json: mmbench.files")


def test_nan_in_results_json_is_rejected(results, registry, tmp_path):
    literal = Path(shutil.copytree(results, tmp_path / "literal"))
    edit_summary(literal, lambda s: s["scores"]["test"][0].update(precision_at_1=float("nan")))
    assert "invalid JSON" in problem(rejected(literal, registry), "results.json")
    edit_summary(results, lambda s: s["scores"]["test"][0].update(precision_at_1=None))  # what write_results makes of NaN
    assert "not a finite number" in problem(rejected(results, registry), "results.json: scores.test[default].precision_at_1")


def test_out_of_range_metrics_are_rejected(results, registry, tmp_path):
    per_query = Path(shutil.copytree(results, tmp_path / "pq"))

    def too_big(pq):
        pq.loc[0, "recall_at_5"] = 1.5
        return pq

    edit_per_query(per_query, too_big)
    assert "outside [0, 1]" in problem(rejected(per_query, registry), "per_query.parquet: recall_at_5")
    edit_summary(results, lambda s: s["scores"]["test"][0].update(mrr=1.5))
    assert "outside [0, 1]" in problem(rejected(results, registry), "results.json: scores.test[default].mrr")


def test_tampered_aggregate_is_rejected(results, registry):
    def inflate(s):
        entry = s["scores"]["test"][0]
        entry["precision_at_1"] = entry["main_score"] = entry["precision_at_1"] + 0.05

    edit_summary(results, inflate)
    reason = problem(rejected(results, registry), "results.json: scores.test[default].precision_at_1")
    assert "recomputed from the per-query records" in reason


def test_tampered_per_query_metrics_are_rejected_even_when_aggregates_agree(results, registry):
    def promote(pq):
        misses = pq.index[pq["precision_at_1"] == 0]
        pq.loc[misses, "precision_at_1"] = 1.0  # rankings unchanged
        return pq

    edit_per_query(results, promote)  # aggregates rewritten to agree with the edited rows
    assert "recomputed from ranked_ids" in problem(rejected(results, registry), "per_query.parquet: precision_at_1")


def test_rankings_must_follow_the_scores(results, registry):
    def reorder(pq):
        i = next(i for i, s in enumerate(pq["scores"]) if np.ptp(s) > 1e-3)
        pq.at[i, "scores"] = list(pq.at[i, "scores"])[::-1]  # the scores now ascend along the ranking
        return pq

    edit_per_query(results, reorder)
    assert "non-increasing" in problem(rejected(results, registry), "per_query.parquet: scores")


def test_model_identity_and_settings_are_required(results, registry, tmp_path):
    no_name = Path(shutil.copytree(results, tmp_path / "noname"))
    edit_summary(results, lambda s: s["mmbench"]["model"].pop("settings"))
    assert "settings are missing" in problem(rejected(results, registry), "results.json: mmbench.model.settings")
    edit_summary(no_name, lambda s: s["mmbench"]["model"].update(name="  "))
    assert "non-empty" in problem(rejected(no_name, registry), "results.json: mmbench.model.name")


def test_duplicate_is_refused_unless_replace(results, registry, tmp_path):
    board = Board(tmp_path / "board")
    first = board.submit(validate_submission(results, registry))
    with pytest.raises(DuplicateSubmission) as info:
        board.submit(validate_submission(results, registry))
    assert "--replace" in problem(info.value, "submission")
    again = board.submit(validate_submission(results, registry), replace=True)
    assert again.id == first.id and len(board.entries()) == 1
    # one folder remains, the replacement's (each version gets a fresh folder; the page name stays the same)
    assert sorted(p.name for p in (tmp_path / "board" / "submissions" / "visual_grounding").iterdir()) == [again.folder.name]
    assert again.slug == first.slug and not first.folder.exists()


def test_duplicate_via_cli_exits_2_and_names_replace(setup, tmp_path, capsys):
    _, good, official = setup
    args = ["leaderboard", "submit", str(good), "--board", str(tmp_path / "b"), "--official", str(official)]
    assert main(args) == 0
    assert main(args) == 2
    assert "--replace" in capsys.readouterr().err
    assert main([*args, "--replace"]) == 0
    capsys.readouterr()
    assert main(["leaderboard", "list", "--board", str(tmp_path / "b")]) == 0
    assert "'model-a'" in capsys.readouterr().out


def test_official_command_writes_a_registry_entry(vg_tiny, registry, tmp_path):
    assert main(["leaderboard", "official", str(vg_tiny), "--write", str(tmp_path / "reg.json")]) == 0
    from mmbench.builders.visual_grounding import TASK_VERSION

    written = OfficialRegistry.load(tmp_path / "reg.json").get("visual_grounding", TASK_VERSION)
    expected = registry.get("visual_grounding", TASK_VERSION)
    assert (written.content_hash, written.n_items, written.subsets) == (expected.content_hash, expected.n_items,
                                                                        expected.subsets)


def test_path_traversal_in_names_never_reaches_the_file_system(vg_tiny, registry, tmp_path):
    board = Board(tmp_path / "board")
    for i, name in enumerate(("../../../escaped", "/etc/passwd", "..\\..\\win", "....//....//x")):
        entry = board.submit(validate_submission(make_results(vg_tiny, tmp_path / f"r{i}", name=name, dim=8), registry))
        assert entry.model_name == name  # the name is kept as data...
        assert entry.folder.resolve().parent == (tmp_path / "board" / "submissions" / "visual_grounding").resolve()
        assert ".." not in entry.folder.name and "/" not in entry.folder.name and "\\" not in entry.folder.name
    outside = {p.name for p in tmp_path.iterdir()}
    assert outside == {"board", "r0", "r1", "r2", "r3"}  # ...and nothing was written beside the board


def test_unexpected_file_names_and_links_in_a_submission_are_refused(results, registry, tmp_path):
    (results / "..evil.json").write_text("{}")
    os.symlink("/etc/passwd", results / "seen.parquet.tmp")
    exc = rejected(results, registry)
    assert "not an accepted data file" in problem(exc, "file ..evil.json")
    assert "symbolic link" in problem(exc, "file seen.parquet.tmp")
    linked = Path(shutil.copytree(results, tmp_path / "linked", symlinks=True))
    for extra in ("..evil.json", "seen.parquet.tmp"):
        (linked / extra).unlink()
    (linked / "seen.parquet").unlink()
    os.symlink(results / "per_query.parquet", linked / "seen.parquet")
    assert "symbolic link" in problem(rejected(linked, registry), "file seen.parquet")


def test_oversized_files_are_rejected(results, registry):
    exc = rejected(results, registry, limits=Limits(max_file_bytes=1000))
    assert "over the limit of 1000 bytes" in problem(exc, "file per_query.parquet")
    exc = rejected(results, registry, limits=Limits(max_json_bytes=100))
    assert "over the limit of 100 bytes" in problem(exc, "file results.json")


def test_html_and_js_in_names_are_kept_as_text_and_escaped(vg_tiny, registry, tmp_path):
    board = Board(tmp_path / "board")
    entry = board.submit(validate_submission(make_results(vg_tiny, tmp_path / "r", name=HOSTILE_NAME, dim=8), registry))
    assert entry.model_name == HOSTILE_NAME
    assert "<" not in entry.folder.name and '"' not in entry.folder.name
    site = build_site(board, tmp_path / "site")
    pages = [site / "index.html", *sorted((site / "models").glob("*.html"))]
    for page in pages:
        text = page.read_text()
        assert "<script>window" not in text and "<img src=x" not in text
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in pages[0].read_text()
    assert '<script src="' in pages[0].read_text()  # the site's own script is still there


def test_control_characters_in_names_are_rejected(results, registry):
    edit_summary(results, lambda s: s["mmbench"]["model"].update(name="ok\x1b[31mred"))
    assert "control characters" in problem(rejected(results, registry), "results.json: mmbench.model.name")


class _Trap:
    """Unpickling this would create a marker file; a data-only reader never unpickles."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (Path(self.marker),))


def test_pickles_and_code_are_rejected_and_never_loaded(results, registry, tmp_path):
    marker = tmp_path / "unpickled"
    payload = pickle.dumps(_Trap(str(marker)))
    extra = Path(shutil.copytree(results, tmp_path / "extra"))
    (extra / "model.pkl").write_bytes(payload)
    (extra / "hook.py").write_text("import os\n")
    exc = rejected(extra, registry)
    assert "looks like a pickle" in problem(exc, "file model.pkl")
    assert "not an accepted data file" in problem(exc, "file hook.py")
    (results / "per_query.parquet").write_bytes(payload)  # a pickle under an accepted name
    assert "not a Parquet file (it looks like a pickle)" in problem(rejected(results, registry), "file per_query.parquet")
    (results / "per_query.parquet").unlink()
    (results / "results.json").write_bytes(payload)
    assert "looks like a pickle" in problem(rejected(results, registry), "file results.json")
    assert not marker.exists()


def test_a_failed_store_leaves_nothing_behind(results, registry, tmp_path, monkeypatch):
    board = Board(tmp_path / "board")
    sub = validate_submission(results, registry)
    before = board.submit(sub)
    stored = {p.name: p.read_bytes() for p in before.folder.iterdir()}
    import mmbench.leaderboards.store as store

    real_replace = os.replace

    def failing(src, dst):
        if ".staging-" in str(src):
            raise OSError("disk full")
        return real_replace(src, dst)

    monkeypatch.setattr(store.os, "replace", failing)
    with pytest.raises(OSError, match="disk full"):
        board.submit(sub, replace=True)
    monkeypatch.undo()
    entries = board.entries()
    assert [e.id for e in entries] == [before.id] and entries[0].submitted_at == before.submitted_at
    assert {p.name: p.read_bytes() for p in before.folder.iterdir()} == stored  # old files restored intact
    assert not [p for p in board.root.iterdir() if p.name.startswith((".staging", ".trash"))]


def _submit_proc(results: Path, board: Path, official: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "mmbench.cli", "leaderboard", "submit", str(results),
                             "--board", str(board), "--official", str(official)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_two_processes_submitting_at_once(setup, vg_tiny, tmp_path):
    _, good, official = setup
    other = make_results(vg_tiny, tmp_path / "other", name="model-b", dim=4)
    board = tmp_path / "board"
    procs = [_submit_proc(good, board, official), _submit_proc(other, board, official)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    # the same results from two processes at once: exactly one is accepted
    procs = [_submit_proc(other, tmp_path / "board2", official) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert sorted(p.returncode for p in procs) == [0, 2], outs
    assert "already on the board" in "".join(err for _, err in outs)
    assert sorted(e.model_name for e in Board(board).entries()) == ["model-a", "model-b"]
    assert len(Board(tmp_path / "board2").entries()) == 1
    with sqlite3.connect(board / "board.sqlite") as con:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert con.execute("SELECT COUNT(DISTINCT submission_id) FROM scores").fetchone()[0] == 2
    folders = sorted(p.name for p in (board / "submissions" / "visual_grounding").iterdir())
    assert len(folders) == 2 and not [p for p in board.iterdir() if p.name.startswith((".staging", ".trash"))]


def test_shipped_registry_names_every_registered_task():
    from mmbench.tasks import task_specs

    reg = OfficialRegistry.load(None)
    for spec in task_specs():
        assert (spec.name, spec.version) in reg.entries, (
            f"{spec.name} v{spec.version} has no official hash: build it with `mmbench build --task {spec.name}` and run "
            "`mmbench leaderboard official DIR --write leaderboards/data/official_hashes.json`")
        entry = reg.get(spec.name, spec.version)
        assert len(entry.content_hash) == 64 and entry.n_items > 0
        assert sum(s.n_items for s in entry.subsets.values()) == entry.n_items


def test_ravel_scores_are_validated_and_correlated(tmp_path):
    from scipy import stats

    from mmbench.running.ravel_inputs import load_ground_truth

    gt = load_ground_truth()
    part = gt[gt["llm"] == "Qwen3-1.7B"].head(12)
    rng = np.random.default_rng(0)
    scores = [{"encoder": r.encoder, "llm": r.llm, "score": float(r.Avg + rng.normal(0, 2))} for r in part.itertuples()]
    folder = tmp_path / "ravel"
    folder.mkdir()
    doc = {"task": "ravel", "model": {"name": "my-predictor", "settings": {"k": 100}}, "scores": scores}
    (folder / "ravel_scores.json").write_text(json.dumps(doc))
    sub = validate_submission(folder)
    want = stats.spearmanr([s["score"] for s in scores], part["Avg"]).statistic
    assert sub.scores["llm=Qwen3-1.7B"]["spearman"] == pytest.approx(want, abs=1e-12)
    # a stated correlation that does not follow from the scores is rejected
    doc["correlation"] = {"Qwen3-1.7B": {"spearman": 0.99}}
    (folder / "ravel_scores.json").write_text(json.dumps(doc))
    assert "recomputed from the scores" in problem(rejected(folder, None), "ravel_scores.json: correlation.Qwen3-1.7B.spearman")
    doc.pop("correlation")
    doc["scores"][0] = {**scores[0], "encoder": "No Such Encoder"}
    (folder / "ravel_scores.json").write_text(json.dumps(doc))
    assert "no ground truth" in problem(rejected(folder, None), "ravel_scores.json: scores")
    doc["scores"][0] = {**scores[0], "score": float("nan")}
    (folder / "ravel_scores.json").write_text(json.dumps(doc, allow_nan=True))
    assert "invalid JSON" in problem(rejected(folder, None), "ravel_scores.json")


@pytest.mark.parametrize("name, reason", [("a\x85b", "control characters (U+0085)"),
                                          ("good\u202eledom", "invisible formatting character (U+202E"),
                                          ("\u200b", "invisible formatting character (U+200B"),
                                          ("a\ud800b", "unpaired surrogate (U+D800)")])
def test_c1_controls_bidi_invisible_and_surrogate_names_are_rejected(results, registry, name, reason):
    edit_summary(results, lambda s: s["mmbench"]["model"].update(name=name))
    assert reason in problem(rejected(results, registry), "results.json: mmbench.model.name")


def test_joiners_in_names_are_accepted(results, registry):
    edit_summary(results, lambda s: s["mmbench"]["model"].update(name="emoji-\U0001F468\u200d\U0001F52C"))
    assert validate_submission(results, registry).model_name.endswith("\u200d\U0001F52C")


def test_surrogate_in_settings_is_rejected_before_it_can_break_the_site(results, registry):
    edit_summary(results, lambda s: s["mmbench"]["model"]["settings"].update(note="x\udc00"))
    assert "unpaired surrogate" in problem(rejected(results, registry), "results.json: mmbench.model.settings.note")


@pytest.mark.parametrize("column, value", [("precision_at_1", str), ("mrr", lambda v: bool(v)),
                                           ("first_relevant_rank", lambda v: "abc")])
def test_per_query_columns_of_the_wrong_type_are_rejected_not_crashing(results, registry, column, value):
    # metrics stored as strings ("0.5") used to pass the range checks and crash the aggregation;
    # a non-numeric first_relevant_rank crashed the ranking check
    edit_per_query(results, lambda pq: pq.assign(**{column: pq[column].map(value)}), resummarise=False)
    assert "must hold numbers" in problem(rejected(results, registry), f"per_query.parquet: {column}")


def _ravel_folder(tmp_path: Path, **doc) -> Path:
    from mmbench.running.ravel_inputs import load_ground_truth

    part = load_ground_truth().query("llm == 'Qwen3-1.7B'").head(6)
    scores = [{"encoder": r.encoder, "llm": r.llm, "score": float(r.Avg)} for r in part.itertuples()]
    folder = tmp_path / "ravel"
    folder.mkdir(exist_ok=True)
    full = {"task": "ravel", "model": {"name": "p", "settings": {}}, "scores": scores, **doc}
    (folder / "ravel_scores.json").write_text(json.dumps(full))
    return folder


def test_ravel_lower_is_better_must_be_a_boolean(tmp_path):
    # "false" (a string) used to be read as true, silently negating every correlation
    folder = _ravel_folder(tmp_path, lower_is_better="false")
    assert "not true or false" in problem(rejected(folder, None), "ravel_scores.json: lower_is_better")
    assert validate_submission(_ravel_folder(tmp_path, lower_is_better=False)).scores["llm=Qwen3-1.7B"]["spearman"] == 1.0


def test_ravel_constant_scores_are_rejected_not_stored_as_nan(tmp_path):
    folder = _ravel_folder(tmp_path)
    doc = json.loads((folder / "ravel_scores.json").read_text())
    for s in doc["scores"]:
        s["score"] = 0.5
    (folder / "ravel_scores.json").write_text(json.dumps(doc))
    assert "is the same" in problem(rejected(folder, None), "ravel_scores.json: scores")


def test_ravel_unknown_names_are_listed_without_pointing_at_a_flag_submit_lacks(tmp_path):
    folder = _ravel_folder(tmp_path)
    doc = json.loads((folder / "ravel_scores.json").read_text())
    doc["scores"][0]["encoder"] = "No Such Encoder"
    (folder / "ravel_scores.json").write_text(json.dumps(doc))
    reason = problem(rejected(folder, None), "ravel_scores.json: scores")
    assert "No Such Encoder / Qwen3-1.7B" in reason and "--allow-missing" not in reason


def test_submit_and_build_refuse_another_protocol_of_the_same_model(vg_tiny, setup, tmp_path, capsys):
    """The same model run in another dtype (another setup) is refused by submit and build, naming the field;
    --allow-protocol-mismatch accepts it and prints the difference."""
    _, good, official = setup
    board = tmp_path / "board"
    half = make_results(vg_tiny, tmp_path / "half", name="model-a", dim=16, settings={"dtype": "float16"})
    assert main(["leaderboard", "submit", str(good), "--board", str(board), "--official", str(official)]) == 0
    capsys.readouterr()
    assert main(["leaderboard", "submit", str(half), "--board", str(board), "--official", str(official)]) == 2
    err = capsys.readouterr().err
    assert "different protocols" in err and 'setup.dtype: null vs "float16"' in err
    assert main(["leaderboard", "submit", str(half), "--board", str(board), "--official", str(official),
                 "--allow-protocol-mismatch"]) == 0
    assert "joined despite a protocol difference" in capsys.readouterr().err
    assert main(["leaderboard", "build", "--board", str(board), "--out", str(tmp_path / "site")]) == 2
    assert "setup.dtype" in capsys.readouterr().err
    assert main(["leaderboard", "build", "--board", str(board), "--out", str(tmp_path / "site"),
                 "--allow-protocol-mismatch"]) == 0
