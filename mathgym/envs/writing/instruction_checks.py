"""Checkers of verifiable instructions (InstructionFollow-v0): pure functions of the response text.

The constraint families follow IFEval's (Zhou et al., 2023: keywords, length, format, case,
start/end, punctuation, combination); the checkers are mathgym's own. Each takes the response
and the constraint's parameters and returns ``True`` or ``False``; every one is linear in the
response (no backtracking regex), so a hostile megabyte costs milliseconds.

Definitions the checkers share:

- a *word* is a run of letters or digits, with inner apostrophes or hyphens (``don't``, ``x-ray``);
- a *sentence* ends with ``.``, ``!`` or ``?`` followed by white space or the end of the text
  (text after the last one counts as a sentence when it has a word);
- *paragraphs* are separated by blank lines;
- keyword and forbidden-word matches are whole words, case-insensitive.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Literal

Relation = Literal["at least", "at most"]

_WORD = re.compile(r"[^\W_]+(?:['’-][^\W_]+)*")
_SENTENCE_END = re.compile(r"(?<![.!?])[.!?]+(?=\s|$)")  # from the start of a run only: linear
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n\s*")
_BULLET = re.compile(r"^[ \t]*(?:[*•]|-(?!-))[ \t]+\S", re.MULTILINE)
_TITLE = re.compile(r"<<([^\n<>]+)>>")
_HIGHLIGHT = re.compile(r"(?<!\*)\*([^*\n]+)\*(?!\*)")
_PLACEHOLDER = re.compile(r"\[([^\[\]\n]+)\]")
_POSTSCRIPT = re.compile(r"^[ \t]*p\.[ \t]?s\.", re.IGNORECASE | re.MULTILINE)
_FENCE = re.compile(r"^```[a-zA-Z]*[ \t]*\n?|\n?```[ \t]*$")
CONSTRAINED_ANSWERS = ("My answer is yes.", "My answer is no.", "My answer is maybe.")
RESPONSE_SEPARATOR = "******"


_DETECTOR_SEEDED = []


def detect_language(text: str) -> str | None:
    """The language of ``text`` as langdetect names it (ISO 639-1, ``"en"``), the detector
    IFEval and open-instruct use; ``None`` when it finds nothing to go by (no letters).

    langdetect draws random samples of the text; its generator is seeded here, so one text
    always gets one answer (IFEval leaves it unseeded: a short text may flip between runs).
    It reads at most the first 10,000 characters.
    """
    from langdetect import DetectorFactory, detect  # noqa: PLC0415 - its profiles load on first use (~0.3 s)
    from langdetect.lang_detect_exception import LangDetectException  # noqa: PLC0415

    if not _DETECTOR_SEEDED:
        DetectorFactory.seed = 0
        _DETECTOR_SEEDED.append(True)
    try:
        return detect(text)
    except LangDetectException:
        return None


def words(text: str) -> list[str]:
    """The words of ``text`` (see the module docstring)."""
    return _WORD.findall(text)


def has_word(text: str) -> bool:
    """Whether ``text`` holds a word at all (stops at the first: no list of a long text's words)."""
    return _WORD.search(text) is not None


def count_sentences(text: str) -> int:
    """Sentences in ``text``: pieces ending in ``.``/``!``/``?`` (and a last unterminated piece) that hold a word."""
    count, start = 0, 0
    for match in _SENTENCE_END.finditer(text):
        count += _WORD.search(text, start, match.start()) is not None
        start = match.end()
    return count + (_WORD.search(text, start) is not None)


def paragraphs(text: str) -> list[str]:
    """The non-empty paragraphs of ``text`` (separated by blank lines)."""
    return [p for p in _PARAGRAPH_BREAK.split(text.strip()) if p.strip()]


def _compare(value: int, relation: Relation, n: int) -> bool:
    return value >= n if relation == "at least" else value <= n


def _occurrences(text: str, word: str) -> int:
    target = word.lower()
    return sum(w.lower() == target for w in words(text))


def word_count(text: str, relation: Relation, n: int) -> bool:
    """At least / at most ``n`` words."""
    return _compare(len(words(text)), relation, n)


def sentence_count(text: str, relation: Relation, n: int) -> bool:
    """At least / at most ``n`` sentences."""
    return _compare(count_sentences(text), relation, n)


def paragraph_count(text: str, n: int) -> bool:
    """Exactly ``n`` paragraphs separated by blank lines."""
    return len(paragraphs(text)) == n


def includes_keywords(text: str, keywords: Sequence[str]) -> bool:
    """Every keyword appears (whole word, any case)."""
    present = {w.lower() for w in words(text)}
    return all(k.lower() in present for k in keywords)


def forbids_words(text: str, forbidden: Sequence[str]) -> bool:
    """None of the forbidden words appears (whole word, any case)."""
    present = {w.lower() for w in words(text)}
    return not any(f.lower() in present for f in forbidden)


def keyword_frequency(text: str, keyword: str, relation: Relation, n: int) -> bool:
    """``keyword`` appears at least / at most ``n`` times (whole word, any case)."""
    return _compare(_occurrences(text, keyword), relation, n)


def letter_frequency(text: str, letter: str, relation: Relation, n: int) -> bool:
    """The letter appears at least / at most ``n`` times (any case)."""
    return _compare(text.lower().count(letter.lower()), relation, n)


def is_json(text: str) -> bool:
    """The whole response (optionally in a Markdown code fence) is a JSON object or array."""
    body = _FENCE.sub("", text.strip()).strip()
    if not body.startswith(("{", "[")):
        return False
    try:
        json.loads(body)
    except (ValueError, RecursionError):
        return False
    return True


def bullet_count(text: str, n: int) -> bool:
    """Exactly ``n`` Markdown bullet points (lines starting with ``* ``, ``- `` or ``• ``)."""
    return len(_BULLET.findall(text)) == n


def has_title(text: str) -> bool:
    """A title in double angular brackets, such as ``<<poem of joy>>``."""
    return any(m.group(1).strip() for m in _TITLE.finditer(text))


def highlighted_count(text: str, n: int) -> bool:
    """At least ``n`` sections highlighted in Markdown, ``*like this*``."""
    return sum(1 for m in _HIGHLIGHT.finditer(text) if m.group(1) == m.group(1).strip()) >= n


def section_count(text: str, marker: str, n: int) -> bool:
    """Exactly ``n`` sections, marked ``{marker} 1`` ... ``{marker} n`` in order, each with some text."""
    pattern = re.compile(rf"(?:^|\n)[ \t]*{re.escape(marker)}[ \t]+(\d{{1,3}})\b")
    found = list(pattern.finditer(text))
    if [m.group(1) for m in found] != [str(i) for i in range(1, n + 1)]:
        return False
    ends = [m.start() for m in found[1:]] + [len(text)]
    return all(_WORD.search(text, m.end(), end) is not None for m, end in zip(found, ends))


def all_lowercase(text: str) -> bool:
    """Letters, and no capital letter."""
    return any(ch.isalpha() for ch in text) and text == text.lower()


def all_uppercase(text: str) -> bool:
    """Letters, and no small letter."""
    return any(ch.isalpha() for ch in text) and text == text.upper()


def capital_words(text: str, relation: Relation, n: int) -> bool:
    """At least / at most ``n`` words written in capitals (two letters or more, such as ``NOTE``)."""
    count = sum(1 for w in words(text) if len(w) > 1 and w.isupper())
    return _compare(count, relation, n)


def ends_with(text: str, phrase: str) -> bool:
    """The response ends with ``phrase`` (any case; trailing white space ignored)."""
    return text.strip().lower().endswith(phrase.strip().lower())


def starts_with(text: str, phrase: str) -> bool:
    """The response begins with ``phrase`` (any case; leading white space ignored)."""
    return text.strip().lower().startswith(phrase.strip().lower())


def has_postscript(text: str) -> bool:
    """A postscript: a line starting with ``P.S.``."""
    return _POSTSCRIPT.search(text) is not None


def no_commas(text: str) -> bool:
    """No comma at all (``,`` nor the full-width ``，``)."""
    return "," not in text and "，" not in text


def wrapped_in_quotes(text: str) -> bool:
    """The whole response is wrapped in double quotation marks."""
    body = text.strip()
    return len(body) > 2 and body[0] == '"' and body[-1] == '"' and _WORD.search(body) is not None


def placeholder_count(text: str, n: int) -> bool:
    """At least ``n`` placeholders in square brackets, such as ``[address]``."""
    return sum(1 for m in _PLACEHOLDER.finditer(text) if m.group(1).strip()) >= n


def two_responses(text: str) -> bool:
    """Two different responses separated by ``******`` (and no other separator)."""
    parts = [p.strip() for p in text.split(RESPONSE_SEPARATOR)]
    return len(parts) == 2 and all(words(p) for p in parts) and parts[0] != parts[1]


def repeats_request(text: str, request: str) -> bool:
    """The response first repeats the request word for word (any case), then answers it."""
    body = text.strip().lower()
    head = request.strip().lower()
    return body.startswith(head) and words(body[len(head) :]) != []


def first_word_of_paragraph(text: str, n: int, nth: int, word: str) -> bool:
    """Exactly ``n`` paragraphs, and paragraph ``nth`` (from 1) begins with ``word`` (any case)."""
    found = paragraphs(text)
    if len(found) != n:
        return False
    first = words(found[nth - 1][:200])
    return bool(first) and first[0].lower() == word.lower()


def constrained_answer(text: str) -> bool:
    """The response holds one of "My answer is yes.", "My answer is no.", "My answer is maybe."."""
    return any(option in text for option in CONSTRAINED_ANSWERS)
