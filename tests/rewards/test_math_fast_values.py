"""The fast path on MATH-style answers, against math-verify itself.

Random answers of every shape the fast path reads (fractions, radicals, multiples of π,
sums of those, percentages, sets, intervals, tuples, matrices, words), each rendered in
several LaTeX forms, right and wrong: wherever the fast path decides, its verdict must be
math-verify's (``verify(parse(gold), parse(completion))``). MATH-500's reference answers,
boxed as written and perturbed, are checked the same way, and the share of them the fast
path decides is kept from shrinking.
"""

from __future__ import annotations

import random
from fractions import Fraction
from pathlib import Path

import pytest

from mathgym.envs.math.data import load_jsonl
from mathgym.rewards.math import latex_gold
from tests.rewards.math_corpus import Pair, math_verify_verdicts
from mathgym.rewards.math_fast import fast_answer, fast_gold, fast_verdict
from mathgym.rewards.math_values import Group, Matrix, Scalar, Text, read_value

MATH500 = Path(__file__).parents[1] / "data" / "math500_test.jsonl"
SEED = 424242
_BOXES = ["\\boxed{{{}}}", "So the answer is $\\boxed{{{}}}$.", "\\[\\boxed{{{}}}\\]", "Hence $x = \\boxed{{{}}}$.", "The final answer is $\\boxed{{{}}}$",
          "Thus \\boxed{{{}}} is it."]


def _rational(rng: random.Random, value: Fraction) -> str:
    n, d = value.numerator, value.denominator
    sign = "-" if n < 0 else ""
    n = abs(n)
    if d == 1:
        return rng.choice([f"{sign}{n}", f"{sign}\\frac{{{2 * n}}}{{2}}", f"{sign}{n}"])
    k = rng.choice([1, 1, 2, 3])
    frac = rng.choice(["\\frac", "\\dfrac", "\\tfrac"])
    return rng.choice([f"{sign}{frac}{{{k * n}}}{{{k * d}}}", f"{sign}{n}/{d}", f"\\frac{{{sign}{n}}}{{{d}}}" if sign else f"{n}/{d}"])


def _radical(rng: random.Random, c: Fraction, r: int) -> str:
    """``c·√r`` in one of several forms (``r`` square-free, ``c > 0``)."""
    n, d = c.numerator, c.denominator
    forms = [f"\\frac{{{n}\\sqrt{{{r}}}}}{{{d}}}", f"\\frac{{{n}}}{{{d}}}\\sqrt{{{r}}}", f"\\sqrt{{{n * n * r}}}/{d}",
             f"\\frac{{{n * r}}}{{{d}\\sqrt{{{r}}}}}", f"\\frac{{\\sqrt{{{n * n * r}}}}}{{{d}}}"]
    if d == 1:
        forms += [f"{n}\\sqrt{{{r}}}", f"\\sqrt{{{n * n * r}}}", f"{n} \\sqrt {r}" if r < 10 else f"{n}\\sqrt{{{r}}}"]
        if n == 1:
            forms += [f"\\sqrt{{{r}}}", f"\\sqrt{r}" if r < 10 else f"\\sqrt{{{r}}}"]
    return rng.choice(forms)


def _pi(rng: random.Random, c: Fraction) -> str:
    n, d = c.numerator, c.denominator
    forms = [f"\\frac{{{n}\\pi}}{{{d}}}", f"\\frac{{{n}}}{{{d}}}\\pi", f"{n}\\pi/{d}"]
    if d == 1:
        forms += [f"{n}\\pi", f"{n} \\pi"] + (["\\pi"] if n == 1 else [])
    elif n == 1:
        forms += [f"\\frac{{\\pi}}{{{d}}}", f"\\pi/{d}"]
    return rng.choice(forms)


def _positive(rng: random.Random) -> tuple[str, tuple]:
    """A random positive exact scalar: (kind, parameters)."""
    kind = rng.choice(["rational", "radical", "pi", "sum"])
    c = Fraction(rng.randint(1, 9), rng.choice([1, 1, 2, 3, 4, 6]))
    return kind, (c, rng.choice([2, 3, 5, 6, 7, 10, 11]), Fraction(rng.randint(1, 5)))


def _render(rng: random.Random, scalar: tuple[str, tuple], negative: bool = False) -> str:
    kind, (c, r, a) = scalar
    if kind == "rational":
        return _rational(rng, -c if negative else c)
    sign = "-" if negative else ""
    if kind == "radical":
        return sign + _radical(rng, c, r)
    if kind == "pi":
        return sign + _pi(rng, c)
    root = _radical(rng, c, r)
    return f"{sign}{a} + {root}" if rng.random() < 0.5 or negative else f"{root} + {a}"


