"""The fast path on inequalities, equations and ``x \\in I``, against math-verify itself.

Random relations (``mathgym/rewards/math_relations.py``) in several spellings (``\\ge``,
``\\geq``, ``>``, flipped sides, chains, ``x \\in [a, b)``, bounds written as fractions,
radicals, multiples of π), right and near misses (another bound, strictness, direction,
variable, chain order), against golds of the same and other shapes (an interval, a number,
``x = c``): wherever the fast path decides, its verdict must be math-verify's
(``verify(parse(gold), parse(completion))``).
"""

from __future__ import annotations

import random
from fractions import Fraction

import pytest

from tests.rewards.math_corpus import Pair, math_verify_verdicts
from mathgym.rewards.math_fast import fast_answer, fast_decision, fast_gold, fast_verdict
from mathgym.rewards.math_relations import Member, Relation, read_answer
from tests.rewards.test_math_fast_values import _BOXES, _INLINE, _approx, _perturb, _positive, _render, _scalars, _sizes

SEED = 515151
_OPS = {"<": ["<", "\\lt", "<"], "<=": ["\\le", "\\leq", "\\leqslant"], ">": [">", "\\gt", ">"], ">=": ["\\ge", "\\geq", "\\geqslant"]}
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}
_VARIABLES = ["x"] * 8 + ["y", "n", "t", "m", "X", "e", "i", "a"]


def _bound(rng: random.Random) -> tuple[tuple, bool]:
    """A scalar (the parameters of tests.rewards.test_math_fast_values) and its sign."""
    if rng.random() < 0.5:
        return ("rational", (Fraction(rng.randint(0, 20)), 2, Fraction(1))), rng.random() < 0.3
    return _positive(rng), rng.random() < 0.2


def _write(rng: random.Random, bound: tuple[tuple, bool]) -> str:
    scalar, negative = bound
    if scalar[0] == "rational" and scalar[1][0] == 0:
        return "0"
    return _render(rng, scalar, negative)


def _value(bound: tuple[tuple, bool]) -> float:
    return -_approx(bound[0]) if bound[1] else _approx(bound[0])


def _relation(rng: random.Random, variable: str, op: str, bound: str) -> str:
    if rng.random() < 0.3:
        return f"{bound} {rng.choice(_OPS[_FLIP[op]])} {variable}"
    space = rng.choice([" ", "", "  "])
    return f"{variable}{space}{rng.choice(_OPS[op])}{space}{bound}"


def _near(rng: random.Random, bound: tuple[tuple, bool]) -> tuple[tuple, bool]:
    scalar, negative = bound
    return (_perturb(rng, scalar), negative) if rng.random() < 0.7 else (scalar, not negative)


def _relation_pair(rng: random.Random, endings: list[str]) -> Pair:
    """A gold relation, interval, number or equation, and an answer of a related shape."""
    shape = rng.choice(["single", "single", "chain", "equation", "member", "against_interval", "against_number"])
    right = rng.random() < 0.5
    variable = "x" if right else rng.choice(_VARIABLES)
    if shape in ("single", "against_interval", "against_number"):
        op, bound = rng.choice(list(_OPS)), _bound(rng)
        shown_op = op if right or rng.random() < 0.5 else rng.choice(list(_OPS))
        shown = bound if right or shown_op != op else _near(rng, bound)
        answer = _relation(rng, variable, shown_op, _write(rng, shown))
        if shape == "single":
            gold = _relation(rng, "x", op, _write(rng, bound))
        elif shape == "against_number":
            gold = _write(rng, bound)
            answer, gold = (answer, gold) if rng.random() < 0.5 else (gold, _relation(rng, "x", op, _write(rng, bound)))
        else:
            closed = "[" if op.endswith("=") else "("
            end = _write(rng, bound)
            gold = f"{closed}{end}, \\infty)" if op[0] == ">" else f"(-\\infty, {end}{']' if closed == '[' else ')'}"
            if rng.random() < 0.3:
                answer, gold = gold, answer
    elif shape == "chain":
        low, high = sorted([_bound(rng), _bound(rng)], key=_value)
        ops = [rng.choice(["<", "<="]), rng.choice(["<", "<="])]
        gold = f"{_write(rng, low)} {rng.choice(_OPS[ops[0]])} x {rng.choice(_OPS[ops[1]])} {_write(rng, high)}"
        shown_ops = ops if right or rng.random() < 0.5 else [rng.choice(["<", "<="]), ops[1]]
        shown_high = high if right or shown_ops != ops else _near(rng, high)
        low_text, high_text = _write(rng, low), _write(rng, shown_high)
        answer = rng.choice([
            f"{low_text} {rng.choice(_OPS[shown_ops[0]])} {variable} {rng.choice(_OPS[shown_ops[1]])} {high_text}",
            f"{high_text} {rng.choice(_OPS[_FLIP[shown_ops[1]]])} {variable} {rng.choice(_OPS[_FLIP[shown_ops[0]]])} {low_text}",
            f"{'[' if shown_ops[0] == '<=' else '('}{low_text}, {high_text}{']' if shown_ops[1] == '<=' else ')'}",
        ])
        if rng.random() < 0.3:
            gold = f"{'[' if ops[0] == '<=' else '('}{_write(rng, low)}, {_write(rng, high)}{']' if ops[1] == '<=' else ')'}"
    elif shape == "equation":
        bound = _bound(rng)
        shown = bound if right else _near(rng, bound)
        gold = rng.choice([f"x = {_write(rng, bound)}", _write(rng, bound), f"x={_write(rng, bound)}"])
        answer = rng.choice([f"{variable} = {_write(rng, shown)}", f"{variable}={_write(rng, shown)}", _write(rng, shown),
                             f"{_write(rng, shown)} = {variable}", f"{variable} \\ge {_write(rng, shown)}"])
    else:
        low, high = sorted([_bound(rng), _bound(rng)], key=_value)
        brackets = rng.choice(["[]", "[)", "(]", "()"])
        shown_high = high if right else _near(rng, high)
        interval = f"{brackets[0]}{_write(rng, low)}, {_write(rng, high)}{brackets[1]}"
        shown = f"{brackets[0]}{_write(rng, low)}, {_write(rng, shown_high)}{brackets[1]}"
        gold = rng.choice([interval, interval, f"x = {_write(rng, low)}", f"x \\in {interval}"])
        answer = rng.choice([f"{variable} \\in {shown}", f"{variable}\\in{shown}", f"{variable} \\in (-\\infty, {_write(rng, high)}]"])
    return Pair(shape, f"${gold}$", rng.choice(endings).format(answer), "boxed")


