"""A number written with words in ``\\text{…}`` inside a final box, which math-verify reads as no number.

latex2sympy reads ``\\text{…}`` (``\\textbf``, ``\\mathrm`` and the like too) as one
symbol named by its letters (spaces dropped, lowercased), so math-verify 0.9 reads

* ``\\text{The answer is } 23`` as the product ``theansweris*23``, and
* ``\\text{23 apples}`` as the symbol ``23apples``,

and neither is equal to a number (``grader.sympy_numeric_eq`` finds a symbol in it, its
symbolic difference is no zero) nor to an inequality or ``x = c``. :func:`read_words`
reads these two shapes (:func:`~mathgym.rewards.math_fast.fast_verdict` gives that
verdict). Declined: a zero (``answer*0`` is 0), words math-verify rewrites first (``and``, ``or``, ``inf``,
``pct``, ``percent``, ``sqrt``), a symbol name it reads as a constant (``pi``,
``gamma``) or a single letter (``e``, ``i``, ``I``), anything but letters and single
spaces in the words. ``tests/rewards/test_math_fast_shapes.py`` checks the verdicts against
math-verify.
"""

from __future__ import annotations

import re
from typing import NamedTuple


_WORDS = r"[A-Za-z]+(?: [A-Za-z]+){0,8}"
#: The commands math-verify rewrites to ``\\text`` (``normalize_latex``'s basic rules).
_TEXT = r"\\(?:text|textbf|textit|textrm|textnormal|mathrm|mathit|mathbf)"
_WORDS_THEN_NUMBER = re.compile(rf"{_TEXT}\{{ ?({_WORDS}) ?\}} ?[1-9]\d{{0,11}}", re.ASCII)
_NUMBER_THEN_WORDS = re.compile(rf"{_TEXT}\{{ ?[1-9]\d{{0,11}} ({_WORDS}) ?\}}", re.ASCII)
_REWRITTEN = re.compile(r"inf|pct|percent|sqrt|\b(?:and|or)\b", re.ASCII)
_CONSTANTS = frozenset({"pi", "gamma"})


class Words(NamedTuple):
    """A number with words in ``\\text{}``: a symbol (times the number) to math-verify."""

    words: str


def read_words(text: str) -> Words | None:
    """``\\text{words} N`` or ``\\text{N words}`` (``N`` a positive integer), else ``None``.

    Example:
        >>> read_words("\\\\text{The answer is } 23")
        Words(words='The answer is')
    """
    text = text.strip()
    match = _WORDS_THEN_NUMBER.fullmatch(text) or _NUMBER_THEN_WORDS.fullmatch(text)
    if match is None:
        return None
    words = match.group(1)
    name = words.replace(" ", "").lower()
    if _REWRITTEN.search(words.lower()) or name in _CONSTANTS or len(name) < 2 or "i" in words.lower().split():
        return None
    return Words(words)

