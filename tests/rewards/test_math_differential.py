"""MathVerifier against math-verify itself, on a seeded sample of the generated corpus.

Ground truth: ``verify(parse(gold), parse(completion))`` with math-verify's defaults, the
gold read as every entry point reads it (:func:`~mathgym.rewards.math_gold.read_gold`), run
in a process pool (its SIGALRM timeouts only work in a process's main thread). Lenient
mode must agree on every pair; strict mode must agree on every pair that carries a
final-answer marker, and refuse exactly the others (``unparseable``; an empty last box is
a ``format_error``). The full corpus is a benchmark row (``benchmarks/bench_math.py``).
"""

from __future__ import annotations

import dataclasses
import random
import sys
import unicodedata
from collections import Counter
from fractions import Fraction

import pytest

from mathgym.rewards import MathVerifier, Status
from tests.rewards.math_corpus import CATEGORIES, Pair, generate_corpus, math_verify_verdicts
from mathgym.rewards.math_fast import fast_answer, fast_gold, fast_verdict
from mathgym.rewards.math_gold import read_gold

SAMPLE = 12 * len(CATEGORIES)  # every category 12 times
SEED = 20261123


@pytest.fixture(scope="module")
def judged():
    pairs = generate_corpus(SAMPLE, seed=SEED)
    expected = math_verify_verdicts([dataclasses.replace(p, gold=read_gold(p.gold)) for p in pairs])
    golds, texts = [p.gold for p in pairs], [p.completion for p in pairs]
    strict = MathVerifier(timeout=30).score_batch(texts, golds)
    lenient = MathVerifier(answer_extraction="lenient", timeout=30).score_batch(texts, golds)
    return pairs, expected, strict, lenient


def test_the_sample_spans_every_category_and_both_verdicts(judged):
    pairs, expected, _, _ = judged
    assert {p.category for p in pairs} == set(CATEGORIES)
    assert 0.25 < sum(expected) / len(expected) < 0.75


def test_lenient_mode_agrees_with_math_verify_on_every_pair(judged):
    pairs, expected, _, lenient = judged
    timeouts = [p for p, r in zip(pairs, lenient) if r.status == Status.TIMEOUT]
    assert not timeouts, timeouts  # nothing in the corpus is hostile
    disagree = [(p, want, r) for p, want, r in zip(pairs, expected, lenient) if (r.status == Status.CORRECT) != want]
    assert not disagree, disagree[:5]
    assert {r.details["mode"] for r in lenient} == {"lenient"}
    assert Counter(r.details["path"] for r in lenient)["exact"] > 0


def test_strict_mode_differs_only_where_the_completion_has_no_marker(judged):
    pairs, expected, strict, _ = judged
    differences: Counter[str] = Counter()
    unmarked_and_right: Counter[str] = Counter()
    for pair, want, result in zip(pairs, expected, strict):
        if pair.marker is None:
            assert result.status == Status.UNPARSEABLE, (pair, result)
            unmarked_and_right[pair.category] += want
        elif pair.marker == "empty_box":
            assert result.status == Status.FORMAT_ERROR and not want, (pair, result)  # math-verify reads the empty box too
        else:
            assert (result.status == Status.CORRECT) == want, (pair, want, result)
        differences[pair.category] += (result.status == Status.CORRECT) != want
    assert differences == unmarked_and_right  # per category: exactly the unmarked answers math-verify accepts
    assert sum(differences.values()) > 0  # the sample does hold unmarked right answers


def test_fast_path_decides_the_plain_numbers(judged):
    pairs, _, strict, lenient = judged
    for results in (strict, lenient):
        exact = Counter(p.category for p, r in zip(pairs, results) if r.details.get("path") == "exact")
        assert exact["integer"] > 0 and exact["gsm8k"] > 0 and exact["answer_is"] > 0


# -- fuzzing the fast path: random text around every shape it recognises ---------------------

