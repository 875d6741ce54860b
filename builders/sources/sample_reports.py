"""Offline summarization sources: reports cut from the text that ships with Python, and page images.

The corpus is real prose that ships with Python: the Language Reference topics of
`pydoc_data.topics`, then the docstrings of a fixed list of standard-library modules (read with
`ast`, never imported), module by module in sorted order, each in source order. The Language Reference alone
(about 106K Qwen3 tokens) cannot supply disjoint 16–32K-token documents for every bin.

`natural_reports(bins, per_bin, counter)` cuts consecutive, disjoint runs of corpus paragraphs
whose own length falls inside each bin's range (spread over the range, never padded), so every
bin gets its own documents; within each bin the two genres (Language Reference, docstrings)
alternate. `natural_paged_documents` does the same for page-image documents by page count,
each followed by its own unseen extension pages. `pydoc_reports()` keeps the short
(about 2K-token) reports of earlier versions for tests of the readers.

Each report gets a project-written summary that draws on its opening, middle and closing parts, so
it needs the whole report; it names what each part is about in words of its own, never quoting a run of the report. A few instead quote one paragraph, a local excerpt the filter drops:
every ninth of `pydoc_reports()`, and one extra report in each natural bin but the largest of
several. Page-image documents are rendered with PIL's bitmap font.
"""
from __future__ import annotations

import re
import textwrap
from functools import lru_cache
from typing import Iterator, Sequence

from PIL import Image as PILImage, ImageDraw, ImageFont

from mmbench.builders.sources.govreport import Report
from mmbench.builders.sources.mmlongbench import PagedDocument

PAGE_SIZE = (512, 640)       # 16 × 20 = 320 unified tokens per page
CHAR_WIDTH = 6
LINE_HEIGHT = 16
MARGIN = 32


def _topics() -> list[tuple[str, str]]:
    import pydoc_data.topics as topics

    return [(k, topics.topics[k]) for k in sorted(topics.topics)]


def _paragraphs(text: str) -> list[str]:
    return [" ".join(p.split()) for p in re.split(r"\n\s*\n", text) if p.strip()]


def _prose(paragraphs: list[str]) -> list[int]:
    """Indices of paragraphs that read as prose (not grammar rules or code)."""
    return [i for i, p in enumerate(paragraphs) if len(p.split()) >= 12 and "::=" not in p and not p.startswith(">>>")]


COMMON = frozenset("""about above after again against along although among another because before being below
between both cannot could does doing during each either every following further given having however itself might
must never often only other others otherwise same should since some still such than that their them then there
therefore these they this those through under unless until upon used uses using very what when where whether which
while will with within without would your""".split())


def _words(paragraph: str) -> set[str]:
    """The paragraph's distinctive-looking words: letters only, at least five of them, not a common function word
    (a paragraph of code with none: its words of three letters or more)."""
    words = re.findall(r"[a-z]+", paragraph.lower())
    return {w for w in words if len(w) >= 5 and w not in COMMON} or {w for w in words if len(w) >= 3}


def _keywords(ps: list[str], i: int, k: int = 4) -> str:
    """`k` words of paragraph i that the rest of the report uses least (longest first on ties), alphabetical and
    joined as a list: the summary names what a part is about without quoting it (no run of its words)."""
    counts: dict[str, int] = {}
    for j, p in enumerate(ps):
        if j != i:
            for w in _words(p):
                counts[w] = counts.get(w, 0) + 1
    picked = sorted(sorted(_words(ps[i]), key=lambda w: (counts.get(w, 0), -len(w), w))[:k])
    return ", ".join(picked[:-1]) + f" and {picked[-1]}" if len(picked) > 1 else "".join(picked)


