"""The in-process fast path of the math verifier: numbers and MATH-style answers, decided as math-verify decides them.

math-verify reads a completion by trying its extraction patterns in priority order
(``final answer is … I hope``; then ``final answer … is`` and ``\\boxed``; then
``answer:``; then ``answer``; then any LaTeX, expression or number) and, within one
priority, the match that *ends* rightmost first (``math_verify/parser.py``, version 0.9);
a match whose text does not parse is skipped for the next. The fast path decides
in-process only completions whose shape pins down what those rules extract, without
running them (:func:`fast_answer` says which shape):

* **boxed**, **sentence**, **boxes**: one box; a box holding a sentence around one
  ``$…$``; several boxes with no other LaTeX, or each in its own ``$…$``
  (:mod:`~mathgym.rewards.math_boxes`).
* **answer**: "answer" occurs exactly once, no box, and it reads ``answer is N`` /
  ``answer: N`` (``final answer`` too; ``N`` bare or as ``$N$``): the match of priority
  50, 100 or 200 ends at ``N``. Also ``\\frac{a}{b}`` or ``a/b`` there (and after
  ``####``), the last of several "answer is N", and ``answer … = M``
  (:mod:`~mathgym.rewards.math_plain_text`).
* **gsm8k**: no "answer", no box, and the last ``####`` is followed by a space and ``N``
  (or ``$N``): the rightmost match of priority 300 is ``N``.
* **latex**: one ``$…$`` or ``\\(…\\)`` with nothing readable after it (after the one
  "answer", or with none).
* **bare**: the whole text is ``N``.
* **unmarked**, **nothing**: no marker (or an "answer" followed by nothing math-verify
  can read): its rightmost match that parses, a number or ``a^b``; or no match at all (it
  reads nothing, ``unparseable``).
* **rationals** (:func:`fast_decision` only): a text from which math-verify can read
  only rational numbers, against a gold no rational equals.

In the answer and gsm8k shapes, nothing after ``N`` may start another number,
expression, equation, LaTeX environment or percentage (no digit, ``=``, ``$``, ``\\``,
brackets, braces, parentheses, operators, ``%``, "percent"): words and full stops only.

In the answer, gsm8k and bare shapes ``N`` is an integer or decimal (thousands commas in
groups of three). A box or ``$…$`` holds a value of the grammar of
:mod:`~mathgym.rewards.math_values` (numbers, fractions, radicals, multiples of π and
their sums, percentages, sets, intervals, tuples, matrices of numbers, ``\\text{word}``),
an inequality, equation or ``x \\in I`` (:mod:`~mathgym.rewards.math_relations`), a
polynomial in one variable (:mod:`~mathgym.rewards.math_polynomials`), a higher root or
``7.3e4`` (:mod:`~mathgym.rewards.math_roots`), or a number with words
(:mod:`~mathgym.rewards.math_words`). The gold is such a number, ``a/b`` or
``\\frac{a}{b}`` as written, or a value of that grammar inside one ``$…$`` (as
:func:`~mathgym.rewards.math.latex_gold` writes MATH's answers). Both are read exactly;
:func:`fast_verdict` gives math-verify's comparison (:func:`numeric_verdict` for two
rational numbers, with its float rounding and percentages), returning ``None`` (ask
math-verify) wherever its rules could differ from exact comparison. Everything else goes
to math-verify. ``tests/rewards/test_math_differential.py``, ``tests/rewards/test_math_fast_values.py``
and ``tests/rewards/test_math_fast_shapes.py`` check these verdicts against math-verify on the
generated corpus, on fuzzed text (Unicode too), on fuzzed answers of every shape and on
MATH-500's answers.

**Unicode.** math-verify's patterns read ``\\d`` and ``\\s`` as Unicode classes and match
its keywords case-insensitively in Unicode (``anſwer`` and ``fİnal answer`` are "answer"
and "final answer" to it), while sympy does not read ``1٤٨`` or ``１４８`` as 148. The rules
above hold for text where those classes are ASCII, so the fast path declines any
completion or gold holding a character that could read otherwise (:func:`_unicode_safe`):
a digit, number or space outside ASCII, a letter whose case mappings involve ASCII
(``ſ``, ``İ``, ``ı``, the Kelvin sign, ``ß``), a combining mark, an invisible format
character. Its own patterns are ASCII-only (``re.ASCII``), and positions are found in an
ASCII-only lowercase copy of the same length. Other text outside ASCII (``’``, ``…``,
``×``, ``π``, ``€``, fullwidth letters, CJK) does not stop it.
"""

from __future__ import annotations