_FRAGMENTS = ["The final answer is ", "the answer is ", "Answer: ", "answer ", "#### ", "####", "$", "$$", "\\[", "\\]", "\\(", "\\)",
              " ", "\n", ".", ", ", "%", " percent", "=", " x = ", "I hope", " apples", "{", "}", "(", ")", " and ", " or ",
              "\\frac{1}{2}", "3", "42", "-7", "0.5", "1,000", "12.50", "+", " so ", "\\boxed{", "\\fbox{", "\\text{ cm}", "€", "pct"]
_NUMBERS = {"3/4": ["0.75", "3/4", "\\frac{3}{4}", "6/8"], "-1/2": ["-0.5", "-1/2", "1/2"], "42": ["42", "42.0"], "-7": ["-7", "-7.00"], "0.5": ["0.5", "\\frac{1}{2}"], "1,000": ["1000", "1,000"], "12.50": ["12.5"],
            "\\frac{1}{2}": ["0.5", "\\frac{1}{2}", "1/2", "2/4"], "0": ["0", "0.0"], "2.0": ["2"], "-0.25": ["-\\frac{1}{4}", "-0.25"], "1,234.5": ["1234.5"]}
_SHAPES = ["\\boxed{%s}", "$\\boxed{%s}$", "$$\\boxed{%s}$$", "\\[\\boxed{%s}\\]", "$x = \\boxed{%s}$", "the answer is %s",
           "The final answer is %s", "answer: %s", "The answer is $%s$", "#### %s", "#### $%s", "%s"]


def _fuzzed(rng: random.Random) -> Pair:
    number = rng.choice(list(_NUMBERS))
    noise = lambda k: "".join(rng.choice(_FRAGMENTS) for _ in range(rng.randint(0, k)))  # noqa: E731
    text = noise(6) + rng.choice(_SHAPES) % number + noise(4)
    gold = rng.choice(_NUMBERS[number]) if rng.random() < 0.7 else rng.choice([g for forms in _NUMBERS.values() for g in forms])
    return Pair("fuzz", gold, text, None)


def test_fast_path_decisions_on_fuzzed_text_are_math_verifys():
    """Every verdict the fast path takes on noisy text is math-verify's (the fast path declines the rest)."""
    rng, pairs, tried = random.Random(SEED), [], 0
    while len(pairs) < 400:
        pair, tried = _fuzzed(rng), tried + 1
        gold, found = fast_gold(pair.gold), fast_answer(pair.completion)
        if gold is not None and found is not None and fast_verdict(gold, found[0]) is not None:
            pairs.append(pair)
    truth = math_verify_verdicts(pairs)
    wrong = [(p, t) for p, t in zip(pairs, truth) if fast_verdict(fast_gold(p.gold), fast_answer(p.completion)[0]) != t]
    assert not wrong, wrong[:5]
    assert 0.2 < sum(truth) / len(truth) < 0.8 and len(pairs) < 0.9 * tried  # both verdicts, and the fast path declines some


# -- Unicode fuzzing: digits of every script, look-alike letters, marks, spaces ---------------

#: The zero of every script with decimal digits (Python's ``\d``, so math-verify's).
_ZEROS = [chr(i) for i in range(0x80, sys.maxunicode + 1) if unicodedata.decimal(chr(i), None) == 0]
#: Letters that Python's case-insensitive patterns (math-verify's) match to ASCII, or that lower to two characters.
_LOOKALIKES = {"s": "ſ", "i": "İı", "k": "\u212a", "S": "ſ", "I": "İı", "K": "\u212a"}
_ODD = ["\u0301", "\u0338", "\u20d7", "\u00a0", "\u2003", "\u3000", "\u202f", "\u0085", "\u2028", "\u200b", "\ufeff", "\u00ad",
        "ß", "ẞ", "＄", "＼boxed{", "｛", "｝", "ａｎｓｗｅｒ ｉｓ ", "²", "½", "Ⅻ", "𝟒", "’", "…", "×", "−", "π", "€", "中文", "😀", "é", "Ａ"]
