"""The in-process fast path of the math verifier: plain numbers, decided as math-verify decides them.

math-verify reads a completion by trying its extraction patterns in priority order
(``final answer is … I hope``; then ``final answer … is`` and ``\\boxed``; then
``answer:``; then ``answer``; then any LaTeX, expression or number) and, within one
priority, the match that *ends* rightmost first (``math_verify/parser.py``, version 0.9).
The fast path decides in-process only completions whose shape pins down what those rules
extract, without running them:

* **boxed**: exactly one ``\\boxed{N}`` (no ``\\fbox``), alone or as the whole of a
  ``$…$``, ``$$…$$``, ``\\[…\\]``, ``\\(…\\)``; no "final answer" anywhere; after it no
  character that could close a LaTeX environment or a box (``{}$\\[]``) and no percent
  sign or word. Then the rightmost-ending match of priority 50 is that box.
* **answer**: "answer" occurs exactly once, no box, and the text ends with
  ``answer is N`` / ``answer: N`` (``final answer`` too) followed only by spaces and
  full stops: the match of priority 50, 100 or 200 ends at ``N``.
* **gsm8k**: no "answer", no box, and the text ends with ``#### N`` (space before ``N``),
  followed only by spaces and full stops: the rightmost match of priority 300 is ``N``.
* **bare**: the whole text is ``N``.

``N`` is an integer or decimal (thousands commas in groups of three outside a box; a
``\\frac{a}{b}`` of integers inside a box) and the gold is such a number or such a
fraction. Then both sides are sympy numbers, and :func:`numeric_verdict` gives
math-verify's comparison, returning ``None`` (ask math-verify) where its float rounding
could matter. Everything else goes to math-verify. ``tests/test_math_differential.py``
checks these verdicts against math-verify on the generated corpus.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import NamedTuple

_MAX_NUMBER_CHARS = 40
#: Significant digits up to which a decimal compares like math-verify's 15-digit floats.
MAX_DECIMAL_DIGITS = 14

_DECIMAL = r"-?(?:0|[1-9]\d*)(?:\.\d+)?"
_THOUSANDS = r"-?[1-9]\d{0,2}(?:,\d{3})+(?:\.\d+)?"
_FRACTION = r"-?\\frac\{\d+\}\{\d+\}"
_PLAIN = re.compile(rf"{_DECIMAL}|{_THOUSANDS}")
_GOLD = re.compile(rf"{_DECIMAL}|{_THOUSANDS}|{_FRACTION}")
_BOX = re.compile(rf"\\boxed\{{({_DECIMAL}|{_FRACTION})\}}")
_FRACTION_PARTS = re.compile(r"(-?)\\frac\{(\d+)\}\{(\d+)\}")
_ANSWER_TAIL = re.compile(rf"answer(?: is:?|:)[ \t]+({_DECIMAL}|{_THOUSANDS})[\s.]*", re.IGNORECASE)
_GSM8K_TAIL = re.compile(rf"####[ \t]+({_DECIMAL}|{_THOUSANDS})[\s.]*")
_DELIMITERS = (("$$", "$$"), ("\\[", "\\]"), ("\\(", "\\)"), ("$", "$"))
_CLOSERS = frozenset("{}$\\[]%")


class Numeric(NamedTuple):
    """A plain number as written: its exact value and how math-verify will type it."""

    value: Fraction
    is_float: bool  # written with a decimal point (a sympy Float for math-verify)
    percent: bool

    @property
    def effective(self) -> Fraction:
        return self.value / 100 if self.percent else self.value


def numeric_verdict(gold: Numeric, answer: Numeric) -> bool | None:
    """math-verify's verdict on two plain numbers, or ``None`` where it is not certain.

    math-verify compares two integers (percent or not) by their written values (``25%``
    equals ``25``) or by value (``100%`` equals ``1``), otherwise by value (``25%`` equals
    ``0.25`` and ``1/4``); a float is compared after rounding to 6 decimals, which is
    where this returns ``None``.
    """
    g_int = not gold.is_float and gold.value.denominator == 1
    a_int = not answer.is_float and answer.value.denominator == 1
    if (gold.percent or answer.percent) and g_int and a_int:
        return gold.value == answer.value or gold.effective == answer.effective
    if gold.effective == answer.effective:
        return True
    if not (gold.is_float or answer.is_float or gold.percent or answer.percent):
        return False  # exact rationals: sympy compares them exactly
    if gold.percent or answer.percent:
        return None
    difference = abs(gold.effective - answer.effective)
    scale = max(abs(gold.effective), abs(answer.effective), Fraction(1))
    return False if difference > Fraction(1, 10**5) * scale else None


def _number(text: str) -> Numeric | None:
    """The value of a string of the fast path's grammar (checked by the caller)."""
    if len(text) > _MAX_NUMBER_CHARS:
        return None
    fraction = _FRACTION_PARTS.fullmatch(text)
    if fraction:
        sign, numerator, denominator = fraction.groups()
        if int(denominator) == 0:
            return None
        value = Fraction(int(numerator), int(denominator))
        return Numeric(-value if sign else value, False, False)
    plain = text.replace(",", "")
    is_float = "." in plain
    if is_float and len(plain.lstrip("-").replace(".", "").lstrip("0")) > MAX_DECIMAL_DIGITS:
        return None  # beyond a 15-digit float: math-verify's rounding decides
    return Numeric(Fraction(plain), is_float, False)