import functools
import re
import string
import unicodedata
from fractions import Fraction
from typing import NamedTuple

from mathgym.rewards.math_boxes import INLINE_BRACKET, boxes_in_dollars, one_box, quiet_tail, sentence_in_box, several_boxes
from mathgym.rewards.math_plain_text import NoMatch, Power, SomeRational, marked_number, only_rationals, unmarked_number
from mathgym.rewards.math_polynomials import Polynomial, polynomial_verdict
from mathgym.rewards.math_relations import Answer, Member, Relation, read_answer, relation_verdict
from mathgym.rewards.math_roots import EulerProduct, Root, euler_product_verdict, root_verdict
from mathgym.rewards.math_values import Group, Scalar, value_verdict
from mathgym.rewards.math_words import Words, read_words

_MAX_NUMBER_CHARS = 40
_MAX_UNMARKED_CHARS = 100_000
#: Significant digits up to which a decimal compares like math-verify's 15-digit floats.
MAX_DECIMAL_DIGITS = 14

_DECIMAL = r"-?(?:0|[1-9]\d*)(?:\.\d+)?"
_THOUSANDS = r"-?[1-9]\d{0,2}(?:,\d{3})+(?:\.\d+)?"
_FRACTION = r"-?\\frac\{\d+\}\{\d+\}"
_PLAIN = re.compile(rf"{_DECIMAL}|{_THOUSANDS}", re.ASCII)
_SLASH = r"-?(?:0|[1-9]\d*)/[1-9]\d*"
_GOLD = re.compile(rf"{_DECIMAL}|{_THOUSANDS}|{_FRACTION}|{_SLASH}", re.ASCII)
_FRACTION_PARTS = re.compile(r"(-?)\\frac\{(\d+)\}\{(\d+)\}", re.ASCII)
_ANSWER_TAIL = re.compile(rf"answer(?: is:?|:)[ \t]+(\$?)({_THOUSANDS}|{_DECIMAL})\1", re.IGNORECASE | re.ASCII)
_MARKED_RATIO = re.compile(rf"(?:answer(?: is:?|:)|####)[ \t]+(-?\\frac\{{\d{{1,12}}\}}\{{[1-9]\d{{0,11}}\}}|{_SLASH})", re.IGNORECASE | re.ASCII)
#: What may follow ``a/b`` so that math-verify's expression ends there.
_SLASH_END = re.compile(r"[,:]|\s+[A-Za-z]|\s*$", re.ASCII)
_GSM8K_TAIL = re.compile(rf"####[ \t]+\$?()({_THOUSANDS}|{_DECIMAL})", re.ASCII)
_NON_ASCII = re.compile(r"[^\x00-\x7f]")
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


class Numeric(NamedTuple):
    """A plain number as written: its exact value and how math-verify will type it."""

    value: Fraction
    is_float: bool  # written with a decimal point (a sympy Float for math-verify)
    percent: bool

    @property
    def effective(self) -> Fraction:
        return self.value / 100 if self.percent else self.value


def numeric_verdict(gold: Numeric, answer: Numeric) -> bool | None:
    """math-verify's verdict on two plain numbers, or ``None`` where it is not certain.

    math-verify compares two integers (percent or not) by their written values (``25%``
    equals ``25``) or by value (``100%`` equals ``1``), otherwise by value (``25%`` equals
    ``0.25`` and ``1/4``, not ``25.0``); a float is compared after rounding to 6 decimals
    (``grader.sympy_numeric_eq``), so two different decimals of at most 6 places (and 14
    digits, within a 15-digit float) differ, while a value within rounding distance of
    another is where this returns ``None``. A percentage against the same number written
    without one (``0.675`` and ``0.675%``) is ``None`` too: math-verify also compares the
    texts it read, and in plain text it reads ``0.675%`` as the text ``0.675``.
    """
    g_int = not gold.is_float and gold.value.denominator == 1
    a_int = not answer.is_float and answer.value.denominator == 1
    if (gold.percent or answer.percent) and g_int and a_int:
        return gold.value == answer.value or gold.effective == answer.effective
    if gold.effective == answer.effective:
        return True
    if gold.percent or answer.percent:
        if gold.value == answer.value:
            return None  # the same number written: math-verify's texts may match (``0.675`` and ``0.675%`` in plain text)
        if not (gold.is_float or answer.is_float):
            return False  # exact: sympy compares the values
        # a float against a percentage: compared after rounding to 6 decimals
        return False if all(10**6 % n.effective.denominator == 0 and abs(n.effective) < 10**8 for n in (gold, answer)) else None
    if not (gold.is_float or answer.is_float):
        return False  # exact rationals: sympy compares them exactly
    if all(10**6 % n.value.denominator == 0 and abs(n.value) < 10**8 for n in (gold, answer)):
        return False  # different decimals of at most 6 places and 14 digits: they differ after rounding to 6
    difference = abs(gold.effective - answer.effective)
    scale = max(abs(gold.effective), abs(answer.effective), Fraction(1))
    return False if difference > Fraction(1, 10**5) * scale else None


