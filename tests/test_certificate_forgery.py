"""Backend certificates cannot be forged (issue 35 #3): `passed` is recomputed from the certificate's own
measurements and thresholds at attach (`run --backend-certificate`), at submit and on the board; a failed
certificate attaches only with --allow-failed-certificate and then shows as FAILED on the board and the model page.
Before: flipping `passed` to true with a top-1 agreement of 0.25 under a threshold of 1.0 was recorded as passed."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from browser_helpers import NEEDS_CHROMIUM, base_url, browser, page  # noqa: F401 - fixtures
from leaderboard_helpers import edit_summary, official_registry
from mmbench.cli import main
from mmbench.running.verify_backend import certificate, certificate_problem, read_certificate, ProbeError
from toy_models import HashingModel


class Shaky(HashingModel):
    """Vectors pushed off by a batch-dependent amount: the second path of a certificate that fails."""

    def encode(self, documents, role, media):
        out = super().encode(documents, role, media)
        return out + 0.8 * np.linalg.norm(out, axis=1, keepdims=True) * np.eye(self.card.dim)[7]


def _named(model, name):
    model.card = dataclasses.replace(model.card, name=name)
    return model


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    root = tmp_path_factory.mktemp("certs")
    good = certificate(_named(HashingModel(), "model-good"), HashingModel(), "batching", "reversed whole batches")
    failed = certificate(_named(HashingModel(), "model-failed"), Shaky(), "batching", "a shaky path")
    assert good["passed"] and not failed["passed"]
    paths = {}
    for name, cert in (("good", good), ("failed", failed)):
        paths[name] = root / f"{name}.json"
        paths[name].write_text(json.dumps(cert))
    flipped = dict(failed, passed=True, reasons=[])          # the forgery: the flag alone
    paths["flipped"] = root / "flipped.json"
    paths["flipped"].write_text(json.dumps(flipped))
    dressed = dict(flipped, cosine_min=1.0, top1_agreement=1.0)   # summary figures edited too: the items disagree
    paths["dressed"] = root / "dressed.json"
    paths["dressed"].write_text(json.dumps(dressed))
    return paths


def test_a_forged_certificate_is_refused_when_read(certs):
    assert read_certificate(certs["good"])["passed"] is True
    assert read_certificate(certs["failed"])["passed"] is False    # honest, if failed
    with pytest.raises(ProbeError, match="passed: states True, but its own measurements and thresholds give failed"):
        read_certificate(certs["flipped"])
    with pytest.raises(ProbeError, match="cosine_min: states 1.0, but its own items give"):
        read_certificate(certs["dressed"])
    cert = json.loads(certs["good"].read_text())
    assert certificate_problem(cert) is None
    assert "forged" in certificate_problem(dict(cert, thresholds={**cert["thresholds"], "min_cosine": 1.5}))


def _run(vg_tiny, cert, out, *extra):
    name = "model-good" if "good" in cert.name else "model-failed"
    return main(["run", "--task", "visual_grounding", "--data", str(vg_tiny), "--no-cache", "--quiet", "--model",
                 "toy_models:HashingModel", "--model-name", name, "--backend-certificate", str(cert),
                 "--output", str(out), *extra])


def test_attach_refuses_forged_and_failed_certificates(vg_tiny, certs, tmp_path, capsys):
    for name in ("flipped", "dressed"):
        assert _run(vg_tiny, certs[name], tmp_path / name) == 2
        err = capsys.readouterr().err.strip()
        assert "forged" in err and str(certs[name]) in err and len(err.splitlines()) == 1
    assert _run(vg_tiny, certs["failed"], tmp_path / "failed") == 2
    err = capsys.readouterr().err
    assert "FAILED" in err and "--allow-failed-certificate" in err and "minimum cosine" in err
    assert not (tmp_path / "failed" / "results.json").exists()
    assert _run(vg_tiny, certs["failed"], tmp_path / "failed", "--allow-failed-certificate") == 0
    block = json.loads((tmp_path / "failed" / "results.json").read_text())["mmbench"]["backend_certificate"]
    assert block["passed"] is False and block["min_top1_agreement"] == 1.0


@pytest.fixture(scope="module")
def board(vg_tiny, certs, tmp_path_factory):
    """A board holding one run with a passed and one with a failed (allowed) certificate."""
    root = tmp_path_factory.mktemp("certboard")
    official_registry(vg_tiny, root / "official.json")
    for name, extra in (("good", []), ("failed", ["--allow-failed-certificate"])):
        assert _run(vg_tiny, certs[name], root / name, *extra) == 0
        assert _submit(root, root / name) == 0
    assert main(["leaderboard", "build", "--board", str(root / "board"), "--out", str(root / "site")]) == 0
    return root


def _submit(root, results):
    return main(["leaderboard", "submit", str(results), "--board", str(root / "board"),
                 "--official", str(root / "official.json")])


def test_submit_refuses_a_flipped_flag_and_the_board_shows_failed(board, tmp_path, capsys):
    import shutil

    forged = tmp_path / "forged"
    shutil.copytree(board / "failed", forged)
    edit_summary(forged, lambda s: s["mmbench"]["backend_certificate"].update(passed=True))
    assert _submit(board, forged) == 2
    assert "backend_certificate.passed" in capsys.readouterr().err
    pages = {p.name: p.read_text() for p in (board / "site" / "models").glob("*.html")}
    shown = {("model-failed" in html): html.split('id="backend-certificate">')[1].split("<")[0] for html in pages.values()}
    assert shown[True].startswith("FAILED") and shown[False].startswith("passed")
    rows = json.loads((board / "site" / "data" / "efficiency.json").read_text())["rows"]
    cells = {r["model"]: r["certificate"] for r in rows}
    assert cells["model-failed"].startswith("FAILED") and cells["model-good"].startswith("passed")


def test_the_board_believes_the_measurements_not_the_flag():
    from mmbench.leaderboards.efficiency import certificate_cell

    block = {"passed": True, "cosine_min": 0.9999, "top1_agreement": 0.25, "min_cosine": 0.99,
             "min_top1_agreement": 1.0}
    assert certificate_cell(block).startswith("FAILED")
    assert certificate_cell(dict(block, top1_agreement=1.0)).startswith("passed")
    assert certificate_cell({k: v for k, v in block.items() if k != "min_top1_agreement"}).startswith("FAILED")


@pytest.fixture(scope="module")
def site(board):
    return board / "site"


@NEEDS_CHROMIUM
def test_the_board_and_model_page_show_failed_in_a_browser(board, page, base_url):
    page.goto(f"{base_url}/index.html")
    assert page.locator("td", has_text="FAILED (cosine min").count() == 1
    [failed_page] = [p.name for p in (board / "site" / "models").glob("*.html") if "model-failed" in p.read_text()]
    page.goto(f"{base_url}/models/{failed_page}")
    assert page.locator("#backend-certificate").inner_text().startswith("FAILED")
    assert not page.problems