def _perturb(rng: random.Random, scalar: tuple[str, tuple]) -> tuple[str, tuple]:
    kind, (c, r, a) = scalar
    change = rng.choice(["c", "r", "a", "kind"])
    if change == "c":
        c = c + rng.choice([1, Fraction(1, 2), -Fraction(c.numerator, 2 * c.denominator)])
    elif change == "r":
        r = {2: 3, 3: 2}.get(r, 2)
    elif change == "a":
        a += 1
    else:
        kind = rng.choice(["rational", "radical", "pi", "sum"])
    return kind, (c, r, a)


def _scalars(rng: random.Random, count: int) -> list[tuple[str, tuple]]:
    values: list = []
    while len(values) < count:
        value = _positive(rng)
        if all(abs(_approx(value) - _approx(v)) > 1e-3 for v in values):
            values.append(value)
    return values


def _approx(scalar: tuple[str, tuple]) -> float:
    kind, (c, r, a) = scalar
    return float({"rational": c, "radical": c * Fraction(r**0.5), "pi": c * Fraction(3.141592653589793), "sum": a + c * Fraction(r**0.5)}[kind])


def _fuzzed_pair(rng: random.Random, endings: list[str] = _BOXES) -> Pair:
    """A gold ``$…$`` and a boxed answer of the same shape, right about half of the time."""
    right = rng.random() < 0.5
    shape = rng.choice(["scalar", "scalar", "negative", "percent", "set", "bare_set", "interval", "tuple", "matrix", "text"])
    if shape in ("scalar", "negative"):
        value = _positive(rng)
        shown = value if right else _perturb(rng, value)
        gold, answer = _render(rng, value, shape == "negative"), _render(rng, shown, shape == "negative")
    elif shape == "percent":
        n = rng.randint(1, 150)
        m = n if right else n + rng.choice([1, 5, -1])
        gold = rng.choice([f"{n}\\%", f"{n}"])
        answer = rng.choice([f"{m}\\%", f"{m}", f"\\frac{{{m}}}{{100}}", f"{m / 100}"])
    elif shape in ("set", "bare_set"):
        items = _scalars(rng, rng.randint(2, 4))
        shown = list(items) if right else [*items[:-1], _perturb(rng, items[-1])]
        rng.shuffle(shown)
        join = lambda values: ", ".join(_render(rng, v, rng.random() < 0.3 and v[0] == "rational") for v in values)  # noqa: E731
        gold, answer = (f"\\{{{join(items)}\\}}", f"\\{{{join(shown)}\\}}") if shape == "set" else (join(items), join(shown))
    elif shape == "interval":
        low, high = sorted(_scalars(rng, 2), key=_approx)
        brackets = rng.choice(["[]", "[)", "(]", "()"])
        other = brackets if right or rng.random() < 0.5 else rng.choice(["[]", "[)", "(]", "()"])
        shown_high = high if right or other != brackets else _perturb(rng, high)
        ends = [_render(rng, low), _render(rng, high)]
        if rng.random() < 0.3:
            ends[rng.randrange(2)] = "-\\infty" if not ends or rng.random() < 0.5 else "\\infty"
        gold = f"{brackets[0]}{ends[0]}, {ends[1]}{brackets[1]}"
        shown_ends = [ends[0], _render(rng, shown_high) if ends[1] not in ("\\infty", "-\\infty") else ends[1]]
        answer = rng.choice([f"{other[0]}{shown_ends[0]}, {shown_ends[1]}{other[1]}", f"\\left{other[0]} {shown_ends[0]}, {shown_ends[1]} \\right{other[1]}"])
    elif shape == "tuple":
        items = _scalars(rng, rng.randint(2, 3))
        if len(items) == 2:
            items.sort(key=_approx, reverse=True)
        shown = items if right else [_perturb(rng, items[0]), *items[1:]]
        gold = "(" + ", ".join(_render(rng, v) for v in items) + ")"
        answer = "(" + ", ".join(_render(rng, v) for v in shown) + ")"
    elif shape == "matrix":
        cells = [rng.randint(-9, 9) for _ in range(rng.choice([2, 4, 6]))]
        shown = cells if right else [*cells[:-1], cells[-1] + 1]
        columns = 1 if len(cells) == 2 else 2
        gold = _matrix(rng, cells, columns)
        answer = _matrix(rng, shown, columns)
    else:
        words = ["Evelyn", "east", "odd", "even", "neither", "Monday", "yes", "no", "cm", "inches", "degrees", "A", "C", "pi", "e", "i", "x"]
        word = rng.choice(words)
        shown = word if right else rng.choice(words)
        gold = rng.choice([f"\\text{{{word}}}", f"\\text{{{word.lower()}}}"])
        answer = rng.choice([f"\\text{{{shown}}}", f"\\text{{{shown.upper()}}}", f"\\text{{ {shown} }}"])
    return Pair(shape, f"${gold}$", rng.choice(endings).format(answer), "boxed")