@functools.lru_cache(maxsize=4096)
def _inert(char: str) -> bool:
    """Whether a character outside ASCII reads to math-verify as nothing the fast path must model.

    Refused: numbers of every script (``\\d`` is Unicode to math-verify: ``١``, fullwidth
    ``４``), spaces (``\\s`` too), combining marks, control, format, private-use and
    unassigned characters, and any character whose case mappings hold an ASCII letter
    (``ſ``→``S``, ``İ``→``i̇``, ``ı``→``I``, the Kelvin sign→``k``, ``ß``→``SS``): Python's
    case-insensitive patterns match some of them to ASCII letters, and lowering ``İ``
    changes the text's length. ``tests/rewards/test_rewards_math.py`` checks every code point.
    """
    if unicodedata.category(char)[0] in "NMZC":
        return False
    return not any(c.isascii() for form in (char.lower(), char.upper(), char.casefold()) for c in form)


def _unicode_safe(text: str) -> bool:
    """Whether every character of ``text`` reads alike to math-verify and to the fast path's ASCII rules."""
    return text.isascii() or all(_inert(char) for char in set(_NON_ASCII.findall(text)))


def _ascii_lower(text: str) -> str:
    """``text`` with ASCII letters lowercased and nothing else changed: same length, same positions."""
    return text.lower() if text.isascii() else text.translate(_ASCII_LOWER)


def _number(text: str) -> Numeric | None:
    """The value of a string of the fast path's grammar (checked by the caller)."""
    if len(text) > _MAX_NUMBER_CHARS:
        return None
    fraction = _FRACTION_PARTS.fullmatch(text)
    if fraction:
        sign, numerator, denominator = fraction.groups()
        if int(denominator) == 0:
            return None
        value = Fraction(int(numerator), int(denominator))
        return Numeric(-value if sign else value, False, False)
    if "/" in text:  # a/b: math-verify parses it unevaluated, and compares it by value
        numerator, denominator = text.split("/")
        return Numeric(Fraction(int(numerator), int(denominator)), False, False)
    plain = text.replace(",", "")
    point = plain.find(".")
    if point < 0:
        return Numeric(Fraction(int(plain)), False, False)
    digits = plain[:point] + plain[point + 1 :]
    if len(digits.lstrip("-").lstrip("0")) > MAX_DECIMAL_DIGITS:
        return None  # beyond a 15-digit float: math-verify's rounding decides
    return Numeric(Fraction(int(digits), 10 ** (len(plain) - point - 1)), True, False)


def _as_scalar(number: Numeric | None, plain: bool) -> Scalar | None:
    if number is None:
        return None
    terms = ((1, 0, number.value),) if number.value else ()
    return Scalar(terms, number.is_float, number.percent, plain)


@functools.lru_cache(maxsize=4096)
def fast_gold(gold: str) -> Answer | None:
    """The gold as the fast path reads it, or ``None`` when math-verify must read it.

    A plain number (a trailing ``\\%`` ignored, as math-verify does outside LaTeX), ``a/b``
    or ``\\frac{a}{b}`` as written; anything else of the grammar of
    :mod:`~mathgym.rewards.math_values` inside one ``$…$`` (math-verify reads bare LaTeX
    otherwise, see :func:`~mathgym.rewards.math.latex_gold`).
    """
    if not _unicode_safe(gold):
        return None
    gold = gold.strip()
    if gold.endswith("\\%") and _PLAIN.fullmatch(gold[:-2]):
        gold = gold[:-2]  # outside LaTeX, math-verify reads ``54\\%`` as the number 54
    if _GOLD.fullmatch(gold):
        return _as_scalar(_number(gold), plain=_PLAIN.fullmatch(gold) is not None)
    if len(gold) > 2 and gold[0] == gold[-1] == "$" and gold.count("$") == 2:
        return read_answer(gold[1:-1])
    return None