def _decided(pair: Pair) -> bool | None:
    gold = fast_gold(pair.gold)
    decided = fast_decision(gold, pair.completion) if gold is not None else None
    return None if decided is None else decided[0]


def test_reads_relations_as_math_verify_writes_them():
    assert read_answer("x \\ge 3") == read_answer("3 \\leq x") == read_answer("x\\geq3")
    assert read_answer("x > 3") != read_answer("x \\ge 3")
    chain = read_answer("-2 \\le x < \\frac{5}{2}")
    assert isinstance(chain, Relation) and [op for op, _ in chain.links] == [">=", "<"]
    assert read_answer("x = 5").is_equation and isinstance(read_answer("x \\in [1, 2)"), Member)
    for declined in ["m \\ge 3", "e > 1", "x \\geqslant 3", "x > 2.5", "5 = x", "x = y = 3", "1 < x > 2", "x \\in \\{1, 2\\}", "xy > 1",
                     "x \\ne 3", "x > \\infty", "X > 3", "x_1 > 3", "x \\ge 3 \\text{ cm}"]:
        assert not isinstance(read_answer(declined), (Relation, Member)), declined


def test_relation_verdicts_follow_math_verifys_rules():
    def verdict(gold: str, answer: str) -> bool | None:
        return fast_verdict(fast_gold(gold), read_answer(answer))

    assert verdict("$x > 3$", "3 < x") is True and verdict("$x > 3$", "x \\ge 3") is False
    assert verdict("$x \\geq 3$", "[3, \\infty)") is True and verdict("$[3, \\infty)$", "x \\ge 3") is False  # only a gold relation is a set
    assert verdict("$-1 \\le x < 2$", "2 > x \\ge -1") is False  # compared link by link in written order
    assert verdict("$x = 5$", "5") is True and verdict("5", "x = 5") is True and verdict("$x = 5$", "y = 5") is False
    assert verdict("$x = 5$", "x \\in [5, 6]") is None and verdict("5", "x \\ge 5") is False


def _checked(pairs: list) -> tuple[list, list]:
    """The pairs the fast path decides (with its verdicts) and math-verify's verdicts on them;
    fails on any pair where the two differ."""
    decided = [(p, v) for p in pairs if (v := _decided(p)) is not None]
    truth = math_verify_verdicts([p for p, _ in decided])
    wrong = [(p, v) for (p, v), t in zip(decided, truth) if v != t]
    assert not wrong, wrong[:5]
    return decided, truth


@pytest.mark.parametrize("size", _sizes(100, 900))
def test_fast_verdicts_on_fuzzed_relations_are_math_verifys(size):
    rng = random.Random(SEED)
    pairs = [_relation_pair(rng, _BOXES if rng.random() < 0.6 else _INLINE) for _ in range(size)]
    decided, truth = _checked(pairs)
    assert {p.category for p, _ in decided} >= {"single", "chain", "equation", "member", "against_interval", "against_number"}
    assert 0.2 < sum(truth) / len(truth) < 0.8 and len(decided) > 0.4 * len(pairs)


# -- plain numbers after several "answer"s, and after "answer … = N" ----------------------------

_EARLIER = ["The answer is 7, no wait, ", "answer 12 or ", "Answer: 9. Hmm, ", "The final answer is 4? No: ", "My answer was 3, but ", "answers: 5; ",
            "I answered 2. ", "the answer is $6$... ", "The answer is \\frac{1}{2}? ", ""]
_MARKS = ["the answer is ", "The answer is: ", "answer: ", "The final answer is ", "so the answer is $"]
_BECAUSE = [" because {a} + {b} = {m}.", " since {a} + {b} = {m}", " as {a}+{b} = {m} apples", " as {a} + {b} ={m}.", " because x = {m}",
            " because {a} + {b} = {m} + 0", " because\n{a} + {b} = {m}", " because " + "so " * 35 + "{a} + {b} = {m}", " = {m}", " = {m} = {m}",
            " because {a} + {b} = {m}%", " because {a} + {b} = ${m}$", " (= {m})", " because {a} + {b} = {m} and {a}", " = -{m}", " = {m}.5",
            ".", " apples.", " and 8 more", ""]


