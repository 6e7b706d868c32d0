"""Math verifier: extraction, the exact fast path (agreeing with math-verify), statuses."""

from __future__ import annotations

import logging
from fractions import Fraction

import pytest

from mathgym.errors import ConfigError
from mathgym.rewards import MathVerifier, Status, boxed_contents, extract_answer, last_boxed, parse_number, parse_numeric
from mathgym.rewards.math import latex_gold, numeric_verdict
from mathgym.rewards.math_fast import fast_answer, fast_gold, fast_verdict


@pytest.fixture(scope="module")
def verifier():
    v = MathVerifier(timeout=5)
    v.warm_up()
    return v


def test_extraction_formats_and_order():
    assert extract_answer("x \\boxed{1} then \\boxed{\\frac{2}{3}}") == ("\\frac{2}{3}", "boxed")
    assert extract_answer("work\n#### 1,234") == ("1,234", "gsm8k")
    assert extract_answer("So the final answer is $7$.") == ("7", "answer_is")
    assert extract_answer("#### 5\nthe answer is 6", formats=("answer_is", "gsm8k")) == ("6", "answer_is")
    assert extract_answer("no answer here") is None
    assert extract_answer("The answer is 42 because 6 × 7 = 42.") == ("42", "answer_is")
    assert extract_answer("the answer is 3, no wait, the answer is 4") == ("4", "answer_is")  # the last on the line
    assert extract_answer("The answer is $x = 5$. Done.") == ("x = 5", "answer_is")
    assert extract_answer("so \\boxed{5}. Wait: \\boxed{}") is None  # an empty last box is no answer (strict: format_error)
    assert boxed_contents("\\boxed{a{b}c} \\fbox{d} \\boxed {e}") == ["a{b}c", "d", "e"]
    assert last_boxed("\\boxed{1} \\boxed{2") == "1"  # the unbalanced box is skipped
    with pytest.raises(ValueError):
        extract_answer("x", formats=("latex",))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "value", "is_float", "percent"),
    [
        ("42", Fraction(42), False, False),
        ("-1,234.50", Fraction(-123450, 100), True, False),
        ("1{,}000", Fraction(1000), False, False),
        ("\\$12.5", Fraction(25, 2), True, False),
        ("25\\%", Fraction(25), False, True),
        ("\\frac{3}{4}", Fraction(3, 4), False, False),
        ("-\\dfrac{6}{8}", Fraction(-3, 4), False, False),
        ("7/2", Fraction(7, 2), False, False),
    ],
)
def test_parse_numeric(text, value, is_float, percent):
    assert parse_numeric(text) == (value, is_float, percent)
    assert parse_number(text) == value


@pytest.mark.parametrize("text", ["x+1", "1/0", "007", ".5", "12.", "1,23", "\\sqrt{2}", "3/4\\%", "", "1" * 50, "0.123456789012345678", "1٤٨", "１４８", "\\frac{١}{٢}"])
def test_parse_numeric_leaves_the_rest_to_math_verify(text):
    assert parse_numeric(text) is None


def test_numeric_verdict_follows_math_verify_rules():
    n = parse_numeric
    assert numeric_verdict(n("25"), n("25\\%")) is True  # integers: written values
    assert numeric_verdict(n("0.25"), n("25\\%")) is True  # otherwise: values
    assert numeric_verdict(n("1"), n("100\\%")) is True
    assert numeric_verdict(n("0.75"), n("\\frac{3}{4}")) is True
    assert numeric_verdict(n("100"), n("100.0")) is True
    assert numeric_verdict(n("3"), n("\\frac{6}{2}")) is True
    assert numeric_verdict(n("3"), n("4")) is False
    assert numeric_verdict(n("\\frac{1}{3}"), n("0.33")) is False
    assert numeric_verdict(n("\\frac{1}{3}"), n("0.333333")) is None  # rounding rules: math-verify decides


