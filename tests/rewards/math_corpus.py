"""A seeded corpus of (gold, completion) pairs written the way models write answers.

Used to check :class:`~mathgym.rewards.math.MathVerifier` against math-verify itself
(``tests/rewards/test_math_differential.py``) and to time it (``benchmarks/bench_math.py``): test and
benchmark data, so it lives here, not in the package (``from tests.rewards.math_corpus import ...``).
Each pair says which category it belongs to and which final-answer marker it carries by
construction (``"boxed"``, ``"gsm8k"``, ``"answer_is"``, ``"empty_box"`` for a last
``\\boxed{}`` left empty, or ``None``), so a test can tell where strict mode must refuse.
About half the answers are right (in equivalent or identical forms), half wrong in the
same notation.

Example:
    >>> pairs = generate_corpus(40, seed=0)
    >>> len(pairs), len({p.category for p in pairs}) == len(CATEGORIES)
    (40, True)
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing import get_context

__all__ = ["CATEGORIES", "NUMERIC_CATEGORIES", "Pair", "generate_corpus", "math_verify_verdicts"]


@dataclass(frozen=True)
class Pair:
    """One sample: the gold answer, the model's text, and what the text is by construction."""

    category: str
    gold: str
    completion: str
    marker: str | None  # "boxed" | "gsm8k" | "answer_is" | "empty_box" | None


_STEPS = ["First, {a} + {b} = {s}.", "We have {a} groups of {b}, which gives {p}.", "Subtracting, {s} - {a} = {b}.",
          "Let me double-check: {a} times {b} is {p}.", "Dividing both sides by {b} leaves {a}."]


def _reasoning(rng: random.Random) -> str:
    parts = []
    for step in rng.sample(_STEPS, rng.randint(0, 3)):
        a, b = rng.randint(2, 99), rng.randint(2, 30)
        parts.append(step.format(a=a, b=b, s=a + b, p=a * b))
    return " ".join(parts)


def _mark(rng: random.Random, answer: str, kinds: tuple[str, ...] = ("boxed", "gsm8k", "answer_is")) -> tuple[str, str]:
    """A final line carrying ``answer`` with one of ``kinds`` of marker, and that kind."""
    kind = rng.choice(kinds)
    endings = {
        "boxed": ["So the answer is $\\boxed{{{}}}$.", "Therefore \\boxed{{{}}}.", "\\[\\boxed{{{}}}\\]", "The final answer is $\\boxed{{{}}}$",
                  "\\boxed{{{}}}", "Hence $x = \\boxed{{{}}}$."],
        "gsm8k": ["#### {}", "#### {}\n"],
        "answer_is": ["The answer is {}.", "So the final answer is {}", "the answer is: {}", "The answer is {} because it checks out."],
    }[kind]
    return rng.choice(endings).format(answer), kind


def _finish(rng: random.Random, gold: str, answer: str, category: str, kinds: tuple[str, ...] = ("boxed", "gsm8k", "answer_is")) -> Pair:
    ending, kind = _mark(rng, answer, kinds)
    return Pair(category, gold, f"{_reasoning(rng)}\n{ending}".lstrip(), kind)


def _wrong_int(rng: random.Random, value: int) -> int:
    return value + rng.choice([-10, -1, 1, 2, 100])


def _integer(rng: random.Random) -> Pair:
    value = rng.randint(-50, 5000)
    shown = value if rng.random() < 0.5 else _wrong_int(rng, value)
    return _finish(rng, str(value), str(shown), "integer")


def _signed_or_padded(rng: random.Random) -> Pair:
    value = rng.randint(1, 500)
    shown = value if rng.random() < 0.5 else _wrong_int(rng, value)
    return _finish(rng, str(value), rng.choice([f"+{shown}", f"{shown}.0", f"00{shown}", f"{shown}.", f"{shown}.00"]), "signed_or_padded")