def _answer_variant(rng: random.Random, _endings: list[str] | None = None) -> Pair:
    value = rng.randint(2, 400)
    shown, other = (value if rng.random() < 0.5 else value + 1), (value if rng.random() < 0.5 else value + 2)
    a = rng.randint(1, shown)
    earlier = "".join(rng.choice(_EARLIER) for _ in range(rng.choice([0, 0, 1, 1, 2])))
    mark = rng.choice(_MARKS)
    number = f"{shown}$" if mark.endswith("$") else rng.choice([str(shown), f"{shown:,}", f"\\frac{{{2 * shown}}}{{2}}", f"-\\frac{{{shown}}}{{1}}"])
    tail = rng.choice(_BECAUSE if not earlier or rng.random() < 0.3 else _BECAUSE[-4:]).format(a=a, b=other - a, m=other)
    return Pair("answer_variant", str(value), f"{earlier}{mark}{number}{tail}", "answer_is")


def test_reads_the_last_answer_and_the_number_after_equals_as_math_verify_does():
    assert fast_answer("The answer is 7, no wait, the answer is 223.")[0].rational == 223
    assert fast_answer("The answer is 193 because 13 + 179 = 192.")[0].rational == 192  # math-verify's greedy ``answer.{0,100}=``
    assert fast_answer("the answer is: \\frac{204}{2}")[0].rational == 102
    for declined in ["Answer: 7, no wait, the answer is 223.", "The answer is 5 because 2 + 3 = 2 + 3", "The answer is 5 because\n2 + 3 = 5"]:
        assert fast_answer(declined) is None, declined


@pytest.mark.parametrize("size", _sizes(300, 900))
def test_fast_verdicts_on_answer_variants_are_math_verifys(size):
    rng = random.Random(SEED + 1)
    pairs = [_answer_variant(rng) for _ in range(size)]
    decided, truth = _checked(pairs)
    assert 0.2 < sum(truth) / len(truth) < 0.8 and 0.1 * len(pairs) < len(decided) < 0.8 * len(pairs)
    assert sum("no wait" in p.completion for p, _ in decided) > 5 and sum("= " in p.completion for p, _ in decided) > 10


# -- a number with words in \text{} inside the box (mathgym/rewards/math_words.py) --------------

_WORDINGS = ["The answer is ", "The answer is", "Total ", "Answer ", "The final answer is ", "pi ", "gamma ", "apples and pears ", "x or y ", "i ",
             "I ", "e ", "Infinity ", "percent ", "so the value is ", "Result: ", "It is I ", "It is i "]
_UNITS_WORDS = ["apples", "Apples", "dollars", "cm", "m", "s", "apples and pears", "i", "pi", "percent", "units (approx)", "e", "feet"]


def _words_pair(rng: random.Random, _endings: list[str] | None = None) -> Pair:
    n = rng.choice([rng.randint(1, 99), rng.randint(1, 99), 0, 0.5, -3])
    shown = n if rng.random() < 0.5 else rng.randint(1, 99)
    command = rng.choice(["\\text", "\\text", "\\textbf", "\\mathrm"])
    space = rng.choice(["", " "])
    wording, unit = (rng.choice(_WORDINGS[:4]), rng.choice(_UNITS_WORDS[:4])) if rng.random() < 0.5 else (rng.choice(_WORDINGS), rng.choice(_UNITS_WORDS))
    answer = rng.choice([f"{command}{{{wording}}}{space}{shown}", f"{command}{{{space}{shown} {unit}{space}}}"])
    gold = rng.choice([str(n), f"${n}$", f"${n}\\%$", f"$x = {n}$", f"$x \\ge {n}$", f"$[{n}, \\infty)$", f"$\\{{{n}, 100\\}}$", "$\\text{apples}$"])
    return Pair("words", gold, rng.choice(_BOXES).format(answer), "boxed")


@pytest.mark.parametrize("size", _sizes(70, 600))
def test_fast_verdicts_on_numbers_with_words_are_math_verifys(size):
    rng = random.Random(SEED + 2)
    pairs = [_words_pair(rng) for _ in range(size)]
    decided, truth = _checked(pairs)
    assert len(decided) > 0.2 * len(pairs)


# -- \frac{a}{b} and a/b after a marker -----------------------------------------------------------

_RATIO_MARKS = ["the answer is ", "The answer is: ", "answer: ", "The final answer is ", "So the final answer: ", "#### ", "####", "#### $",
                "Answer is ", "the answer is  "]
_RATIO_TAILS = ["", "", ".", " because it checks out.", ", so", ": done", " apples", "\n", "\n\nI hope it helps", " 5", " = 3", "%", " percent",
                ".5", "\\frac{1}{2}", " and $x$", " (approx)", "  ", " or 7"]


