"""Reliability: an output folder mmbench did not write is never replaced, killed builds leave nothing
that breaks the next one, media bytes are verified, and source readers name file, line and field."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from mmbench.cli import main
from mmbench.data.documents import Text
from mmbench.data.poolset import PoolSetError, load_poolset, write_poolset
from mmbench.common.scratch import LOCK_NAME, OutputRefused, STALE_SECONDS, clean_stale

from test_poolset import _poolset
from toy_models import HashingModel

VG_TINY = ["--task", "visual_grounding", "--param", "lengths=[256]", "--param", "backgrounds=[text]",
           "--param", "kinds=[text]", "--param", "needles_per_kind=4"]


# --- item 1: never replace what mmbench did not write ---------------------------------------------------

def test_write_poolset_refuses_a_folder_it_did_not_write(tmp_path):
    ps, media = _poolset(tmp_path)
    out = tmp_path / "mine"
    out.mkdir()
    (out / "thesis.tex").write_text("years of work")
    with pytest.raises(OutputRefused, match="not a pool set mmbench wrote"):
        write_poolset(ps, out, media_from=media.root)
    assert (out / "thesis.tex").read_text() == "years of work"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine", "scratch"]  # no hidden leftovers either


def test_a_manifest_of_another_format_is_not_enough(tmp_path):
    ps, media = _poolset(tmp_path)
    out = tmp_path / "other"
    out.mkdir()
    (out / "manifest.json").write_text(json.dumps({"format": "something-else/1"}))
    with pytest.raises(OutputRefused):
        write_poolset(ps, out, media_from=media.root)
    assert (out / "manifest.json").is_file()


def test_a_pool_set_and_an_empty_folder_are_replaced(tmp_path):
    ps, media = _poolset(tmp_path)
    out = tmp_path / "ps"
    out.mkdir()  # empty: nothing to lose
    write_poolset(ps, out, media_from=media.root)
    first = (out / "manifest.json").read_bytes()
    ps.candidates[0].segments[0] = Text("changed")
    write_poolset(ps, out, media_from=media.root)  # a pool set mmbench wrote: replaced
    assert (out / "manifest.json").read_bytes() != first
    load_poolset(out, verify=True)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_cli_build_refuses_a_foreign_folder_and_the_working_directory(tmp_path, monkeypatch, capsys):
    target = tmp_path / "data"
    target.mkdir()
    (target / "notes.txt").write_text("keep me")
    assert main(["build", *VG_TINY, "--out", str(target)]) == 2
    assert "refusing to replace it" in capsys.readouterr().err
    assert (target / "notes.txt").read_text() == "keep me"
    monkeypatch.chdir(target)
    assert main(["build", *VG_TINY, "--out", "."]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "refusing to replace it" in err
    assert sorted(os.listdir(target)) == ["notes.txt"] and sorted(os.listdir(tmp_path)) == ["data"]
    file_out = tmp_path / "afile"
    file_out.write_text("x")
    assert main(["build", *VG_TINY, "--out", str(file_out)]) == 2
    assert file_out.read_text() == "x"


# --- item 11: leftovers of killed builds ---------------------------------------------------------------

def _leftover(parent: Path, name: str, locked_by_us: bool | None, age: float = 0.0) -> Path:
    """A hidden working folder as a build creates it; `locked_by_us` None means no lock file."""
    folder = parent / name
    folder.mkdir()
    (folder / "media.bin").write_bytes(b"x" * 10)
    if locked_by_us is not None:
        (folder / LOCK_NAME).write_text("1\n")
    if age:
        old = time.time() - age
        os.utime(folder, (old, old))
    return folder


def test_clean_stale_removes_only_abandoned_folders_of_this_output(tmp_path):
    import fcntl

    out = tmp_path / "ps"
    dead = _leftover(tmp_path, ".ps.scratch.abc_1234", locked_by_us=False)
    dead_building = _leftover(tmp_path, ".ps.building.q9x8y7z6", locked_by_us=False)
    live = _leftover(tmp_path, ".ps.building.live0000", locked_by_us=True)
    fd = os.open(live / LOCK_NAME, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)  # another build working in it right now
    young = _leftover(tmp_path, ".ps.scratch.young000", locked_by_us=None)
    aged = _leftover(tmp_path, ".ps.scratch.aged0000", locked_by_us=None, age=STALE_SECONDS + 60)
    other = _leftover(tmp_path, ".psx.scratch.abc_1234", locked_by_us=False)  # another output's
    user = _leftover(tmp_path, ".ps.mine", locked_by_us=False)  # not a pattern mmbench uses
    old_foreign = _leftover(tmp_path, ".ps.old.abcd1234", locked_by_us=None)  # not a pool set: kept
    try:
        removed = clean_stale(out)
    finally:
        os.close(fd)
    assert sorted(p.name for p in removed) == sorted([dead.name, dead_building.name, aged.name])
    for kept in (live, young, other, user, old_foreign):
        assert kept.is_dir(), kept


def _build_cli(args, env):
    return subprocess.Popen([sys.executable, "-m", "mmbench", "build", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def test_a_killed_build_leaves_nothing_that_breaks_the_next(tmp_path):
    out = tmp_path / "vg"
    env = {**os.environ, "MMBENCH_HOME": str(tmp_path / "home")}
    # a first build, so the killed one also has a previous pool set to swap out
    first = _build_cli([*VG_TINY, "--out", str(out)], env)
    assert first.wait(timeout=120) == 0, first.stdout.read()
    killed_with_leftovers = 0
    for delay in (0.3, 0.6, 0.9):
        proc = _build_cli([*VG_TINY, "--out", str(out)], env)
        deadline = time.time() + 60
        while time.time() < deadline and proc.poll() is None and not any(
                p.name.startswith(".vg.") for p in tmp_path.iterdir()):
            time.sleep(0.005)
        time.sleep(delay * 0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        killed_with_leftovers += any(p.name.startswith(".vg.") for p in tmp_path.iterdir())
        again = _build_cli([*VG_TINY, "--out", str(out)], env)
        text, _ = again.communicate(timeout=120)
        assert again.returncode == 0, text
        assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")], text
        load_poolset(out, verify=True)
    assert killed_with_leftovers  # the kills did land while a build had its hidden folders


# --- item 6: media bytes are verified ------------------------------------------------------------------

def _image_poolset(tmp_path):
    """Three candidates, each a distinct solid colour; the query asks for the first."""
    from PIL import Image as PILImage

    from mmbench.data.documents import Document
    from mmbench.data.media import MediaStore
    from mmbench.data.poolset import PoolItem, PoolSet

    media = MediaStore(tmp_path / "scratch")
    imgs = [media.put_image(PILImage.new("RGB", (16, 16), c)) for c in ((250, 0, 0), (0, 250, 0), (0, 0, 250))]
    q = [Document("q1", [Text("red")], 1), Document("q2", [Text("blue")], 1)]
    c = [Document(f"c{i}", [img], 5) for i, img in enumerate(imgs)]
    pools = [PoolItem("i1", "q1", "s", ["c0", "c1", "c2"], ["c0"]), PoolItem("i2", "q2", "s", ["c0", "c1", "c2"], ["c2"])]
    out = write_poolset(PoolSet("toy", "1", q, c, pools), tmp_path / "ps", media_from=media.root)
    return out, [img.ref for img in imgs]


def test_a_media_file_copied_over_another_is_caught(tmp_path, capsys):
    from mmbench.running.runner import RunOptions, run_poolset

    out, refs = _image_poolset(tmp_path)
    load_poolset(out, verify=True)
    (out / "media" / refs[0]).write_bytes((out / "media" / refs[1]).read_bytes())  # a valid PNG, the wrong one
    with pytest.raises(PoolSetError, match=r"corrupt media file .*" + refs[0].split("/")[1][:12]):
        load_poolset(out, verify=True)
    assert main(["validate", str(out)]) == 2
    assert refs[0] in capsys.readouterr().err
    per_query, _, info = run_poolset(load_poolset(out), HashingModel(), RunOptions(progress=False, use_cache=False))
    assert info["n_failed_items"] == 2  # both pools hold c0: neither is scored against the wrong picture
    assert per_query["error"].str.contains("do not match its content address").all()


def test_media_links_outside_the_pool_set_are_refused(tmp_path):
    out, refs = _image_poolset(tmp_path)
    outside = tmp_path / "elsewhere.png"
    target = out / "media" / refs[0]
    outside.write_bytes(target.read_bytes())  # even with the right bytes
    target.unlink()
    target.symlink_to(outside)
    with pytest.raises(PoolSetError, match="outside the pool set"):
        load_poolset(out, verify=True)
    ps = load_poolset(out)
    from mmbench.data.media import MediaError

    with pytest.raises(MediaError, match="outside the pool set"):
        ps.media.load_image(refs[0])
    # a link that stays inside the pool set is fine
    inside = out / "media" / "kept.png"
    os.replace(outside, inside)
    target.unlink()
    target.symlink_to(os.path.relpath(inside, target.parent))
    load_poolset(out, verify=True)
    # the media folder itself linked to another place is outside too
    moved = tmp_path / "media-elsewhere"
    os.replace(out / "media", moved)
    (out / "media").symlink_to(moved)
    with pytest.raises(PoolSetError, match="outside the pool set"):
        load_poolset(out, verify=True)


# --- item 11: source readers name file, line and field --------------------------------------------------

def test_non_utf8_line_is_named_with_file_line_and_column(tmp_path):
    from mmbench.builders.sources.needles import read_needlebench

    path = tmp_path / "needles.jsonl"
    good = json.dumps({"needle": "The key is blue.", "retrieval_question": "What colour is the key?"})
    path.write_bytes((good + "\n").encode() + b'{"needle": "caf\xe9", "retrieval_question": "q"}\n')
    with pytest.raises(ValueError, match=rf"^{path}:2: not valid UTF-8 \(byte 0xe9 at column 16\)"):
        read_needlebench(path)


def test_wrong_field_types_are_named(tmp_path):
    from mmbench.builders.sources.jsonl import read_json, read_jsonl
    from mmbench.builders.sources.needles import read_mmniah_image_needles

    path = tmp_path / "mmniah.jsonl"
    path.write_text(json.dumps({"images_list": ["a.png"], "meta": "needle.png", "question": "which?"}) + "\n")
    with pytest.raises(ValueError, match=rf"^{path}:1: field 'meta' is a str, expected an object"):
        read_mmniah_image_needles(path, tmp_path)
    path.write_text("\n" + json.dumps({"question": 7}) + "\n")
    with pytest.raises(ValueError, match=rf"{path}:2: field 'question': expected text, got a number \(7\)"):
        list(read_jsonl(path, fields={"question": str}))
    path.write_bytes("\ufeff".encode() + b'{"question": "ok"}\n')  # a byte-order mark is not an error
    assert [r for _, _, r in read_jsonl(path, fields={"question": str})] == [{"question": "ok"}]
    whole = tmp_path / "ann.json"
    whole.write_bytes(b'{\n  "v1": {"sentences": ["a"]},\n  "v2": "\xff"\n}')
    with pytest.raises(ValueError, match=rf"^{whole}:3: not valid UTF-8 \(byte 0xff at column 10\)"):
        read_json(whole)
    whole.write_text('{\n  "v1": [1,\n}')
    with pytest.raises(ValueError, match=rf"^{whole}:3: invalid JSON at column 1"):
        read_json(whole)


# --- item 11: degenerate vectors are warned about ----------------------------------------------------------

class _ConstantModel(HashingModel):
    """Every document gets the same vector: zero, or one fixed direction at random lengths."""

    def __init__(self, zero: bool) -> None:
        super().__init__(modalities=("text",))
        self._zero = zero

    def encode(self, documents, role, media):
        rng = np.random.default_rng(len(documents))
        base = np.zeros(self.card.dim) if self._zero else np.linspace(1, 2, self.card.dim)
        return np.stack([base * rng.uniform(0.5, 2) for _ in documents]).astype(np.float32)


@pytest.mark.parametrize("zero", [True, False], ids=["all-zero", "all-parallel"])
def test_degenerate_vectors_are_warned_in_results_and_summary(vg_tiny, tmp_path, zero, capsys):
    from mmbench.running.evaluation import evaluate_to_folder
    from mmbench.results.store import load_results
    from mmbench.running.runner import RunOptions, run_poolset
    from mmbench.results.summary import format_summary

    ps = load_poolset(vg_tiny)
    summary = evaluate_to_folder("visual_grounding", ps, _ConstantModel(zero), RunOptions(progress=False, use_cache=False),
                                 tmp_path / "res", "constant")
    warnings = summary["mmbench"]["warnings"]
    assert any("document vectors" in w and "chance" in w for w in warnings)
    assert any("query vectors" in w for w in warnings)
    text = format_summary(load_results(tmp_path / "res"), ("length_bin",))
    assert "WARNING: all 60 document vectors" in text
    _, _, healthy = run_poolset(ps, HashingModel(modalities=("text",)), RunOptions(progress=False, use_cache=False))
    assert healthy["warnings"] == []


# --- item 11: RAVEL scores of absurd magnitude -----------------------------------------------------------

@pytest.mark.parametrize("value", [1e308, -1e308, 3e13])
def test_ravel_refuses_absurd_score_magnitudes(tmp_path, value, capsys):
    import pandas as pd

    from mmbench.running.ravel_inputs import correlate_files
    from test_ravel_correlate import DATA

    df = pd.read_csv(DATA)
    df.loc[2, "mean_recall_5cap"] = value
    df.to_csv(tmp_path / "s.csv", index=False)
    with pytest.raises(ValueError, match=r"1 scores beyond ±1e\+12") as info:
        correlate_files(tmp_path / "s.csv", score_column="mean_recall_5cap")
    assert df.loc[2, "display_name"] in str(info.value) and "s.csv" in str(info.value)
    assert main(["ravel", "correlate", "--scores", str(tmp_path / "s.csv"), "--score-column", "mean_recall_5cap"]) != 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "beyond" in err