def _thousands(rng: random.Random) -> Pair:
    value = rng.randint(1000, 9_999_999)
    shown = value if rng.random() < 0.5 else _wrong_int(rng, value)
    form = rng.choice([f"{shown:,}", f"{shown:,}".replace(",", "{,}"), f"{shown:,}".replace(",", " "), f"{shown:,}".replace(",", "\\,"), str(shown)])
    gold = rng.choice([str(value), f"{value:,}"])
    return _finish(rng, gold, form, "thousands")


def _cents(rng: random.Random) -> tuple[str, int, int]:
    cents = rng.randint(1, 999_999)
    shown = cents if rng.random() < 0.5 else cents + rng.choice([-1, 1, 10, 100])
    return f"{cents // 100}.{cents % 100:02d}", *divmod(shown, 100)


def _decimal(rng: random.Random) -> Pair:
    value, whole, frac = _cents(rng)
    return _finish(rng, value, rng.choice([f"{whole}.{frac:02d}", f"{whole}.{frac:02d}0"]), "decimal")


def _decimal_comma(rng: random.Random) -> Pair:
    value, whole, frac = _cents(rng)
    form = rng.choice([f"{whole},{frac:02d}", f"{whole:,}".replace(",", ".") + f",{frac:02d}", f"{whole}{{,}}{frac:02d}"])
    return _finish(rng, value, form, "decimal_comma")


def _leading_dot(rng: random.Random) -> Pair:
    digit = rng.randint(1, 9)
    shown = digit if rng.random() < 0.5 else (digit % 9) + 1 if digit != 9 else 8
    return _finish(rng, f"0.{digit}", rng.choice([f".{shown}", f"0.{shown}", f"-.{shown}"]), "leading_dot")


def _scientific(rng: random.Random) -> Pair:
    mantissa, exponent = rng.randint(11, 99), rng.randint(2, 6)
    value = mantissa * 10 ** (exponent - 1)
    shown = mantissa if rng.random() < 0.5 else mantissa + 1
    m = f"{shown // 10}.{shown % 10}"
    form = rng.choice([f"{m} \\times 10^{{{exponent}}}", f"{m}e{exponent}", f"{m} \\cdot 10^{exponent}", f"{m}E+{exponent}"])
    return _finish(rng, str(value), form, "scientific")


def _fraction(rng: random.Random) -> Pair:
    num, den = rng.randint(1, 20), rng.randint(2, 21)
    shown = num if rng.random() < 0.5 else num + 1
    gold = rng.choice([f"\\frac{{{num}}}{{{den}}}", f"{num}/{den}", f"${num}/{den}$"])
    form = rng.choice([f"\\frac{{{shown}}}{{{den}}}", f"\\dfrac{{{shown}}}{{{den}}}", f"{shown}/{den}", f"{shown / den:.6f}",
                       f"\\frac{{{2 * shown}}}{{{2 * den}}}", f"{round(shown / den, 2)}"])
    return _finish(rng, gold, form, "fraction")


def _percent(rng: random.Random) -> Pair:
    value = rng.randint(1, 99)
    shown = value if rng.random() < 0.5 else value + 5
    gold = rng.choice([str(value), f"{value}\\%", f"{value / 100}"])
    form = rng.choice([f"{shown}\\%", f"{shown}%", f"{shown / 100}", f"{shown} percent", f"{shown}"])
    return _finish(rng, gold, form, "percent")


def _currency_units(rng: random.Random) -> Pair:
    cents = rng.randint(100, 999_999)
    value = f"{cents // 100}.{cents % 100:02d}"
    shown = cents if rng.random() < 0.5 else cents + 100
    amount = f"{shown // 100:,}.{shown % 100:02d}"
    form = rng.choice([f"\\${amount}", f"{amount} €", f"€{amount}", f"{amount}\\text{{ dollars}}", f"{shown // 100} \\text{{ cm}}",
                       f"{shown // 100}\\,\\mathrm{{kg}}", f"{amount} USD"])
    return _finish(rng, value, form, "currency_units")