def _ratio_pair(rng: random.Random, _endings: list[str] | None = None) -> Pair:
    a, b = rng.randint(0, 30), rng.randint(1, 30)
    c = a if rng.random() < 0.5 else a + rng.choice([1, -1, b])
    k = rng.choice([1, 1, 2, 3])
    sign = rng.choice(["", "", "-"])
    ratio = rng.choice([f"{sign}\\frac{{{k * c}}}{{{k * b}}}", f"{sign}{k * c}/{k * b}", f"\\dfrac{{{c}}}{{{b}}}", f"{c}/0", f"({c}/{b})",
                        f"{c}/{b}/2", f"{sign}{k * c}/{k * b}"])
    value = Fraction(a, b) * (-1 if sign and rng.random() < 0.7 else 1)
    gold = rng.choice([f"{value.numerator}/{value.denominator}", f"$\\frac{{{value.numerator}}}{{{value.denominator}}}$", f"{float(value):.6f}",
                       str(round(float(value), 2)), f"{value.numerator}" if value.denominator == 1 else f"{value}", f"{a}\\%"])
    return Pair("ratio", gold, f"{rng.choice(['', 'Some steps. '])}{rng.choice(_RATIO_MARKS)}{ratio}{rng.choice(_RATIO_TAILS)}", "answer_is")


@pytest.mark.parametrize("size", _sizes(300, 900))
def test_fast_verdicts_on_marked_ratios_are_math_verifys(size):
    rng = random.Random(SEED + 3)
    pairs = [_ratio_pair(rng) for _ in range(size)]
    decided, truth = _checked(pairs)
    assert sum(truth) > 5 and 0.1 * len(pairs) < len(decided) < 0.8 * len(pairs)


# -- text from which math-verify can read only rational numbers -----------------------------------

_PIECES = ["The answer is ", "#### ", "So the final answer is ", "answer: ", "First, 3 + 4 = 7. ", "We get 12 apples. ", "\\sqrt{2}", "\\sqrt{12}",
           "\\pi", "2\\pi", "\\frac{\\pi}{4}", "\\frac{1}{2}", "\\frac{1}{\\sqrt{2}}", "2^{1/2}", "2**0.5", "1.414214", "0,5", "$\\sqrt{2}$",
           "\\(\\pi\\)", " [\\sqrt{3}] ", "\\boxed{\\sqrt{2}}", "3x-7", "(x+1)^2", "7 - 3", "2 * 3", "-5", "17/12", "100%", " 50 percent", " ",
           "\n", ".", " because it checks out.", "\\frac{22}{7}", "(2)", "x \\ge 3"]
_NEVER_RATIONAL = ["$\\sqrt{2}$", "$2\\sqrt{3}$", "$\\frac{\\sqrt{2}}{2}$", "$\\pi$", "$\\frac{\\pi}{4}$", "$1 + \\sqrt{3}$", "$x \\geq 3$", "$x > -1$",
                   "$\\frac{22}{7}$", "3", "$7$", "$x = \\sqrt{2}$", "0.5"]


def _rationals_pair(rng: random.Random, _endings: list[str] | None = None) -> Pair:
    text = "".join(rng.choice(_PIECES) for _ in range(rng.randint(1, 6)))
    return Pair("rationals", rng.choice(_NEVER_RATIONAL), text, None)


@pytest.mark.parametrize("size", _sizes(300, 900))
def test_fast_verdicts_on_text_of_rationals_only_are_math_verifys(size):
    rng = random.Random(SEED + 4)
    pairs = [_rationals_pair(rng) for _ in range(size)]
    decided, truth = _checked(pairs)
    assert sum(fast_decision(fast_gold(p.gold), p.completion)[1] == "rationals" for p, _ in decided) > 0.1 * len(pairs)


# -- polynomials in one variable (mathgym/rewards/math_polynomials.py) -----------------------------


_TIMES = ["", "", " ", " \\cdot ", "*"]


def _linear_factors(rng: random.Random, count: int) -> list[tuple[int, int]]:
    """``count`` factors ``a·x + b``."""
    return [(rng.choice([1, 1, 2, -1, 3]), rng.randint(-5, 5)) for _ in range(count)]


def _expand(factors: list[tuple[int, int]]) -> list[Fraction]:
    coefficients = [Fraction(1)]
    for a, b in factors:
        out = [Fraction(0)] * (len(coefficients) + 1)
        for k, c in enumerate(coefficients):
            out[k] += c * b
            out[k + 1] += c * a
        coefficients = out
    return coefficients


def _term(rng: random.Random, c: Fraction, k: int, variable: str) -> str:
    power = "" if k == 0 else variable if k == 1 else rng.choice([f"{variable}^{k}", f"{variable}^{{{k}}}"])
    magnitude = abs(c)
    if k and magnitude == 1:
        body = power
    elif magnitude.denominator != 1:
        body = rng.choice([f"\\frac{{{magnitude.numerator}}}{{{magnitude.denominator}}}{power}", f"\\frac{{{magnitude.numerator}{power}}}{{{magnitude.denominator}}}"])
    else:
        times = rng.choice(_TIMES) if k else ""
        body = f"{magnitude.numerator}{times}{power}"
    return ("-" if c < 0 else "+") + body


