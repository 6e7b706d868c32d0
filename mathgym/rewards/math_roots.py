"""Higher roots of integers (``\\sqrt[3]{2}``, ``2^{1/3}``), read and compared as math-verify 0.9 does.

latex2sympy reads ``\\sqrt[n]{b}`` and ``b^{1/n}`` alike as ``b**(1/n)``. With ``b`` a
positive integer that is no perfect power and ``n ≥ 3``, that number is irrational, and
two of them are equal exactly when ``b`` and ``n`` are (``b^m = c^k`` with neither a
perfect power forces ``b = c``, ``m = k``). It is no rational multiple of a sum of square
roots and powers of π either (its degree over the rationals is ``n``, not a power of two;
π is transcendental), so sympy finds a non-zero difference against every value of
:mod:`~mathgym.rewards.math_values` except a decimal, which math-verify compares after
rounding to 6 places. :func:`root_verdict` gives those verdicts; ``b^{1/2}`` is read as
the square root it is (a :class:`~mathgym.rewards.math_values.Scalar`).

In a box, ``7.3e4`` is ``7.3*E*4`` to latex2sympy (``e`` is Euler's number, not a
power of ten): :class:`EulerProduct`, irrational, equal to no rational number.
``tests/rewards/test_math_fast_shapes.py`` checks the verdicts against math-verify.
"""

from __future__ import annotations

import math
import re
from typing import NamedTuple

from mathgym.rewards.math_values import Scalar, read_value

_MAX_BASE = 10**6
_ROOT = re.compile(r"\\sqrt\[(?P<index>[2-9])\]\{(?P<base>[1-9]\d{0,5})\}|(?P<base2>[1-9]\d{0,5})\^\{1/(?P<index2>[2-9])\}", re.ASCII)


class Root(NamedTuple):
    """``base ** (1/index)``: ``base`` no perfect power, ``index`` at least 3."""

    base: int
    index: int

    def approx(self) -> float:
        return self.base ** (1 / self.index)


def read_root(text: str) -> Root | Scalar | None:
    """``\\sqrt[n]{b}`` or ``b^{1/n}`` (spaces ignored), or ``None``; a square root as a scalar.

    Example:
        >>> read_root("\\\\sqrt[3]{2}") == read_root("2^{1/3}")
        True
    """
    match = _ROOT.fullmatch(re.sub(r"\s+", "", text)) if len(text) < 40 else None
    if match is None:
        return None
    base, index = int(match.group("base") or match.group("base2")), int(match.group("index") or match.group("index2"))
    if index == 2:
        square_root = read_value(f"\\sqrt{{{base}}}")
        return square_root if isinstance(square_root, Scalar) else None
    if base == 1 or _perfect_power(base):
        return None
    return Root(base, index)


def _perfect_power(n: int) -> bool:
    """Whether ``n = m^k`` for some ``k ≥ 2`` (``n`` at most a million)."""
    return any(round(n ** (1 / k)) ** k == n or (round(n ** (1 / k)) + 1) ** k == n for k in range(2, n.bit_length() + 1))


def root_verdict(gold: object, answer: object) -> bool | None:
    """math-verify's verdict when either side is a :class:`Root` and the other a root or a scalar; else ``None``."""
    if isinstance(gold, Root) and isinstance(answer, Root):
        return gold == answer
    root, other = (gold, answer) if isinstance(gold, Root) else (answer, gold)
    if not isinstance(other, Scalar) or other.percent:
        return None
    if not other.is_float and other.rational is not None:
        return False
    apart = abs(root.approx() - other.approx()) > 1e-5 * max(1.0, abs(root.approx()))  # type: ignore[union-attr]
    return False if apart and math.isfinite(other.approx()) else None



class EulerProduct(NamedTuple):
    """``7.3e4`` in a box: latex2sympy reads ``7.3*E*4``, ``e`` being Euler's number: irrational, so equal to no rational number."""

    text: str


_EULER_PRODUCT = re.compile(r"\s*(?:[1-9]\d{0,5}(?:\.\d{1,6})?|0\.\d{0,5}[1-9])e[1-9]\s*", re.ASCII)


def read_euler_product(text: str) -> EulerProduct | None:
    """``m e k`` written as ``7.3e4`` (non-zero ``m``, one non-zero digit ``k``, lowercase ``e``), or ``None``."""
    return EulerProduct(text.strip()) if _EULER_PRODUCT.fullmatch(text) else None


def euler_product_verdict(gold: object, answer: object) -> bool | None:
    """Never equal to a rational number that is no decimal nor percentage (those math-verify rounds or scales); else ``None``."""
    other = answer if isinstance(gold, EulerProduct) else gold
    if isinstance(other, Scalar) and other.rational is not None and not (other.is_float or other.percent):
        return False
    return None