_EXPRESSIONS = [  # (gold, right forms, wrong forms)
    ("$x^2+2x+1$", ["(x+1)^2", "x^2 + 2x + 1", "1 + 2x + x^2"], ["(x-1)^2", "x^2+1"]),
    ("$2\\pi$", ["2\\pi", "\\pi \\cdot 2", "6.283185"], ["\\pi", "4\\pi"]),
    ("$\\frac{\\pi}{4}$", ["\\frac{\\pi}{4}", "\\pi/4", "0.25\\pi"], ["\\frac{\\pi}{2}", "\\frac{\\pi}{3}"]),
    ("$3x - 7$", ["3x-7", "-7 + 3x"], ["3x+7", "7-3x"]),
    ("$e^{2}$", ["e^2", "e^{2}"], ["2e", "e^{3}"]),
    ("$\\log_2 8$", ["3", "\\log_2 8"], ["8", "2"]),
    ("$\\binom{5}{2}$", ["10", "\\binom{5}{2}"], ["20", "5"]),
]


def _latex_expression(rng: random.Random) -> Pair:
    gold, right, wrong = rng.choice(_EXPRESSIONS)
    return _finish(rng, gold, rng.choice(right if rng.random() < 0.5 else wrong), "latex_expression")


def _radical(rng: random.Random) -> Pair:
    gold, right, wrong = rng.choice([
        ("$\\frac{\\sqrt{2}}{2}$", ["\\frac{1}{\\sqrt{2}}", "\\frac{\\sqrt{2}}{2}", "\\sqrt{2}/2", "\\sqrt{\\frac{1}{2}}"], ["\\sqrt{2}", "\\frac{\\sqrt{3}}{2}"]),
        ("$2\\sqrt{3}$", ["\\sqrt{12}", "2\\sqrt{3}", "2 \\sqrt 3"], ["3\\sqrt{2}", "\\sqrt{6}"]),
        ("$\\sqrt[3]{2}$", ["2^{1/3}", "\\sqrt[3]{2}"], ["\\sqrt{2}", "2^{1/2}"]),
    ])
    return _finish(rng, gold, rng.choice(right if rng.random() < 0.5 else wrong), "radical")


def _several_answers(rng: random.Random) -> Pair:
    a, b = rng.randint(-5, 9), rng.randint(10, 19)
    right = rng.random() < 0.5
    c = b if right else b + 1
    gold = rng.choice([f"${a}, {b}$", f"$\\{{{a}, {b}\\}}$", f"$({a}, {b}), ({b}, {a})$"])
    if gold.startswith("$("):
        text = rng.choice([f"\\boxed{{({a}, {c})}}, \\boxed{{({c}, {a})}}", f"\\boxed{{({a}, {c}), ({c}, {a})}}", f"$\\boxed{{({a},{c})}}$ and $\\boxed{{({c},{a})}}$"])
    else:
        text = rng.choice([f"\\boxed{{{a}}}, \\boxed{{{c}}}", f"\\boxed{{{a}, {c}}}", f"\\boxed{{\\{{{a}, {c}\\}}}}", f"$x = \\boxed{{{a}}}$ or $x = \\boxed{{{c}}}$"])
    return Pair("sets_tuples", gold, f"{_reasoning(rng)}\nThe solutions are {text}.".lstrip(), "boxed")


def _interval(rng: random.Random) -> Pair:
    lo, hi = rng.randint(-9, 0), rng.randint(1, 9)
    shown_hi = hi if rng.random() < 0.5 else hi + 1
    gold = rng.choice([f"$[{lo}, {hi})$", f"$(-\\infty, {hi}]$"])
    if gold.startswith("$(-"):
        inner = rng.choice([f"(-\\infty, {shown_hi}]", f"x \\in (-\\infty, {shown_hi}]", f"x \\le {shown_hi}"])
    else:
        inner = rng.choice([f"[{lo}, {shown_hi})", f"x \\in [{lo}, {shown_hi})", f"{lo} \\le x < {shown_hi}"])
    text, kind = rng.choice([(f"the solution set is $\\boxed{{{inner}}}$.", "boxed"), (f"so the answer is ${inner}$", "answer_is"),
                             (f"The interval is ${inner}$.", None)])
    return Pair("interval", gold, f"{_reasoning(rng)}\nHence {text}".lstrip(), kind)