def fast_gold(gold: str) -> Numeric | None:
    """The gold as the fast path reads it, or ``None`` when math-verify must read it."""
    gold = gold.strip()
    return _number(gold) if _GOLD.fullmatch(gold) else None


def _quiet(rest: str) -> bool:
    """True when nothing in ``rest`` can end a LaTeX environment, a box or a percentage."""
    if _CLOSERS.intersection(rest):
        return False
    lower = rest.lower()
    return "pct" not in lower and "percent" not in lower


def _boxed(text: str, lower: str) -> str | None:
    if "final answer" in lower or text.count("\\boxed") != 1 or "\\fbox" in text:
        return None
    match = _BOX.search(text)
    if match is None:
        return None
    before, after = text[: match.start()], text[match.end() :]
    for opening, closing in _DELIMITERS:
        if before.endswith(opening) and after.startswith(closing):
            if before[: -len(opening)].endswith("\\"):
                return None  # an escaped delimiter: leave it to math-verify
            after = after[len(closing) :]
            break
    return match.group(1) if _quiet(after) else None


def _answer_is(text: str, lower: str) -> str | None:
    if "\\boxed" in text or lower.count("answer") != 1:
        return None
    match = _ANSWER_TAIL.fullmatch(text, lower.rfind("answer"))
    return match.group(1) if match else None


def _gsm8k(text: str, lower: str) -> str | None:
    if "\\boxed" in text or "answer" in lower:
        return None
    start = text.rfind("####")
    match = _GSM8K_TAIL.fullmatch(text, start) if start >= 0 else None
    return match.group(1) if match else None


def fast_answer(completion: str) -> tuple[Numeric, str] | None:
    """The number math-verify extracts from ``completion`` and the shape that proves it, or ``None``.

    Example:
        >>> fast_answer("6 * 7 = 42, so the answer is 42.")
        (Numeric(value=Fraction(42, 1), is_float=False, percent=False), 'answer')
    """
    lower = completion.lower()
    for shape, read in (("boxed", _boxed), ("answer", _answer_is), ("gsm8k", _gsm8k)):
        found = read(completion, lower)
        if found is not None:
            number = _number(found)
            return None if number is None else (number, shape)
    bare = completion.strip()
    if _PLAIN.fullmatch(bare):
        number = _number(bare)
        return None if number is None else (number, "bare")
    return None
