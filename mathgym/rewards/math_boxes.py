"""Where math-verify's boxed patterns read a completion: one box, a sentence in a box, several boxes.

math-verify 0.9 tries its ``\\boxed`` patterns at priority 50, with "final answer … is"
(``math_verify/parser.py``), and keeps only the contents of the boxes a match holds
(``latex2sympy2_extended.math_normalization.extract_boxed_content``). The readers here
return the text math-verify then parses, where the completion's shape pins it down
(:mod:`~mathgym.rewards.math_fast` reads it as a value):

* :func:`one_box`: exactly one ``\\boxed{…}`` (no ``\\fbox``) and no percent sign or
  word after it; where "final answer" occurs, no digit or LaTeX delimiter between it and
  the box (bar the box's own ``$…$``, ``\\[…\\]``) nor after the box, and no "I hope".
* :func:`sentence_in_box`: a box holding words, one ``$…$`` and words ending in a letter
  and a full stop: latex2sympy cannot parse that, and math-verify reads the ``$…$``.
* :func:`several_boxes`: two to six boxes with no other LaTeX, joined as
  ``extract_boxed_content`` joins them (``\\boxed{1}, \\boxed{2}`` is ``1,2``).
* :func:`boxes_in_dollars`: boxes each in its own ``$…$`` (``$x = \\boxed{4}$ or
  $x = \\boxed{11}$``), read as math-verify chains those environments.

:func:`quiet_tail` is the test for text after an answer: words and full stops only.
Every function is one pass over the text.
"""

from __future__ import annotations

import re
import string

from mathgym.rewards.math_values import MAX_VALUE_CHARS

_MAX_BOXES = 6
#: A sentence in a box: words, one ``$…$``, words ending in a letter and a full stop (which latex2sympy cannot parse).
_BOXED_SENTENCE = re.compile(r"([A-Za-z ,]*) ?\$([^$\n]+)\$ ?([A-Za-z ,]*[A-Za-z])\.", re.ASCII)
#: What joins two ``$…$`` in math-verify's chain of environments (its ``\\s*(?:,?and|,?or|,)\\s*``).
_ENV_SEPARATOR = re.compile(r"\s*(?:,?and|,?or|,)\s*")
_PERCENT_WORD = re.compile(r"^\s*(?:percent|pct)", re.IGNORECASE | re.ASCII)
_LATEX_OUTSIDE_BOXES = re.compile(r"\$|\\[(\[]", re.ASCII)
_BOX_SEPARATOR = re.compile(r"\b(?:and|or)\b|,|;")  # math-verify's VALID_SEPARATOR_PATTERN
_DELIMITERS = (("$$", "$$"), ("\\[", "\\]"), ("\\(", "\\)"), ("$", "$"))
_DIGIT_OR_LATEX = re.compile(r"[\d$\\\[\]{}]", re.ASCII)
#: After an answer: nothing that could start another number, expression, equation, LaTeX or percentage.
_TAIL_BLOCKERS = re.compile(r"[\d=$\\\[\]{}%()+\-*/^×÷]", re.ASCII)
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)
#: math-verify's inline-bracket environment (`` [a, b] ``): one anywhere could be read with or instead of ours.
INLINE_BRACKET = re.compile(r"\s\[[^\n\]\[]+\]\s", re.ASCII)


def quiet_tail(tail: str) -> bool:
    """Whether ``tail`` holds words and full stops only: no digit, ``=``, LaTeX, bracket, operator or percentage."""
    if _TAIL_BLOCKERS.search(tail):
        return False
    lower = tail.translate(_ASCII_LOWER)
    return "pct" not in lower and "percent" not in lower


def _box_span(text: str, after: int = 0) -> tuple[int, int] | None:
    """Start and end of the first ``\\boxed{…}`` from ``after`` (braces matched), or ``None``."""
    start = text.find("\\boxed{", after)
    if start < 0:
        return None
    depth = 0
    for at in range(start + 6, min(len(text), start + 8 + MAX_VALUE_CHARS)):
        depth += {"{": 1, "}": -1}.get(text[at], 0)
        if depth == 0:
            return start, at + 1
    return None


def one_box(text: str, lower: str) -> str | None:
    """The contents of the one box, when every match of math-verify's priority 50 holds it (see above)."""
    if text.count("\\boxed") != 1 or "\\fbox" in text:
        return None
    span = _box_span(text)
    if span is None:
        return None
    start, end = span
    after = lower[end:]
    if "%" in after or "pct" in after or "percent" in after:
        return None  # a percent sign after a LaTeX environment holding the box scales it
    if "final answer" in lower:  # its own patterns share the box's priority: they must find the box too
        before = text[lower.find("final answer") : start]
        after = text[end:]
        for opening, closing in _DELIMITERS:
            if before.endswith(opening) and after.startswith(closing):
                before, after = before[: -len(opening)], after[len(closing) :]
                break
        if "i hope" in lower or _DIGIT_OR_LATEX.search(before) or _DIGIT_OR_LATEX.search(after):
            return None
    return text[start + 7 : end - 1]


