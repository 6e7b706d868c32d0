"""Inequalities, equations and ``x \\in S`` in a final answer, read and compared as math-verify 0.9 does.

latex2sympy reads ``x \\ge 3`` as a sympy relation, ``-2 \\le x < 5`` as an ``And`` of two
relations in the order written, ``x = 3`` as ``Eq(x, 3)`` and ``x \\in [1, 2)`` as
``Eq(x, Interval)``. ``math_verify.grader.sympy_expr_eq`` then compares them so:

* **equations**: ``x = c`` is an assignment (its left side a symbol). When only one side
  is an equation, that side is replaced by its right side (``x = 5`` against ``5`` compares
  5 with 5, either way round). Two assignments are equal when the variables are the same
  and the right sides equal (``x - c₁`` against ``x - c₂``); ``x = 5`` against ``y = 5``
  is not. Failing that, sympy's ``solve`` compares their solutions: ``y = 2x + 14`` (a
  polynomial right side, :mod:`~mathgym.rewards.math_polynomials`) never equals ``x = c``,
  whose solution is a number, while ``x = 2x + 14`` equals ``x = -14`` (declined).
* **inequalities**: two relations compare link by link in written order (``a \\le x < b``
  against ``a \\le x < b``; a chain written the other way round, ``b > x \\ge a``, is not
  equal, nor is a single relation to a chain). Two links are equal when they are the same
  relation, or one is the other flipped (``x > 3`` and ``3 < x``): same variable, same
  direction, same strictness, equal bounds. A gold inequality against an interval is
  compared as its set (``x \\ge 3`` equals ``[3, \\infty)``); an answered inequality
  against a gold interval, or a number against an inequality either way, is never equal.
* **membership**: ``x \\in S`` against a gold that is no equation is ``S``.

The reader takes a single lowercase variable from ``VARIABLES`` (letters that no unit rule
of math-verify erases and that are neither ``e`` nor ``i``), ``<``, ``>``, ``\\le``,
``\\leq``, ``\\lt``, ``\\ge``, ``\\geq``, ``\\gt``, ``=``, ``\\in`` and exact bounds of
:mod:`~mathgym.rewards.math_values`'s scalar grammar (no decimals, no percentages):
``x op c``, ``c op x``, ``c op x op c`` (both links the same direction), ``x = c``,
``x \\in I`` (an interval), ``y = p`` with ``p`` a polynomial. Everything else is declined. ``tests/rewards/test_math_fast_shapes.py``
checks the verdicts against math-verify on fuzzed relations.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import NamedTuple

from mathgym.rewards.math_polynomials import Polynomial, read_polynomial
from mathgym.rewards.math_roots import EulerProduct, Root, read_euler_product, read_root
from mathgym.rewards.math_values import (
    MAX_VALUE_CHARS, Group, Infinity, Scalar, Value, prepare_value_text, read_scalar, read_value, scalar_verdict,
)

#: Variables read: single lowercase letters math-verify neither erases as a unit (``m``, ``s``…) nor reads as a constant.
VARIABLES = frozenset("abknpqruvwxyz")
_OPERATOR = re.compile(r"(\\(?:leq?|geq?|[lg]t|in)(?![A-Za-z])|<|>|=)", re.ASCII)
_NORMAL = {"\\le": "<=", "\\leq": "<=", "\\lt": "<", "<": "<", "\\ge": ">=", "\\geq": ">=", "\\gt": ">", ">": ">", "=": "="}
_FLIPPED = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "="}


class Relation(NamedTuple):
    """``variable op bound`` links in written order, each with the variable on the left (``3 < x`` is ``x > 3``)."""

    variable: str
    links: tuple[tuple[str, Scalar | Polynomial], ...]  # (one of "<", "<=", ">", ">=", "="; bound: a polynomial only after "=")

    @property
    def is_equation(self) -> bool:
        return self.links[0][0] == "="


class Member(NamedTuple):
    """``variable \\in interval``."""

    variable: str
    interval: Group


Answer = Value | Relation | Member | Polynomial | Root | EulerProduct
Verdict = Callable[[Answer, Answer], "bool | None"]


def read_answer(text: str) -> Answer | None:
    """A relation or membership if ``text`` is one (see above), else the first reading of ``text`` as a value.

    In order: :func:`~mathgym.rewards.math_values.read_value`, a polynomial
    (:mod:`~mathgym.rewards.math_polynomials`), a higher root or ``7.3e4``
    (:mod:`~mathgym.rewards.math_roots`); ``None`` when none reads it.

    Example:
        >>> read_answer("3 < x") == read_answer("x \\\\gt 3")
        True
    """
    found = _read_relation(text)
    if found is not None:
        return found
    value = read_value(text)
    return value if value is not None else read_polynomial(text) or read_root(text) or read_euler_product(text)


def _read_relation(text: str) -> Relation | Member | None:
    if len(text) > MAX_VALUE_CHARS or not text.isascii() or not _OPERATOR.search(text):
        return None
    parts = [prepare_value_text(part) if i % 2 == 0 else part for i, part in enumerate(_OPERATOR.split(text))]
    if None in parts:
        return None
    if len(parts) == 3 and parts[1] == "\\in":
        interval = read_value(parts[2])
        is_interval = isinstance(interval, Group) and interval.kind == "interval"
        return Member(parts[0], interval) if parts[0] in VARIABLES and is_interval else None  # type: ignore[arg-type]
    if "\\in" in parts or len(parts) not in (3, 5):
        return None
    ops = [_NORMAL[op] for op in parts[1::2]]
    if len(parts) == 3:
        left, right = parts[0], parts[2]
        if left in VARIABLES:
            bound = _bound(right) if ops[0] != "=" else _bound(right) or read_polynomial(right)
            return None if bound is None else Relation(left, ((ops[0], bound),))
        if right in VARIABLES and ops[0] != "=":  # ``5 = x`` is no assignment to math-verify
            bound = _bound(left)
            return None if bound is None else Relation(right, ((_FLIPPED[ops[0]], bound),))
        return None
    low, variable, high = parts[0], parts[2], parts[4]
    if variable not in VARIABLES or "=" in ops or (ops[0][0] != ops[1][0]):
        return None
    low_bound, high_bound = _bound(low), _bound(high)
    if low_bound is None or high_bound is None:
        return None
    return Relation(variable, ((_FLIPPED[ops[0]], low_bound), (ops[1], high_bound)))


def _bound(text: str) -> Scalar | None:
    value = read_scalar(text)
    return value if isinstance(value, Scalar) and not value.is_float and not value.percent else None


def relation_verdict(gold: Answer, answer: Answer, verdict: Verdict) -> bool | None:
    """math-verify's verdict when either side is a relation or a membership, or ``None`` where not certain.

    ``verdict`` compares two values (called with the sides an equation unwraps to).
    """
    if isinstance(gold, Member):
        return None
    gold_equation = isinstance(gold, Relation) and gold.is_equation
    if isinstance(answer, Member):
        return None if gold_equation else verdict(gold, answer.interval)
    answer_equation = isinstance(answer, Relation) and answer.is_equation
    if gold_equation and answer_equation:
        return _link_verdict(gold.variable, gold.links[0], answer.variable, answer.links[0])  # type: ignore[union-attr]
    if answer_equation:
        return verdict(gold, answer.links[0][1])  # type: ignore[union-attr]
    if gold_equation:
        return verdict(gold.links[0][1], answer)  # type: ignore[union-attr]
    if isinstance(gold, Relation) and isinstance(answer, Relation):
        if len(gold.links) != len(answer.links):
            return False
        verdicts = [_link_verdict(gold.variable, g, answer.variable, a) for g, a in zip(gold.links, answer.links)]
        return False if False in verdicts else (True if all(verdicts) else None)
    if isinstance(gold, Relation):
        if isinstance(answer, Scalar):
            return False
        interval = _as_interval(gold)
        is_interval = isinstance(answer, Group) and answer.kind == "interval"
        return verdict(interval, answer) if interval is not None and is_interval else None
    if isinstance(gold, Scalar) or (isinstance(gold, Group) and gold.kind == "interval"):
        return False  # an inequality is never a number, and never equals a gold interval (math-verify: no set-relation comparison)
    return None


def _link_verdict(gold_variable: str, gold: tuple, answer_variable: str, answer: tuple) -> bool | None:
    if isinstance(gold[1], Polynomial) or isinstance(answer[1], Polynomial):  # ``y = 2x + 1``
        if (gold_variable, gold) == (answer_variable, answer):
            return True
        if isinstance(gold[1], Polynomial) == isinstance(answer[1], Polynomial):
            return None  # two equations in two variables: sympy's solve may find them equivalent
        variable, polynomial = (gold_variable, gold[1]) if isinstance(gold[1], Polynomial) else (answer_variable, answer[1])
        # ``y = 2x + 14`` solved keeps a free variable: never the other's ``x = c`` (``x = 2x + 14`` is ``x = -14`` to it)
        return False if polynomial.variable != variable else None
    if gold_variable != answer_variable or gold[0] != answer[0]:
        return False
    return scalar_verdict(gold[1], answer[1])


def _as_interval(relation: Relation) -> Group | None:
    """The set of an inequality (``x > 3`` is ``(3, \\infty)``), or ``None`` when empty or a point."""
    if len(relation.links) == 1:
        op, bound = relation.links[0]
        closed = op.endswith("=")
        if op[0] == ">":
            return Group("interval", (bound, Infinity(False)), (closed, False))
        return Group("interval", (Infinity(True), bound), (False, closed))
    (low_op, low), (high_op, high) = relation.links
    if low_op[0] == "<":
        (low_op, low), (high_op, high) = (high_op, high), (low_op, low)
    apart = high.approx() - low.approx()
    if not apart > 1e-9 * max(1.0, abs(low.approx()), abs(high.approx())) or not math.isfinite(apart):
        return None
    return Group("interval", (low, high), (low_op.endswith("="), high_op.endswith("=")))
