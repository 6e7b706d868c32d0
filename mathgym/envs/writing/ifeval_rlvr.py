"""AllenAI's RLVR-IFeval constraints (``ground_truth = {"func_name": ..., ...}``) and their checks.

The ``allenai/RLVR-IFeval`` training set (used for Tülu 3 and OLMo) writes each prompt's
constraint as one function name with its arguments, other argument slots ``null``. Its rewards
were computed by open-instruct's ``if_functions.py``, whose tests differ from IFEval's own in
many details (exact counts where IFEval has "at least", substring matches where IFEval matches
words, the letter count case-sensitive, the response stripped first). The checks here follow
those published definitions, so a reward from this env is the one the data set was built for;
they are written for mathgym, linear in the response (no regex retries), and never raise on a
response.

Where open-instruct's function misreads its own argument, the meaning wins, and the check says so:
``validate_choice`` receives its options as the text of a tuple (``"('My answer is yes.', ...)"``),
which open-instruct iterates character by character (any letter of an option passes); here the
text is read as the tuple it spells. ``validate_response_language`` asks langdetect, as
open-instruct does (seeded: :func:`mathgym.envs.writing.instruction_checks.detect_language`).
"""

from __future__ import annotations

import ast
import functools
import json
import re
from collections.abc import Callable
from typing import Any

from mathgym.envs.writing.instruction_checks import detect_language

_TOKEN = re.compile(r"\b\w+\b")
_CAPITAL_WORD = re.compile(r"\b[A-Z]+\b")


def _quantified(count: int, n: int, quantifier: str, around: int) -> bool:
    """``at least`` / ``at most`` / ``around`` (within ``around``); any other quantifier fails, as in open-instruct."""
    if quantifier == "at least":
        return count >= n
    if quantifier == "at most":
        return count <= n
    if quantifier == "around":
        return abs(count - n) <= around
    return False


def _tolerance(n: int) -> int:
    """open-instruct's "around" for words and capital words: a tenth of N (Python's rounding), at least 1."""
    return max(round(n * 0.1), 1)


def _pairs_on_lines(text: str, opening: str, closing: str) -> int:
    """How many non-overlapping ``opening ... closing`` spans (``.*?`` between, within a line) a regex
    would find, counted in one pass: on each line an opening goes to the first closing after it."""
    count = 0
    for line in text.split("\n"):
        start = line.find(opening)
        while start != -1:
            end = line.find(closing, start + len(opening))
            if end == -1:
                break
            count += 1
            start = line.find(opening, end + len(closing))
    return count


def verify_keywords(text: str, keyword_list: list[str]) -> bool:
    """Every keyword appears, ignoring case (as a substring)."""
    lowered = text.lower()
    return all(str(keyword).lower() in lowered for keyword in keyword_list)


def verify_keyword_frequency(text: str, word: str, N: int) -> bool:
    """The word appears exactly ``N`` times as a whole token (``\\b\\w+\\b``), ignoring case."""
    target = str(word).lower()
    return sum(1 for token in _TOKEN.findall(text.lower()) if token == target) == N


def validate_forbidden_words(text: str, forbidden_words: list[str]) -> bool:
    """None of the words appears, ignoring case (as a substring: ``"car"`` is found in ``"scarf"``)."""
    lowered = text.lower()
    return not any(str(word).lower() in lowered for word in forbidden_words)


def verify_letter_frequency(text: str, letter: str, N: int) -> bool:
    """The letter appears exactly ``N`` times, case counting."""
    if len(letter) != 1:
        raise ValueError(f"letter={letter!r} is not a single character")
    return text.count(letter) == N


def verify_paragraph_count(text: str, N: int) -> bool:
    """Exactly ``N`` paragraphs separated by ``* * *`` (lines stripped first), none of them empty."""
    cleaned = "\n".join(line.strip() for line in text.splitlines()).strip()
    parts = cleaned.split("* * *")
    return all(part.strip() for part in parts) and len(parts) == N


def validate_word_constraint(text: str, N: int, quantifier: str) -> bool:
    """Words split on whitespace: at least, at most or around ``N`` (a tenth of it, at least 1)."""
    return _quantified(len(text.split()), N, quantifier, _tolerance(N))


def count_rlvr_sentences(text: str) -> int:
    """open-instruct's sentence count: pieces split at each whitespace character that follows
    ``.``, ``?`` or ``!``, except after an abbreviation shaped ``x.y?`` (a word character, a dot, a
    word character, one more character) or ``Ab.`` (a capital and a lower-case ASCII letter, a dot)."""
    count = 1
    for index, char in enumerate(text):
        if not char.isspace() or index == 0 or text[index - 1] not in ".?!":
            continue
        if index >= 4 and _word_char(text[index - 4]) and text[index - 3] == "." and _word_char(text[index - 2]) and text[index - 1] != "\n":
            continue
        if index >= 3 and "A" <= text[index - 3] <= "Z" and "a" <= text[index - 2] <= "z" and text[index - 1] == ".":
            continue
        count += 1
    return count


def _word_char(char: str) -> bool:
    return char.isalnum() or char == "_"


def verify_sentence_constraint(text: str, N: int, quantifier: str) -> bool:
    """Sentences (:func:`count_rlvr_sentences`): at least, at most or around ``N`` (within 1)."""
    return _quantified(count_rlvr_sentences(text), N, quantifier, 1)


