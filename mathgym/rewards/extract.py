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
_ANSWER_IS = re.compile(r"(?i)(?:final answer|the answer)\s*(?:is|:)\s*:?\s*([^\n]{1,200})")


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


def extract_answer(text: str, formats: Sequence[AnswerFormat] = DEFAULT_FORMATS) -> tuple[str, AnswerFormat] | None:
    """The final answer in ``text`` and which format it came from, or ``None``.

    Formats are tried in the given order; within a format the last occurrence wins.

    Example:
        >>> extract_answer("so 6 * 7 = 42, the answer is 42.")
        ('42', 'answer_is')
    """
    for kind in formats:
        if kind == "boxed":
            value = last_boxed(text)
        elif kind == "gsm8k":
            matches = _GSM8K.findall(text)
            value = matches[-1] if matches else None
        elif kind == "answer_is":
            matches = _ANSWER_IS.findall(text)
            value = matches[-1].strip().rstrip(".").strip("$ ") if matches else None
        else:
            raise ValueError(f"unknown answer format {kind!r}; choose from {DEFAULT_FORMATS}")
        if value is not None and value.strip():
            return value.strip(), kind
    return None