def _inequality(rng: random.Random) -> Pair:
    value = rng.randint(-9, 20)
    shown = value if rng.random() < 0.5 else value + 1
    gold = rng.choice([f"$x \\geq {value}$", f"$x > {value}$", f"$[{value}, \\infty)$"])
    op = ">" if ">" in gold and "geq" not in gold else "\\geq"
    inner = rng.choice([f"x {op} {shown}", f"{shown} \\le x" if op == "\\geq" else f"{shown} < x", f"x \\ge {shown}"])
    text, kind = rng.choice([(f"\\boxed{{{inner}}}", "boxed"), (f"\\boxed{{Therefore ${inner}$ is the solution.}}", "boxed"),
                             (f"the answer is ${inner}$.", "answer_is"), (f"we need ${inner}$.", None)])
    return Pair("inequality", gold, f"{_reasoning(rng)}\nSo {text}".lstrip(), kind)


def _equation(rng: random.Random) -> Pair:
    value = rng.randint(-20, 40)
    shown = value if rng.random() < 0.5 else value - 3
    gold = rng.choice([str(value), f"$x = {value}$"])
    inner = rng.choice([f"x = {shown}", f"x={shown}", f"{shown}", f"y = 2x + {shown}"])
    text, kind = rng.choice([(f"$\\boxed{{{inner}}}$", "boxed"), (f"The answer is ${inner}$.", "answer_is"), (f"Solving gives ${inner}$.", None)])
    return Pair("equation", gold, f"{_reasoning(rng)}\n{text}".lstrip(), kind)


def _matrix(rng: random.Random) -> Pair:
    a, b, c, d = (rng.randint(-9, 9) for _ in range(4))
    e = d if rng.random() < 0.5 else d + 1
    gold = f"$\\begin{{pmatrix}} {a} & {b} \\\\ {c} & {d} \\end{{pmatrix}}$"
    inner = rng.choice([f"\\begin{{pmatrix}} {a} & {b} \\\\ {c} & {e} \\end{{pmatrix}}", f"\\begin{{bmatrix}}{a}&{b}\\\\{c}&{e}\\end{{bmatrix}}"])
    text, kind = rng.choice([(f"$$\\boxed{{{inner}}}$$", "boxed"), (f"The matrix is ${inner}$.", None)])
    return Pair("matrix", gold, f"{_reasoning(rng)}\n{text}".lstrip(), kind)


def _text_in_box(rng: random.Random) -> Pair:
    value = rng.randint(2, 60)
    shown = value if rng.random() < 0.5 else value + 2
    gold = rng.choice([str(value), f"$x \\geq {value}$"])
    inner = rng.choice([f"\\text{{The answer is }} {shown}", f"Therefore $x \\geq {shown}$ is the solution.", f"\\text{{{shown} apples}}",
                        f"{shown} \\text{{ (after checking)}}"])
    return Pair("text_in_box", gold, f"{_reasoning(rng)}\n\\boxed{{{inner}}}".lstrip(), "boxed")


def _gsm8k(rng: random.Random) -> Pair:
    value = rng.randint(1, 100_000)
    shown = value if rng.random() < 0.5 else _wrong_int(rng, value)
    form = rng.choice(["#### {}", "#### {}", "#### {}\n", "#### ${}", "#### {}.\n\nI hope this helps!"])
    answer = f"{shown:,}" if rng.random() < 0.2 else str(shown)
    return Pair("gsm8k", str(value), f"{_reasoning(rng)}\n{form.format(answer)}".lstrip(), "gsm8k")