def validate_paragraphs(text: str, N: int, first_word: str, i: int) -> bool:
    """Exactly ``N`` paragraphs separated by ``\\n\\n``, the ``i``-th (from 1) starting with ``first_word``
    (as a prefix of its text). An ``i`` outside the paragraphs fails."""
    parts = text.split("\n\n")
    if len(parts) != N or not 1 <= i <= len(parts):
        return False
    return parts[i - 1].strip().startswith(first_word)


def verify_postscript(text: str, postscript_marker: str) -> bool:
    """The marker appears, with something after it."""
    start = text.find(postscript_marker)
    return start != -1 and len(text[start:].strip()) > len(postscript_marker)


def validate_placeholders(text: str, N: int) -> bool:
    """At least ``N`` placeholders in square brackets (``[name]``; an empty ``[]`` counts)."""
    return _pairs_on_lines(text, "[", "]") >= N


def verify_bullet_points(text: str, N: int) -> bool:
    """Exactly ``N`` lines that start, after blanks, with ``*`` or ``-``."""
    return sum(1 for line in text.split("\n") if line.strip().startswith(("*", "-"))) == N


def validate_title(text: str) -> bool:
    """A title in double angular brackets (``<<...>>`` on one line)."""
    return _pairs_on_lines(text, "<<", ">>") > 0


def choice_options(options: Any) -> tuple[str, ...]:
    """``validate_choice``'s options as a tuple: a list as it is, the text of a tuple or list as what
    it spells, any other text as one option."""
    if isinstance(options, str):
        try:
            parsed = ast.literal_eval(options.strip())
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            return (options,)
        options = parsed
    if isinstance(options, (list, tuple)):
        return tuple(str(option) for option in options)
    return (str(options),)


def validate_choice(text: str, options: Any) -> bool:
    """One of the options appears (as a substring); see the module's note on how options are read."""
    return any(option in text for option in choice_options(options))


def validate_highlighted_sections(text: str, N: int) -> bool:
    """At least ``N`` sections between asterisks (``*...*`` within a line, ``**`` counting as an empty one)."""
    return _pairs_on_lines(text, "*", "*") >= N


def validate_sections(text: str, N: int, section_splitter: str) -> bool:
    """At least ``N`` headers of the splitter followed by a number (``SECTION 1``), ignoring case."""
    pattern = r"\s?" + re.escape(section_splitter) + r"\s?\d+\s?"
    return len(re.split(pattern, text, flags=re.IGNORECASE)) - 1 >= N


def validate_json_format(text: str) -> bool:
    """The whole response parses as JSON."""
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True


def validate_repeat_prompt(text: str, original_prompt: str) -> bool:
    """The response starts with the request, exactly."""
    return text.startswith(original_prompt)


def validate_two_responses(text: str) -> bool:
    """Two different responses separated by one ``******``."""
    if text.count("******") != 1:
        return False
    first, second = text.split("******")
    return first.strip() != second.strip()


def validate_uppercase(text: str) -> bool:
    """Nothing changes when upper-cased."""
    return text == text.upper()


def validate_lowercase(text: str) -> bool:
    """Nothing changes when lower-cased."""
    return text == text.lower()


def validate_frequency_capital_words(text: str, N: int, quantifier: str) -> bool:
    """Words of capital ASCII letters (``\\b[A-Z]+\\b``): at least, at most or around ``N`` (a tenth, at least 1)."""
    return _quantified(len(_CAPITAL_WORD.findall(text)), N, quantifier, _tolerance(N))


def validate_end(text: str, end_phrase: str) -> bool:
    """The response ends with the phrase, exactly."""
    return text.endswith(end_phrase)


def validate_quotation(text: str) -> bool:
    """The response starts and ends with a double quotation mark."""
    return text.startswith('"') and text.endswith('"')


def validate_no_commas(text: str) -> bool:
    """No comma."""
    return "," not in text


def validate_response_language(text: str, language: str) -> bool:
    """langdetect reads the response as ``language`` (a text it cannot read fails)."""
    return detect_language(text) == language


_FUNCTIONS: tuple[Callable[..., bool], ...] = (
    verify_keywords, verify_keyword_frequency, validate_forbidden_words, verify_letter_frequency, verify_paragraph_count,
    validate_word_constraint, verify_sentence_constraint, validate_paragraphs, verify_postscript, validate_placeholders,
    verify_bullet_points, validate_title, validate_choice, validate_highlighted_sections, validate_sections,
    validate_json_format, validate_repeat_prompt, validate_two_responses, validate_uppercase, validate_lowercase,
    validate_frequency_capital_words, validate_end, validate_quotation, validate_no_commas, validate_response_language,
)


def _on_stripped(function: Callable[..., bool]) -> Callable[..., bool]:
    """open-instruct strips the response before its check."""
    @functools.wraps(function)
    def check(text: str, **kwargs: Any) -> bool:
        return function(text.strip(), **kwargs)

    return check


#: RLVR-IFeval's function names and their checks (``check(response, **arguments)``, the response stripped).
RLVR_CHECKS: dict[str, Callable[..., bool]] = {function.__name__: _on_stripped(function) for function in _FUNCTIONS}
#: Function names the data set uses that have no check here (the record is left out): none.
RLVR_UNCHECKED: frozenset[str] = frozenset()
