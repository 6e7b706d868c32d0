"""The constraint families of InstructionFollow-v0: how each is drawn, worded and checked.

A family names its checker (:mod:`mathgym.envs.writing.instruction_checks`), draws its parameters
from the env's generator, and lists the *aspects* of the response it governs (its case, its
start, its end, its overall structure...): two families that share an aspect are never drawn
for the same prompt, so no prompt asks for contradictory things.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from mathgym.envs.writing import instruction_checks as checks

KEYWORDS = ("river", "lantern", "compass", "harvest", "velvet", "signal", "meadow", "anchor", "puzzle", "echo")
FORBIDDEN = ("very", "really", "thing", "stuff", "basically", "literally", "awesome", "amazing", "actually", "just")
END_PHRASES = (
    "Is there anything else I can help with?",
    "Thank you for reading.",
    "That is all for now.",
    "Let me know what you think.",
)
START_PHRASES = ("Here is my answer.", "Let me begin.", "Good question.")
FIRST_WORDS = ("today", "moreover", "finally", "indeed", "meanwhile")
RARE_LETTERS = "zqjx"
COMMON_LETTERS = "eaotns"


@dataclass(frozen=True)
class Constraint:
    """One verifiable instruction: its family, parameters and wording."""

    kind: str
    params: tuple[tuple[str, Any], ...]
    text: str

    @property
    def options(self) -> dict[str, Any]:
        """The parameters as keyword arguments of the checker."""
        return dict(self.params)

    def check(self, response: str, request: str = "") -> bool:
        """Whether ``response`` meets this constraint (``request`` for the families that repeat it)."""
        kwargs = self.options
        if self.kind == "repeat_request":
            kwargs["request"] = request
        return bool(FAMILIES[self.kind].checker(response, **kwargs))


@dataclass(frozen=True)
class Family:
    """A constraint family: its checker, the aspects it governs, and how to draw one."""

    checker: Callable[..., bool]
    aspects: frozenset[str]
    draw: Callable[[np.random.Generator], tuple[dict[str, Any], str]]


def _pick(rng: np.random.Generator, items: tuple[Any, ...] | str, k: int = 1) -> list[Any]:
    return [items[int(i)] for i in rng.choice(len(items), size=k, replace=False)]


def _relation(rng: np.random.Generator) -> str:
    return "at least" if rng.random() < 0.5 else "at most"


def _word_count(rng: np.random.Generator) -> tuple[dict[str, Any], str]:
    relation = _relation(rng)
    n = int(rng.integers(3, 9)) * 5 if relation == "at least" else int(rng.integers(5, 13)) * 5
    return {"relation": relation, "n": n}, f"Answer with {relation} {n} words."


def _sentence_count(rng: np.random.Generator) -> tuple[dict[str, Any], str]:
    relation = _relation(rng)
    n = int(rng.integers(2, 6)) if relation == "at least" else int(rng.integers(2, 7))
    return {"relation": relation, "n": n}, f"Your response should contain {relation} {n} sentences."


def _paragraph_count(rng: np.random.Generator) -> tuple[dict[str, Any], str]:
    n = int(rng.integers(2, 5))
    return {"n": n}, f"Write exactly {n} paragraphs, separated from each other by a blank line."


def _keywords(rng: np.random.Generator) -> tuple[dict[str, Any], str]:
    picked = _pick(rng, KEYWORDS[:5], 2)
    return {"keywords": tuple(picked)}, f"Include the keywords {picked[0]} and {picked[1]}."


def _forbidden(rng: np.random.Generator) -> tuple[dict[str, Any], str]:
    picked = _pick(rng, FORBIDDEN, 2)
    return {"forbidden": tuple(picked)}, f"Do not use the words {picked[0]} or {picked[1]}."


def _keyword_frequency(rng: np.random.Generator) -> tuple[dict[str, Any], str]:
    word, n = _pick(rng, KEYWORDS[5:])[0], int(rng.integers(2, 5))
    return {"keyword": word, "relation": "at least", "n": n}, f"The word {word} should appear at least {n} times."


def _letter_frequency(rng: np.random.Generator) -> tuple[dict[str, Any], str]:
    if rng.random() < 0.5:
        letter, n = _pick(rng, COMMON_LETTERS)[0], int(rng.integers(2, 7)) * 5
        return {
            "letter": letter,
            "relation": "at least",
            "n": n,
        }, f"The letter {letter} should appear at least {n} times."
    letter, n = _pick(rng, RARE_LETTERS)[0], int(rng.integers(0, 3))
    return {"letter": letter, "relation": "at most", "n": n}, f"The letter {letter} should appear at most {n} times."


def _capital_words(rng: np.random.Generator) -> tuple[dict[str, Any], str]:
    relation = _relation(rng)
    n = int(rng.integers(2, 6)) if relation == "at least" else int(rng.integers(0, 3))
    return {"relation": relation, "n": n}, f"Use {relation} {n} words written in all capital letters."


def _fixed(text: str, **params: Any) -> Callable[[np.random.Generator], tuple[dict[str, Any], str]]:
    return lambda rng: (dict(params), text)


def _count(text: str, low: int, high: int) -> Callable[[np.random.Generator], tuple[dict[str, Any], str]]:
    def draw(rng: np.random.Generator) -> tuple[dict[str, Any], str]:
        n = int(rng.integers(low, high + 1))
        return {"n": n}, text.format(n=n)

    return draw


def _sections(rng: np.random.Generator) -> tuple[dict[str, Any], str]:
    marker, n = _pick(rng, ("SECTION", "PART"))[0], int(rng.integers(2, 5))
    return {
        "marker": marker,
        "n": n,
    }, f"Divide your response into {n} sections; start section k with the line '{marker} k'."


def _end_phrase(rng: np.random.Generator) -> tuple[dict[str, Any], str]:
    phrase = _pick(rng, END_PHRASES)[0]
    return {"phrase": phrase}, f"Finish your response with this exact phrase: {phrase}"


def _start_phrase(rng: np.random.Generator) -> tuple[dict[str, Any], str]:
    phrase = _pick(rng, START_PHRASES)[0]
    return {"phrase": phrase}, f"Begin your response with this exact phrase: {phrase}"


def _first_word(rng: np.random.Generator) -> tuple[dict[str, Any], str]:
    n = int(rng.integers(2, 5))
    nth, word = int(rng.integers(1, n + 1)), _pick(rng, FIRST_WORDS)[0]
    return {"n": n, "nth": nth, "word": word}, (
        f"Write exactly {n} paragraphs separated by blank lines; paragraph {nth} must start with the word {word}."
    )


def _aspects(*names: str) -> frozenset[str]:
    return frozenset(names)


#: Every family, by name. Aspects: what part of the response a family governs.
FAMILIES: Mapping[str, Family] = {
    "word_count": Family(checks.word_count, _aspects("words"), _word_count),
    "sentence_count": Family(checks.sentence_count, _aspects("sentences"), _sentence_count),
    "paragraph_count": Family(checks.paragraph_count, _aspects("layout"), _paragraph_count),
    "include_keywords": Family(checks.includes_keywords, _aspects("keywords"), _keywords),
    "forbidden_words": Family(checks.forbids_words, _aspects("forbidden"), _forbidden),
    "keyword_frequency": Family(checks.keyword_frequency, _aspects("frequency"), _keyword_frequency),
    "letter_frequency": Family(checks.letter_frequency, _aspects("letters"), _letter_frequency),
    "json_format": Family(
        checks.is_json,
        _aspects("layout", "start", "end", "wrap"),
        _fixed("Wrap your entire response in JSON format (an object); you may use a ```json code block."),
    ),
    "bullet_list": Family(
        checks.bullet_count,
        _aspects("layout"),
        _count("Your answer must contain exactly {n} bullet points, such as:\n* This is a point.", 2, 5),
    ),
    "title": Family(
        checks.has_title,
        _aspects("start"),
        _fixed("Give your answer a title wrapped in double angular brackets, such as <<poem of joy>>."),
    ),
    "highlighted_sections": Family(
        checks.highlighted_count,
        _aspects("highlight"),
        _count("Highlight at least {n} sections with markdown, i.e. *highlighted section*.", 1, 3),
    ),
    "sections": Family(checks.section_count, _aspects("layout", "case"), _sections),
    "lowercase": Family(
        checks.all_lowercase,
        _aspects("case"),
        _fixed("Your entire response must be in lowercase letters; no capital letters are allowed."),
    ),
    "uppercase": Family(
        checks.all_uppercase,
        _aspects("case"),
        _fixed("Your entire response must be in English, in capital letters only."),
    ),
    "capital_words": Family(checks.capital_words, _aspects("case"), _capital_words),
    "end_phrase": Family(checks.ends_with, _aspects("end"), _end_phrase),
    "start_phrase": Family(checks.starts_with, _aspects("start"), _start_phrase),
    "postscript": Family(
        checks.has_postscript,
        _aspects("end"),
        _fixed("At the end of your response, add a postscript starting with P.S."),
    ),
    "no_commas": Family(checks.no_commas, _aspects("commas"), _fixed("Do not use any commas in your response.")),
    "quotation": Family(
        checks.wrapped_in_quotes,
        _aspects("wrap", "start", "end"),
        _fixed("Wrap your entire response in double quotation marks."),
    ),
    "placeholders": Family(
        checks.placeholder_count,
        _aspects("placeholders"),
        _count("Include at least {n} placeholders in square brackets, such as [address].", 1, 3),
    ),
    "two_responses": Family(
        checks.two_responses,
        _aspects("layout", "start", "end", "wrap"),
        _fixed("Give two different responses, separated by 6 asterisk symbols: ******."),
    ),
    "repeat_request": Family(
        checks.repeats_request,
        _aspects("start"),
        _fixed("First repeat the request word for word without change, then give your answer."),
    ),
    "first_word": Family(checks.first_word_of_paragraph, _aspects("layout"), _first_word),
    "constrained_answer": Family(
        checks.constrained_answer,
        _aspects("case", "verdict"),
        _fixed('Include one of these verdicts: "My answer is yes.", "My answer is no.", "My answer is maybe."'),
    ),
}


def draw_constraints(rng: np.random.Generator, count: int, families: tuple[str, ...]) -> list[Constraint]:
    """``count`` constraints of different families whose aspects do not overlap, in a random order."""
    chosen: list[Constraint] = []
    taken: set[str] = set()
    for index in rng.permutation(len(families)):
        family = FAMILIES[families[int(index)]]
        if family.aspects & taken:
            continue
        params, text = family.draw(rng)
        chosen.append(Constraint(families[int(index)], tuple(sorted(params.items())), text))
        taken |= family.aspects
        if len(chosen) == count:
            break
    return chosen