_KEYWORDS = ["the answer is ", "The final answer is ", "Answer: ", "answer ", "I hope", "final answer", "####", " percent", " pct"]


def _foreign_digits(rng: random.Random, number: str) -> str:
    """``number`` with some of its digits written in other scripts."""
    return "".join(chr(ord(rng.choice(_ZEROS)) + int(c)) if c.isdigit() and rng.random() < 0.4 else c for c in number)


def _lookalike(rng: random.Random, text: str) -> str:
    """``text`` with some letters swapped for ones math-verify may match to them (``ſ`` for ``s``)."""
    return "".join(rng.choice(_LOOKALIKES[c]) if c in _LOOKALIKES and rng.random() < 0.5 else c for c in text)


def _unicode_fuzzed(rng: random.Random) -> Pair:
    def noise(k: int) -> str:
        parts = []
        for _ in range(rng.randint(0, k)):
            kind = rng.random()
            parts.append(rng.choice(_FRAGMENTS) if kind < 0.4 else rng.choice(_ODD) if kind < 0.7 else _lookalike(rng, rng.choice(_KEYWORDS)))
        return "".join(parts)

    number = rng.choice(list(_NUMBERS))
    shape = rng.choice(_SHAPES)
    shown = _foreign_digits(rng, number) if rng.random() < 0.5 else number
    if rng.random() < 0.3:
        shape = _lookalike(rng, shape.replace("%s", "\0")).replace("\0", "%s")
    text = noise(5) + shape % shown + noise(3)
    if rng.random() < 0.2:  # an odd character inside the marker or the number itself
        at = rng.randrange(len(text) + 1)
        text = text[:at] + rng.choice(_ODD) + text[at:]
    gold = rng.choice(_NUMBERS[number]) if rng.random() < 0.7 else rng.choice([g for forms in _NUMBERS.values() for g in forms])
    if rng.random() < 0.1:
        gold = _foreign_digits(rng, gold)
    return Pair("unicode-fuzz", gold, text, None)


def test_fast_path_decisions_on_unicode_fuzzed_text_are_math_verifys():
    """Mixed-script digits, ``ſ``/``İ``/``ı``/Kelvin/``ß``, marks and odd spaces around every shape:
    wherever the fast path answers, its verdict is math-verify's."""
    rng, pairs, tried = random.Random(SEED + 17), [], 0
    while len(pairs) < 400:
        pair, tried = _unicode_fuzzed(rng), tried + 1
        gold, found = fast_gold(pair.gold), fast_answer(pair.completion)
        if gold is not None and found is not None and fast_verdict(gold, found[0]) is not None:
            pairs.append(pair)
    truth = math_verify_verdicts(pairs)
    wrong = [(p, t) for p, t in zip(pairs, truth) if fast_verdict(fast_gold(p.gold), fast_answer(p.completion)[0]) != t]
    assert not wrong, wrong[:5]
    non_ascii = sum(not p.completion.isascii() for p in pairs)
    assert non_ascii > 50, non_ascii  # the fast path still decides text with harmless characters outside ASCII
    assert 0.2 < sum(truth) / len(truth) < 0.8 and len(pairs) < 0.8 * tried


# -- fuzzing the number after a marker: math-verify's number pattern, then anything --------------

