"""Printed outputs in the docs are compared with what their commands print (tests/shown_output.py), and the figures
the pages quote from the reproduction matrix equal the matrix's (ci/refresh_docs.py rewrites both)."""
from __future__ import annotations

import sys

import pytest

from shown_output import normalise, stale_lines
from snippets import ROOT, check_shown, make_workspace, parse_snippets

sys.path.insert(0, str(ROOT / "ci"))
from refresh_docs import MARK, figure_text, matrix_figures, quoted_figures  # noqa: E402


def test_a_changed_number_is_stale_and_volatile_parts_are_not():
    shown = [(10, "task x  model bm25  pool set 2cd3c321be25"), (11, "..."), (12, "micro: P@1 0.458  R@5 0.781"),
             (13, "results written to runs/x in 3.1 s")]
    printed = ("task x  model bm25  pool set 2cd3c321be25\nnoise\nmicro: P@1 0.458  R@5 0.781\n"
               "results written to /tmp/w/runs/x in 12.7 s\n")
    assert stale_lines(shown, printed, "/tmp/w") == []
    changed = printed.replace("0.458", "0.396")
    (stale,) = stale_lines(shown, changed, "/tmp/w")
    assert stale.line == 12 and "0.396" in stale.printed and "0.458" in stale.shown
    (missing,) = stale_lines([(5, "a line nobody prints 1")], printed)
    assert missing.printed is None
    assert normalise("4,276,255 tokens/s, 434 MB, 2026-12-07T10:00:00Z") == "<rate> tokens/s, <memory>, <date>"


def test_the_parser_pairs_a_command_with_the_output_block_under_it():
    text = "```bash\nmmbench show x\n```\n\n```\nline one\n...\n```\n\n```bash\nls\n```\nprose\n```\nnot output\n```\n"
    first, second = parse_snippets(text)
    assert first.shown == [(6, "line one"), (7, "...")]
    assert second.shown == []   # prose between: not its output


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    return make_workspace(tmp_path_factory, "outputs")


def test_a_changed_output_line_in_a_docs_page_fails_the_docs_test(workspace):
    """docs/long-contexts.md shows `mmbench list tasks`' Visual Grounding line; the same page with that line
    changed fails, naming the page line and what the command printed; the page as it is passes."""
    page = ROOT / "docs" / "long-contexts.md"
    (snippet,) = [s for s in parse_snippets(page.read_text(encoding="utf-8")) if s.code == "mmbench list tasks\n"]
    from snippets import run

    done, _ = run(snippet.code, snippet.language, workspace)
    assert done.returncode == 0
    check_shown(snippet, done.stdout, workspace, "docs/long-contexts.md")   # today's page passes
    number, line = snippet.shown[0]
    snippet.shown[0] = (number, line.replace("v1.4", "v1.3"))
    with pytest.raises(AssertionError, match=rf"docs/long-contexts.md line {number} shows .*v1\.3.*printed .*v1\.4"):
        check_shown(snippet, done.stdout, workspace, "docs/long-contexts.md")


def test_quoted_matrix_figures_equal_the_matrix():
    """Every `<!--repro:task/model/limit/figure-->0.458` in README and docs is the matrix's figure at the decimals
    shown, every `<!--sample:task/items-->7,200` the shipped sample size (ci/refresh_docs.py rewrites them)."""
    figures = matrix_figures()
    quoted = quoted_figures()
    assert sum(k.startswith("repro:") for _, _, k, _ in quoted) >= 6, "the task pages quote the matrix's figures"
    assert sum(k.startswith("sample:") for _, _, k, _ in quoted) >= 5, "the task index quotes each sample's size"
    for path, line, key, shown in quoted:
        assert key in figures, f"{path}:{line}: {key} is not in the reproduction matrix"
        want = figure_text(figures[key], shown)
        assert shown == want, f"{path}:{line}: {key} shows {shown}, the matrix has {want} (python ci/refresh_docs.py)"


def test_a_quoted_figure_that_differs_from_the_matrix_is_found(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("BM25 P@1 <!--repro:logical_summarization/bm25/all/precision_at_1-->0.500 here\n")
    ((_, line, key, shown),) = quoted_figures([page])
    assert (line, key, shown) == (1, "repro:logical_summarization/bm25/all/precision_at_1", "0.500")
    assert figure_text(matrix_figures()[key], shown) != shown   # the matrix has 0.458
    assert MARK.search(page.read_text())


def _output_blocks(text: str) -> list[int]:
    """Line numbers of the blocks that show printed output: unlabelled or `text` fences, and `console` blocks."""
    import re

    out, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        fence = re.match(r"^\s*```(\w*)\s*$", lines[i])
        if not fence:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].strip().startswith("```"))
        if fence.group(1) in ("", "text", "console"):
            out.append(i + 1)
        i = end + 1
    return out


# Output blocks not yet compared with a run, per page: printed outputs of commands that need data, a model or a
# cluster the tests do not have (illustrations), diagrams and layouts that are not output. The count may only
# go down: a new output block is put under the command that prints it, so the snippet tests compare it.
NOT_YET_COMPARED = {"architecture.md": 1, "efficiency.md": 1,
                    "long-contexts.md": 3, "performance.md": 1,
                    "statistics-and-reports.md": 1,
                    # issue 45 added the memory refusal line (it needs an address-space limit to print)
                    "reliability-guide.md": 5,
                    "validity-and-leaks.md": 2, "verify-backend.md": 2}


def test_output_blocks_are_compared_or_counted_as_not_yet():
    """Every printed-output block of README and docs is either the output of the runnable command above it (the
    snippet tests compare it) or counted in NOT_YET_COMPARED, whose counts may only shrink."""
    from test_docs_snippets import PAGES

    found: dict[str, int] = {}
    for page, path in [("README.md", ROOT / "README.md"), *((p, ROOT / "docs" / p) for p in PAGES)]:
        text = path.read_text(encoding="utf-8")
        compared = {n for s in parse_snippets(text) if s.shown and not s.kinds for n, _ in s.shown[:1]}
        compared |= {s.line for s in parse_snippets(text) if s.shown and not s.kinds and s.language == "shell"}
        left = [n for n in _output_blocks(text) if n + 1 not in compared and n not in compared]
        if left:
            found[page] = len(left)
    grown = {p: (n, NOT_YET_COMPARED.get(p, 0)) for p, n in found.items() if n > NOT_YET_COMPARED.get(p, 0)}
    assert not grown, f"output blocks no test compares (page: found, allowed): {grown}"
    shrunk = {p: (found.get(p, 0), n) for p, n in NOT_YET_COMPARED.items() if found.get(p, 0) < n}
    assert not shrunk, f"fewer uncompared blocks than NOT_YET_COMPARED allows: lower it {shrunk}"


def test_refresh_docs_help_prints_the_usage_and_rewrites_nothing(capsys, monkeypatch):
    """`python ci/refresh_docs.py --help` once ran the whole refresh (every docs snippet, pages rewritten)."""
    import refresh_docs

    monkeypatch.setattr(refresh_docs, "refresh_figures", lambda: pytest.fail("--help rewrote the figures"))
    with pytest.raises(SystemExit) as done:
        refresh_docs.main(["--help"])
    assert done.value.code == 0 and "--figures" in capsys.readouterr().out
    with pytest.raises(SystemExit) as bad:
        refresh_docs.main(["--fgures"])
    assert bad.value.code == 2
