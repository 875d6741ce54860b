"""Running the shell and Python snippets of Markdown files as pasted: README.md and every page under docs/.

The snippets run in a copy of the checkout (its tracked files) whose `.venv` is this venv, with `.venv/bin`
first on PATH as the README's install section says, MMBENCH_HOME, HF_HOME and XDG_CACHE_HOME in a
temporary folder, and the hubs offline (HF_HUB_OFFLINE=1, HF_DATASETS_OFFLINE=1). Later snippets use what
earlier ones wrote (a build, then a run, then a report), so the snippets of one test module share one
working folder and run in document order (README order; for docs/, the order of mkdocs.yml's nav).

A snippet that cannot run here is marked by an HTML comment directly above its block:

    <!-- snippet: KIND[, KIND] [-- reason] -->

- needs-network: needs the model hub, a dataset hub or an API. Each of its commands must fail by itself (a
  hang guard of 3 x FAST_S kills it otherwise) with exit code 2 and mmbench's one-line error naming what it could not reach. Skipped, with
  the reason, on a machine that does reach the network.
- needs-data: needs a downloaded release that is not shipped. Each command must fail fast with exit 2 and
  mmbench's error naming the missing file or folder.
- install: a `pip install` line; it is checked against .ci/run (the same constraints file, no extra that
  CI does not install) instead of being run; what follows it in the chain runs.
- slow: runs only with MMBENCH_README_SLOW=1 (minutes on 2 cores); skipped otherwise, the reason shown.
- skip: cannot be exercised by a test at all (root, a Ray cluster, the test suite itself, an edit to the
  package shown as an example); the reason is required and shown.
Unmarked snippets must succeed. One exit is forgiven, with a warning: a Python snippet that ran its last statement
(the runner appends a marker line after it) and then aborted in std::terminate while a native thread pool was torn
down at interpreter exit (`TEARDOWN_ABORT`; apache/arrow#34314).
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CI = ROOT / ".ci" / "run"
LANGUAGES = {"bash": "shell", "sh": "shell", "console": "shell", "python": "python"}
KINDS = {"needs-network", "needs-data", "install", "slow", "skip"}
MARK = re.compile(r"<!--\s*snippet:\s*(?P<kinds>[\w\s,-]*?)\s*(?:--\s*(?P<reason>.*?)\s*)?-->")
FAST_S = 60          # a marked command gives up well within 3x this (the hub's retries alone take ~30 s)
SNIPPET_TIMEOUT_S = 900
SLOW = os.environ.get("MMBENCH_README_SLOW") == "1"
# what mmbench says when it cannot reach a hub or an API
OFFLINE_WORDS = re.compile(r"offline|network|couldn't reach|could not reach|couldn't connect|no answer from", re.I)


@dataclass
class Snippet:
    line: int                  # the line of the opening fence (1-based)
    language: str              # "shell" or "python"
    code: str
    kinds: set[str] = field(default_factory=set)
    reason: str = ""
    # the printed output the page shows for it: (line number, text) of each line of the output block that
    # directly follows the snippet (an unlabelled or `text` fence, only blank lines between), or of a console
    # block's lines that are not `$ ` commands
    shown: list[tuple[int, str]] = field(default_factory=list)

    @property
    def id(self) -> str:
        first = next((x for x in self.code.splitlines() if x.strip()), "")
        return f"L{self.line}:{first[:40]}"


def parse_snippets(text: str) -> list[Snippet]:
    """The bash/sh/console/python blocks of a markdown text, with the marks directly above them."""
    out, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        fence = re.match(r"^(\s*)```(\w*)\s*$", lines[i])   # indented fences too (blocks inside lists)
        if not fence:
            i += 1
            continue
        indent, lang = fence.group(1), fence.group(2)
        end = next(j for j in range(i + 1, len(lines)) if lines[j].strip().startswith("```"))
        language = LANGUAGES.get(lang)
        if language:
            body = [x[len(indent):] if x.startswith(indent) else x for x in lines[i + 1:end]]
            code = "\n".join(body) + "\n"
            if lang == "console":   # `$ command` lines; the rest is shown output
                code = "\n".join(x[2:] for x in body if x.startswith("$ ")) + "\n"
            snippet = Snippet(i + 1, language, code)
            if lang == "console":
                snippet.shown = [(i + 2 + k, x) for k, x in enumerate(body) if x.strip() and not x.startswith("$ ")]
            else:
                snippet.shown = output_block_after(lines, end)
            above = i - 1
            while above >= 0 and lines[above].lstrip().startswith("<!--"):
                mark = MARK.search(lines[above])
                if mark:
                    snippet.kinds |= {k.strip() for k in mark.group("kinds").split(",") if k.strip()}
                    snippet.reason = mark.group("reason") or snippet.reason
                above -= 1
            out.append(snippet)
        i = end + 1
    return out


OUTPUT_FENCE = re.compile(r"^\s*```(text)?\s*$")


def output_block_after(lines: list[str], end: int) -> list[tuple[int, str]]:
    """The lines (1-based number, text) of a printed-output block (an unlabelled or `text` fence) that follows the
    fence closing at `end` with only blank lines between; none when the next thing is not one."""
    k = end + 1
    while k < len(lines) and not lines[k].strip():
        k += 1
    if k >= len(lines) or not OUTPUT_FENCE.match(lines[k]):
        return []
    close = next(j for j in range(k + 1, len(lines)) if lines[j].strip().startswith("```"))
    return [(j + 1, lines[j]) for j in range(k + 1, close)]


def shell_commands(code: str) -> list[str]:
    """The commands of a shell snippet: continuation lines joined, blank and comment-only lines dropped."""
    commands, pending = [], ""
    for line in code.splitlines():
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        command = (pending + line).strip()
        pending = ""
        if command and not command.startswith("#"):
            commands.append(command)
    return commands


def ci_install() -> tuple[str, set[str], str]:
    """.ci/run's constraints file, the extras it installs and its test command (the README's, verbatim)."""
    text = CI.read_text()
    command = next(x for x in text.splitlines() if "pip install" in x and not x.lstrip().startswith("#"))
    constraints = re.search(r"-c\s+(\S+)", command).group(1)
    spec = re.search(r"""["']?\.(\[[\w,\s-]*\])?["']?(?=\s|$|&)""", command.split("pip install", 1)[1])
    extras = {e.strip() for e in (spec.group(1) or "[]")[1:-1].split(",") if e.strip()}
    return constraints, extras, command.strip()


def network_reachable() -> bool:
    try:
        socket.getaddrinfo("huggingface.co", 443)
        return True
    except OSError:
        return False


def make_workspace(tmp_path_factory, name: str = "readme"):
    """A copy of the checkout after the install command: its tracked files, with this venv as `.venv`."""
    base = tmp_path_factory.mktemp(name)
    work = base / "checkout"
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True)
    if listed.returncode == 0:
        for tracked in filter(None, listed.stdout.decode().split("\0")):
            source = ROOT / tracked
            if source.is_file():
                (work / tracked).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, work / tracked)
    else:  # not a git checkout (an unpacked archive): its files, less the venv and caches
        shutil.copytree(ROOT, work, ignore=shutil.ignore_patterns(".venv", ".git", "__pycache__", "*.egg-info"))
    venv = Path(sys.executable).parent.parent
    (work / ".venv").symlink_to(venv, target_is_directory=True)
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "PYTHONPATH"}
    env.update({"PATH": f"{work / '.venv' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
                "VIRTUAL_ENV": str(work / ".venv"), "MMBENCH_HOME": str(base / "home"),
                "HF_HOME": str(base / "hf"), "XDG_CACHE_HOME": str(base / "cache"), "MPLBACKEND": "Agg",
                "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    return work, env


# A Python snippet prints this line after its last statement; the runner takes it out of what the snippet printed.
RAN_TO_ITS_END = "<<snippet: ran to its end>>"
# What libstdc++ prints when a process aborts in std::terminate; Arrow's native thread pool can end that way while
# it is torn down at interpreter exit, after every Python statement has run (apache/arrow#34314; once in the suite
# so far, an AMD EPYC under load: exit -6 after the snippet's last line had printed).
TEARDOWN_ABORT = "terminate called without an active exception"


def run(code: str, language: str, workspace, timeout: float = SNIPPET_TIMEOUT_S) -> tuple[subprocess.CompletedProcess, float]:
    work, env = workspace
    if language == "python":
        end = "\n" + RAN_TO_ITS_END + "\n"
        code = f"{code}\n\nimport sys as _snippet_sys\n_snippet_sys.stdout.write({end!r})\n_snippet_sys.stdout.flush()\n"
    argv = ["bash", "-e", "-o", "pipefail", "-c", code] if language == "shell" else \
        [str(work / ".venv" / "bin" / "python"), "-c", code]
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=timeout)
    return (past_teardown_abort(done) if language == "python" else done), time.perf_counter() - start


def past_teardown_abort(done: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    """A Python snippet's result with the end marker taken out of its output; one that ran every statement and then
    aborted in a native library's teardown (SIGABRT, `TEARDOWN_ABORT` the last line on stderr) counts as exit 0, with
    a warning. Anything else keeps its exit code: an abort before the last statement, another signal, another error."""
    lines = done.stdout.splitlines()
    ended = RAN_TO_ITS_END in lines
    stdout = "\n".join(line for line in lines if line != RAN_TO_ITS_END)
    err = done.stderr.strip().splitlines()
    code = done.returncode
    if ended and code in (-6, 134) and err and err[-1].strip() == TEARDOWN_ABORT:
        warnings.warn(f"a snippet ran to its end and then aborted at interpreter exit ({TEARDOWN_ABORT}; "
                      "apache/arrow#34314): counted as passed", stacklevel=2)
        code = 0
    return subprocess.CompletedProcess(done.args, code, stdout, done.stderr)


def tail(text: str, n: int = 25) -> str:
    return "\n".join(text.strip().splitlines()[-n:])


def check_install(snippet: Snippet) -> str:
    """Check the snippet's pip line against .ci/run; return what the chain runs after it."""
    constraints, ci_extras, _ = ci_install()
    parts = [p.strip() for p in snippet.code.strip().split("&&")]
    pip = [p for p in parts if "pip install" in p]
    assert pip, f"{snippet.id}: marked install but has no `pip install`"
    for line in pip:
        assert f"-c {constraints}" in line, f"{snippet.id}: does not name CI's constraints file {constraints}"
        target = shlex.split(line.split("pip install", 1)[1])
        spec = next(t for t in target if t.startswith("."))
        extras = set(re.findall(r"[\w-]+", spec[1:]))
        assert extras <= ci_extras, f"{snippet.id}: installs extras {extras - ci_extras} that .ci/run does not"
    rest = parts[parts.index(pip[-1]) + 1:]
    return " && ".join(rest)


def check_shown(snippet: Snippet, printed: str | tuple[str, str], workspace, where: str) -> None:
    """The output block under the snippet against what it printed (tests/shown_output.py); with
    MMBENCH_DOCS_REFRESH=1 the page's stale lines are rewritten instead."""
    from shown_output import REFRESH, refresh, stale_lines

    work = str(workspace[0])
    stale = stale_lines(snippet.shown, printed, work)
    if stale and REFRESH:
        refresh(ROOT / ("README.md" if where == "README" else where), stale, work)
        stale = [s for s in stale if s.printed is None]
    assert not stale, (f"{where}: the output shown under the snippet of line {snippet.line} is not what it prints "
                       "(refresh the page with `python ci/refresh_docs.py`):\n"
                       + "\n".join(s.message(where) for s in stale)
                       + f"\n--- printed\n{tail(printed if isinstance(printed, str) else chr(10).join(printed), 40)}")


def exercise(snippet: Snippet, workspace, where: str = "README") -> None:
    """Run (or check, or skip) one snippet as its marks say; `where` names its file in messages."""
    code = snippet.code
    if "install" in snippet.kinds:
        code = check_install(snippet)   # checked even where what follows it is skipped
    if "skip" in snippet.kinds:
        pytest.skip(f"{where} line {snippet.line}: {snippet.reason}")
    if not code.strip():
        return
    if "slow" in snippet.kinds and not SLOW:
        pytest.skip(f"{where} line {snippet.line}: slow ({snippet.reason or 'minutes on 2 cores'}); "
                    "MMBENCH_README_SLOW=1 runs it")
    marked = snippet.kinds & {"needs-network", "needs-data"}
    if not marked:
        done, seconds = run(code, snippet.language, workspace)
        assert done.returncode == 0, (f"{where} line {snippet.line} failed (exit {done.returncode}, {seconds:.0f}s):\n"
                                      f"{code}\n--- stdout\n{tail(done.stdout)}\n--- stderr\n{tail(done.stderr)}")
        if snippet.shown:
            check_shown(snippet, (done.stdout, done.stderr), workspace, where)
        return
    if "needs-network" in marked and network_reachable():
        pytest.skip(f"{where} line {snippet.line}: this machine reaches the network; the offline failure is not checkable")
    assert snippet.language == "shell", f"{snippet.id}: only shell snippets may be marked {marked}"
    errors = []
    for command in shell_commands(code):
        try:  # a hang guard, not a speed check: mmbench must give up by itself, not be killed
            done, _ = run(command, "shell", workspace, timeout=FAST_S * 3)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{where} line {snippet.line}: `{command}` did not give up within "
                                 f"{FAST_S * 3}s") from None
        err = done.stderr.strip().splitlines()
        at = f"{where} line {snippet.line}: `{command}`"
        assert done.returncode == 2, f"{at}: exit {done.returncode}, not 2\n{tail(done.stdout)}\n{tail(done.stderr)}"
        assert err and err[-1].startswith("mmbench: error: "), f"{at}: no mmbench error line:\n{tail(done.stderr)}"
        errors.append(err[-1])
    if "needs-network" in marked:  # later commands may fail for want of what the first could not fetch
        assert any(OFFLINE_WORDS.search(e) for e in errors), \
            f"{where} line {snippet.line}: no error says what could not be reached: {errors}"