_MARKERS = ["the answer is ", "The answer is: ", "Answer: ", "answer:\t", "#### ", "####  ", "The final answer is ", "So the final answer: ", "####"]
_TOKENS = {"6850,28": "6850.28", "9.809,69": "9.809", "1 234 567": "1234567", "12 345": "12345", "2.5E+4": "2.5", "3.6e3": "3.6", "€12.34": "12.34",
           "£5": "5", "0012": "12", "12.": "12", ".5": "0.5", "-.5": "-0.5", "+12": "12", "-7": "-7", "1,234": "1234", "1,234.5": "1234.5",
           "1,23": "1.23", "2{,}66": "2", "1\\,234": "1", "12.00": "12", "0.750000": "$\\frac{3}{4}$", "3/4": "3/4", "42": "42.0", "1 23": "1",
           "7 100": "7100", "-0": "0", "54%": "54\\%", "54 percent": "0.54", "54.5 Pct": "54.5", "7 %": "7", "0.5%": "0.005"}
_TAILS = ["", ".", " apples.", ",48", "E+4", " USD", " €", "{,}66", "\\,234", " because 3 + 4 is 7.", " = 7", " (approx)", "%", " percent",
          " pct", "$", " $5$", "\\(x\\)", " [1]", "\\frac{1}{2}", "\n\nI hope this helps!", " I hope", " 5", " and 12", "\n#### 9", " is it",
          " answer", "\\cdot 10^2", "^2", " x 3", "...", "!"]


def _marked(rng: random.Random) -> Pair:
    before = "".join(rng.choice(_FRAGMENTS) for _ in range(rng.randint(0, 3))) if rng.random() < 0.5 else ""
    tail = "".join(rng.choice(_TAILS) for _ in range(rng.randint(0, 2)))
    token = rng.choice(list(_TOKENS))
    gold = _TOKENS[token] if rng.random() < 0.6 else rng.choice(list(_TOKENS.values()))
    return Pair("marked", gold, f"{before}{rng.choice(_MARKERS)}{token}{tail}", None)


def test_fast_path_decisions_on_marked_numbers_are_math_verifys():
    """After "answer is", "answer:" and "####": decimal commas, space thousands, padding, signs,
    currency, scientific notation, then noise that may or may not start another match."""
    rng, pairs, tried = random.Random(SEED + 29), [], 0
    while len(pairs) < 400:
        pair, tried = _marked(rng), tried + 1
        gold, found = fast_gold(pair.gold), fast_answer(pair.completion)
        if gold is not None and found is not None and fast_verdict(gold, found[0]) is not None:
            pairs.append(pair)
    truth = math_verify_verdicts(pairs)
    wrong = [(p, t) for p, t in zip(pairs, truth) if fast_verdict(fast_gold(p.gold), fast_answer(p.completion)[0]) != t]
    assert not wrong, wrong[:5]
    assert 0.1 < sum(truth) / len(truth) < 0.9 and len(pairs) < 0.8 * tried


def test_reads_the_number_after_a_marker_as_math_verify_does():
    """Each reading below was checked against math-verify's ``parse``."""
    read = {
        "The answer is 6850,28 because it checks out.": Fraction("6850.28"),  # a decimal comma
        "the answer is: 9.809,69": Fraction("9.809"),  # its number pattern stops at the comma
        "So the final answer is 1 234 567": Fraction(1234567),  # thousands separated by spaces
        "The answer is 2.5E+4 because it checks out.": Fraction("2.5"),
        "Hence 3 + 4 = 7.\n#### 6.133,48": Fraction("6.133"),
        "#### €12.34": Fraction("12.34"),
        "#### 0012": Fraction(12),
        "#### .5": Fraction(1, 2),
        "The answer is 2{,}66 because it checks out.": Fraction(2),
        "The answer is 50 percent": Fraction(50),  # read as 50% (compared as math-verify compares percentages)
        "#### 5 apples and 6 pears": Fraction(6),  # no "answer": math-verify's rightmost match
        "So \\boxed{3}. Wait: 4 + 3 is 8 apples. \\boxed{}": Fraction(8),  # its boxed pattern reads ``3,``, which does not parse
    }
    for text, value in read.items():
        found = fast_answer(text)
        assert found is not None and found[0].rational == value, (text, found)
    assert fast_answer("The answer is 5, see $x$")[0] == fast_gold("$x$")  # math-verify reads the LaTeX after "answer": x
    assert fast_answer("#### -.5")[1] == fast_answer("#### +12")[1] == "nothing"  # no pattern of math-verify matches: it reads nothing
    assert fast_answer("#### 3.5 \\cdot 10^2")[0].rational == 100  # math-verify's rightmost match is the expression 10^2
    for declined in ["The answer is 5 (since 2+3)", "The final answer: 5 which is 6",
                     "The answer is 5 = 2 + 3", "The answer is 50 percent or 7%", "The answer is 5, see $\\alpha$", "#### 5 apples and 6 + 1 pears"]:
        assert fast_answer(declined) is None, declined


