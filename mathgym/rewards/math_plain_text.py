"""Numbers in plain text, found where math-verify's expression patterns find them (its behaviour, restated here).

math-verify reads numbers outside LaTeX with two patterns (``math_verify.parser.lazy_expr_regex``,
version 0.9): a number (``1,234.5``, ``1 234``, ``6850,28``, ``.5``, a currency sign before
it, ``%``/"percent" after it) and an expression (digits, spaces and operators), each after
an anchor (start of text, a space, ``=``). After "answer" it takes the first match; with no
marker at all, the match that ends rightmost (priority 300). The functions here re-state
those patterns (:data:`NUMBER`, :data:`EXPRESSION`) and decide only where the text pins
down which match math-verify takes and that it is a number; the caller compares values:

* :func:`marked_number`: the number after the last "answer is"/"answer:" (earlier
  "answer"s end before it), after ``answer … = `` (its greedy ``answer.{0,100}=``), or
  after the last ``####``; ``74\\%`` is 74 there (the pattern's ``%`` must follow at once).
* :func:`unmarked_number`: with no marker, or an "answer" followed by nothing any pattern
  can match (``the answer is +57``, ``-.6``, ``\\$9.50``: no anchored digit), the
  rightmost match, which lies before it; :class:`NoMatch` when there is none anywhere
  (math-verify reads nothing).
* :func:`only_rationals`: a text whose every match is a rational number or nothing.

Bounded work: the marked shape looks at one position; the unmarked scan walks back from
the end of the text over short runs of the characters a match can hold, at most
``_MAX_SCAN`` characters in all, each run at most ``_MAX_RUN`` long; the other checks are
single regular-expression searches without nested repetition.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import NamedTuple

_CURRENCY = "€£¥₹₽₪₩₫฿₡₢₣₤₥₦₧₨₩₪₫₭₮₯₰₱₲₳₴₵₶₷₸₹₺₻₼₽₾₿"  # math-verify's, less "$" (LaTeX is declined)
_DIGITS = r"(?:(?P<int>-?[1-9]\d{0,2}(?:[ ,]\d{3})+)(?P<dec>\.\d+)?|(?P<int2>-?\d+)(?P<dec2>[.,]\d+)|(?P<dec3>\.\d+)|(?P<int3>-?\d+))"
#: math-verify's ``\s*(?:%|[Pp]ercent|\s*[Pp]ercentage|\s*[Pp]ct)``, the same matches without its quadratic backtracking.
_PERCENT = r"(?P<percent>\s*+(?:%|[Pp]ercent|[Pp]ct))?"
_ANCHOR = r"(?:^|\s|=)(?:\*\*)?"
_EXPR_CHARS = r"[\d.\s+\-*×/^()÷]"
_OPERATORS = r"[+\-*×/^()÷]"
#: math-verify's number pattern, its alternatives in its order (``\d``, ``\s`` Unicode, as its are).
DIGITS = re.compile(rf"(?<!\d){_DIGITS}{_PERCENT}")
#: The anchored number and expression patterns of math-verify's priority 300.
NUMBER = re.compile(rf"{_ANCHOR}[{_CURRENCY}]?(?<!\d){_DIGITS}{_PERCENT}")
EXPRESSION = re.compile(rf"{_ANCHOR}(?P<expr>-?\(?-?\d{_EXPR_CHARS}*{_OPERATORS}{_EXPR_CHARS}+\)?)(?:\*\*)?(?:\.|,|:|\s|\)|\$|$)")
_EXPR_RUN = re.compile(rf"{_EXPR_CHARS}*")
_OPERATOR = re.compile(_OPERATORS)
_SPACES = re.compile(r"[ \t]+", re.ASCII)
_ANSWER_MARK = re.compile(r"answer(?: is:?|:)[ \t]+", re.IGNORECASE | re.ASCII)
_GSM8K_MARK = re.compile(r"####[ \t]+", re.ASCII)
#: The start or end of a LaTeX environment math-verify could read instead.
_LATEX_MARKS = re.compile(r"[$\[\]]|\\(?:[()\[\]]|frac|boxed|fbox)")
#: Where a further number or expression could start: an anchor, then a digit soon after.
_ANCHORED_DIGIT = re.compile(r"[\s=]\S{0,4}\d")
#: Characters a match of :data:`NUMBER` or :data:`EXPRESSION` can hold (bar spaces): a match never crosses any other.
_SOFT = frozenset("0123456789.,:%+-*×/^()÷=Pperctang" + _CURRENCY)
#: Where a number or expression match of math-verify could start: an anchor, ``**``, a currency sign, a sign or parenthesis, a digit.
_MATCH_START = re.compile(rf"[\s=](?:\*\*)?(?:[${_CURRENCY}]?(?:-?\d|\.\d)|-?\(?-?\d)")
#: LaTeX before the rightmost match (a box is checked apart; an escaped ``\\$`` starts no environment).
_UNMARKED_LATEX = re.compile(r"(?<!\\)\$|[\[\]]|\\(?:[()\[\]]|frac|fbox)")
#: Where a LaTeX environment could start (an escaped ``\\$`` is none).
_LATEX_START = re.compile(r"(?<!\\)\$|\\[(\[]|\\frac|\s\[")
_POWER = re.compile(r"\s*([1-9]\d{0,3})\s*\^\s*(\d{1,2})\s*", re.ASCII)
_EMPTY_LAST_BOX = re.compile(r"\\boxed\{([^{}]*)\}")
_INTEGER_BOX = re.compile(r"\s*-?\d{1,12}\s*", re.ASCII)
_MAX_DIGITS = 14
_MAX_RUN = 120
_MAX_SCAN = 4000


class PlainNumber(NamedTuple):
    value: Fraction
    is_float: bool
    percent: bool = False  # "%", "percent", "pct" after it: math-verify divides by 100


def _value(match: re.Match) -> PlainNumber | None:
    """The number math-verify builds from a match (``extract_expr``): separators dropped, ``,`` as a point."""
    integer = (match.group("int") or match.group("int2") or match.group("int3") or "").replace(" ", "").replace(",", "")
    negative = integer.startswith("-")
    integer = integer.lstrip("-").lstrip("0") or "0"
    decimal = (match.group("dec") or match.group("dec2") or match.group("dec3") or "").replace(",", ".")
    if len((integer + decimal[1:]).lstrip("0")) > _MAX_DIGITS:
        return None
    value = Fraction(integer + decimal)
    return PlainNumber(-value if negative else value, bool(decimal), bool(match.group("percent")))


def _quiet(tail: str, lower_tail: str) -> bool:
    return not ("=" in tail or "%" in tail or "pct" in lower_tail or "percent" in lower_tail or _LATEX_MARKS.search(tail))


def marked_number(text: str, lower: str) -> tuple[PlainNumber, str] | None:
    """The number after the last "answer is"/"answer:", or else the last ``####``, and that shape.

    ``N`` is what math-verify's number pattern matches there: ``6850,28`` is 6850.28,
    ``9.809,69`` is 9.809, ``1 234 567`` is 1234567, ``2.5E+4`` is 2.5, ``0012`` is 12, a
    currency sign before it is dropped, a percentage sign right after it read (``54%`` is
    54/100). Declined when ``N`` starts an expression (an operator among the expression
    characters from there), when a further percentage or LaTeX follows, and, after ``####``
    (math-verify's rightmost match), when another number could start after it.

    After "answer" digits may follow (math-verify takes the first match after "answer"),
    unless a "final answer … is" could reach a later one. Earlier occurrences of "answer"
    ("the answer is 7, no wait, the answer is 8") make matches that end before ``N``
    (none may be "answer:", whose priority is higher, nor "final answer"). An ``=``
    after ``N`` is read as math-verify's ``answer.{0,100}=\\s*N`` does: see
    :func:`_after_equals`. ``lower`` is ``text`` with ASCII letters lowercased (same positions).
    """
    if "\\boxed" in text or "\\fbox" in text:
        return None
    count = lower.count("answer")
    if count >= 1:
        shape, at = "answer", lower.rfind("answer")
        marker = _ANSWER_MARK.match(text, at)
        if marker is None or "i hope" in lower:
            return None
        if "final answer" in lower and (count > 1 or not lower.startswith("answer is", at)):
            return None
        if lower.count("answer:") > lower.startswith("answer:", at):
            return None  # an earlier "answer:" has the higher priority (100)
    else:
        shape, at = "gsm8k", text.rfind("####")
        marker = _GSM8K_MARK.match(text, at) if at >= 0 else None
        if marker is None:
            return None
    number = _number_at(text, marker.end())
    if number is None:
        return None
    after = number.end() + 2 * text.startswith("\\%", number.end())  # ``74\\%``: math-verify's pattern reads 74
    tail = text[after:]
    if shape == "answer" and "=" in tail:
        return _after_equals(text, lower, at + len("answer"))
    if not _quiet(tail, lower[after:]) or (shape == "gsm8k" and _ANCHORED_DIGIT.search(tail)):
        return None
    found = _value(number)
    return None if found is None else (found, shape)


def _number_at(text: str, begin: int) -> re.Match | None:
    """math-verify's number match at ``begin`` (a currency sign skipped), or ``None`` where an expression starts."""
    begin += begin < len(text) and text[begin] in _CURRENCY
    number = DIGITS.match(text, begin)
    if number is None or _OPERATOR.search(_EXPR_RUN.match(text, begin).group(), 1):
        return None
    return number


def _after_equals(text: str, lower: str, after_answer: int) -> tuple[PlainNumber, str] | None:
    """The number after the last ``=`` when math-verify's ``answer(?:.{0,100}=\\s*|…)`` reaches it from the one "answer".

    The first alternative is tried first and is greedy: the last ``=`` within 100
    characters of "answer" (no line break between) whose continuation (spaces, then a
    number) matches ends the match, and no other match of priority 100 or 200 ends later.
    ``answer is 192 because 13 + 179 = 192`` reads the second 192.
    """
    equals = text.rfind("=")
    if lower.count("answer") != 1 or "final answer" in lower or equals - after_answer > 100 or "\n" in text[after_answer:equals]:
        return None
    spaces = _SPACES.match(text, equals + 1)
    number = _number_at(text, spaces.end()) if spaces else None
    if number is None or _LATEX_MARKS.search(text, after_answer) or not _quiet(text[number.end() :], lower[number.end() :]):
        return None
    found = _value(number)
    return None if found is None else (found, "answer")


def _only_an_empty_last_box(text: str) -> bool:
    """Boxes whose contents math-verify cannot parse (``12,``: integers, then an empty last box), so its boxed pattern fails."""
    boxes = _EMPTY_LAST_BOX.findall(text)
    if len(boxes) != text.count("\\boxed") or "\\fbox" in text:
        return False
    return boxes[-1].strip() == "" and all(_INTEGER_BOX.fullmatch(box) for box in boxes[:-1])


def _scan(pattern: re.Pattern, text: str, start: int, end: int) -> list[re.Match]:
    """``pattern.finditer(text)``'s matches that start in ``[start, end)`` (none crosses either end)."""
    found, at = [], start
    while at < end:
        match = pattern.match(text, at)
        if match and match.end() > at:
            found.append(match)
            at = match.end()
        else:
            at += 1
    return found


class Power(NamedTuple):
    """An expression ``a^b`` of two integers (``#### 1.7 \\cdot 10^3`` reads ``10^3``): its value, no plain number."""

    value: Fraction


class NoMatch(NamedTuple):
    """No pattern of math-verify's matches anywhere in the text: it reads nothing (``parse`` returns ``[]``)."""


def unmarked_number(text: str, lower: str) -> PlainNumber | Power | NoMatch | None:
    """The number math-verify reads from text with no marker: its rightmost-ending match, when that is a number.

    Only text with no LaTeX environment (``$`` unless escaped, ``\\(``, ``\\[``, ``[``,
    ``\\frac``) and no box, or boxes math-verify cannot parse (an empty last box after integers), so that
    every pattern before priority 300 finds nothing; "answer" only once and followed by
    nothing any pattern can match (:func:`_dead_after`), so that the rightmost match lies
    before it (``the answer is +57`` reads no number there). The rightmost match lies in
    the last run of characters a match can hold that holds any match; an expression ending
    there as far right is declined, unless it is a power of two integers (:class:`Power`)
    or its parentheses do not balance: ``parse_expr``
    fails on it and math-verify takes the next match (``#### 320 (that is 78 + 242)`` reads
    242). :class:`NoMatch` when nothing matches at all.
    """
    end = len(text)
    if "answer" in lower:
        end = lower.find("answer")
        if lower.count("answer") != 1 or not _dead_after(text, end):
            return None
    if _UNMARKED_LATEX.search(text, 0, end):
        return None
    if "\\boxed" in text and not _only_an_empty_last_box(text):
        return None
    scanned = 0
    while end > 0 and scanned < _MAX_SCAN:
        start = end
        while start > 0 and (text[start - 1] in _SOFT or text[start - 1].isspace()):
            start -= 1
        if end - start > _MAX_RUN:
            return None
        matches = [(m.end(), -m.start(), pattern is EXPRESSION, m) for pattern in (NUMBER, EXPRESSION) for m in _scan(pattern, text, start, end)]
        # math-verify tries them rightmost end first, then leftmost start, then expressions first, skipping
        # those that do not parse: an expression whose parentheses do not balance (``78 + 242)``) is one
        for _, _, is_expression, match in sorted(matches, key=lambda m: m[:3], reverse=True):
            if not is_expression:
                return _value(match)
            power = _POWER.fullmatch(match.group("expr"))
            if power:  # ``10^3``: parse_expr's ``10**3``, an integer
                return Power(Fraction(int(power.group(1)) ** int(power.group(2))))
            if _balanced(match.group("expr")):
                return None
        scanned += end - start + 1
        end = start - 1
    return NoMatch() if end <= 0 else None


def _balanced(expression: str) -> bool:
    """Whether the parentheses of ``expression`` balance (else ``parse_expr`` certainly fails on it)."""
    depth = 0
    for char in expression:
        depth += (char == "(") - (char == ")")
        if depth < 0:
            return False
    return depth == 0


def _dead_after(text: str, at: int) -> bool:
    """Whether no pattern of math-verify can match from ``at`` on: no anchored digit, no LaTeX, no box."""
    tail = text[at:]
    return not (_MATCH_START.search(tail) or _LATEX_START.search(tail) or "\\fbox" in tail or "\\boxed" in tail)


class SomeRational(NamedTuple):
    """What math-verify reads from a text that holds only rational numbers: a rational number, or nothing."""


#: What could make math-verify read more than a rational: LaTeX environments, powers; decimals (floats), an inline bracket.
_MORE_THAN_RATIONALS = ("$", "\\(", "\\[", "\\boxed", "\\fbox", "^", "**")
_DECIMAL_OR_BRACKET = re.compile(r"[.,]\d|\s\[[^\n\]\[]+\]\s")


def only_rationals(text: str) -> SomeRational | None:
    """:class:`SomeRational` when every match of math-verify's patterns in ``text`` is a rational number.

    With no LaTeX environment (``$``, ``\\(``, ``\\[``, `` [a] ``, a box) only its number
    and expression patterns and its ``-?\\frac{N}{N}`` pattern can match; with no decimal
    point or comma before a digit and no ``^`` or ``**``, each of those reads an integer,
    a percentage of one, a fraction of two, or a sum, difference, product or quotient of
    them (``parse_expr``), or fails to parse. The caller knows which golds no rational
    equals (a radical, a multiple of π, a polynomial, an inequality).
    """
    if any(mark in text for mark in _MORE_THAN_RATIONALS) or _DECIMAL_OR_BRACKET.search(text):
        return None
    return SomeRational()
