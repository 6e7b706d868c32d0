"""Final-answer extraction from model text: ``\\boxed{}``, GSM8K ``####``, "the answer is";
:func:`answer_after_thinking`, a reasoning model's answer without its thinking; and
:func:`delimited`, the linear finder of ``<tag>...</tag>`` blocks the envs share.

Pure string scanning in linear time: no regex with nested quantifiers, and no lazy
``open(.*?)close`` regex (it rescans the rest of the text from every unclosed ``open``),
so a hostile megabyte of text is scanned in milliseconds.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Literal, NamedTuple

AnswerFormat = Literal["boxed", "gsm8k", "answer_is"]
DEFAULT_FORMATS: tuple[AnswerFormat, ...] = ("boxed", "gsm8k", "answer_is")

_FENCE = re.compile(r"```([^\n]*)\n(.*?)```", re.DOTALL)
_LANGUAGE = re.compile(r"[ \t]*([A-Za-z0-9_+-]*)")
_BOX_OPEN = re.compile(r"\\(?:boxed|fbox) *\{")
_BRACE = re.compile(r"[{}]")
_GSM8K = re.compile(r"####[ \t]*([^\n]{1,200})")
_ANSWER_IS = re.compile(r"(?i)(?:final answer|the answer)[ \t]*(?:is|:)[ \t]*:?[ \t]*")
#: A number that ends the answer: followed by punctuation, a word (``42 because …``) or the line's end.
_LEADING_NUMBER = re.compile(r"\$?(-?\d[\d,]*(?:\.\d+)?)\$?(?=[.,;!?]?(?:[ \t]+[^\W\d_]|[ \t]*$))", re.MULTILINE)
_SENTENCE_END = re.compile(r"\.(?:\s|$)")


#: The tags of a reasoning model's thinking (DeepSeek-R1, QwQ, Qwen3 and the models trained like them).
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"


def answer_after_thinking(text: str) -> str | None:
    """A reasoning model's answer: the text after its last ``</think>``, or ``None`` if it never answered.

    Without a think block the whole text is the answer. With one, what follows the last
    ``</think>`` is (the whitespace a chat template puts after the tag left out); a completion
    holding only the ``</think>`` reads the same, as DeepSeek-R1's and QwQ's generation prompt
    opens the block itself. A ``<think>`` that opens the text (or the text after the last
    ``</think>``) and is never closed means the model ran out of tokens while thinking: there is
    no answer, and its thinking is not read as one. Linear: one search from the end.

    Example:
        >>> answer_after_thinking("<think>\\n2 + 2 is 4? yes\\n</think>\\n\\nThe answer is 4.")
        'The answer is 4.'
        >>> answer_after_thinking("The answer is 4."), answer_after_thinking("<think>\\n2 + 2 is 4, so")
        ('The answer is 4.', None)
    """
    close = text.rfind(THINK_CLOSE)
    answer = text if close < 0 else text[close + len(THINK_CLOSE) :].lstrip()
    if answer.lstrip().startswith(THINK_OPEN):
        return None
    return answer


def delimited(text: str, opening: str, closing: str) -> Iterator[tuple[int, int, int, int]]:
    """``(start, body_start, body_end, end)`` of every ``opening ... closing`` block, in order.

    Finds what ``re.finditer(re.escape(opening) + "(.*?)" + re.escape(closing), text, re.DOTALL)``
    finds, in linear time: a block is the first ``opening`` with a ``closing`` after it, up to
    the first such ``closing``; an ``opening`` never closed ends the scan, as no later one is
    closed either.

    Example:
        >>> [text[b:e] for text in ["<a>1</a> <a>2</a> <a>3"] for _, b, e, _ in delimited(text, "<a>", "</a>")]
        ['1', '2']
    """
    position = 0
    while (start := text.find(opening, position)) >= 0:
        body = start + len(opening)
        close = text.find(closing, body)
        if close < 0:
            return
        position = close + len(closing)
        yield start, body, close, position


class Fence(NamedTuple):
    """A Markdown code fence found by :func:`fenced_blocks`.

    Attributes:
        start: Offset of the opening ```.
        end: Offset just after the closing ``` (the text's end for an unclosed fence).
        language: The tag after the opening ```, lower-cased (``""`` when untagged).
        body: The code: from the line after the opening ``` up to the closing one.
    """

    start: int
    end: int
    language: str
    body: str


def fenced_blocks(text: str) -> tuple[list[Fence], Fence | None]:
    """Every closed fenced code block of ``text``, in order, and an unclosed last one (or ``None``).

    A fence opens with ``` and the rest of its line (the language tag first) and closes at
    the next ```. Linear in ``len(text)``: every ``` before the last line end that precedes
    the last ``` opens a block that closes, no later one does, and the scan stops there
    (the regex alone would retry from every unclosed ```, to the text's end each time).

    Example:
        >>> blocks, unclosed = fenced_blocks("```py\\nx = 1\\n``` then ```\\ny")
        >>> [(b.language, b.body) for b in blocks], unclosed.body
        ([('py', 'x = 1\\n')], 'y')
    """
    blocks: list[Fence] = []
    last = text.rfind("```")
    line_end = text.rfind("\n", 0, last) if last >= 0 else -1
    if line_end >= 0:
        stop = text.find("```", line_end + 1) + 3
        blocks = [Fence(m.start(), m.end(), _language(m.group(1)), m.group(2)) for m in _FENCE.finditer(text, 0, stop)]
    start = text.find("```", blocks[-1].end if blocks else 0)
    header_end = text.find("\n", start + 3) if start >= 0 else -1
    if header_end < 0:
        return blocks, None
    return blocks, Fence(start, len(text), _language(text[start + 3 : header_end]), text[header_end + 1 :])


def _language(header: str) -> str:
    """The language tag of a fence's header line, lower-cased (``""`` when untagged)."""
    return _LANGUAGE.match(header).group(1).lower() if header else ""  # type: ignore[union-attr]


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