def _write_polynomial(rng: random.Random, factors: list[tuple[int, int]], variable: str) -> str:
    if rng.random() < 0.3 and len(factors) > 1:
        return "".join(f"({a if a not in (1, -1) else '-' if a == -1 else ''}{variable} {'+' if b >= 0 else '-'} {abs(b)})" for a, b in factors)
    if rng.random() < 0.2 and len(factors) == 2 and factors[0] == factors[1]:
        a, b = factors[0]
        return f"({a if a != 1 else ''}{variable}+{b})^2".replace("+-", "-")
    coefficients = _expand(factors)
    scale = rng.choice([1, 1, 1, 2])
    terms = [_term(rng, c / scale, k, variable) for k, c in enumerate(coefficients) if c]
    rng.shuffle(terms)
    text = rng.choice(["", " "]).join(terms).lstrip("+") or "0"
    if rng.random() < 0.2:
        text = text.replace("-", rng.choice(["+ -", "+-", "- --"]))  # ``2x + -16``; ``- --`` is no polynomial to the reader
    return text


def _polynomial_pair(rng: random.Random, endings: list[str]) -> Pair:
    factors = _linear_factors(rng, rng.choice([1, 1, 2, 2, 3]))
    right = rng.random() < 0.5
    shown = factors if right else [(a, b + rng.choice([1, -1])) if i == 0 else (a, b) for i, (a, b) in enumerate(factors)]
    variable = "x" if right or rng.random() < 0.6 else rng.choice(["y", "t", "m", "e", "i", "n", "X"])
    gold = _write_polynomial(rng, factors, "x")
    answer = _write_polynomial(rng, shown, variable)
    shape = rng.choice(["poly", "poly", "equation", "number"])
    if shape == "equation":
        gold, answer = rng.choice([(gold, f"y = {answer}"), (f"y = {gold}", f"y = {answer}"), (f"x = {rng.randint(-5, 5)}", f"y = {answer}"),
                                   (str(rng.randint(-5, 5)), f"y = {answer}"), (f"y = {gold}", answer)])
    elif shape == "number":
        gold, answer = rng.choice([(gold, str(rng.randint(-5, 5))), (str(rng.randint(-5, 5)), answer), (f"{gold}", "\\sqrt{2}"), ("x \\ge 2", answer)])
    return Pair(shape, f"${gold}$", rng.choice(endings).format(answer), "boxed")


def test_reads_polynomials_as_math_verify_does():
    assert read_answer("(x+1)^2") == read_answer("x^2 + 2x + 1") == read_answer("1+2 \\cdot x+x^{2}")
    assert read_answer("\\frac{x}{2} - 3") == read_answer("-3 + \\frac{1}{2}x")
    for declined in ["x^23", "x(x+1)", "2\\frac{x}{3}", "x2", "xy", "x + y", "2.5x", "e^{2}", "(x+1)2", "x^{-1}", "\\frac{1}{x}", "x - x", "2\\cdotx"]:
        assert read_answer(declined) is None, declined


@pytest.mark.parametrize("size", _sizes(300, 900))
def test_fast_verdicts_on_fuzzed_polynomials_are_math_verifys(size):
    rng = random.Random(SEED + 5)
    pairs = [_polynomial_pair(rng, _BOXES if rng.random() < 0.7 else _INLINE) for _ in range(size)]
    decided, truth = _checked(pairs)
    assert 0.2 < sum(truth) / len(truth) < 0.8 and len(decided) > 0.4 * len(pairs)


# -- several boxes: math-verify joins their contents ----------------------------------------------

_BETWEEN = [", ", " and ", " or ", "; ", " ", ",", " then ", " and also, as checked above, ", " then some words here and there ",
            " " + "word " * 15 + ", ", " $5$ ", " \\(2\\) ", " [1] ", "\n", " {x} "]


def _boxes_pair(rng: random.Random, _endings: list[str] | None = None) -> Pair:
    items = [_positive(rng) for _ in range(rng.randint(2, 3))]
    right = rng.random() < 0.5
    shown = list(items) if right else [*items[:-1], _perturb(rng, items[-1])]
    if rng.random() < 0.2:
        shown.append(shown[-1])  # the same box twice
    rng.shuffle(shown)
    boxes = [f"\\boxed{{{_render(rng, item)}}}" for item in shown]
    text = boxes[0]
    for box in boxes[1:]:
        text += rng.choice(_BETWEEN) + box
    gold = ", ".join(_render(rng, item) for item in items)
    gold = rng.choice([f"${gold}$", f"$\\{{{gold}\\}}$", f"${_render(rng, items[0])}$"])
    before = rng.choice(["The solutions are ", "So ", "The final answer is ", "We get $x$: ", ""])
    return Pair("boxes", gold, before + text + rng.choice([".", "", " % ", " is it.", " \\\\ done"]), "boxed")


@pytest.mark.parametrize("size", _sizes(100, 900))
def test_fast_verdicts_on_several_boxes_are_math_verifys(size):
    rng = random.Random(SEED + 6)
    pairs = [_boxes_pair(rng) for _ in range(size)]
    decided, truth = _checked(pairs)
    assert 0.1 < sum(truth) / len(truth) < 0.8 and len(decided) > 0.3 * len(pairs)


# -- "answer" followed by nothing math-verify can read: its rightmost match before it, or nothing ---

