"""Every shell and Python snippet of README.md runs as pasted, in README order, after the install command.

How the snippets run and what their marks (`<!-- snippet: KIND -- reason -->`) mean: tests/snippets.py.
The pages under docs/ are run the same way by tests/test_docs_snippets.py.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from snippets import (KINDS, ROOT, TEARDOWN_ABORT, Snippet, ci_install, exercise, make_workspace, parse_snippets, run,
                      shell_commands)

README = ROOT / "README.md"
SNIPPETS = parse_snippets(README.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    return make_workspace(tmp_path_factory, "readme")


def test_readme_has_snippets_and_known_marks():
    assert len(SNIPPETS) >= 4   # the two commands, a first look, the Python example; the rest is in docs/
    for s in SNIPPETS:
        unknown = s.kinds - KINDS
        assert not unknown, f"{s.id}: unknown snippet mark {unknown}; known: {sorted(KINDS)}"
        assert "skip" not in s.kinds or s.reason, f"{s.id}: a skipped snippet must say why"


def test_readme_is_short_and_links_into_the_docs():
    """A newcomer's page: at most about 250 lines, every local link resolving to a file of the checkout."""
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250, f"README.md has {len(text.splitlines())} lines; move reference text to docs/"
    links = re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text)
    assert any(x.startswith("docs/") for x in links)
    missing = [x for x in links if not (ROOT / x).exists()]
    assert not missing, f"README.md links to files that do not exist: {missing}"


def test_the_readme_test_command_is_ci_s_verbatim():
    _, _, ci_command = ci_install()
    install_code = [s.code for s in SNIPPETS if "install" in s.kinds]
    assert any(ci_command in code for code in install_code), f".ci/run's command is in no install snippet: {ci_command}"


def test_parser_reads_marks_continuations_and_console_blocks():
    text = ("<!-- snippet: needs-data, slow -- a release -->\n```bash\nmmbench build \\\n  --task x  # note\n"
            "# only a comment\n\nmmbench run\n```\n\n```console\n$ mmbench list tasks\nshown output\n```\n"
            "```json\n{}\n```\n- a list item:\n  <!-- snippet: skip -- why -->\n  ```python\n  if x:\n      y()\n  ```\n")
    first, second, third = parse_snippets(text)
    assert first.kinds == {"needs-data", "slow"} and first.reason == "a release" and first.line == 2
    assert shell_commands(first.code) == ["mmbench build    --task x  # note", "mmbench run"]
    assert second.language == "shell" and second.code == "mmbench list tasks\n" and not second.kinds
    assert third.code == "if x:\n    y()\n" and third.kinds == {"skip"} and third.reason == "why"


def test_only_an_abort_in_teardown_after_the_last_statement_is_forgiven(tmp_path):
    """Arrow's thread pool can abort the interpreter's exit (apache/arrow#34314): a Python snippet that ran every
    statement and then died so passes, with a warning; an abort before the end, or with another message, fails."""
    import os
    import sys

    (tmp_path / ".venv").symlink_to(Path(sys.executable).parent.parent, target_is_directory=True)
    workspace = (tmp_path, dict(os.environ))
    say = f"import atexit, os, sys\ndef die():\n    sys.stderr.write({TEARDOWN_ABORT!r} + '\\n'); sys.stderr.flush(); os.abort()\n"
    with pytest.warns(UserWarning, match="arrow#34314"):
        done, _ = run(say + "atexit.register(die)\nprint('all done')", "python", workspace)
    assert done.returncode == 0 and done.stdout.strip() == "all done"
    done, _ = run(say + "print('half')\ndie()\nprint('never')", "python", workspace)  # aborted before its end
    assert done.returncode == -6 and done.stdout.strip() == "half"
    other = "import atexit, os, sys\natexit.register(lambda: (sys.stderr.write('boom\\n'), os.abort()))\nprint(1)"
    assert run(other, "python", workspace)[0].returncode == -6
    assert run("raise SystemExit(3)", "python", workspace)[0].returncode == 3


@pytest.mark.parametrize("snippet", SNIPPETS, ids=[s.id for s in SNIPPETS])
def test_snippet(snippet: Snippet, workspace):
    exercise(snippet, workspace, "README")