def _summary(topic_names: list[str], ps: list[str], excerpt: bool) -> str | None:
    """The templated summary of a report (a one-paragraph quote if `excerpt`), or None when the report
    has too little prose to summarise.

    It names what the opening, middle and closing prose paragraphs are about by words the rest of the report
    uses least, in alphabetical order, and never quotes the report's topic names or a run of its sentences: a
    summary that copied them (as 2.2's did) let a matcher of query 4-grams find the report in every pool, Hard ones
    included. It states no count either: 2.4's "spans N subjects over M paragraphs" named the only candidate with M
    text segments in every GovReport-layout pool (issue 43)."""
    prose = _prose(ps)
    if len(ps) < 4 or len(prose) < 3:
        return None
    if excerpt:
        return f"This report quotes Python's documentation: {' '.join(ps[prose[len(prose) // 2]].split()[:60])}"
    parts = [_keywords(ps, i) for i in (prose[0], prose[len(prose) // 2], prose[-1])]
    if not all(parts):
        return None
    return ("This report from Python's documentation covers its subjects in turn. "
            f"Its opening concerns {parts[0]}. "
            f"Midway it concerns {parts[1]}. "
            f"At the close it concerns {parts[2]}.")


@lru_cache(maxsize=4)
def pydoc_reports(report_chars: int = 9000) -> tuple[Report, ...]:
    """Consecutive Language Reference topics grouped into short reports (about 2K tokens) with templated summaries."""
    chunks: list[tuple[list[str], list[str]]] = []   # (topic names, paragraphs)
    names: list[str] = []
    paras: list[str] = []
    for name, text in _topics():
        for p in _paragraphs(text):
            if not names or names[-1] != name:
                names.append(name)
            paras.append(p)
            if sum(len(x) for x in paras) >= report_chars:
                chunks.append((names, paras))
                names, paras = [name], []
    if paras:
        chunks.append((names, paras))
    reports = []
    for k, (topic_names, ps) in enumerate(chunks):
        summary = _summary(topic_names, ps, k % 9 == 4)   # every ninth report quotes one paragraph
        if summary is not None:
            reports.append(Report(f"pydoc-r{k:02d}", summary, ps))
    return tuple(reports)


# ---- natural-length reports ---------------------------------------------------------------

# Standard-library modules and packages whose docstrings form the corpus, in this order: pure-Python
# ones that every CPython 3.11+ install has on every platform (not those Linux distributions ship
# apart, such as tkinter, idlelib, turtle, lib2to3, distutils or ensurepip, nor ones removed in 3.13),
# so the corpus depends on the Python version only, not on how Python was installed.
STDLIB_MODULES = tuple(sorted("""
    __future__ _collections_abc _compression _markupbase _py_abc _pydecimal _pyio _sitebuiltins _strptime
    _threading_local _weakrefset abc argparse ast asyncio base64 bdb bisect bz2 cProfile calendar cmd code codecs
    codeop collections colorsys compileall concurrent configparser contextlib contextvars copy copyreg csv ctypes
    curses dataclasses datetime dbm difflib dis doctest email enum filecmp fileinput fnmatch fractions ftplib
    functools genericpath getopt getpass gettext glob graphlib gzip hashlib heapq hmac html http imaplib importlib
    inspect io ipaddress json keyword linecache locale logging lzma mailbox mimetypes modulefinder multiprocessing
    netrc ntpath nturl2path numbers opcode operator optparse os pathlib pdb pickle pickletools pkgutil platform
    plistlib poplib posixpath pprint profile pstats py_compile pyclbr pydoc queue quopri random re reprlib
    rlcompleter runpy sched secrets selectors shelve shlex shutil signal site smtplib socket socketserver sqlite3
    ssl stat statistics string stringprep struct subprocess symtable sysconfig tabnanny tarfile tempfile textwrap
    threading timeit token tokenize tomllib trace traceback tracemalloc tty types typing unittest urllib uuid venv
    warnings wave weakref webbrowser wsgiref xml xmlrpc zipapp zipfile zipimport zoneinfo
""".split()))


def _docstrings(tree) -> list[str]:
    """Docstrings of a module, its classes and functions, in source order."""
    import ast

    out: list[str] = []

    def visit(node) -> None:
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node)
            if doc:
                out.append(doc)
        for child in getattr(node, "body", []):
            if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(child)

    visit(tree)
    return out


@lru_cache(maxsize=1)
def _stdlib_files() -> tuple[tuple[str, str], ...]:
    """(module name, file path) of STDLIB_MODULES (a package: its files in sorted order, tests left out)."""
    import sysconfig
    from pathlib import Path

    root = Path(sysconfig.get_paths()["stdlib"])
    out = []
    for name in STDLIB_MODULES:
        single, package = root / f"{name}.py", root / name
        if single.is_file():
            out.append((name, str(single)))
        elif package.is_dir():
            for path in sorted(package.rglob("*.py")):
                rel = path.relative_to(root)
                if not {"test", "tests", "idle_test"} & set(rel.parts):
                    out.append((".".join(rel.with_suffix("").parts), str(path)))
    return tuple(out)


@lru_cache(maxsize=None)
def _module_paragraphs(path: str) -> tuple[str, ...]:
    import ast

    try:
        with open(path, "rb") as fh:
            tree = ast.parse(fh.read())
    except (SyntaxError, ValueError, OSError):
        return ()
    return tuple(p for d in _docstrings(tree) for p in _paragraphs(d))


def _stdlib_modules():
    """(module name, paragraphs of its docstrings), module by module (parsed lazily, once per process);
    a module this Python lacks is left out."""
    for name, path in _stdlib_files():
        paras = _module_paragraphs(path)
        if paras:
            yield name, paras


def corpus_paragraphs():
    """(source name, paragraph) over the whole corpus: Language Reference topics, then stdlib docstrings.

    A paragraph is given once: the topics repeat each other ('compound' holds 'if', 'while', ...)
    and docstrings repeat boilerplate, and a repeat would let one document quote another."""
    reference, docstrings = corpus_streams()
    yield from reference
    yield from docstrings


def corpus_streams():
    """The two genres of the corpus as two streams sharing one 'seen' set: (Language Reference, docstrings)."""
    seen: set[str] = set()

    def fresh(pairs):
        for name, paras in pairs:
            for p in paras:
                if p not in seen:
                    seen.add(p)
                    yield name, p

    return (fresh((name, _paragraphs(text)) for name, text in _topics()), fresh(_stdlib_modules()))


def _spread(j: int) -> float:
    """A deterministic fraction in (0.02, 0.42) for the j-th document of a bin (golden-ratio
    steps: spread, not sorted; the lower part of the range, so the corpus suffices for the default
    sample)."""
    return 0.02 + 0.4 * ((0.5 + j * 0.6180339887498949) % 1.0)


def _cut(stream, token_count, lo: int, hi: int, frac: float):
    """Consecutive paragraphs from `stream` whose tokens land in (lo, hi], near lo + frac·(hi - lo).
    Returns (names, paragraphs) or None when the stream runs out."""
    target = lo + frac * (hi - lo)
    names, paras, total = [], [], 0
    for name, p in stream:
        n = token_count(p)
        if total + n > hi:
            if total > lo:
                break
            continue                                  # a paragraph that would overshoot is skipped
        paras.append(p)
        total += n
        if not names or names[-1] != name:
            names.append(name)
        if total >= target:
            return names, paras
    return (names, paras) if total > lo else None


def _with_excerpt(b: int, n_bins: int, per_bin: int) -> tuple[int, bool]:
    """(reports to make for bin number b, whether its 5th is an excerpt): the largest of several bins
    gets none (its documents are the costliest text), every other bin one more than needed."""
    extra = per_bin >= 4 and (b < n_bins - 1 or n_bins == 1)
    return per_bin + extra, extra


def natural_reports(bins: Sequence[tuple[int, int]], per_bin: int, token_count) -> list[Report]:
    """`per_bin` reports for each (lo, hi] range, plus an excerpt summary the filter should drop (see
    `_with_excerpt`), cut from consecutive, disjoint corpus text; ids say the bin and the number."""
    from mmbench.data.tokens import length_label

    streams = corpus_streams()
    reports = []
    wanted = [_with_excerpt(b, len(bins), per_bin)[0] for b in range(len(bins))]
    for b, (lo, hi) in enumerate(bins):
        n, excerpt = _with_excerpt(b, len(bins), per_bin)
        made = 0
        while made < n:
            # both genres in every bin, so length is not confounded with one kind of text: a third of the
            # documents from the Language Reference (too short to give half of every bin), the rest docstrings
            first = 0 if (b + made) % 3 == 0 else 1
            got = _cut(streams[first], token_count, lo, hi, _spread(made)) or \
                _cut(streams[1 - first], token_count, lo, hi, _spread(made))
            if got is None:
                per_bin_made = ", ".join(f"{length_label(h)} {made if k == b else (wanted[k] if k < b else 0)} of "
                                         f"{wanted[k]}" for k, (_, h) in enumerate(bins))
                raise ValueError(f"the sample corpus ran out of text for the ({lo}, {hi}] bin; use fewer queries "
                                 f"(reports of natural length made per bin: {per_bin_made})")
            names, ps = got
            summary = _summary(names, ps, excerpt and made == 4)
            if summary is None:
                continue
            reports.append(Report(f"nat-{length_label(hi)}-{made:02d}", summary, ps))
            made += 1
    return reports


_ASCII = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-", "\u2014": "--",
                        "\u2026": "...", "\u2022": "*", "\u2192": "->"})


