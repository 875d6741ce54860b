"""mkdocs hook: formulas as MathML, rendered by the browser itself (no JavaScript, nothing fetched).

`pymdownx.arithmatex` (generic mode) wraps each `$...$` / `$$...$$` of the Markdown in
`<span class="arithmatex">\\(...\\)</span>` or `<div class="arithmatex">\\[...\\]</div>`. This hook replaces each
wrapper's TeX with the MathML that `latex2mathml` converts it to, so the site shows formulas offline; the TeX
stays in the element's `data-tex` attribute (what a reader copies). A formula latex2mathml cannot convert
stops the build with the page and the formula named.
"""
from __future__ import annotations

import html
import re

from latex2mathml.converter import convert

WRAPPED = re.compile(r'<(?P<tag>span|div) class="arithmatex">\\(?P<open>[(\[])(?P<tex>.*?)\\[)\]]</(?P=tag)>', re.S)


def to_mathml(tex: str, display: bool) -> str:
    return convert(tex, display="block" if display else "inline")


def render(content: str, where: str = "page") -> str:
    """`content` with every arithmatex wrapper's TeX replaced by MathML."""
    def one(m: re.Match) -> str:
        tex = html.unescape(m["tex"]).strip()
        try:
            math = to_mathml(tex, m["open"] == "[")
        except Exception as exc:  # latex2mathml raises several types for TeX it does not know
            raise ValueError(f"{where}: cannot render the formula {tex!r} as MathML ({exc})") from exc
        return f'<{m["tag"]} class="arithmatex" data-tex="{html.escape(tex, quote=True)}">{math}</{m["tag"]}>'

    return WRAPPED.sub(one, content)


def on_page_content(html_text: str, page, config, files) -> str:  # mkdocs event
    return render(html_text, page.file.src_path)