_DEAD = ["+57", "-.6", "\\$9,748.53", "€7", "\\frac{\\pi}{4}", "+5", "(5)", "[5]", "5", " 5", "=5", "= 5", "$5$", "\\(5\\)", "x", "-(4)", "**5",
         "\\sqrt{2}", "one", "-.5%", "\\$-3", "+.5", "1.7 \\cdot 10^3", "10^3", "2 ^ 3", "10^3.", "10^3)", "10^3 + 1", "0^3", "10^{3}", "7^2"]
_REASONING = ["First, 3 + 4 = 7.", "We have 12 apples.", "So x = 5.", "It costs 2.50 in total.", "Then 40%.", "So 3/4 of it.", "Now $7$.", "",
              "Hence 1,234 of them", "We get (2+3)", "x", "\\boxed{}", "Total: 17", "It costs \\$5.", "It costs \\$5", "(that is 12 + 5)",
              "(that is 7 + 5", "so 12 (5 + 7)", "so 12 (5 + 7))", "((5)", "#### 17 (that is 12 + 5)", "it is 5) or 7"]


def _dead_answer_pair(rng: random.Random, _endings: list[str] | None = None) -> Pair:
    reasoning = " ".join(rng.choice(_REASONING) for _ in range(rng.randint(0, 3)))
    marker = rng.choice(["The answer is ", "the answer is: ", "Answer: ", "The final answer is ", "#### ", "answer ", "The answer is ", ""])
    tail = rng.choice(["", ".", " because it checks out.", " apples", " (approx)", " and 6", "\nI hope"])
    gold = rng.choice(["7", "5", "17", "12"] if rng.random() < 0.6 else ["0.75", "2.5", "1234", "40\\%", "0.4", "$\\frac{3}{4}$", "57", "-0.6", "1000",
                                                                         "8", "1000.0", "49", "1000\\%", "$10^3$"])
    return Pair("dead", gold, f"{reasoning}\n{marker}{rng.choice(_DEAD)}{tail}".lstrip(), "answer_is")


@pytest.mark.parametrize("size", _sizes(300, 900))
def test_fast_verdicts_after_an_unreadable_answer_are_math_verifys(size):
    rng = random.Random(SEED + 7)
    pairs = [_dead_answer_pair(rng) for _ in range(size)]
    decided, truth = _checked(pairs)
    shapes = {fast_answer(p.completion)[1] for p, _ in decided}
    assert {"unmarked", "nothing"} <= shapes and sum(truth) > 5 and len(decided) > 0.3 * len(pairs), shapes


# -- percentages: 7%, 7 percent, 74\% in plain text, a percentage against a float ------------------


def _percent_pair(rng: random.Random, _endings: list[str] | None = None) -> Pair:
    n = rng.choice([rng.randint(1, 150), rng.randint(1, 99) + 0.5])
    m = n if rng.random() < 0.5 else rng.choice([n + 1, n + 5, n * 10, n / 100])
    m_text = f"{m:g}"
    gold = rng.choice([f"{n:g}", f"{n:g}\\%", f"${n:g}\\%$", f"{n / 100:g}", f"{n / 100:.3f}", f"$\\frac{{{int(n * 2)}}}{{200}}$", f"{n:g}.0"])
    answer = rng.choice([f"{m_text}%", f"{m_text} %", f"{m_text} percent", f"{m_text} percentage", f"{m_text}\\%", f"-{m_text}%", f"0{m_text}%",
                         f"{m_text}pct", f"{m_text}"])
    if rng.random() < 0.5:
        text = rng.choice(_BOXES).format(answer)
    else:
        text = rng.choice(["The answer is {}.", "#### {}", "the answer is: {} because it checks out", "So the final answer is {}"]).format(answer)
    return Pair("percent", gold, text, "boxed")


@pytest.mark.parametrize("size", _sizes(100, 900))
def test_fast_verdicts_on_percentages_are_math_verifys(size):
    rng = random.Random(SEED + 8)
    pairs = [_percent_pair(rng) for _ in range(size)]
    decided, truth = _checked(pairs)
    assert 0.1 < sum(truth) / len(truth) < 0.8 and len(decided) > 0.4 * len(pairs)


# -- a sentence in a box: "\boxed{Therefore $x \ge 5$ is the solution.}" ---------------------------

_SENTENCE_BEFORE = ["Therefore ", "So ", "Hence, ", "", "The answer is ", "We get ", "Thus we have "]
_SENTENCE_AFTER = [" is the solution.", " holds.", ".", " is the solution", " percent.", " for all n.", " is it, 5.", " and so on.", ", done."]


def _sentence_pair(rng: random.Random, _endings: list[str] | None = None) -> Pair:
    value = rng.randint(-5, 30)
    shown = value if rng.random() < 0.5 else value + rng.choice([1, 2])
    forms = ["x \\geq {}", "x > {}", "{} \\le x", "x = {}", "{}", "[{}, \\infty)", "{}x + 1", "\\frac{{{}}}{{2}}"]
    form = rng.choice(forms)
    inner = form.format(shown)
    words = lambda: " ".join("".join(rng.choice("abcdefghijklmnopqrstuvwxyzEIT") for _ in range(rng.randint(1, 7))) for _ in range(rng.randint(1, 4)))  # noqa: E731
    opening, closing = (rng.choice(_SENTENCE_BEFORE), rng.choice(_SENTENCE_AFTER)) if rng.random() < 0.5 else (words() + " ", " " + words() + ".")
    box = f"\\boxed{{{opening}${inner}${closing}}}"
    before = rng.choice(["So ", "First, 3 + 4 = 7.\nSo ", "", "So ", "We get $y$. ", "The final answer is "])
    after = rng.choice(["", ".", "", " 5", " $z$"])
    gold = f"${form.format(value)}$" if rng.random() < 0.5 else rng.choice([f"$x \\geq {value}$", str(value), f"$x = {value}$", f"$[{value}, \\infty)$"])
    return Pair("sentence", gold, f"{before}{box}{after}", "boxed")