def fast_verdict(gold: Answer, answer: Answer | Words | NoMatch) -> bool | None:
    """math-verify's verdict on the values the fast path read, or ``None`` where it is not certain."""
    if isinstance(answer, NoMatch):
        return False  # math-verify read nothing
    if isinstance(answer, Words):
        return False if isinstance(gold, (Scalar, Relation, Polynomial)) else None  # a symbol to math-verify (math_words.py)
    if isinstance(gold, (Relation, Member)) or isinstance(answer, (Relation, Member)):
        return relation_verdict(gold, answer, fast_verdict)
    if isinstance(gold, Polynomial) or isinstance(answer, Polynomial):
        return polynomial_verdict(gold, answer)
    if isinstance(gold, Root) or isinstance(answer, Root):
        return root_verdict(gold, answer)
    if isinstance(gold, EulerProduct) or isinstance(answer, EulerProduct):
        return euler_product_verdict(gold, answer)
    return value_verdict(gold, answer, _numeric_scalars)


def _never_rational(gold: Answer) -> bool:
    """Whether no rational number is ``gold`` to math-verify: an exact irrational number or root, a polynomial, an inequality."""
    if isinstance(gold, Scalar):
        return gold.rational is None and not gold.is_float and not gold.percent
    return isinstance(gold, (Polynomial, Root)) or (isinstance(gold, Relation) and not gold.is_equation)


def _numeric_scalars(gold: Scalar, answer: Scalar) -> bool | None:
    return numeric_verdict(Numeric(gold.rational, gold.is_float, gold.percent), Numeric(answer.rational, answer.is_float, answer.percent))


def _answer_is(text: str, lower: str) -> str | None:
    if "\\boxed" in text or lower.count("answer") != 1:
        return None
    match = _ANSWER_TAIL.match(text, lower.rfind("answer"))
    return match.group(2) if match and quiet_tail(text[match.end() :]) else None


def _marked_ratio(text: str, lower: str) -> tuple[str, str] | None:
    """``\\frac{a}{b}`` or ``a/b`` right after the one "answer is"/"answer:"/"final answer is", or the last ``####``.

    math-verify reads it there: ``\\frac{a}{b}`` with its LaTeX-fraction pattern
    (``-?\\frac{N}{N}``; not ``\\dfrac``), ``a/b`` with its expression pattern (parsed
    unevaluated, compared by value). After "answer" (its ``answer.{0,50}?`` patterns,
    priority 100 or 200; "final answer … is", 50) the first match after the marker is
    taken, with no "answer" (priority 300) the match ending rightmost. No other match can
    end later: only words and full stops may follow (no digit), and after ``a/b`` a
    space and a letter, a comma, a colon or the end, so that the expression cannot take in
    a decimal point (``a/b.`` is ``a/b.0`` to it).
    """
    if "\\boxed" in text or "\\fbox" in text or "i hope" in lower:
        return None
    count = lower.count("answer")
    if count == 1:
        at, shape = lower.find("answer"), "answer"
        if "final answer" in lower and not lower.startswith("final answer is", at - len("final ")):
            return None
    elif count == 0:
        at, shape = text.rfind("####"), "gsm8k"
    else:
        return None
    match = _MARKED_RATIO.match(text, at) if at >= 0 else None
    if match is None or not quiet_tail(text[match.end() :]):
        return None
    if match.group(1).startswith(("-\\", "\\")) or _SLASH_END.match(text, match.end()):
        return match.group(1), shape
    return None


def _gsm8k(text: str, lower: str) -> str | None:
    if "\\boxed" in text or "answer" in lower:
        return None
    start = text.rfind("####")
    match = _GSM8K_TAIL.match(text, start) if start >= 0 else None
    return match.group(2) if match and quiet_tail(text[match.end() :]) else None


_TAIL_AFTER_LATEX = re.compile(r"[\d=%$\\\[\]]|pct|percent", re.IGNORECASE | re.ASCII)