def test_marked_numbers_in_hostile_text_are_read_in_linear_time():
    import time

    for text in ["#### 5" + " " * 100000 + "x", "the answer is 7 \t" * 30000, "#### " + "1 " * 50000, "the answer is " + "1,000" * 20000, "#### " + "9" * 100000, "#### 5" + " \t" * 50000 + "(",
                 "the answer is 5" + "1+" * 50000, "#### 1" + ".1" * 50000]:
        start = time.perf_counter()
        fast_answer(text)
        assert time.perf_counter() - start < 0.5, text[:40]


# -- fuzzing unmarked text: math-verify's rightmost match ---------------------------------------

_WORDS = ["So we get ", "Total: ", "apples", " in total", ". ", ", ", " ", "\n", "=", " = ", "x", "(", ")", " + ", "-", "*", "**", "^2", " / ",
          "%", " percent", " Pct", "€", "£", ".", ":", "#### ", "I think it's ", " since ", "Wait, ", "\\boxed{}", "\\boxed{12}", "\\boxed{ }",
          "\\boxed{-3}, ", "{", "}", "\\,", "\\cdot ", "E+4", "e3", "pe", "ta", "!", "?", ";", "\t", "\x1c"]
_NUMBERS_IN_TEXT = ["7", "42", "-7", "0.5", ".5", "1,234", "1 234", "6850,28", "9.809,69", "007", "12.", "3/4", "2 + 3", "(4)", "1,23", "100"]
_UNMARKED_GOLDS = ["7", "42", "-7", "0.5", "1234", "6850.28", "9.809", "12", "0.75", "5", "4", "1.23", "100", "$\\frac{1}{2}$", "234", "3",
                   "7\\%", "0.07", "42\\%", "$5\\%$"]


def _unmarked(rng: random.Random) -> Pair:
    parts = []
    for _ in range(rng.randint(1, 8)):
        parts.append(rng.choice(_NUMBERS_IN_TEXT) if rng.random() < 0.4 else rng.choice(_WORDS))
    return Pair("unmarked", rng.choice(_UNMARKED_GOLDS), "".join(parts), None)


def test_fast_path_decisions_on_unmarked_text_are_math_verifys():
    """Text with no marker: numbers, expressions, percentages, currency, boxes (an empty last one), anchors."""
    rng, pairs, tried = random.Random(SEED + 31), [], 0
    while len(pairs) < 400:
        pair, tried = _unmarked(rng), tried + 1
        gold, found = fast_gold(pair.gold), fast_answer(pair.completion)
        if gold is not None and found is not None and fast_verdict(gold, found[0]) is not None:
            pairs.append(pair)
    truth = math_verify_verdicts(pairs)
    wrong = [(p, t) for p, t in zip(pairs, truth) if fast_verdict(fast_gold(p.gold), fast_answer(p.completion)[0]) != t]
    assert not wrong, wrong[:5]
    read = [t for p, t in zip(pairs, truth) if fast_answer(p.completion)[1] != "nothing"]  # where it reads a number
    assert 0.05 < sum(read) / len(read) < 0.9 and len(pairs) < 0.9 * tried
    assert sum(fast_answer(p.completion)[1] == "unmarked" for p in pairs) > 200