CASES = [
    # (completion, gold, status, path)
    ("so \\boxed{42}", "42", Status.CORRECT, "exact"),
    ("so \\boxed{1,234}", "1234", Status.CORRECT, "exact"),  # thousands without spaces: 1234 to math-verify too
    ("so \\boxed{41}", "42", Status.WRONG, "exact"),
    ("so \\boxed{0.5}", "\\frac{1}{2}", Status.CORRECT, "exact"),
    ("so \\boxed{0.333333}", "\\frac{1}{3}", Status.CORRECT, "math_verify"),
    # a bare LaTeX gold is read as LaTeX (math_gold.read_gold), so the fast path reads it as it reads $...$
    ("so \\boxed{\\frac{\\sqrt{2}}{2}}", "\\frac{1}{\\sqrt{2}}", Status.CORRECT, "exact"),
    ("so \\boxed{x^2+2x+1}", "(x+1)^2", Status.CORRECT, "exact"),
    ("so \\boxed{2x}", "x", Status.WRONG, "exact"),
    ("so \\boxed{(1, 2)}", "(1,2)", Status.CORRECT, "exact"),
    ("so \\boxed{\\sin(\\pi/4)}", "\\frac{1}{\\sqrt{2}}", Status.CORRECT, "math_verify"),
    ("so \\boxed{\\text{}}", "5", Status.UNPARSEABLE, "math_verify"),
    ("I do not know", "5", Status.UNPARSEABLE, None),
    ("#### 1,234", "1234", Status.CORRECT, "exact"),
    ("so the answer is 41.", "41", Status.CORRECT, "exact"),
    ("The answer is 42 because 6 × 7 = 42.", "42", Status.CORRECT, "exact"),  # math-verify reads the number after "="
    ("The answer is 42 because 6 × 7 = 41.", "42", Status.WRONG, "exact"),
    ("the answer is 3, no wait, the answer is 4", "4", Status.CORRECT, "exact"),
    ("The answer is 42 because 6 × 7 = 40 + 2.", "42", Status.CORRECT, "math_verify"),  # an expression after "="
    ("Answer $9$", "9", Status.UNPARSEABLE, None),  # strict: no marker
    ("so \\boxed{5}. Hmm, wait: \\boxed{}", "5", Status.FORMAT_ERROR, None),  # strict: the last box is empty
]


@pytest.mark.parametrize(("completion", "gold", "status", "path"), CASES)
def test_statuses_and_paths(verifier, completion, gold, status, path):
    result = verifier.score(completion, gold)
    assert result.status == status, result
    assert result.score == (1.0 if status == Status.CORRECT else 0.0)
    assert result.details.get("path") == path


SHAPES = ["so \\boxed{{{}}}.", "Thus $\\boxed{{{}}}$", "\\[\\boxed{{{}}}\\]", "#### {}", "so the answer is {}.", "{}", "the final answer is {}"]


def test_fast_path_agrees_with_math_verify():
    """Every verdict the fast path takes is math-verify's own on the whole completion."""
    from math_verify import parse, verify

    logging.getLogger("math_verify").setLevel(logging.ERROR)
    forms = ["12", "0.12", "1,234", "1234", "1234.0", "-3", "3/4", "\\frac{3}{4}", "0.75", "-\\frac{1}{2}", "-0.5",
             "\\frac{1}{3}", "0.3333", "7", "7.000001", "1,000,000", "2.5", "\\frac{5}{2}", "0", "0.0", "1000,99"]
    golds = {gold: parse(gold, parsing_timeout=None) for gold in forms}
    checked = 0
    for answer in forms:
        for shape in SHAPES:
            completion = shape.format(answer)
            found = fast_answer(completion)
            parsed = None
            for gold in forms:
                gold_number = fast_gold(gold)
                verdict = None if found is None or gold_number is None else fast_verdict(gold_number, found[0])
                if verdict is not None:
                    parsed = parsed or parse(completion, parsing_timeout=None)
                    assert verdict == verify(golds[gold], parsed, timeout_seconds=None), (gold, completion, found)
                    checked += 1
    assert checked > 0.4 * len(forms) ** 2 * len(SHAPES)


LENIENT = MathVerifier(answer_extraction="lenient", timeout=5)


@pytest.mark.parametrize(
    ("completion", "gold", "status"),
    [
        ("Answer $9$", "9", Status.CORRECT),
        ("The final answer is 1,000.99 €", "1000.99", Status.CORRECT),
        ("42", "42", Status.CORRECT),
        ("so \\boxed{5}. Hmm, wait: \\boxed{}", "5", Status.UNPARSEABLE),  # math-verify reads the empty box
        ("no number at all", "5", Status.UNPARSEABLE),
    ],
)
def test_lenient_mode_reads_like_math_verify(completion, gold, status):
    result = LENIENT.score(completion, gold)
    assert result.status == status, result
    assert result.details["mode"] == "lenient"


def test_answer_extraction_is_validated():
    with pytest.raises(ConfigError, match="'strict', 'lenient'"):
        MathVerifier(answer_extraction="loose")  # type: ignore[arg-type]