def _answer_is(rng: random.Random) -> Pair:
    value = rng.randint(1, 500)
    shown = value if rng.random() < 0.5 else value + 1
    return _finish(rng, str(value), rng.choice([str(shown), str(shown), f"${shown}$", f"{shown} apples"]), "answer_is", kinds=("answer_is",))


def _answer_variants(rng: random.Random) -> Pair:
    value = rng.randint(2, 500)
    shown = value if rng.random() < 0.5 else value + 1
    a = rng.randint(2, shown)
    text, kind = rng.choice([
        (f"The answer is 7, no wait, the answer is {shown}.", "answer_is"),
        (f"The answer is {shown} because {a} + {shown - a} = {shown}.", "answer_is"),
        (f"the answer is: \\frac{{{2 * shown}}}{{2}}", "answer_is"),
        (f"####{shown}", "gsm8k"),
        (f"#### {shown} (that is {a} + {shown - a})", "gsm8k"),
        (f"\\boxed{{{shown}}} is what I get; the answer is {shown}.", "boxed"),
    ])
    return Pair("answer_variants", str(value), f"{_reasoning(rng)}\n{text}".lstrip(), kind)


def _no_marker(rng: random.Random) -> Pair:
    value = rng.randint(1, 999)
    shown = value if rng.random() < 0.5 else value + 1
    cents = rng.randint(100, 99_999)
    money = f"{cents // 100:,}.{cents % 100:02d}"
    gold, text = rng.choice([
        (str(value), f"Answer ${shown}$"),
        (str(value), f"So we get {shown} apples in total."),
        (str(value), f"{shown}"),
        (str(value), f"I think it's ${shown}$, since {shown} - 1 = {shown - 1}."),
        (f"{cents / 100:.2f}", f"Total: {money} €"),
        (str(value), f"Result: \\({shown}\\)"),
    ])
    return Pair("no_marker", gold, f"{_reasoning(rng)}\n{text}".lstrip(), None)


_MATH_STYLE = [  # (gold as the math envs pass it, right forms, wrong forms): MATH-500's shapes of answer
    ("$\\frac{3\\sqrt{5}}{5}$", ["\\frac{3}{\\sqrt{5}}", "\\frac{3\\sqrt5}{5}", "\\tfrac35\\sqrt{5}"], ["\\frac{\\sqrt{5}}{3}", "\\frac{3\\sqrt{5}}{4}"]),
    ("$\\dfrac{14}{3}$", ["\\frac{14}{3}", "14/3", "\\dfrac{28}{6}"], ["\\frac{13}{3}", "\\frac{3}{14}"]),
    ("$4\\sqrt{2}$", ["\\sqrt{32}", "4 \\sqrt 2", "\\frac{8}{\\sqrt{2}}"], ["2\\sqrt{4}", "\\sqrt{8}"]),
    ("$\\frac{5\\pi}{6}$", ["\\frac{5}{6}\\pi", "5\\pi/6"], ["\\frac{\\pi}{6}", "\\frac{6\\pi}{5}"]),
    ("$1 + \\sqrt{3}$", ["\\sqrt{3} + 1", "1+\\sqrt3"], ["1 - \\sqrt{3}", "2\\sqrt{3}"]),
    ("$\\left( 3, \\frac{\\pi}{2} \\right)$", ["(3, \\frac{\\pi}{2})", "\\left(3, \\pi/2\\right)"], ["(3, \\pi)", "(2, \\frac{\\pi}{2})"]),
    ("$[-2, 7]$", ["[-2,7]", "\\left[ -2, 7 \\right]"], ["(-2, 7)", "[-2, 7)"]),
    ("$(-\\infty, 3]$", ["(-\\infty, 3]"], ["(-\\infty, 3)", "(-\\infty, 4]"]),
    ("$\\{-2, 1\\}$", ["\\{1, -2\\}", "\\{-2, 1\\}"], ["\\{2, -1\\}", "\\{-2, 1, 3\\}"]),
    ("$-2, 1$", ["1, -2", "-2,1"], ["2, -1", "-2, 3"]),
    ("$\\begin{pmatrix} 1 & -2 \\\\ 0 & 3 \\end{pmatrix}$", ["\\begin{bmatrix}1&-2\\\\0&3\\end{bmatrix}"], ["\\begin{pmatrix} 1 & 2 \\\\ 0 & 3 \\end{pmatrix}"]),
    ("$\\text{Evelyn}$", ["\\text{Evelyn}", "\\text{evelyn}"], ["\\text{Bob}"]),
    ("$25\\%$", ["25\\%", "25"], ["26\\%", "24"]),
]