def _matrix(rng: random.Random, cells: list[int], columns: int) -> str:
    env = rng.choice(["pmatrix", "bmatrix"])
    rows = [cells[i : i + columns] for i in range(0, len(cells), columns)]
    body = " \\\\ ".join(" & ".join(str(c) for c in row) for row in rows)
    return f"\\begin{{{env}}} {body} \\end{{{env}}}"


def _decided(pair: Pair) -> bool | None:
    gold, found = fast_gold(pair.gold), fast_answer(pair.completion)
    return None if gold is None or found is None else fast_verdict(gold, found[0])


def test_reads_math_style_values_exactly():
    assert read_value("\\frac{3\\sqrt{5}}{5}") == read_value("\\frac{3}{\\sqrt 5}") == read_value("\\tfrac35\\sqrt{5}")
    assert read_value("2\\sqrt{3}") == read_value("\\sqrt{12}")
    assert read_value("\\frac{\\pi}{4}") == read_value("\\pi/4")
    assert read_value("1+\\sqrt5") == read_value("\\sqrt{5} + 1")
    assert read_value("\\left( 3, \\frac{\\pi}{2} \\right)").kind == "tuple"  # 3 > π/2: math-verify's tuple
    assert read_value("(1, 2)").kind == "interval" and read_value("(-\\infty, 3]").closed == (False, True)
    assert isinstance(read_value("\\begin{pmatrix} 1 & 2 \\\\ 3 & 4 \\end{pmatrix}"), Matrix)
    assert read_value("\\text{Evelyn}") == Text("evelyn") and isinstance(read_value("25\\%"), Scalar)
    assert isinstance(read_value("-2, 1"), Group)
    for declined in ["2\\frac12", "1, 000", "0.5\\pi", "\\sqrt{2.0}", "x+1", "1 0", "\\sqrt[3]{2}", "5\\,000", "2^{1/3}", "\\pm 1", "(1, 1)", "[3, 1]"]:
        assert read_value(declined) is None, declined


def test_hostile_box_contents_are_declined_quickly():
    for text in ["\\sqrt{" * 5000, "\\frac{" * 5000 + "1", "(" * 10000, "1+" * 5000 + "1", "\\sqrt{99999999999}", "\\pi" * 50]:
        assert read_value(text) is None
        assert fast_answer(f"\\boxed{{{text}}}") is None


#: Fuzzed pairs: math-verify's own verdict costs about 0.1 s a pair on a CPU, so the default run
#: checks the first part of each seeded stream and ``-m heavy`` the whole of it.
def _sizes(default: int, heavy: int) -> list:
    return [default, pytest.param(heavy, marks=pytest.mark.heavy)]


@pytest.mark.parametrize("size", _sizes(150, 900))
def test_fast_verdicts_on_fuzzed_math_style_answers_are_math_verifys(size):
    rng = random.Random(SEED)
    pairs = [_fuzzed_pair(rng) for _ in range(size)]
    decided = [(p, v) for p in pairs if (v := _decided(p)) is not None]
    truth = math_verify_verdicts([p for p, _ in decided])
    wrong = [(p, v) for (p, v), t in zip(decided, truth) if v != t]
    assert not wrong, wrong[:5]
    shapes = {p.category for p, _ in decided}
    assert shapes >= {"scalar", "negative", "percent", "set", "bare_set", "interval", "tuple", "matrix", "text"}, shapes
    assert 0.25 < sum(truth) / len(truth) < 0.75 and len(decided) > 0.6 * len(pairs)