@pytest.mark.parametrize("size", _sizes(100, 900))
def test_fast_verdicts_on_sentences_in_a_box_are_math_verifys(size):
    rng = random.Random(SEED + 9)
    pairs = [_sentence_pair(rng) for _ in range(size)]
    decided, truth = _checked(pairs)
    assert sum(fast_answer(p.completion)[1] == "sentence" for p, _ in decided) > 0.1 * len(pairs) and sum(truth) > 10


def test_new_readers_take_linear_time_on_hostile_text():
    import time

    texts = ["the answer is 5 " * 50_000, "The answer is 5 because " + "= " * 100_000 + "= 5", "\\boxed{1} " * 50_000, "\\boxed{1}, " * 5 + "\\boxed{2" * 50_000,
             "\\boxed{Therefore $x$ " + "a" * 300_000 + ".}", " [" + "a" * 500_000, " [a" * 100_000, "The answer is +5 " + "a 1" * 200_000,
             "\\boxed{\\text{" + "a " * 100_000 + "} 5}", "\\boxed{" + "(" * 100_000 + "x" + ")" * 100_000 + "}", "\\boxed{" + "x > " * 100_000 + "}",
             "#### \\frac{1}{2}" + " word" * 100_000, "answer: " + "1/" * 100_000, "\\boxed{x \\in " + "[" * 100_000 + "}",
             "$\\boxed{1}$ or " * 100_000, "$\\boxed{1}$ or $\\boxed{" + "{" * 200_000 + "$"]
    golds = [fast_gold(g) for g in ("$\\sqrt{2}$", "5", "$x \\geq 1$", "$x^2 + 1$")]
    for text in texts:
        for read in [fast_answer] + [lambda text, gold=gold: fast_decision(gold, text) for gold in golds]:
            start = time.perf_counter()
            read(text)
            assert time.perf_counter() - start < 0.5, text[:40]


# -- boxes each in its own $…$: "$x = \boxed{4}$ or $x = \boxed{11}$" --------------------------------

_ENV_JOINS = [" or ", " and ", ", ", ",and ", " , or ", ", and ", " or maybe ", " ", "\n", ";", " or\n"]


def _dollar_boxes_pair(rng: random.Random, _endings: list[str] | None = None) -> Pair:
    items = _scalars(rng, rng.randint(2, 4))
    right = rng.random() < 0.5
    shown = list(items) if right else [*items[:-1], _perturb(rng, items[-1])]
    if rng.random() < 0.15:
        shown = shown + shown[:3]  # more environments than math-verify chains
    rng.shuffle(shown)
    envs = [f"${rng.choice(['x = ', '', 'x_1 = ', 'y='])}\\boxed{{{_render(rng, item)}}}$" for item in shown]
    text = envs[0] + "".join(rng.choice(_ENV_JOINS) + env for env in envs[1:])
    gold = rng.choice([f"${', '.join(_render(rng, item) for item in items)}$", f"$\\{{{', '.join(_render(rng, item) for item in items)}\\}}$",
                       f"${_render(rng, items[-1])}$"])
    before = rng.choice(["The solutions are ", "So ", "", "The final answer is ", "We get \\(x\\): "])
    return Pair("dollar_boxes", gold, before + text + rng.choice([".", "", " %", " is it.", " 5"]), "boxed")


@pytest.mark.parametrize("size", _sizes(300, 900))
def test_fast_verdicts_on_boxes_in_dollars_are_math_verifys(size):
    rng = random.Random(SEED + 10)
    pairs = [_dollar_boxes_pair(rng) for _ in range(size)]
    decided, truth = _checked(pairs)
    assert sum(truth) > 10 and len(decided) > 0.3 * len(pairs)


# -- higher roots: \sqrt[3]{2}, 2^{1/3} (mathgym/rewards/math_roots.py) -------------------------------


def _root_text(rng: random.Random, base: int, index: int) -> str:
    if index == 2:
        return rng.choice([f"\\sqrt{{{base}}}", f"{base}^{{1/2}}"])
    return rng.choice([f"\\sqrt[{index}]{{{base}}}", f"{base}^{{1/{index}}}", f"\\sqrt[{index}]{{ {base} }}", f"{base} ^ {{1/{index}}}"])