def test_batch_matches_single(verifier):
    completions = [c for c, *_ in CASES]
    golds = [g for _, g, *_ in CASES]
    assert [r.status for r in verifier.score_batch(completions, golds)] == [verifier.score(c, g).status for c, g in zip(completions, golds)]
    with pytest.raises(ConfigError):
        verifier.score_batch(["a"], [])


def test_unparseable_gold_is_an_infra_error(verifier):
    result = verifier.score("\\boxed{x+1}", "\\text{}")
    assert result.status == Status.ERROR and result.status.is_infra_failure


def test_options_are_validated_and_verifier_pickles():
    import pickle

    with pytest.raises(ConfigError):
        MathVerifier(timeout=0)
    with pytest.raises(ConfigError):
        MathVerifier(workers=0)
    copy = pickle.loads(pickle.dumps(MathVerifier(formats=("gsm8k",))))
    assert copy.score("#### 7", "7").status == Status.CORRECT
    assert copy.score("\\boxed{7}", "7").status == Status.UNPARSEABLE


@pytest.mark.parametrize(
    "text",
    [
        "The final answer is $3$ and $\\boxed{42}$",  # math-verify reads the set {3, 42}
        "The final answer is \\boxed{42}, this is 7",  # "final answer … is 7" ends later: 7
        "So $\\boxed{42}$ %",  # a percent sign after the environment: 0.42
        "final answer is 3. I hope \\boxed{42}",  # "final answer is … I hope" comes first: 3
        "\\boxed{42} and \\boxed{43}",  # several boxes: math-verify joins them
        "The answer is 42 because 6 * 7 = 40 + 1",  # "answer … = 40 + 1": 41
        "#### 42 (that is 6 * 7)",  # the rightmost expression wins over a #### marker
        "####42",  # no space: math-verify does not read the number
    ],
)
def test_each_fast_path_guard_declines_what_math_verify_reads_otherwise(text):
    from math_verify import parse

    found = fast_answer(text)  # declined, or read as math-verify reads it (several boxes: a set; ``####42``: nothing)
    assert found is None or found[0] != fast_gold("42"), found
    read = parse(text, parsing_timeout=None)
    assert not read or read[0] != 42


# -- Unicode: the fast path decides only ASCII digits and ASCII case (issue 17, item 9) ------------

#: The zero of some of the scripts whose digits Python's (and so math-verify's) ``\d`` matches.
DIGIT_ZEROS = {"arabic-indic": 0x660, "extended arabic-indic": 0x6F0, "nko": 0x7C0, "devanagari": 0x966, "bengali": 0x9E6,
               "thai": 0xE50, "myanmar": 0x1040, "fullwidth": 0xFF10, "mathematical bold": 0x1D7CE}
DIGIT_SHAPES = ["so \\boxed{{{}}}.", "$\\boxed{{{}}}$", "the answer is {}.", "The final answer is ${}$", "#### {}", "{}", "answer: {}"]


def _script_digits(zero: int, digits: str, keep_first: bool) -> str:
    """``digits`` written in the script of ``zero``, the first one left in ASCII when ``keep_first``."""
    foreign = "".join(chr(zero + int(d)) for d in digits)
    return digits[0] + foreign[1:] if keep_first else foreign


@pytest.mark.parametrize("script", sorted(DIGIT_ZEROS))
def test_non_ascii_digits_go_to_math_verify(verifier, script):
    """``\\boxed{1٤٨}`` is no 148 for math-verify, so the fast path must not call it one."""
    from math_verify import parse, verify

    for shape in DIGIT_SHAPES:
        for keep_first in (True, False):
            completion = shape.format(_script_digits(DIGIT_ZEROS[script], "148", keep_first))
            assert fast_answer(completion) is None, completion
            truth = bool(verify(parse("148", parsing_timeout=None), parse(completion, parsing_timeout=None), timeout_seconds=None))
            for fast in (True, False):
                result = MathVerifier(timeout=5, fast_path=fast, answer_extraction="lenient").score(completion, "148")
                assert (result.status == Status.CORRECT) == truth, (completion, result)
                assert result.details.get("path") != "exact", (completion, result)
    assert fast_gold(_script_digits(DIGIT_ZEROS[script], "148", True)) is None


