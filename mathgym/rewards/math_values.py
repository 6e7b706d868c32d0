"""Exact values of MATH-style answers, and math-verify's verdict on two of them where it is certain.

The fast path (:mod:`mathgym.rewards.math_fast`) reads the contents of a final box, and a
gold written as ``$…$``, with the small grammar below. It builds exact values, never
floats, and :func:`value_verdict` returns math-verify's verdict only where its comparison
rules (``math_verify.grader``) cannot differ from exact comparison; elsewhere ``None``
(ask math-verify).

Grammar (spaces ignored, except between two digits, where the text is declined):

* **scalar**: a sum of terms, each a signed product of at most one leading integer or
  decimal, ``\\sqrt{…}`` (``\\sqrt 3``), ``\\pi`` and ``\\frac{…}{…}`` (``\\dfrac``,
  ``\\tfrac``, ``\\frac12``), optionally ``/`` a further factor (``\\pi/4``,
  ``\\sqrt{2}/2``). Its value is a sum of rational multiples of ``√r·π^k`` (``r``
  square-free): two such sums are equal exactly when their canonical forms are, as
  ``√2, √3, √5, …`` are linearly independent over the rationals and π is transcendental.
  A decimal point is allowed only in a plain number (a sympy Float for math-verify, whose
  float rounding :func:`~mathgym.rewards.math_fast.numeric_verdict` models); a trailing
  ``\\%`` only after a plain number (``7%``, ``7 %``, ``7 percent``, ``7 percentage`` are
  ``7\\%`` to math-verify; ``-7%`` and ``7pct`` are not).
* **set**: ``\\{a, b\\}`` or a bare list ``a, b`` (math-verify reads both as a FiniteSet); a
  bare list of intervals and tuples of rational numbers (``(1, 2), (2, 1)``), equal to
  another exactly when the sets of their elements are.
* **interval**: ``[a, b]``, ``[a, b)``, ``(a, b]``, and ``(a, b)`` when ``a < b`` (else
  math-verify reads a tuple); ends may be ``\\infty``/``-\\infty``.
* **tuple**: ``(a, b)`` with ``a > b``, or three or more elements in parentheses.
* **matrix**: ``pmatrix``/``bmatrix`` of rational numbers.
* **text**: ``\\text{word}``, letters only.

``\\left``/``\\right`` are dropped. Anything else (variables, ``\\pm``, ``\\cdot``,
exponents, ``\\,``, units, equations) is no value, and math-verify decides.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from fractions import Fraction
from typing import NamedTuple

from mathgym.rewards.math_notation import read_notation, strip_unit

#: Longest text read as a value: longer answers go to math-verify.
MAX_VALUE_CHARS = 300
_MAX_INTEGER_DIGITS = 12
_MAX_RADICAND = 10**6
_MAX_ELEMENTS = 16
_NUMBER = re.compile(r"(?:0|[1-9]\d*)(?:\.\d+)?", re.ASCII)
_BRACED_COMMA = re.compile(r"\s*\{\s*,\s*\}", re.ASCII)
_DIGIT_SPACE_DIGIT = re.compile(r"\d\s+\d", re.ASCII)
#: A plain number with ``%`` or the word "percent"/"percentage" after it (a sign or padding reads otherwise).
_PERCENT_SIGN = re.compile(r"\s*((?:0|[1-9]\d{0,11})(?:\.\d{1,12})?)(?:\s*%|\s+percent(?:age)?)\s*", re.ASCII)
_TEXT = re.compile(r"\\text\{([A-Za-z]{1,30})\}", re.ASCII)
_MATRIX = re.compile(r"\\begin\{([pb]matrix)\}(.*)\\end\{\1\}", re.ASCII | re.DOTALL)
#: Interval brackets: (left closed, right closed) by opening and closing character.
_BRACKETS = {"[": True, "(": False, "]": True, ")": False}

Key = tuple[int, int]  # (square-free radicand, power of pi)


class Scalar(NamedTuple):
    """An exact real number ``Σ c·√r·π^k`` (``terms``: sorted (r, k, c)), as written."""

    terms: tuple[tuple[int, int, Fraction], ...]
    is_float: bool = False  # a plain decimal (a sympy Float for math-verify)
    percent: bool = False
    plain: bool = True  # a plain integer or decimal, nothing computed
    product: bool = False  # a decimal times a power of ten (math-verify's equality is binary floats')

    @property
    def rational(self) -> Fraction | None:
        if not self.terms:
            return Fraction(0)
        if len(self.terms) == 1 and self.terms[0][:2] == (1, 0):
            return self.terms[0][2]
        return None

    def approx(self) -> float:
        return sum(float(c) * math.sqrt(r) * math.pi**k for r, k, c in self.terms)


class Infinity(NamedTuple):
    """``\\infty`` or ``-\\infty``, as an interval's end."""

    negative: bool


