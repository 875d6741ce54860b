"""The files every project has: the licence (and the wheel that ships it), the changelog, the contributing guide
and the citation file."""
from __future__ import annotations

import configparser
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
# The section titles of the Apache License 2.0, in order (https://www.apache.org/licenses/LICENSE-2.0).
APACHE_SECTIONS = ["Definitions", "Grant of Copyright License", "Grant of Patent License", "Redistribution",
                   "Submission of Contributions", "Trademarks", "Disclaimer of Warranty", "Limitation of Liability",
                   "Accepting Warranty or Additional Liability"]


def check_apache_text(text: str) -> None:
    assert text.lstrip().startswith("Apache License") and "Version 2.0, January 2004" in text
    found = [m.group(2) for m in re.finditer(r"^\s*(\d)\. ([A-Z][\w ]+?)\.", text, re.M)]
    assert found == APACHE_SECTIONS, f"the licence's sections are {found}"
    assert "END OF TERMS AND CONDITIONS" in text and "APPENDIX: How to apply the Apache License" in text


def test_license_is_the_full_apache_2_text_the_package_declares():
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    assert cfg["metadata"]["license"] == "Apache-2.0" and cfg["metadata"]["license_files"].strip() == "LICENSE"
    check_apache_text((ROOT / "LICENSE").read_text(encoding="utf-8"))


def test_the_wheel_ships_the_licence(tmp_path):
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", str(ROOT),
                           "-w", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    wheel = zipfile.ZipFile(next(tmp_path.glob("mmbench-*.whl")))
    licence = [n for n in wheel.namelist() if re.search(r"\.dist-info/licenses/LICENSE$", n)]
    assert licence, f"no LICENSE in the wheel's metadata: {[n for n in wheel.namelist() if 'dist-info' in n]}"
    check_apache_text(wheel.read(licence[0]).decode("utf-8"))
    metadata = wheel.read(next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    assert "License-File: LICENSE" in metadata


def test_citation_file_names_mmbench_and_the_three_designs():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert cff["cff-version"] == "1.2.0" and cff["message"] and cff["authors"]
    assert cff["title"].startswith("mmbench") and cff["license"] == "Apache-2.0"
    import mmbench

    assert cff["version"] == mmbench.__version__
    titles = [r["title"] for r in cff["references"]]
    assert any(t.startswith("MMLongEmbed") for t in titles)
    assert any("Hard-Negative Text-to-Image Retrieval" in t for t in titles)
    assert any("Evaluating Vision Encoders" in t for t in titles)   # RAVEL
    for ref in cff["references"]:
        assert ref["type"] and ref["authors"], f"reference {ref['title']!r} lacks a type or authors"


def test_changelog_and_contributing_guide():
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert changelog.startswith("# Changelog") and "## Unreleased" in changelog
    contributing = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    for part in ("## Set-up", "## Tests, lint and the docs", "## The layering rule", "## The checklist a change must pass",
                 "docs/howto/add-a-task.md", "docs/howto/add-a-model.md"):
        assert part in contributing, f"CONTRIBUTING.md lacks {part!r}"
    ci = (ROOT / ".ci" / "run").read_text()
    install = next(line for line in contributing.splitlines() if "pip install" in line)
    # contributors install editable (an edit is what `import mmbench` runs, issue 47); CI installs the same
    # requirements the way users do, non-editable
    assert " -e " in install, "CONTRIBUTING.md's set-up is not an editable install"
    assert install.replace(" -e ", " ") in ci, "CONTRIBUTING.md's set-up command is not .ci/run's install (less -e)"