def _one_inline_latex(text: str, lower: str) -> str | None:
    """The contents of the one ``$…$`` or ``\\(…\\)`` math-verify reads, or ``None``.

    The text holds exactly one LaTeX environment and no box. With no "answer", it is the
    rightmost match of priority 300 when nothing that could start a match (a digit, ``=``,
    a percentage, LaTeX) follows it. After the one "answer" (within 50 characters, the
    reach of math-verify's pattern), its LaTeX match and the expression matches all start
    at "answer", and the LaTeX one, ending last, is tried first (after "final answer", no
    digit may come before it: its priority-50 pattern reads the number after "is"). A
    ``\\frac`` outside or an inline-bracket environment (`` [a, b] ``) declines.
    """
    if "\\boxed" in text or "\\fbox" in text or "\\[" in text or INLINE_BRACKET.search(text):
        return None
    if text.count("$") == 2 and "\\(" not in text and "\\$" not in text:
        start = text.find("$")
        end = text.find("$", start + 1)
        if start > 0 and (text[start - 1].isdigit() or text[start - 1] == "\\"):
            return None
        inner, close = text[start + 1 : end], end + 1
    elif "$" not in text and text.count("\\(") == 1 and text.count("\\)") == 1:
        start, end = text.find("\\("), text.find("\\)")
        inner, close = text[start + 2 : end], end + 2
    else:
        return None
    if not inner.strip() or "\n" in inner or end < start or _TAIL_AFTER_LATEX.search(text, close):
        return None
    if "\\frac" in text[:start] or "\\frac" in text[close:]:
        return None
    count = lower.count("answer")
    if count > 1 or "i hope" in lower:
        return None
    if count == 1:
        at = lower.find("answer") + len("answer")
        if not at <= start <= at + 50:
            return None
        if "final answer" in lower and re.search(r"\d", text[at:start]):
            return None  # "final answer … is N" (priority 50) would read N before any LaTeX
    return inner


def fast_answer(completion: str) -> tuple[Answer | Words | NoMatch, str] | None:
    """The value math-verify extracts from ``completion`` and the shape that proves it, or ``None``.

    Example:
        >>> fast_answer("6 * 7 = 42, so the answer is 42.")[1]
        'answer'
    """
    if not _unicode_safe(completion):
        return None
    lower = _ascii_lower(completion)
    boxed = one_box(completion, lower)
    if boxed is not None:
        value = read_answer(boxed) or read_words(boxed)
        if value is None and (inner := sentence_in_box(completion, lower, boxed)) is not None:
            value = read_answer(inner)
            return None if value is None else (value, "sentence")
        return None if value is None else (value, "boxed")
    joined = several_boxes(completion, lower)
    if joined is not None:
        value = read_answer(joined)
        return None if value is None else (value, "boxes")
    chain = boxes_in_dollars(completion, lower)
    if chain is not None:
        values = [read_answer(content) for content in chain]
        if len(values) == 1:
            return None if values[0] is None else (values[0], "boxes")
        scalars = all(isinstance(value, Scalar) and not (value.percent or value.is_float or value.product) for value in values)
        groups = all(isinstance(value, Group) and value.kind != "set" for value in values)
        return (Group("set", tuple(values)), "boxes") if scalars or groups else None
    for shape, read in (("answer", _answer_is), ("gsm8k", _gsm8k)):
        found = read(completion, lower)
        if found is not None:
            scalar = _as_scalar(_number(found), plain=True)
            return None if scalar is None else (scalar, shape)
    ratio = _marked_ratio(completion, lower)
    if ratio is not None:
        value = read_answer(ratio[0]) if "\\" in ratio[0] else _as_scalar(_number(ratio[0]), plain=False)
        return None if value is None else (value, ratio[1])
    marked = marked_number(completion, lower)
    if marked is not None:
        return _as_scalar(Numeric(*marked[0]), plain=True), marked[1]  # type: ignore[return-value]
    inline = _one_inline_latex(completion, lower)
    if inline is not None:
        value = read_answer(inline)
        return None if value is None else (value, "latex")
    bare = completion.strip()
    if _PLAIN.fullmatch(bare):
        scalar = _as_scalar(_number(bare), plain=True)
        return None if scalar is None else (scalar, "bare")
    if len(completion) <= _MAX_UNMARKED_CHARS:
        unmarked = unmarked_number(completion, lower)
        if isinstance(unmarked, NoMatch):
            return unmarked, "nothing"
        if isinstance(unmarked, Power):
            return Scalar(((1, 0, unmarked.value),), plain=False), "unmarked"
        if unmarked is not None:
            return _as_scalar(Numeric(*unmarked), plain=True), "unmarked"  # type: ignore[return-value]
    return None


def fast_decision(gold: Answer, completion: str) -> tuple[bool, str, Answer | Words | NoMatch | SomeRational] | None:
    """math-verify's verdict on ``completion`` against a gold the fast path read, the shape and the answer read; or ``None``.

    :func:`fast_answer` then :func:`fast_verdict`; where no answer is read, a text from
    which math-verify can read only rational numbers
    (:func:`~mathgym.rewards.math_plain_text.only_rationals`) is wrong against a gold no
    rational equals.
    """
    found = fast_answer(completion)
    if found is not None:
        verdict = fast_verdict(gold, found[0])
        return None if verdict is None else (verdict, found[1], found[0])
    if _never_rational(gold) and _unicode_safe(completion) and only_rationals(completion) is not None:
        return False, "rationals", SomeRational()
    return None