class Group(NamedTuple):
    """A set, a tuple, or an interval (``closed``: left and right closed) of scalars."""

    kind: str  # "set" | "tuple" | "interval"
    items: tuple
    closed: tuple[bool, bool] = (False, False)


class Matrix(NamedTuple):
    rows: tuple[tuple[Fraction, ...], ...]


class Text(NamedTuple):
    word: str  # lowercased


Value = Scalar | Group | Matrix | Text


def _square_free(n: int) -> tuple[int, int]:
    """``n = outside² · inside`` with ``inside`` square-free: ``(outside, inside)``."""
    outside, inside, p = 1, n, 2
    while p * p <= inside:
        while inside % (p * p) == 0:
            inside //= p * p
            outside *= p
        p += 1
    return outside, inside


def _scalar(terms: dict[Key, Fraction], **flags) -> Scalar:
    return Scalar(tuple(sorted((r, k, c) for (r, k), c in terms.items() if c)), **flags)


def _times(a: dict[Key, Fraction], b: dict[Key, Fraction]) -> dict[Key, Fraction] | None:
    out: dict[Key, Fraction] = {}
    for (r1, k1), c1 in a.items():
        for (r2, k2), c2 in b.items():
            outside, inside = _square_free(r1 * r2)
            k = k1 + k2
            if abs(k) > 2:
                return None
            out[(inside, k)] = out.get((inside, k), Fraction(0)) + c1 * c2 * outside
    return {key: c for key, c in out.items() if c}


def _inverse(a: dict[Key, Fraction]) -> dict[Key, Fraction] | None:
    """``1/a`` for a single term ``c·√r·π^k`` (``√r/(c·r)·π^-k``); ``None`` for sums and zero."""
    if len(a) != 1:
        return None
    (r, k), c = next(iter(a.items()))
    return {(r, -k): 1 / (c * r)} if c and abs(k) <= 2 else None


class _Reader:
    """Recursive descent over the spaceless text; every method consumes or returns ``None``."""

    def __init__(self, text: str):
        self.text, self.at, self.decimal = text, 0, False
        self.after_number = False  # ``2\\frac12`` is a mixed number to math-verify, not a product

    def peek(self, token: str) -> bool:
        return self.text.startswith(token, self.at)

    def take(self, token: str) -> bool:
        if self.text.startswith(token, self.at):
            self.at += len(token)
            return True
        return False

    def scalar(self) -> dict[Key, Fraction] | None:
        total: dict[Key, Fraction] = {}
        sign = -1 if self.take("-") else 1
        if sign == 1:
            self.take("+")
        while True:
            term = self.term()
            if term is None:
                return None
            for key, c in term.items():
                total[key] = total.get(key, Fraction(0)) + sign * c
            if self.take("+"):
                sign = 1
            elif self.take("-"):
                sign = -1
            else:
                return {key: c for key, c in total.items() if c}

    def term(self) -> dict[Key, Fraction] | None:
        value: dict[Key, Fraction] = {(1, 0): Fraction(1)}
        count, self.after_number = 0, False
        while True:
            factor = self.factor(first=count == 0)
            if factor is None:
                break
            value = _times(value, factor)
            count += 1
            if value is None:
                return None
        if count == 0:
            return None
        if self.take("/"):
            divisor = self.factor(first=True)
            inverse = _inverse(divisor) if divisor else None
            return _times(value, inverse) if inverse else None
        return value

    def factor(self, first: bool) -> dict[Key, Fraction] | None:
        if first:
            number = _NUMBER.match(self.text, self.at)
            if number:
                if len(number.group()) > _MAX_INTEGER_DIGITS:
                    return None
                self.at = number.end()
                self.decimal |= "." in number.group()
                self.after_number = True
                return {(1, 0): Fraction(number.group())}
        if self.after_number and self.peek("\\frac"):
            return None
        self.after_number = False
        if self.take("\\pi"):
            return None if self.peek_letter() else {(1, 1): Fraction(1)}
        if self.take("\\sqrt"):
            inside = self.argument()
            if inside is None or set(inside) - {(1, 0)} or inside.get((1, 0), 0) <= 0:
                return None
            radicand = inside[(1, 0)]
            if radicand.denominator != 1 or radicand > _MAX_RADICAND:
                return None
            outside, square_free = _square_free(int(radicand))
            return {(square_free, 0): Fraction(outside)}
        if self.take("\\frac"):
            numerator = self.argument()
            denominator = self.argument() if numerator is not None else None
            inverse = _inverse(denominator) if denominator else None
            return _times(numerator, inverse) if inverse is not None else None
        return None

    def peek_letter(self) -> bool:
        return self.at < len(self.text) and self.text[self.at].isalpha()

    def argument(self) -> dict[Key, Fraction] | None:
        """``{scalar}`` or a single digit (``\\frac12``, ``\\sqrt3``)."""
        if self.take("{"):
            inner = self.scalar()
            return inner if inner is not None and self.take("}") else None
        if self.at < len(self.text) and self.text[self.at].isdigit():
            self.at += 1
            return {(1, 0): Fraction(int(self.text[self.at - 1]))}
        return None


