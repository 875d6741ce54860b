"""English indefinite articles for generated text: the one place that chooses "a" or "an".

The choice follows the sound of the next word, not its first letter: "an orange", "an hour",
"a unicorn", "a one-eyed cat", "an 8", "an MRI" is out of scope (initialisms are not generated).
"""
from __future__ import annotations

import re

# vowel letters read with a consonant sound, and silent-h words read with a vowel sound
_CONSONANT_SOUND = ("uni", "use", "usu", "uti", "ura", "ure", "euro", "eu", "one", "once", "ewe")
_VOWEL_SOUND = ("hour", "honest", "honour", "honor", "heir")
_AN_NUMBERS = re.compile(r"^(8|11|18|8\d|8\d\d|11\d\d\d|18\d\d\d)(\D|$)")


def article_for(word: str) -> str:
    """ "a" or "an" for the word that follows it."""
    w = word.strip().lower()
    if not w:
        raise ValueError("article_for needs the word that follows the article")
    if w[0].isdigit():
        return "an" if _AN_NUMBERS.match(w) else "a"
    if w.startswith(_VOWEL_SOUND):
        return "an"
    if w.startswith(_CONSONANT_SOUND):
        return "a"
    return "an" if w[0] in "aeiou" else "a"


def with_article(phrase: str) -> str:
    """`phrase` preceded by its indefinite article: with_article("orange crescent") == "an orange crescent"."""
    return f"{article_for(phrase)} {phrase.strip()}"
