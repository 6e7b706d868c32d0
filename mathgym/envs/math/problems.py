"""Built-in math problem generator: deterministic by seed, five difficulty levels.

=====  ==============================================================================
level  what it asks
=====  ==============================================================================
0      one addition of two numbers below 100 ("What is 23 + 45?")
1      one operation of + - * / on larger numbers (division always exact)
2      two operations with precedence and parentheses, negative results allowed
3      fractions, percentages and linear equations in one unknown
4      multi-step word problems (rates, shopping, sharing, discounts)
=====  ==============================================================================

Every problem comes with a short worked solution ending in ``\\boxed{answer}``, which
is what the supervised warm start and expert demonstrations use.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

MAX_LEVEL = 4

#: One in ``TEST_MODULUS`` problems (by a hash of its text) belongs to the test split,
#: the rest to the train split: the two splits never share a problem.
TEST_MODULUS = 5


@dataclass(frozen=True)
class Problem:
    """A generated problem.

    Attributes:
        question: The problem statement.
        answer: The gold answer (an integer or a reduced fraction such as ``3/4``).
        solution: A short worked solution ending in ``\\boxed{answer}``.
        level: Difficulty level it was generated at.
    """

    question: str
    answer: str
    solution: str
    level: int

    @property
    def problem_id(self) -> str:
        """A stable id derived from the text (the same problem gets the same id anywhere)."""
        return f"gen-L{self.level}-" + hashlib.sha1(self.question.encode()).hexdigest()[:12]

    @property
    def split(self) -> str:
        """``"test"`` for one problem in :data:`TEST_MODULUS`, else ``"train"``."""
        digest = int(hashlib.sha1(self.question.encode()).hexdigest(), 16)
        return "test" if digest % TEST_MODULUS == 0 else "train"


def fmt(value: Fraction | int) -> str:
    """Format an exact number as an integer or a reduced fraction ``p/q``."""
    value = Fraction(value)
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


def _int(rng: np.random.Generator, low: int, high: int) -> int:
    """A uniform integer in ``[low, high]`` (both ends included)."""
    return int(rng.integers(low, high + 1))


def _level0(rng: np.random.Generator) -> Problem:
    a, b = _int(rng, 0, 99), _int(rng, 0, 99)
    return Problem(f"What is {a} + {b}?", str(a + b), f"{a} + {b} = {a + b}. \\boxed{{{a + b}}}", 0)


def _level1(rng: np.random.Generator) -> Problem:
    op = ("+", "-", "*", "/")[_int(rng, 0, 3)]
    if op == "+":
        a, b = _int(rng, 100, 999), _int(rng, 100, 999)
        c = a + b
    elif op == "-":
        a, b = _int(rng, 100, 999), _int(rng, 10, 999)
        a, b = max(a, b), min(a, b)
        c = a - b
    elif op == "*":
        a, b = _int(rng, 2, 99), _int(rng, 2, 19)
        c = a * b
    else:
        b, c = _int(rng, 2, 19), _int(rng, 2, 99)
        a = b * c
    return Problem(f"What is {a} {op} {b}?", str(c), f"{a} {op} {b} = {c}. \\boxed{{{c}}}", 1)


def _level2(rng: np.random.Generator) -> Problem:
    a, b, c = _int(rng, 2, 50), _int(rng, 2, 50), _int(rng, 2, 12)
    form = _int(rng, 0, 3)
    if form == 0:
        text, first, value = f"{a} + {b} * {c}", f"{b} * {c} = {b * c}", a + b * c
    elif form == 1:
        text, first, value = f"({a} + {b}) * {c}", f"{a} + {b} = {a + b}", (a + b) * c
    elif form == 2:
        text, first, value = f"{a} - {b} * {c}", f"{b} * {c} = {b * c}", a - b * c
    else:
        text, first, value = f"({a} - {b}) * {c}", f"{a} - {b} = {a - b}", (a - b) * c
    return Problem(f"What is {text}?", str(value), f"{first}, so {text} = {value}. \\boxed{{{value}}}", 2)


def _fraction_sum(rng: np.random.Generator) -> Problem:
    p = Fraction(_int(rng, 1, 9), _int(rng, 2, 9))
    q = Fraction(_int(rng, 1, 9), _int(rng, 2, 9))
    total = p + q
    question = f"What is {fmt(p)} + {fmt(q)}? Give the answer as a reduced fraction."
    return Problem(question, fmt(total), f"{fmt(p)} + {fmt(q)} = {fmt(total)}. \\boxed{{{fmt(total)}}}", 3)


def _percentage(rng: np.random.Generator) -> Problem:
    pct = (5, 10, 15, 20, 25, 30, 40, 50, 60, 75)[_int(rng, 0, 9)]
    base = _int(rng, 1, 40) * 20
    value = Fraction(pct * base, 100)
    question = f"What is {pct}% of {base}?"
    return Problem(question, fmt(value), f"{pct}/100 * {base} = {fmt(value)}. \\boxed{{{fmt(value)}}}", 3)


def _linear(rng: np.random.Generator) -> Problem:
    a, x, b = _int(rng, 2, 12), _int(rng, -20, 20), _int(rng, -30, 30)
    c = a * x + b
    sign = "+" if b >= 0 else "-"
    question = f"Solve for x: {a}x {sign} {abs(b)} = {c}."
    solution = f"{a}x = {c} - ({b}) = {c - b}, so x = {c - b}/{a} = {x}. \\boxed{{{x}}}"
    return Problem(question, str(x), solution, 3)


def _level3(rng: np.random.Generator) -> Problem:
    return (_fraction_sum, _percentage, _linear)[_int(rng, 0, 2)](rng)


_NAMES = ("Ava", "Ben", "Chloe", "Dev", "Ema", "Farid", "Grace", "Hugo", "Ines", "Jun")
_ITEMS = ("apples", "pencils", "stickers", "books", "marbles", "cookies")


def _rate(rng: np.random.Generator) -> Problem:
    name, speed, hours, extra = _NAMES[_int(rng, 0, 9)], _int(rng, 30, 90), _int(rng, 2, 6), _int(rng, 10, 60)
    total = speed * hours + extra
    question = (
        f"{name} drives at {speed} km per hour for {hours} hours, then drives another {extra} km. "
        "How many kilometres does "
        f"{name} drive in total?"
    )
    solution = f"{speed} * {hours} = {speed * hours} km, plus {extra} km is {total} km. \\boxed{{{total}}}"
    return Problem(question, str(total), solution, 4)


def _shopping(rng: np.random.Generator) -> Problem:
    name, item = _NAMES[_int(rng, 0, 9)], _ITEMS[_int(rng, 0, 5)]
    count, price, paid = _int(rng, 2, 9), _int(rng, 2, 15), 0
    cost = count * price
    paid = (cost // 10 + 1 + _int(rng, 0, 5)) * 10
    change = paid - cost
    question = f"{name} buys {count} {item} at ${price} each and pays with ${paid}. How many dollars of change does {name} get?"
    solution = f"{count} * {price} = {cost} dollars; {paid} - {cost} = {change}. \\boxed{{{change}}}"
    return Problem(question, str(change), solution, 4)


def _sharing(rng: np.random.Generator) -> Problem:
    name, item = _NAMES[_int(rng, 0, 9)], _ITEMS[_int(rng, 0, 5)]
    friends, each, kept = _int(rng, 2, 8), _int(rng, 2, 12), _int(rng, 1, 20)
    total = friends * each + kept
    question = (
        f"{name} has {total} {item}, keeps {kept} and shares the rest equally among {friends} friends. "
        "How many does each friend get?"
    )
    solution = f"{total} - {kept} = {total - kept}; {total - kept} / {friends} = {each}. \\boxed{{{each}}}"
    return Problem(question, str(each), solution, 4)


def _discount(rng: np.random.Generator) -> Problem:
    item, price = _ITEMS[_int(rng, 0, 5)], _int(rng, 2, 40) * 10
    pct = (10, 20, 25, 50)[_int(rng, 0, 3)]
    count = _int(rng, 2, 5)
    unit = Fraction(price * (100 - pct), 100)
    total = unit * count
    question = f"A box of {item} costs ${price}. During a {pct}% off sale, how many dollars do {count} boxes cost?"
    solution = (
        f"{pct}% off {price} leaves {fmt(unit)}; {count} * {fmt(unit)} = {fmt(total)}. \\boxed{{{fmt(total)}}}"
    )
    return Problem(question, fmt(total), solution, 4)


def _level4(rng: np.random.Generator) -> Problem:
    return (_rate, _shopping, _sharing, _discount)[_int(rng, 0, 3)](rng)


_LEVELS: tuple[Callable[[np.random.Generator], Problem], ...] = (_level0, _level1, _level2, _level3, _level4)


def generate(rng: np.random.Generator, level: int, split: str = "train", *, max_tries: int = 1000) -> Problem:
    """Draw one problem of ``level`` from ``split`` using ``rng``.

    Args:
        rng: Source of randomness (an env's ``np_random``); same state, same problem.
        level: Difficulty from 0 to :data:`MAX_LEVEL`.
        split: ``"train"``, ``"test"`` (the two never share a problem) or ``"all"``.
        max_tries: Draws allowed to land in the requested split.

    Example:
        >>> generate(np.random.default_rng(0), 0).question
        'What is 85 + 63?'
    """
    if not 0 <= level <= MAX_LEVEL:
        raise ValueError(f"difficulty must be between 0 and {MAX_LEVEL}, got {level}")
    for _ in range(max_tries):
        problem = _LEVELS[level](rng)
        if split == "all" or problem.split == split:
            return problem
    raise RuntimeError(f"no level-{level} problem landed in split {split!r} after {max_tries} draws")