def _root_pair(rng: random.Random, endings: list[str]) -> Pair:
    base, index = rng.choice([2, 3, 5, 6, 10, 12, 4, 8, 9, 16]), rng.choice([2, 3, 3, 4, 5])
    right = rng.random() < 0.5
    shown_base, shown_index = (base, index) if right else rng.choice([(base + 1, index), (base, index + 1), (base, 2)])
    gold = rng.choice([f"${_root_text(rng, base, index)}$", f"${_root_text(rng, base, index)}$", str(round(base ** (1 / index), 6)), "2"])
    answer = rng.choice([_root_text(rng, shown_base, shown_index), _root_text(rng, shown_base, shown_index), f"{shown_base ** (1 / shown_index):.6f}",
                         str(shown_base), f"2\\sqrt[3]{{{shown_base}}}"])
    ending = rng.choice(endings + ["#### {}", "The answer is {}.", "So the final answer is {}"])
    return Pair("root", gold, ending.format(answer), "boxed")


def test_reads_higher_roots_as_math_verify_does():
    assert read_answer("\\sqrt[3]{2}") == read_answer("2^{1/3}") != read_answer("\\sqrt[4]{2}")
    assert read_answer("2^{1/2}") == read_answer("\\sqrt{2}") and read_answer("8^{1/2}") == read_answer("2\\sqrt{2}")
    for declined in ["\\sqrt[3]{8}", "\\sqrt[3]{16}", "4^{1/3}", "2^{2/3}", "\\sqrt[3]{2.5}", "\\sqrt[10]{2}", "\\sqrt[3]{1}"]:
        assert read_answer(declined) is None, declined


@pytest.mark.parametrize("size", _sizes(300, 900))
def test_fast_verdicts_on_higher_roots_are_math_verifys(size):
    rng = random.Random(SEED + 11)
    pairs = [_root_pair(rng, _BOXES if rng.random() < 0.6 else _INLINE) for _ in range(size)]
    decided, truth = _checked(pairs)
    assert sum(truth) > 10 and len(decided) > 0.3 * len(pairs)


def _euler_pair(rng: random.Random, _endings: list[str] | None = None) -> Pair:
    mantissa = rng.choice(["7.3", "73", "1", "0.5", "2.0", "0.0", "12.25", "7"])
    exponent = rng.choice(["4", "1", "0", "+4", "-2", "12", "9"])
    answer = f"{mantissa}{rng.choice(['e', 'e', 'E', ' e', 'e '])}{exponent}"
    value = float(mantissa) * 10 ** int(exponent.lstrip("+"))
    gold = rng.choice([f"{value:g}", str(int(value)) if value == int(value) else f"{value}", f"${mantissa}$", "$\\pi$", "0", f"{float(mantissa) * 2.718281828:.6f}",
                       f"${mantissa} \\times 10^{{{exponent}}}$", "7\\%"])
    return Pair("euler", gold, rng.choice(_BOXES).format(answer), "boxed")


@pytest.mark.parametrize("size", _sizes(70, 600))
def test_fast_verdicts_on_e_notation_in_a_box_are_math_verifys(size):
    rng = random.Random(SEED + 12)
    pairs = [_euler_pair(rng) for _ in range(size)]
    decided, truth = _checked(pairs)
    assert sum(fast_answer(p.completion)[1] == "boxed" and "e" in p.completion for p, _ in decided) > 0.1 * len(pairs)


# -- sets of tuples and intervals: "(9, 14), (14, 9)" --------------------------------------------


def _group_text(rng: random.Random, group: tuple[str, int, int]) -> str:
    brackets, a, b = group
    a_text = rng.choice([str(a), f"\\frac{{{2 * a}}}{{2}}"]) if rng.random() < 0.2 else str(a)
    inner = f"{a_text},{rng.choice(['', ' '])}{b}"
    return f"\\left{brackets[0]} {inner} \\right{brackets[1]}" if rng.random() < 0.1 else f"{brackets[0]}{inner}{brackets[1]}"


def _group_set_pair(rng: random.Random, _endings: list[str] | None = None) -> Pair:
    a, b = rng.randint(-5, 9), rng.randint(10, 19)
    groups = [("()", a, b), ("()", b, a)] + ([("[]", a, b + 1)] if rng.random() < 0.2 else [])
    right = rng.random() < 0.5
    shown = list(groups) if right else rng.choice([[("()", a, b + 1), ("()", b + 1, a)], groups[:1], [("[)", a, b), ("()", b, a)], groups + groups[:1],
                                                  [("()", b, a), ("()", b, a)]])
    rng.shuffle(shown)
    texts = [_group_text(rng, g) for g in shown]
    answer = rng.choice([f"\\boxed{{{', '.join(texts)}}}", ", ".join(f"\\boxed{{{t}}}" for t in texts), " and ".join(f"$\\boxed{{{t}}}$" for t in texts),
                         f"\\boxed{{\\{{{', '.join(texts)}\\}}}}"])
    gold = ", ".join(_group_text(rng, g) for g in groups)
    gold = rng.choice([f"${gold}$", f"${gold}$", f"$\\{{{gold}\\}}$", str(a)])
    return Pair("group_set", gold, f"The solutions are {answer}.", "boxed")


@pytest.mark.parametrize("size", _sizes(100, 900))
def test_fast_verdicts_on_sets_of_tuples_are_math_verifys(size):
    rng = random.Random(SEED + 13)
    pairs = [_group_set_pair(rng) for _ in range(size)]
    decided, truth = _checked(pairs)
    assert sum(truth) > 20 and len(decided) > 0.3 * len(pairs)