#: Texts where a letter that is not ASCII reads as an ASCII one to math-verify's case-insensitive
#: patterns (``ſ`` as ``s``, ``İ``/``ı`` as ``i``), or changes the text's length when lowered (``İ``).
CASE_TRAPS = [
    ("The anſwer is 7. #### 5", "5"),  # math-verify: "answer … 7" outranks ####
    ("The ANſWER is 7. #### 5", "5"),
    ("The fİnal answer is 3. I hope \\boxed{42}", "42"),  # "final answer is … I hope" comes first: 3
    ("The fınal answer is 3. I hope \\boxed{42}", "42"),
    ("FİNAL ANSWER is 3. I hope $\\boxed{42}$", "42"),
    ("İ" * 14 + "answer: 5 and anſwer is 7.", "7"),  # positions in text.lower() are off by one per İ
    ("İ" * 9 + "answer: 5 x anſwer is 7.", "7"),
    ("ſo the anſwer is 7. So \\boxed{5}", "5"),
]


@pytest.mark.parametrize(("completion", "gold"), CASE_TRAPS)
def test_case_folding_that_math_verify_sees_goes_to_math_verify(completion, gold):
    from math_verify import parse, verify

    truth = bool(verify(parse(gold, parsing_timeout=None), parse(completion, parsing_timeout=None), timeout_seconds=None))
    assert fast_answer(completion) is None
    result = MathVerifier(timeout=5, answer_extraction="lenient").score(completion, gold)
    assert (result.status == Status.CORRECT) == truth, result


def test_every_character_that_reads_as_ascii_to_math_verify_is_declined():
    """Unicode digits, spaces and letters that ``(?i)`` matches to ASCII: anywhere in the text, the fast path declines."""
    import re
    import sys

    every = "".join(chr(i) for i in range(0x80, sys.maxunicode + 1) if not 0xD800 <= i <= 0xDFFF)
    readers = set(re.findall(r"\d|\s|(?i:[a-z])", every))
    assert {"٤", "４", "\u00a0", "ſ", "İ", "ı", "\u212a"} <= readers and len(readers) > 600
    for char in sorted(readers):
        for text in (f"{char} so \\boxed{{7}}", f"the answer is 7. {char}", f"{char}\n#### 7"):
            assert fast_answer(text) is None, (char, text)
    for char in "’×π€—…é中😀Ａ":  # characters math-verify reads as nothing it compares: the fast path still decides
        assert fast_answer(f"{char} so \\boxed{{7}}") is not None, char


# -- commas in a gold: thousands separators only (issue 17, item 10) -------------------------

COMMA_GOLDS = [
    # (completion, gold, right): a list of roots is no decimal number
    ("\\boxed{-2,1}", "-2,1", True),
    ("\\boxed{1, -2}", "-2,1", True),
    ("\\boxed{-2.1}", "-2,1", False),
    ("so the answer is -2.1.", "-2,1", False),
    ("\\boxed{1}", "1,-2", False),  # math-verify reads a bare ``1,-2`` as 1
    ("\\boxed{-2, 1}", "1,-2", True),
    ("\\boxed{0.5}", "0,5", False),
    ("\\boxed{1000.99}", "1000,99", False),
    ("\\boxed{1.2}", "1,2,3", False),
    ("\\boxed{3,2,1}", "1,2,3", True),
    ("\\boxed{1234}", "1,234,56", False),
    ("\\boxed{1.5}", "1, 5", False),
    # groups of three digits: a thousands separator, the gold stays a number
    ("\\boxed{1234567}", "1,234,567", True),
    ("#### 58,500", "58,500", True),
    ("\\boxed{-1234}", "-1,234", True),
    ("\\boxed{12345.6}", "12,345.6", True),
    ("\\boxed{1.234}", "1,234", False),
]


@pytest.mark.parametrize(("completion", "gold", "right"), COMMA_GOLDS)
def test_commas_in_a_gold_separate_thousands_only(completion, gold, right):
    for fast in (True, False):
        for mode in ("strict", "lenient"):
            verifier = MathVerifier(timeout=5, fast_path=fast, answer_extraction=mode)
            for given in (gold, latex_gold(gold)):
                result = verifier.score(completion, given)
                assert result.score == float(right), (fast, mode, given, result)


def test_latex_gold_keeps_only_thousands_commas_plain():
    assert [latex_gold(g) for g in ("1,000", "-1,234,567.5", "12")] == ["1,000", "-1,234,567.5", "12"]
    assert [latex_gold(g) for g in ("-2,1", "1,-2", "1000,99", "0,5", "1,23", "3, 5, 7")] == [
        "$-2,1$", "$1,-2$", "$1000,99$", "$0,5$", "$1,23$", "$3, 5, 7$"]
