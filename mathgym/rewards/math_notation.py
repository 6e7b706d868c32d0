"""Notations of a single number inside a final box, read as math-verify reads them.

:func:`~mathgym.rewards.math_values.read_value` asks :func:`read_notation` first. Each rule
below is math-verify 0.9's reading (``latex2sympy2_extended.math_normalization`` then
``latex2sympy``), checked against it in ``tests/rewards/test_math_fast_values.py``:

* **unit**: a number followed by one ``\\text{…}`` (``\\mbox``, ``\\mathrm``, ``\\textbf``…)
  of letters, spaces and parentheses, optionally squared: the unit is dropped
  (``56 \\text{ apples}`` is 56). Words math-verify rewrites first (``percent``, ``pct``,
  ``and``, ``or``, ``inf``, ``sqrt``) are declined.
* **currency**: a leading ``\\$`` is dropped (``\\$12.34`` is 12.34).
* **padded**: ``+7``, ``007``, ``7.00``, ``.5``, ``-.5`` are the plain numbers 7, 7, 7.00,
  0.5, −0.5 (``7.`` is declined: math-verify cannot parse it); thousands separators
  without spaces (``1,234,567``, ``1{,}234.5``) are read as such, while ``1, 234`` is a set.
* **scientific**: ``8.9 \\times 10^{5}``, ``8.9 \\cdot 10^5`` and ``8.9E+5`` are 890000
  (a float when the mantissa has a point or the ``E`` form is used); ``8.9e5`` is declined
  (math-verify reads ``e`` as Euler's number). sympy keeps ``1.1 \\times 10^{2}``
  unevaluated, and math-verify finds it *unequal* to 110 (binary floats), so such a
  product is only ever found different from a value far from it (``product``).
* **digit groups**: integers separated by spaces, ``\\,``, ``\\;`` or ``\\ `` are *added*
  (``12\\,345`` is 357, ``1 005`` is 6): latex2sympy reads juxtaposed integers as a sum.
  A group of zeros is declined (``82 0`` reads as the product ``82*0``).

Everything is bounded: the caller passes at most ``MAX_VALUE_CHARS`` characters, and each
pattern is anchored and free of nested repetition.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import NamedTuple

_MAX_DIGITS = 14
_MAX_MAGNITUDE = 10**9
_UNIT_COMMANDS = r"\\(?:text|textbf|textit|textrm|textnormal|mathrm|mathit|mathbf|mbox)"
_WITH_UNIT = re.compile(
    rf"(?P<value>.*?)(?:\s|\\[ ,])*{_UNIT_COMMANDS}\{{(?P<unit>[A-Za-z ()]{{1,40}})\}}(?:\^\d|\^\{{\d\}})?", re.ASCII | re.DOTALL
)
_REWRITTEN_WORDS = re.compile(r"percent|pct|inf|sqrt|(?<![a-z])(?:and|or)(?![a-z])", re.ASCII)
_PADDED = re.compile(
    r"(?P<sign>[+-]?)(?P<digits>\d+(?:\.\d+)?|[1-9]\d{0,2}(?:(?:,|\{,\})\d{3})+(?:\.\d+)?)|(?P<negative>-?)(?P<fraction>\.\d+)", re.ASCII
)
_SCIENTIFIC = re.compile(
    r"(?P<sign>-?)(?P<mantissa>\d{1,14}(?:\.\d{1,14})?)\s*(?:\\times|\\cdot)\s*10\s*\^\s*(?:\{\s*(?P<braced>-?\d)\s*\}|(?P<bare>\d))", re.ASCII
)
_E_FORM = re.compile(r"(?P<sign>-?)(?P<mantissa>\d{1,14}(?:\.\d{1,14})?)E(?P<exponent>[+-]?\d)", re.ASCII)
_GROUPS = re.compile(r"\d{1,12}(?:(?:\s|\\[ ,;])+\d{1,12}){1,15}", re.ASCII)
_GROUP_SEPARATOR = re.compile(r"(?:\s|\\[ ,;])+", re.ASCII)


class Notation(NamedTuple):
    """A number as math-verify reads it: exact value, whether sympy holds it as a Float, whether written plainly."""

    value: Fraction
    is_float: bool
    plain: bool
    product: bool = False  # a decimal times a power of ten, which sympy leaves unevaluated


def strip_unit(text: str) -> str | None:
    """``text`` without a trailing unit and a leading ``\\$``, or ``None`` if it has neither.

    Example:
        >>> strip_unit("\\\\$12.50 \\\\text{ dollars}")
        '12.50'
    """
    text = text.strip()
    stripped = text[2:].lstrip() if text.startswith("\\$") else text
    match = _WITH_UNIT.fullmatch(stripped)
    if match:
        if _REWRITTEN_WORDS.search(match.group("unit").lower()) or re.search(_UNIT_COMMANDS, match.group("value")):
            return None
        stripped = match.group("value").strip()
    return stripped if stripped and stripped != text and "\\$" not in stripped else None


def read_notation(text: str) -> Notation | None:
    """The number ``text`` writes in one of the notations above, or ``None``.

    Example:
        >>> read_notation("8.9 \\\\times 10^{5}").value, read_notation("12\\\\,345").value
        (Fraction(890000, 1), Fraction(357, 1))
    """
    text = text.strip()
    padded = _PADDED.fullmatch(text)
    if padded:
        digits = (padded.group("digits") or "0" + padded.group("fraction")).replace("{,}", "").replace(",", "")
        if len(digits.replace(".", "").lstrip("0")) > _MAX_DIGITS:
            return None
        value = Fraction(digits)
        negative = padded.group("sign") == "-" or padded.group("negative") == "-"
        return Notation(-value if negative else value, "." in digits, True)
    for pattern in (_SCIENTIFIC, _E_FORM):
        match = pattern.fullmatch(text)
        if match:
            exponent = int(match.group("braced") or match.group("bare") or "0") if pattern is _SCIENTIFIC else int(match.group("exponent"))
            mantissa = match.group("mantissa")
            value = Fraction(mantissa) * Fraction(10) ** exponent
            if len(mantissa.replace(".", "").lstrip("0")) > _MAX_DIGITS or abs(value) >= _MAX_MAGNITUDE:
                return None
            is_float = "." in mantissa or pattern is _E_FORM
            product = "." in mantissa and pattern is _SCIENTIFIC
            return Notation(-value if match.group("sign") else value, is_float, False, product)
    if _GROUPS.fullmatch(text):
        groups = [int(group) for group in _GROUP_SEPARATOR.split(text)]
        return Notation(Fraction(sum(groups)), False, False) if all(groups) else None  # ``82 0`` is a product
    return None
