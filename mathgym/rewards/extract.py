"""Final-answer extraction from model text: ``\\boxed{}``, GSM8K ``####``, "the answer is".

Pure string scanning in linear time: no regex with nested quantifiers, so a hostile
megabyte of text is scanned in milliseconds.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

AnswerFormat = Literal["boxed", "gsm8k", "answer_is"]
DEFAULT_FORMATS: tuple[AnswerFormat, ...] = ("boxed", "gsm8k", "answer_is")

_BOX_OPEN = re.compile(r"\\(?:boxed|fbox) *\{")
_BRACE = re.compile(r"[{}]")
_GSM8K = re.compile(r"####[ \t]*([^\n]{1,200})")
_ANSWER_IS = re.compile(r"(?i)(?:final answer|the answer)[ \t]*(?:is|:)[ \t]*:?[ \t]*")
#: A number that ends the answer: followed by punctuation, a word (``42 because …``) or the line's end.
_LEADING_NUMBER = re.compile(r"\$?(-?\d[\d,]*(?:\.\d+)?)\$?(?=[.,;!?]?(?:[ \t]+[^\W\d_]|[ \t]*$))", re.MULTILINE)
_SENTENCE_END = re.compile(r"\.(?:\s|$)")


def boxed_contents(text: str) -> list[str]:
    """Contents of every balanced ``\\boxed{...}`` (and ``\\fbox{...}``), in order.

    An opening brace that is never closed ends the scan (the unbalanced box is skipped).
    Boxes nested inside a found box are part of its contents. Linear in ``len(text)``.

    Example:
        >>> boxed_contents(r"\\boxed{\\frac{1}{2}} and \\boxed{3}")
        ['\\\\frac{1}{2}', '3']
    """
    found: list[str] = []
    resume = 0
    for match in _BOX_OPEN.finditer(text):
        if match.start() < resume:
            continue
        brace = match.end() - 1
        depth, i = 0, brace
        for token in _BRACE.finditer(text, brace):
            depth += 1 if token.group() == "{" else -1
            if depth == 0:
                i = token.start()
                break
        if depth != 0:
            return found
        found.append(text[brace + 1 : i])
        resume = i + 1
    return found


def last_boxed(text: str) -> str | None:
    """Contents of the last balanced ``\\boxed{}``, or ``None``."""
    boxes = boxed_contents(text)
    return boxes[-1] if boxes else None


def _after_last_answer_is(text: str) -> str | None:
    """What follows the last "the answer is" / "final answer:": a leading number, else the sentence."""
    last = None
    for last in _ANSWER_IS.finditer(text):
        pass
    if last is None:
        return None
    line = text[last.end() : last.end() + 200].split("\n", 1)[0]
    number = _LEADING_NUMBER.match(line)
    if number:
        return number.group(1)
    end = _SENTENCE_END.search(line)
    return (line[: end.start()] if end else line).strip().rstrip(".").strip("$ ")


def extract_answer(text: str, formats: Sequence[AnswerFormat] = DEFAULT_FORMATS) -> tuple[str, AnswerFormat] | None:
    """The final answer in ``text`` and which format it came from, or ``None``.

    Formats are tried in the given order; within a format the last occurrence wins (an
    empty last ``\\boxed{}`` counts as no box here; :class:`~mathgym.rewards.math.MathVerifier`
    in strict mode calls it a ``format_error``). After "the answer is", a number followed
    by words is the answer (``42 because 6 × 7 = 42`` reads ``42``); otherwise the rest of
    the sentence.

    Example:
        >>> extract_answer("so 6 * 7 = 42, the answer is 42.")
        ('42', 'answer_is')
        >>> extract_answer("The answer is 3. No: the answer is 4 because 2 + 2 = 4.")
        ('4', 'answer_is')
    """
    for kind in formats:
        if kind == "boxed":
            value = last_boxed(text)
        elif kind == "gsm8k":
            matches = _GSM8K.findall(text)
            value = matches[-1] if matches else None
        elif kind == "answer_is":
            value = _after_last_answer_is(text)
        else:
            raise ValueError(f"unknown answer format {kind!r}; choose from {DEFAULT_FORMATS}")
        if value is not None and value.strip():
            return value.strip(), kind
    return None