def sentence_in_box(text: str, lower: str, boxed: str) -> str | None:
    """The ``$…$`` of a box that holds a sentence (``\\boxed{Therefore $x \\ge 5$ is the solution.}``), as math-verify reads it.

    latex2sympy cannot parse a text ending in a letter and a full stop, so math-verify's
    boxed match (priority 50) fails and its plain LaTeX patterns (300) take the match ending
    rightmost: the ``$…$`` in the box, when no LaTeX stands outside the box, no "answer",
    and no digit, percentage or LaTeX after that ``$…$``.
    """
    sentence = _BOXED_SENTENCE.fullmatch(boxed)
    if sentence is None or "answer" in lower or _PERCENT_WORD.search(sentence.group(3)):
        return None
    start = text.find("\\boxed{")
    outside = text[:start] + text[start + len(boxed) + 8 :]
    if _LATEX_OUTSIDE_BOXES.search(outside) or "\\frac" in outside or INLINE_BRACKET.search(text) or not quiet_tail(text[start + len(boxed) + 8 :]):
        return None
    return sentence.group(2)


def several_boxes(text: str, lower: str) -> str | None:
    """The contents math-verify joins from two or more boxes with no other LaTeX around (``\\boxed{1}, \\boxed{2}`` is ``1,2``).

    With no ``$``, ``\\(``, ``\\[``, inline bracket, "final answer" or brace outside the
    boxes, the one match of priority 50 is its plain ``\\boxed{.+}``, from the first box to
    the last brace, and ``extract_boxed_content`` (mode "last") takes the boxes from the
    right while the text between two is under 10 characters, or under 70 with ``,``, ``;``,
    "and" or "or" in it and different contents; equal neighbours are kept once.
    """
    if "\\fbox" in text or "final answer" in lower or "i hope" in lower or _LATEX_OUTSIDE_BOXES.search(text) or INLINE_BRACKET.search(text):
        return None
    spans: list[tuple[int, int]] = []
    while len(spans) <= _MAX_BOXES and (span := _box_span(text, spans[-1][1] if spans else 0)) is not None:
        spans.append(span)
    if not 2 <= len(spans) <= _MAX_BOXES or len(spans) != text.count("\\boxed"):
        return None
    inside = sum(text.count("{", start, end) for start, end in spans)
    if inside != text.count("{") or inside != text.count("}"):
        return None  # a brace outside the boxes: math-verify's ``\\boxed{.+}`` could end elsewhere
    contents = [text[start + 7 : end - 1].strip() for start, end in spans]
    if not all(contents):
        return None
    taken = [contents[-1]]
    for at in range(len(spans) - 2, -1, -1):
        between = text[spans[at][1] : spans[at + 1][0]]
        near = len(between) < 10 or (contents[at] != taken[-1] and len(between) < 70 and _BOX_SEPARATOR.search(between))
        if not near:
            break
        if contents[at] != taken[-1]:
            taken.append(contents[at])
    return ",".join(reversed(taken))


def boxes_in_dollars(text: str, lower: str) -> list[str] | None:
    """The boxes math-verify reads from ``$x = \\boxed{4}$ or $x = \\boxed{11}$``: those of the last chain of ``$…$``.

    Each ``$…$`` holds one box and nothing else is LaTeX. math-verify's boxed pattern of
    priority 50 takes up to six such environments, joined by ``,``, "and" or "or"
    (``\\s*(?:,?and|,?or|,)\\s*``), from left to right; the match ending rightmost is the
    chain holding the last one, and it reads the contents of its boxes (a set when more
    than one). Its plain ``\\boxed{.+}`` match ends before that last ``$``.
    """
    if text.count("$") < 4 or text.count("$") % 2 or "$$" in text or "\\$" in text or "\\fbox" in text or "final answer" in lower:
        return None
    dollars = [at for at, char in enumerate(text) if char == "$"]
    envs = list(zip(dollars[::2], dollars[1::2]))
    if len(envs) > _MAX_BOXES or text.count("\\boxed") != len(envs) or (envs[0][0] and text[envs[0][0] - 1].isdigit()):
        return None
    outside = text[: envs[0][0]] + text[envs[-1][1] + 1 :]
    if _LATEX_OUTSIDE_BOXES.search(outside) or "\\frac" in outside or INLINE_BRACKET.search(text) or not quiet_tail(text[envs[-1][1] + 1 :]):
        return None
    contents = []
    for start, end in envs:
        span = _box_span(text, start)
        if span is None or span[1] > end or "{" in text[start:span[0]] + text[span[1] : end]:
            return None
        contents.append(text[span[0] + 7 : span[1] - 1].strip())
    chain: list[str] = []
    for at, content in enumerate(contents):
        joined = at and len(chain) < _MAX_BOXES and _ENV_SEPARATOR.fullmatch(text, envs[at - 1][1] + 1, envs[at][0])
        chain = [*chain, content] if joined else [content]
    return chain if all(chain) else None