def _math500_pairs() -> list[Pair]:
    """Each MATH-500 answer against itself boxed, against a perturbed copy, and against its reference solution."""
    rng, pairs = random.Random(SEED), []
    for record in load_jsonl(MATH500):
        gold = latex_gold(record.answer)
        pairs.append(Pair("reference", gold, f"So the answer is $\\boxed{{{record.answer}}}$.", "boxed"))
        pairs.append(Pair("solution", gold, record.solution, "boxed"))
        digits = [i for i, c in enumerate(record.answer) if c.isdigit()]
        if digits:
            at = rng.choice(digits)
            perturbed = record.answer[:at] + str((int(record.answer[at]) + rng.randint(1, 8)) % 10) + record.answer[at + 1 :]
            pairs.append(Pair("perturbed", gold, f"\\boxed{{{perturbed}}}", "boxed"))
    return pairs


@pytest.mark.heavy
def test_fast_verdicts_on_math500_answers_are_math_verifys():
    pairs = _math500_pairs()
    decided = [(p, v) for p in pairs if (v := _decided(p)) is not None]
    truth = math_verify_verdicts([p for p, _ in decided])
    wrong = [(p, v) for (p, v), t in zip(decided, truth) if v != t]
    assert not wrong, wrong[:5]


def test_fast_path_decides_most_math500_answers():
    """A count, not a timing: how many MATH-500 answers (boxed as written) the fast path decides."""
    pairs = [p for p in _math500_pairs() if p.category == "reference"]
    decided = [p for p in pairs if _decided(p) is not None]
    assert len(decided) >= 300, len(decided)


# -- notations of one number in a box (mathgym/rewards/math_notation.py) ----------------------

_UNITS = ["\\text{ apples}", "\\text{ cm}", " \\text{dollars}", "\\,\\mathrm{kg}", "\\ \\text{m}^2", "\\mbox{ km}", "\\textbf{ units}",
          "\\text{ (after checking)}", "\\text{ percent}", "\\text{ apples and pears}", "\\text{ e}"]


