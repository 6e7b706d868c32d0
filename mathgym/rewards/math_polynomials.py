"""Polynomials in one variable with rational coefficients, read and compared as math-verify 0.9 does.

latex2sympy reads ``x^2 + 2x + 1``, ``(x+1)^2`` or ``\\frac{x}{2} - 3`` as sympy
expressions in the symbol ``x``. ``math_verify.grader.sympy_expr_eq`` compares two of them
by ``simplify(a - b).is_zero`` (after string and numeric checks that cannot find a
non-zero polynomial zero), so two polynomials are equal exactly when their expanded
coefficients and their variable are; a polynomial of degree one or more equals no number
(sympy finds a symbol in the difference). :func:`polynomial_verdict` gives those verdicts.

The reader takes, without spaces: integers, one variable of
:data:`~mathgym.rewards.math_relations.VARIABLES`, ``+``, ``-`` (``+ -16`` too), products by
juxtaposition or ``\\cdot``, ``^`` with a digit or a braced integer (at most 12) after the
variable or a parenthesis, parentheses, and ``\\frac{p}{c}`` with a constant ``c``. It
declines what latex2sympy could read otherwise: the variable followed by a digit, a
variable or ``(`` (a function call), a digit after ``)``, ``x^23``, ``2\\frac{x}{3}`` (a
mixed number), decimals, other letters and commands. Degree at most 24, integers at most
12 digits, and one pass over the text: linear in its length.
``tests/rewards/test_math_fast_shapes.py`` checks the verdicts against math-verify.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import NamedTuple

from mathgym.rewards.math_values import MAX_VALUE_CHARS, Scalar, prepare_value_text

_VARIABLES = "abknpqruvwxyz"  # mathgym.rewards.math_relations.VARIABLES (not imported: that module imports this one)
_MAX_DEGREE = 24
_MAX_EXPONENT = 12
_INTEGER = re.compile(r"(?:0|[1-9]\d{0,11})(?![\d.])", re.ASCII)
_GLUED_COMMAND = re.compile(r"\\cdot[A-Za-z]", re.ASCII)  # ``\\cdotx`` is no ``\\cdot`` to LaTeX
_EXPONENT = re.compile(r"\^(?:(\d)(?!\d)|\{(\d{1,2})\})", re.ASCII)

Coefficients = dict[int, Fraction]


class Polynomial(NamedTuple):
    """``Σ cₖ·variableᵏ`` of degree one or more (``coefficients[k]`` is ``cₖ``)."""

    variable: str
    coefficients: tuple[Fraction, ...]


def read_polynomial(text: str) -> Polynomial | None:
    """The polynomial ``text`` writes (see above), or ``None`` (a constant too).

    Example:
        >>> read_polynomial("(x+1)^2") == read_polynomial("x^2 + 2x + 1")
        True
    """
    if len(text) > MAX_VALUE_CHARS or not text.isascii() or _GLUED_COMMAND.search(text):
        return None
    prepared = prepare_value_text(text)
    if not prepared:
        return None
    reader = _Reader(prepared.replace("\\cdot", "*"))
    found = reader.sum()
    if found is None or reader.at != len(reader.text) or reader.variable is None:
        return None
    degree = max((k for k, c in found.items() if c), default=0)
    if degree == 0:
        return None
    return Polynomial(reader.variable, tuple(found.get(k, Fraction(0)) for k in range(degree + 1)))


def polynomial_verdict(gold: object, answer: object) -> bool | None:
    """math-verify's verdict when either side is a :class:`Polynomial`: equal polynomials, never a number; else ``None``."""
    if isinstance(gold, Polynomial) and isinstance(answer, Polynomial):
        return gold == answer
    if isinstance(gold, Scalar) or isinstance(answer, Scalar):
        return False
    return None


def _times(a: Coefficients, b: Coefficients) -> Coefficients | None:
    out: Coefficients = {}
    for i, x in a.items():
        for j, y in b.items():
            if x and y:
                if i + j > _MAX_DEGREE:
                    return None
                out[i + j] = out.get(i + j, Fraction(0)) + x * y
    return out


class _Reader:
    """Recursive descent over the spaceless text; each method consumes its part or returns ``None``."""

    def __init__(self, text: str):
        self.text, self.at, self.variable = text, 0, None

    def peek(self) -> str:
        return self.text[self.at] if self.at < len(self.text) else ""

    def sum(self) -> Coefficients | None:
        total: Coefficients = {}
        sign = 1
        if self.peek() in ("+", "-"):
            sign = -1 if self.peek() == "-" else 1
            self.at += 1
        while True:
            term = self.product()
            if term is None:
                return None
            for k, c in term.items():
                total[k] = total.get(k, Fraction(0)) + sign * c
            if self.peek() not in ("+", "-"):
                return total
            sign = -1 if self.peek() == "-" else 1
            self.at += 1
            if self.peek() == "-":  # ``2x + -16``: a negative term
                sign, self.at = -sign, self.at + 1

    def product(self) -> Coefficients | None:
        value: Coefficients = {0: Fraction(1)}
        last = ""  # the kind of the previous factor: "number", "variable", "group", "fraction"
        while True:
            if last and self.peek() == "*":
                self.at += 1
                last = "explicit"
            kind = self.kind()
            if kind is None or not _may_follow(last, kind):
                return value if last and last != "explicit" else None
            factor = self.factor(kind)
            if factor is None:
                return None
            value = _times(value, factor)  # type: ignore[assignment]
            if value is None:
                return None
            last = kind

    def kind(self) -> str | None:
        char = self.peek()
        if char.isdigit():
            return "number"
        if char and char in _VARIABLES:
            return "variable"
        if char == "(":
            return "group"
        if self.text.startswith("\\frac{", self.at):
            return "fraction"
        return None

    def factor(self, kind: str) -> Coefficients | None:
        if kind == "number":
            match = _INTEGER.match(self.text, self.at)
            if match is None:
                return None
            self.at = match.end()
            return {0: Fraction(int(match.group()))}
        if kind == "variable":
            name = self.text[self.at]
            if self.variable not in (None, name):
                return None
            self.variable = name
            self.at += 1
            return self.power({1: Fraction(1)})
        if kind == "group":
            self.at += 1
            inner = self.sum()
            if inner is None or self.peek() != ")":
                return None
            self.at += 1
            return self.power(inner)
        self.at += len("\\frac{")
        numerator = self.sum()
        if numerator is None or not self.text.startswith("}{", self.at):
            return None
        self.at += 2
        denominator = self.sum()
        if denominator is None or self.peek() != "}" or set(denominator) - {0} or not denominator.get(0):
            return None
        self.at += 1
        return {k: c / denominator[0] for k, c in numerator.items()}

    def power(self, base: Coefficients) -> Coefficients | None:
        match = _EXPONENT.match(self.text, self.at)
        if match is None:
            return base
        exponent = int(match.group(1) or match.group(2))
        if exponent > _MAX_EXPONENT:
            return None
        self.at = match.end()
        value: Coefficients | None = {0: Fraction(1)}
        for _ in range(exponent):
            value = _times(value, base) if value is not None else None
        return value


def _may_follow(last: str, kind: str) -> bool:
    """Juxtapositions latex2sympy reads as products: ``2x``, ``2(x+1)``, ``(x+1)(x-1)``, ``(x+1)x``, ``\\frac{x}{2}x``."""
    if last in ("", "explicit"):
        return True
    if last == "number":
        return kind in ("variable", "group")
    if last == "variable":
        return False
    return kind in ("variable", "group", "fraction") if last == "group" else kind in ("variable", "group")