def _math_style(rng: random.Random) -> Pair:
    gold, right, wrong = rng.choice(_MATH_STYLE)
    answer = rng.choice(right if rng.random() < 0.5 else wrong)
    ending = rng.choice(["So the answer is $\\boxed{{{}}}$.", "\\[\\boxed{{{}}}\\]", "The final answer is $\\boxed{{{}}}$", "\\boxed{{{}}}"])
    return Pair("math_style", gold, f"{_reasoning(rng)}\n{ending.format(answer)}".lstrip(), "boxed")


def _empty_last_box(rng: random.Random) -> Pair:
    value = rng.randint(1, 99)
    return Pair("empty_last_box", str(value), f"{_reasoning(rng)}\nSo \\boxed{{{value}}}. Wait, let me recheck: \\boxed{{}}".lstrip(), "empty_box")


CATEGORIES: dict[str, Callable[[random.Random], Pair]] = {
    "integer": _integer, "signed_or_padded": _signed_or_padded, "thousands": _thousands, "decimal": _decimal,
    "decimal_comma": _decimal_comma, "leading_dot": _leading_dot, "scientific": _scientific,
    "fraction": _fraction, "percent": _percent, "currency_units": _currency_units, "latex_expression": _latex_expression,
    "radical": _radical, "sets_tuples": _several_answers, "interval": _interval, "inequality": _inequality, "equation": _equation,
    "matrix": _matrix, "text_in_box": _text_in_box, "gsm8k": _gsm8k, "answer_is": _answer_is, "answer_variants": _answer_variants, "no_marker": _no_marker,
    "empty_last_box": _empty_last_box, "math_style": _math_style,
}
#: Plain numbers written plainly after a marker (the share the fast path is built for); the
#: other notations of numbers (signs, padding, separators, commas, units) have their own categories.
NUMERIC_CATEGORIES = ("integer", "decimal", "gsm8k", "answer_is")


def generate_corpus(n: int = 5000, seed: int = 0) -> list[Pair]:
    """``n`` pairs, the categories taken in turn, each drawn from a generator seeded by ``seed``."""
    rng = random.Random(seed)
    makers = list(CATEGORIES.values())
    return [makers[i % len(makers)](rng) for i in range(n)]


def _math_verify_verdict(pair: tuple[str, str]) -> bool:
    from math_verify import parse, verify  # noqa: PLC0415 - imported in the pool's processes only

    logging.disable(logging.CRITICAL)
    gold, completion = pair
    return bool(verify(parse(gold), parse(completion)))


def math_verify_verdicts(pairs: Sequence[Pair], processes: int = 2, timeout: float = 600.0) -> list[bool]:
    """math-verify's own verdicts, ``verify(parse(gold), parse(completion))`` with its defaults.

    Run in a pool of fresh processes, where math-verify's SIGALRM timeouts work (each task
    runs in a process's main thread); a pair it times out on is ``False``, as math-verify
    returns. Past ``timeout`` seconds for the whole list (a hang SIGALRM cannot stop, inside
    C code), the pool is terminated and :class:`multiprocessing.TimeoutError` raised. Call
    it under ``if __name__ == "__main__":`` in a script.
    """
    with get_context("spawn").Pool(processes) as pool:  # leaving the block terminates the workers
        pending = pool.map_async(_math_verify_verdict, [(p.gold, p.completion) for p in pairs], chunksize=16)
        return pending.get(timeout)