def _notation(rng: random.Random, value: Fraction) -> str:
    """``value`` (a multiple of 1/100) written in one of the notations math-verify reads in a box."""
    sign = "-" if value < 0 else ""
    whole, cents = divmod(abs(value.numerator) * 100 // value.denominator, 100)
    decimal = f"{whole}.{cents:02d}" if cents else str(whole)
    form = rng.choice(["unit", "currency", "padded", "dot", "thousands", "scientific", "groups"])
    if form == "unit":
        return f"{sign}{decimal}{rng.choice(_UNITS)}"
    if form == "currency":
        unit = rng.choice(["", " \\text{ dollars}"])
        return f"\\${sign}{decimal}" if rng.random() < 0.5 else f"\\$ {decimal}{unit}"
    if form == "padded":
        return rng.choice([f"+{decimal}", f"00{decimal}", f"{sign}{decimal}.00" if not cents else f"{sign}{decimal}0", f"{sign}0{decimal}"])
    if form == "dot":
        return f"{sign}.{cents:02d}".rstrip("0") if cents else f"{sign}{decimal}"
    if form == "thousands":
        return f"{sign}{whole:,}".replace(",", rng.choice([",", "{,}"])) + (f".{cents:02d}" if cents else "")
    if form == "scientific":
        digits, exponent = (str(whole * 100 + cents), -2)
        digits = digits.rstrip("0") or "0"
        exponent += len(str(whole * 100 + cents)) - len(digits)
        mantissa = f"{digits[0]}.{digits[1:]}" if len(digits) > 1 else digits
        exponent += len(digits) - 1
        return sign + rng.choice([f"{mantissa} \\times 10^{{{exponent}}}", f"{mantissa}\\cdot 10^{{{exponent}}}", f"{mantissa}E{exponent:+d}",
                                  f"{mantissa}E{exponent}", f"{mantissa}e{exponent}"])
    groups = f"{whole:,}".split(",")
    return rng.choice([" ", "\\,", "\\ ", "\\;", " \\, "]).join(groups) if len(groups) > 1 else f"{whole} {cents}"


def _notation_pair(rng: random.Random) -> Pair:
    value = Fraction(rng.choice([rng.randint(1, 99), rng.randint(100, 9_999_999), rng.randint(1, 99_999) / 100]))
    value = Fraction(round(value * 100), 100) * rng.choice([1, 1, 1, -1])
    shown = value if rng.random() < 0.5 else value + rng.choice([1, Fraction(1, 100), 100, -10])
    gold = str(value.numerator) if value.denominator == 1 else f"{float(value):.2f}".rstrip("0")
    gold = rng.choice([gold, f"{gold}", f"${gold}$"]) if value.denominator == 1 or rng.random() < 0.5 else gold
    if rng.random() < 0.15:  # a number against a set, or a set against a number
        gold, answer = (gold, f"{_notation(rng, shown)}, {rng.randint(1, 9)}") if rng.random() < 0.5 else (f"${value}, 7$", _notation(rng, shown))
        return Pair("set_number", gold, rng.choice(_BOXES).format(answer), "boxed")
    return Pair("notation", gold, rng.choice(_BOXES).format(_notation(rng, shown)), "boxed")


def test_reads_number_notations_as_math_verify_does():
    assert read_value("56 \\text{ apples}") == read_value("56") == read_value("056") == read_value("+56")
    assert read_value("\\$12.50") == read_value("12.50\\text{ dollars}") == read_value("12.50")
    assert read_value("8.9 \\times 10^{5}").terms == read_value("8.9E+5").terms == read_value("890000").terms
    assert read_value("12\\,345").terms == read_value("357").terms  # latex2sympy adds juxtaposed integers
    assert read_value("1{,}234.5") == read_value("1234.5") and read_value(".5").terms == read_value("0.5").terms
    for declined in ["8.9e5", "7.", "56 \\text{ percent}", "\\text{56 apples}", "\\text{The answer is } 56", "\\$5\\%", "1 {,} 234"]:
        assert read_value(declined) is None or isinstance(read_value(declined), Group), declined
    assert fast_verdict(fast_gold("110"), read_value("1.1 \\times 10^{2}")) is None  # math-verify: 1.1*10**2 != 110
    assert fast_verdict(fast_gold("120"), read_value("1.1 \\times 10^{2}")) is False
    assert fast_verdict(fast_gold("17"), read_value("1494,17")) is False  # a number is never a set of two


def test_fast_verdicts_on_number_notations_are_math_verifys():
    rng = random.Random(SEED + 1)
    pairs = [_notation_pair(rng) for _ in range(500)]
    decided = [(p, v) for p in pairs if (v := _decided(p)) is not None]
    truth = math_verify_verdicts([p for p, _ in decided])
    wrong = [(p, v) for (p, v), t in zip(decided, truth) if v != t]
    assert not wrong, wrong[:5]
    assert 0.2 < sum(truth) / len(truth) < 0.8 and len(decided) > 0.5 * len(pairs)


def test_text_with_spaces_and_closed_infinite_ends_as_math_verify_reads_them():
    assert read_value("\\text{ e }") is None  # math-verify's unit rules erase `` e }``: unparseable to it
    assert read_value("\\text{e}") == Text("e")
    assert fast_verdict(fast_gold("$[-\\infty, 3]$"), read_value("(-\\infty, 3]")) is True  # an infinite end is open either way
    assert fast_verdict(fast_gold("$[1, \\infty]$"), read_value("[1, \\infty)")) is True
    assert fast_verdict(fast_gold("$[1, \\infty)$"), read_value("(1, \\infty)")) is False


_INLINE = ["The answer is ${}$.", "Answer: ${}$", "So the final answer is ${}$", "The matrix is ${}$.", "Result: \\({}\\)", "${}$",
           "We get ${}$ in the end", "${}$ 5", "Answer ${}$ = 4", "${}$%", "So $x = {}$", "3 $ {}$", "answer and answer ${}$", "${}$ \\frac{{1}}{{2}}",
           "The answer, after a very long detour through many words, is ${}$", "the answer is ${}$, not [2]", "so \\({}\\) and $5$", "${}$ I hope"]


@pytest.mark.parametrize("size", _sizes(120, 700))
def test_fast_verdicts_on_one_inline_latex_answer_are_math_verifys(size):
    """MATH-style values in the one ``$…$`` or ``\\(…\\)`` of a text, with or without "answer", and text around it."""
    rng = random.Random(SEED + 3)
    pairs = [_fuzzed_pair(rng, _INLINE) for _ in range(size)]
    decided = [(p, v) for p in pairs if (v := _decided(p)) is not None]
    truth = math_verify_verdicts([p for p, _ in decided])
    wrong = [(p, v) for (p, v), t in zip(decided, truth) if v != t]
    assert not wrong, wrong[:5]
    assert 0.25 < sum(truth) / len(truth) < 0.75 and 0.3 * len(pairs) < len(decided) < 0.9 * len(pairs)
    assert fast_answer("Result: \\(259\\)")[1] == "latex" and fast_answer("I think it's $748$, since 748 - 1 = 747.") is None
    assert fast_answer("The final answer is 12 345 $5$") is None  # math-verify reads 12345 (priority 50)
