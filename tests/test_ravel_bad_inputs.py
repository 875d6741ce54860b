"""Issue 35 item 4: every bad input `mmbench ravel` meets is one line naming the file, record or field, exit 2.

The same kinds `mmbench build` handles (missing file, broken JSON, wrong or missing fields, missing or corrupt
images, unknown encoder), plus RAVEL's own (manifests, feature arrays, options).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import numpy as np
import pytest
from PIL import Image

from mmbench.cli import main
from mmbench.models.ravel_tiny import build_tiny_models


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return build_tiny_models(tmp_path_factory.mktemp("tiny"))


def _karpathy(tmp: Path, images: list[dict[str, object]] | None = None, text: str | None = None) -> list[str]:
    (tmp / "imgs").mkdir(exist_ok=True)
    for i in range(3):
        Image.new("RGB", (16, 16), (i * 60, 0, 0)).save(tmp / "imgs" / f"{i}.png")
    recs = images if images is not None else [
        {"imgid": i, "filename": f"{i}.png", "sentences": [{"raw": f"caption {i}"}]} for i in range(3)]
    (tmp / "k.json").write_text(text if text is not None else json.dumps({"images": recs}))
    return ["ravel", "calibrate", "--source", "karpathy", "--json", str(tmp / "k.json"), "--image-root",
            str(tmp / "imgs"), "--n", "3", "--out", str(tmp / "m.jsonl")]


def _good(tmp: Path, i: int) -> dict[str, object]:
    return {"imgid": i, "filename": f"{i}.png", "sentences": [{"raw": "x"}]}


def _manifest(tmp: Path, edit: Callable[[list[str]], list[str]] | None = None) -> str:
    assert main(_karpathy(tmp)) == 0
    path = tmp / "m.jsonl"
    if edit is not None:
        path.write_text("".join(line + "\n" for line in edit(path.read_text().splitlines())))
    return str(path)


def _score(manifest: str, *extra: str) -> list[str]:
    return ["ravel", "score", "--manifest", manifest, "--cache-dir", "", "--k", "1", *extra]


def _case_corrupt_image(tmp: Path, tiny: dict[str, str]) -> tuple[list[str], str]:
    m = _manifest(tmp)
    (tmp / "imgs" / "1.png").write_bytes(b"not an image")
    np.save(tmp / "t.npy", np.ones((3, 4)))
    return _score(m, "--encoder", f"clip={tiny['clip']}", "--text-features", f"q={tmp / 't.npy'}"), \
        "pair 1 (id '1'): " + str(tmp / "imgs" / "1.png") + " is not a readable image (unknown format)"


def _case_missing_image_at_score(tmp: Path, tiny: dict[str, str]) -> tuple[list[str], str]:
    m = _manifest(tmp)
    (tmp / "imgs" / "2.png").unlink()
    np.save(tmp / "t.npy", np.ones((3, 4)))
    return ["ravel", "score", "--manifest", m, "--cache-dir", str(tmp / "cache"), "--k", "1",
            "--encoder", f"clip={tiny['clip']}", "--text-features", f"q={tmp / 't.npy'}"], \
        "pair 2 (id '2'): image file " + str(tmp / "imgs" / "2.png") + " does not exist"


def _arrays(tmp: Path, patches: np.ndarray, text: np.ndarray) -> list[str]:
    np.save(tmp / "v.npy", patches)
    np.save(tmp / "t.npy", text)
    return ["ravel", "score", "--features", f"v={tmp / 'v.npy'}", "--text-features", f"q={tmp / 't.npy'}", "--k", "1"]


CASES: dict[str, Callable[[Path, dict[str, str]], tuple[list[str], str]]] = {
    "karpathy json missing": lambda t, _: (_karpathy(t)[:5] + [str(t / "nope.json")] + _karpathy(t)[6:],
                                           f"{t / 'nope.json'}: no such file"),
    "karpathy json broken": lambda t, _: (_karpathy(t, text='{"images": ['), "k.json:1: invalid JSON"),
    "karpathy json without images": lambda t, _: (_karpathy(t, text='{"imgs": []}'), "k.json: field 'images' missing"),
    "karpathy record without sentences": lambda t, _: (
        _karpathy(t, [_good(t, 0), {"imgid": 1, "filename": "1.png"}]), "images[1]: field 'sentences' missing"),
    "karpathy record with no sentence": lambda t, _: (
        _karpathy(t, [{"imgid": 0, "filename": "0.png", "sentences": []}]), "images[0]: field 'sentences' is empty"),
    "karpathy sentence without raw": lambda t, _: (
        _karpathy(t, [{"filename": "0.png", "sentences": [{"tokens": []}]}]), "sentences[0]: field 'raw' missing"),
    "karpathy filename not a string": lambda t, _: (
        _karpathy(t, [{"filename": 7, "sentences": [{"raw": "x"}]}]), "images[0]: field 'filename' is 7"),
    "karpathy image missing": lambda t, _: (
        _karpathy(t, [_good(t, 0), _good(t, 1), {"filename": "gone.png", "sentences": [{"raw": "x"}]}]),
        "pair 2 (id '2'): field 'image': image file"),
    "image root missing": lambda t, _: (_karpathy(t)[:7] + [str(t / "no-imgs")] + _karpathy(t)[8:],
                                        f"--image-root {t / 'no-imgs'}: no such folder"),
    "source without image root": lambda t, _: (["ravel", "calibrate", "--source", "coco", "--json", "x.json",
                                                "--out", str(t / "m.jsonl")], "source 'coco' needs --json and --image-root"),
    "unknown source": lambda t, _: (["ravel", "calibrate", "--source", "laion", "--out", str(t / "m.jsonl")],
                                    "unknown calibration source 'laion'"),
    "llava item without caption": lambda t, _: (
        (t / "imgs").mkdir() or (t / "l.json").write_text(json.dumps([{"image": "a.png", "conversations": [
            {"from": "human", "value": "?"}]}])) and
        ["ravel", "calibrate", "--source", "llava-lcs", "--json", str(t / "l.json"), "--image-root", str(t / "imgs"),
         "--out", str(t / "m.jsonl")], "item 0: field 'conversations' has no gpt turn"),
    "coco annotation without caption": lambda t, _: (
        (t / "imgs").mkdir() or (t / "c.json").write_text(json.dumps({"images": [{"id": 1, "file_name": "a.png"}],
                                                                       "annotations": [{"id": 5, "image_id": 1}]})) and
        ["ravel", "calibrate", "--source", "coco", "--json", str(t / "c.json"), "--image-root", str(t / "imgs"),
         "--out", str(t / "m.jsonl")], "annotations[0]: field 'caption' missing"),
    "pairs csv without text": lambda t, _: (
        (t / "p.csv").write_text("image,label\na.png,x\n") and
        ["ravel", "calibrate", "--source", "pairs", "--pairs", str(t / "p.csv"), "--n", "1", "--out",
         str(t / "m.jsonl")], "p.csv:2: field 'text' missing"),
    "pairs jsonl broken line": lambda t, _: (
        (t / "p.jsonl").write_text('{"image": "a.png", "text": "x"}\n{"image": \n') and
        ["ravel", "calibrate", "--source", "pairs", "--pairs", str(t / "p.jsonl"), "--out", str(t / "m.jsonl")],
        "p.jsonl:2: invalid JSON"),
    "manifest missing": lambda t, _: (_score(str(t / "none.jsonl"), "--encoder", "e=x", "--llm", "l=y"),
                                      f"manifest {t / 'none.jsonl'}: no such file"),
    "manifest edited": lambda t, _: (_score(_manifest(t, lambda ls: [ls[0], ls[1].replace("caption 0", "edited")]
                                                      + ls[2:]), "--encoder", "e=x", "--llm", "l=y"),
                                     "manifest fingerprint mismatch"),
    "manifest record without text": lambda t, _: (
        _score(_manifest(t, lambda ls: [ls[0], json.dumps({"index": 0, "id": "0", "image": "0.png"})]),
               "--encoder", "e=x", "--llm", "l=y"), "m.jsonl:2: field 'text' missing"),
    "unknown encoder": lambda t, tiny: (_score(_manifest(t), "--encoder", f"e={t / 'no-such-model'}", "--llm",
                                               f"q={tiny['llm']}"), f"--encoder e={t / 'no-such-model'}: unknown model"),
    "encoder folder without config": lambda t, tiny: (_score(_manifest(t), "--encoder", f"e={t / 'imgs'}", "--llm",
                                                             f"q={tiny['llm']}"), "not a transformers model folder"),
    "unknown llm": lambda t, _: (_score(_manifest(t), "--features", "v=a.npy", "--llm", "q=nowhere"),
                                 "--llm q=nowhere: unknown model"),
    "corrupt image": _case_corrupt_image,
    "missing image at score time": _case_missing_image_at_score,
    "features file missing": lambda t, _: (_arrays(t, np.ones((5, 2, 3)), np.ones((5, 3)))[:3] + [
        f"v={t / 'gone.npy'}"] + _arrays(t, np.ones((5, 2, 3)), np.ones((5, 3)))[4:], f"--features {t / 'gone.npy'}: no such file"),
    "features of the wrong rank": lambda t, _: (_arrays(t, np.ones(5), np.ones((5, 3))), "expected (n, P, d) or (n, d)"),
    "text features not an array": lambda t, _: (
        _arrays(t, np.ones((5, 2, 3)), np.ones((5, 3)))[:4] + ["--text-features", f"q={t / 'k.txt'}"] if
        (t / "k.txt").write_text("hello") else [], f"--text-features {t / 'k.txt'}: not a numpy"),
    "features and texts of different n": lambda t, _: (_arrays(t, np.ones((5, 2, 3)), np.ones((4, 3))),
                                                       "v: 5 images vs q: 4 texts"),
    "unknown method": lambda t, _: (_arrays(t, np.ones((5, 2, 3)), np.ones((5, 3))) + ["--methods", "ravle"],
                                    "--methods: unknown method 'ravle'"),
    "bad layer": lambda t, _: (_arrays(t, np.ones((5, 2, 3)), np.ones((5, 3))) + ["--layer", "penultimate"],
                               "--layer 'penultimate'"),
    "ground truth without Avg": lambda t, _: (
        (t / "gt.csv").write_text("llm,encoder,score\nq,v,1\n") and _arrays(t, np.ones((5, 2, 3)), np.ones((5, 3))) and
        ["ravel", "ckax", "--features", f"v={t / 'v.npy'}", "--text-features", f"q={t / 't.npy'}", "--ground-truth",
         str(t / "gt.csv")], f"--ground-truth {t / 'gt.csv'}: ground truth needs an 'Avg' column"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_one_line_and_exit_2(case: str, tmp_path: Path, tiny: dict[str, str],
                                          capsys: pytest.CaptureFixture[str]) -> None:
    argv, expected = CASES[case](tmp_path, tiny)
    capsys.readouterr()
    assert main(argv) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    errors = [line for line in err if line.startswith("mmbench: error: ")]
    assert len(errors) == 1 and "Traceback" not in "\n".join(err), err
    assert expected in errors[0], errors[0]