def _latin1(text: str) -> str:
    """What PIL's bitmap font can draw: typographic punctuation simplified, the rest as '?'."""
    return text.translate(_ASCII).encode("latin-1", "replace").decode("latin-1")


def _layout(text: str, size: tuple[int, int], scale: int) -> list[list[str]]:
    """The wrapped lines of each page (a blank line between paragraphs) at `size`, glyphs `scale` times larger."""
    w, h = size[0] // scale, size[1] // scale
    margin = MARGIN // scale
    chars = max(20, (w - 2 * margin) // CHAR_WIDTH)
    per_page = max(1, (h - 2 * margin) // LINE_HEIGHT)
    lines: list[str] = []
    for p in _paragraphs(_latin1(text)) or [_latin1(text)]:
        lines.extend(textwrap.wrap(p, chars) + [""])
    return [lines[i:i + per_page] for i in range(0, len(lines), per_page)]


def _draw(lines: list[str], number: int, size: tuple[int, int], scale: int) -> PILImage.Image:
    w, h = size[0] // scale, size[1] // scale
    margin = MARGIN // scale
    font = ImageFont.load_default_imagefont()   # PIL's bitmap font: 6 px per character, fast to draw
    img = PILImage.new("L", (w, h), 255)          # grey levels: a third of the memory of RGB, same pixels
    d = ImageDraw.Draw(img)
    for i, line in enumerate(lines):
        d.text((margin, margin + i * LINE_HEIGHT), line, fill=20, font=font)
    d.text((w // 2 - 8, h - margin + 4 // scale), str(number), fill=90, font=font)
    # nearest-neighbour enlargement: exact integer arithmetic, the same bytes on every machine
    return img if scale == 1 else img.resize(size, PILImage.Resampling.NEAREST)


def render_pages(text: str, size: tuple[int, int] = PAGE_SIZE, scale: int = 1) -> list[PILImage.Image]:
    """Typeset plain text onto white pages: wrapped lines, blank line between paragraphs."""
    return [_draw(lines, k + 1, size, scale) for k, lines in enumerate(_layout(text, size, scale))]


NATURAL_PAGE_SCALE = 2      # natural page documents: glyphs twice as large, about 150 text tokens a page


def _lines_per_page(size: tuple[int, int], scale: int) -> tuple[int, int]:
    w, h = size[0] // scale, size[1] // scale
    margin = MARGIN // scale
    return max(20, (w - 2 * margin) // CHAR_WIDTH), max(1, (h - 2 * margin) // LINE_HEIGHT)


def _take_pages(stream, pages: int, size: tuple[int, int], scale: int):
    """(names, paragraphs) filling at most `pages` pages, at least pages - 1 (None when the stream runs out)."""
    chars, per_page = _lines_per_page(size, scale)
    names, paras, lines = [], [], 0
    for name, p in stream:
        n = len(textwrap.wrap(_latin1(p), chars)) + 1
        if lines + n > pages * per_page:
            if lines > (pages - 1) * per_page:
                return names, paras
            continue
        paras.append(p)
        lines += n
        if not names or names[-1] != name:
            names.append(name)
    return None


def natural_paged_documents(bins: Sequence[tuple[int, int]], per_bin: int, size: tuple[int, int] = PAGE_SIZE,
                            scale: int = NATURAL_PAGE_SCALE) -> Iterator[PagedDocument]:
    """`per_bin` page documents for each (lo, hi] token range, their page counts spread over the
    range, each followed by its own unseen extension (the corpus text right after it, half as many
    pages plus one). Documents and extensions are disjoint corpus text. Made one at a time (a 32K
    document is about 100 page images), so a caller can store each before the next is drawn."""
    from mmbench.data.tokens import length_label
    from mmbench.data.tokens import image_tokens

    per_page = image_tokens(*size)
    streams = corpus_streams()
    for b, (lo, hi) in enumerate(bins):
        first, last = lo // per_page + 1, hi // per_page
        if first > last:
            raise ValueError(f"no whole number of {size[0]}x{size[1]} pages fits the ({lo}, {hi}] bin")
        n, excerpt = _with_excerpt(b, len(bins), per_bin)
        made = 0
        while made < n:
            pages = first + round(_spread(made) * (last - first))
            stream = streams[(b + made) % 2]   # the genres alternate within a bin, as in natural_reports
            doc = _take_pages(stream, pages, size, scale)
            if doc is None:
                stream = streams[1 - (b + made) % 2]
                doc = _take_pages(stream, pages, size, scale)
            ext = _take_pages(stream, pages // 2 + 1, size, scale)
            if doc is None or ext is None:
                raise ValueError(f"the sample corpus ran out of text for the ({lo}, {hi}] page bin; use fewer queries")
            summary = _summary(*doc, excerpt and made == 4)
            if summary is None:
                continue
            did = f"pages-{length_label(hi)}-{made:02d}"
            body, more = _layout("\n\n".join(doc[1]), size, scale), _layout("\n\n".join(ext[1]), size, scale)
            yield PagedDocument(did, summary, [_draw(x, i + 1, size, scale) for i, x in enumerate(body)],
                                [_draw(x, len(body) + i + 1, size, scale) for i, x in enumerate(more)],
                                [f"{did}/p{i + 1}" for i in range(len(body))],
                                [f"{did}-ext/p{len(body) + i + 1}" for i in range(len(more))],
                                [" ".join(x) for x in body])
            made += 1


def paged_documents(n: int | None = None, reports: tuple[Report, ...] | None = None) -> list[PagedDocument]:
    """Up to `n` documents: even-numbered reports as page images, the next report's pages as extension."""
    reports = reports or pydoc_reports()
    out: list[PagedDocument] = []
    for i in range(0, len(reports) - 1, 2):
        if n is not None and len(out) >= n:
            break
        r, nxt = reports[i], reports[i + 1]
        pages, ext = render_pages(r.text), render_pages(nxt.text)
        out.append(PagedDocument(f"pages-{r.id}", r.summary, pages, ext,
                                 [f"{r.id}/p{k + 1}" for k in range(len(pages))],
                                 [f"{nxt.id}/p{k + 1}" for k in range(len(ext))],
                                 [" ".join(lines) for lines in _layout(r.text, PAGE_SIZE, 1)]))
    return out
