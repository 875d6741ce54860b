"""The docs' math hook (ci/mkdocs_math.py): arithmatex's TeX wrappers become MathML, bad TeX stops the build."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("mkdocs_math", ROOT / "ci" / "mkdocs_math.py")
math_hook = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(math_hook)


def test_inline_and_display_formulas_become_mathml_with_their_tex_kept():
    html = ('<p>P@k is <span class="arithmatex">\\(\\frac{1}{k}\\sum_{i=1}^{k} r_i\\)</span> and</p>'
            '<div class="arithmatex">\\[a &lt; b\\]</div>')
    out = math_hook.render(html)
    assert out.count("<math") == 2 and "\\(" not in out and "\\[" not in out
    assert 'display="inline"' in out and 'display="block"' in out
    assert "<mfrac>" in out and "&#x02211;" in out          # the fraction and the sum sign
    assert 'data-tex="\\frac{1}{k}\\sum_{i=1}^{k} r_i"' in out and 'data-tex="a &lt; b"' in out
    assert out.startswith("<p>P@k is <span") and out.endswith("</div>")


def test_text_without_formulas_is_left_alone():
    html = '<p>costs $5 and <code>\\(x\\)</code></p>'
    assert math_hook.render(html) == html


def test_a_formula_that_cannot_be_converted_names_the_page(monkeypatch):
    def broken(tex, display):
        raise ValueError("unknown command")

    monkeypatch.setattr(math_hook, "to_mathml", broken)
    with pytest.raises(ValueError, match=r"statistics\.md: cannot render the formula '\\\\oops' as MathML"):
        math_hook.render('<span class="arithmatex">\\(\\oops\\)</span>', "statistics.md")