def read_scalar(text: str) -> Scalar | Infinity | None:
    """A whole ``text`` as one scalar (or an infinity), or ``None``."""
    if text in ("\\infty", "+\\infty", "-\\infty"):
        return Infinity(text.startswith("-"))
    percent = text.endswith("\\%")
    if percent:
        text = text[:-2]
    reader = _Reader(text)
    terms = reader.scalar()
    if terms is None or reader.at != len(text):
        return None
    plain = _NUMBER.fullmatch(text.lstrip("-+")) is not None
    if (reader.decimal or percent) and not plain:
        return None  # decimals and percentages only as plain numbers: math-verify's float rules
    return _scalar(terms, is_float=reader.decimal, percent=percent, plain=plain)


def _split_top(text: str, separator: str) -> list[str] | None:
    """``text`` split at ``separator`` outside braces and brackets; ``None`` if unbalanced."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char in "{([":
            depth += 1
        elif char in "})]":
            depth -= 1
            if depth < 0:
                return None
        elif char == separator and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    return None if depth else [*parts, text[start:]]


def _elements(text: str, floats: bool = False) -> tuple | None:
    """The comma-separated scalars of a set (``floats``: decimals allowed) or of an interval or tuple."""
    parts = _split_top(text, ",")
    if parts is None or len(parts) > _MAX_ELEMENTS:
        return None
    items = tuple(read_scalar(part) for part in parts)
    if any(item is None or (isinstance(item, Scalar) and (item.percent or (item.is_float and not floats))) for item in items):
        return None
    return items


def _position(item: Scalar | Infinity) -> float:
    if isinstance(item, Infinity):
        return -math.inf if item.negative else math.inf
    return item.approx()


def _group(text: str) -> Group | None:
    if text.startswith("\\{") and text.endswith("\\}"):
        items = _elements(text[2:-2], floats=True)
        return Group("set", items) if items and not any(isinstance(i, Infinity) for i in items) else None
    if len(text) < 2 or text[0] not in "([" or text[-1] not in ")]" or _split_top(text[1:-1], ",") is None:
        return None
    items = _elements(text[1:-1])
    if not items or len(items) < 2:
        return None
    if len(items) == 2:
        low, high = (_position(item) for item in items)
        if high - low > 0 and (math.isinf(high - low) or high - low > 1e-9 * max(1.0, abs(low), abs(high))):
            return Group("interval", items, (_BRACKETS[text[0]], _BRACKETS[text[-1]]))
        if text[0] + text[-1] == "()" and low - high > 1e-9 * max(1.0, abs(low), abs(high)) and math.isfinite(low - high):
            return Group("tuple", items)  # math-verify reads ``(b, a)`` with ``a < b`` as a tuple
        return None  # empty, a point, or infinite ends the wrong way round
    if text[0] + text[-1] != "()" or any(isinstance(i, Infinity) for i in items):
        return None
    return Group("tuple", items)


def _groups(text: str) -> Group | None:
    """A bare list of two or more intervals and tuples of rational numbers (``(1, 2), (2, 1)``): a set of them to math-verify."""
    parts = _split_top(text, ",")
    if parts is None or not 2 <= len(parts) <= _MAX_ELEMENTS or not all(part[:1] in ("(", "[") for part in parts):
        return None
    groups = tuple(_group(part) for part in parts)
    return Group("set", groups) if all(group and _rational_group(group) for group in groups) else None  # type: ignore[arg-type]


def _rational_group(group: Group) -> bool:
    """An interval or tuple whose ends are rational numbers (no decimals) or infinities."""
    exact = all(isinstance(i, Infinity) or (i.rational is not None and not i.is_float and not i.percent) for i in group.items)
    return group.kind != "set" and exact


def _group_key(group: Group) -> tuple:
    return group.kind, _finite_closed(group) if group.kind == "interval" else (), tuple(i if isinstance(i, Infinity) else i.rational for i in group.items)


def _matrix(text: str) -> Matrix | None:
    match = _MATRIX.fullmatch(text)
    if match is None:
        return None
    rows = []
    for row in match.group(2).split("\\\\"):
        cells = tuple(read_scalar(cell) for cell in row.split("&"))
        if any(not isinstance(c, Scalar) or c.is_float or c.percent or c.rational is None for c in cells):
            return None
        rows.append(tuple(c.rational for c in cells))
    if len({len(row) for row in rows}) != 1 or len(rows) * len(rows[0]) > _MAX_ELEMENTS:
        return None
    return Matrix(tuple(rows))


def prepare_value_text(text: str) -> str | None:
    """``text`` without spaces, ``\\left``/``\\right`` and ``\\dfrac``/``\\tfrac``; ``None`` if two digits stand apart (a sum to latex2sympy)."""
    if _DIGIT_SPACE_DIGIT.search(text):
        return None
    text = re.sub(r"\s+", "", text).replace("\\left", "").replace("\\right", "")
    return text.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")


def read_value(text: str) -> Value | None:
    """The value of a final answer written in the grammar above, or ``None``.

    Example:
        >>> read_value("\\\\frac{3\\\\sqrt{5}}{5}") == read_value("\\\\frac{3}{\\\\sqrt5}")
        True
    """
    if len(text) > MAX_VALUE_CHARS or not text.isascii():
        return None
    text = _BRACED_COMMA.sub(",", text)  # math-verify's normalisation: ``1{,}5`` is ``1,5``
    percent = _PERCENT_SIGN.fullmatch(text)
    if percent:  # ``7%``, ``7 percent``: math-verify reads them as ``7\\%``
        text = percent.group(1) + "\\%"
    notation = read_notation(text)  # units, currency, padding, scientific notation, digit groups
    if notation is not None:
        terms = ((1, 0, notation.value),) if notation.value else ()
        return Scalar(terms, notation.is_float, False, notation.plain, notation.product)
    bare = strip_unit(text)
    if bare is not None:
        value = read_value(bare)
        return value if isinstance(value, Scalar) and not value.percent else None
    text_match = _TEXT.fullmatch(text.strip())
    if text_match:  # no spaces inside: math-verify's unit rules erase some words with spaces (``\text{ e }``)
        return Text(text_match.group(1).lower())
    text = prepare_value_text(text)  # type: ignore[assignment]
    if not text:
        return None
    if text.startswith("\\text"):
        return None
    if text.startswith("\\begin"):
        return _matrix(text)
    groups = _groups(text)
    if groups is not None:
        return groups
    if text[0] in "([\\" and text[-1] in ")]}" and not text.startswith(("\\frac", "\\sqrt", "\\pi")):
        return _group(text)
    parts = _split_top(text, ",")
    if parts is not None and len(parts) > 1:
        if any(re.fullmatch(r"\d{3}", part) for part in parts[1:]):
            return None  # ``1,000``: thousands or a set, as math-verify's normalisation decides
        items = _elements(text, floats=True)
        return Group("set", items) if items and not any(isinstance(i, Infinity) for i in items) else None
    value = read_scalar(text)
    return value if isinstance(value, Scalar) else None


def scalar_verdict(gold: Scalar, answer: Scalar) -> bool | None:
    """Two exact scalars, at least one irrational (no decimal, no percentage)."""
    if gold.is_float or answer.is_float or gold.percent or answer.percent:
        return None
    if gold.terms == answer.terms:
        return True
    g, a = gold.approx(), answer.approx()
    return False if abs(g - a) > 1e-6 * max(1.0, abs(g), abs(a)) else None


def _item_verdict(gold, answer) -> bool | None:
    if isinstance(gold, Infinity) or isinstance(answer, Infinity):
        return gold == answer
    return scalar_verdict(gold, answer)


def value_verdict(gold: Value, answer: Value, numeric_verdict: Callable[[Scalar, Scalar], bool | None]) -> bool | None:
    """math-verify's verdict on two values, or ``None`` where it is not certain.

    ``numeric_verdict`` decides two rational scalars (math-verify's float and percentage rules).
    """
    if isinstance(gold, Scalar) and isinstance(answer, Scalar):
        if gold.rational is not None and answer.rational is not None:
            if (gold.percent or answer.percent) and not (gold.plain and answer.plain):
                return None
            verdict = numeric_verdict(gold, answer)
            return None if verdict and (gold.product or answer.product) else verdict
        return scalar_verdict(gold, answer)
    if type(gold) is not type(answer):
        return _scalar_and_set(gold, answer)
    if isinstance(gold, Text):
        return gold.word == answer.word
    if isinstance(gold, Matrix):
        return gold == answer if _shape(gold) == _shape(answer) else None
    if gold.kind != answer.kind:
        return None
    if gold.kind == "set":
        return _set_verdict(gold.items, answer.items)
    if len(gold.items) != len(answer.items):
        return False if gold.kind == "tuple" else None
    verdicts = [_item_verdict(g, a) for g, a in zip(gold.items, answer.items)]
    if gold.kind == "interval" and _finite_closed(gold) != _finite_closed(answer):
        return False
    if all(v is True for v in verdicts):
        return True
    return False if False in verdicts and None not in verdicts else None


def _shape(matrix: Matrix) -> tuple[int, int]:
    return len(matrix.rows), len(matrix.rows[0])


def _set_verdict(gold: tuple, answer: tuple) -> bool | None:
    """Two finite sets of exact scalars, or of intervals and tuples of rationals: equal as sets, or apart by more than rounding."""
    gold_groups, answer_groups = [isinstance(g, Group) for g in gold], [isinstance(a, Group) for a in answer]
    if any(gold_groups) or any(answer_groups):  # exact rationals: sympy's element-wise comparison is exact
        if not (all(gold_groups) and all(answer_groups) and all(_rational_group(group) for group in (*gold, *answer))):
            return None
        return {_group_key(g) for g in gold} == {_group_key(a) for a in answer}
    gold_set, answer_set = {g.terms for g in gold}, {a.terms for a in answer}
    if gold_set == answer_set:
        return True
    only_gold = [g for g in gold if g.terms not in answer_set]
    only_answer = [a for a in answer if a.terms not in gold_set]
    near = any(scalar_verdict(g, a) is None for g in only_gold for a in only_answer)
    return None if near else False


def _scalar_and_set(gold: Value, answer: Value) -> bool | None:
    """A number against a set of two or more clearly different numbers (either way round): never equal."""
    pair = {type(gold), type(answer)}
    if pair != {Scalar, Group}:
        return None
    group = gold if isinstance(gold, Group) else answer
    if group.kind != "set" or not all(isinstance(item, Scalar) for item in group.items):
        return None
    values = [item.approx() for item in group.items]
    apart = all(abs(a - b) > 1e-5 * max(1.0, abs(a), abs(b)) for i, a in enumerate(values) for b in values[i + 1 :])
    return False if apart and len(values) > 1 else None


def _finite_closed(interval: Group) -> tuple[bool, bool]:
    """Which ends are closed, an infinite end counting as open (math-verify: ``[1, \\infty]`` is ``[1, \\infty)``)."""
    return tuple(closed and not isinstance(end, Infinity) for closed, end in zip(interval.closed, interval.items))  # type: ignore[return-value]
