"""IFEval-layout data for InstructionFollow-v0: Google's IFEval records and their checks
(and open-instruct's layouts of the same instructions, :func:`load_ifeval`).

A record (``input_data.jsonl`` of IFEval, or the ``google/IFEval`` data set as JSONL) holds a
``prompt``, an ``instruction_id_list`` and one ``kwargs`` object per instruction. Each
instruction is checked here by a function written for mathgym after the published definitions
of IFEval's *strict* evaluation (Zhou et al., 2023, "Instruction-Following Evaluation for Large
Language Models", and its reference implementation): the same tests on the same kwargs. Where
that implementation needs NLTK's tokenizers, the checks here use regular expressions instead
and say so (:data:`APPROXIMATED`); the language checks ask langdetect, as IFEval does
(:func:`~mathgym.envs.writing.instruction_checks.detect_language`, seeded).

Every check is linear in the response. IFEval's *loose* evaluation (the response also tried
without its first or last line and without ``*``) is :meth:`IFEvalRecord.check`'s ``loose``.
"""

from __future__ import annotations

import ast
import json
import re
import warnings
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mathgym.envs.math.data import jsonl_rows, last_user_message
from mathgym.envs.writing.ifeval_rlvr import RLVR_CHECKS, choice_options
from mathgym.envs.writing.instruction_checks import count_sentences, detect_language
from mathgym.errors import DatasetError

_WORD = re.compile(r"\w+")


def _relation(value: int, relation: str, n: int) -> bool:
    if relation == "less than":
        return value < n
    if relation == "at least":
        return value >= n
    raise ValueError(f"relation {relation!r} is neither 'less than' nor 'at least'")


def _keywords_exist(text: str, keywords: list[str]) -> bool:
    return all(re.search(re.escape(k), text, re.IGNORECASE) for k in keywords)


def _keyword_frequency(text: str, keyword: str, frequency: int, relation: str) -> bool:
    return _relation(len(re.findall(re.escape(keyword), text, re.IGNORECASE)), relation, frequency)


def _forbidden_words(text: str, forbidden_words: list[str]) -> bool:
    return not any(re.search(r"\b" + re.escape(word) + r"\b", text, re.IGNORECASE) for word in forbidden_words)


def _letter_frequency(text: str, letter: str, let_frequency: int, let_relation: str) -> bool:
    return _relation(Counter(text.lower())[letter.lower()], let_relation, let_frequency)


def _number_words(text: str, num_words: int, relation: str) -> bool:
    return _relation(len(_WORD.findall(text)), relation, num_words)


def _number_sentences(text: str, num_sentences: int, relation: str) -> bool:
    return _relation(count_sentences(text), relation, num_sentences)


def _number_paragraphs(text: str, num_paragraphs: int) -> bool:
    """Paragraphs separated by the Markdown divider ``***``; an empty one is allowed only first or last."""
    parts = re.split(r"\s?\*\*\*\s?", text)
    count = len(parts)
    for index, part in enumerate(parts):
        if not part.strip():
            if index in (0, len(parts) - 1):
                count -= 1
            else:
                return False
    return count == num_paragraphs


def _nth_paragraph_first_word(text: str, num_paragraphs: int, nth_paragraph: int, first_word: str) -> bool:
    """Paragraphs separated by blank lines: exactly ``num_paragraphs``, the ``nth`` beginning with ``first_word``."""
    parts = re.split(r"\n\n", text)
    count = sum(1 for part in parts if part.strip())
    if not 1 <= nth_paragraph <= len(parts) or count != num_paragraphs:
        return False
    paragraph = parts[nth_paragraph - 1].strip()
    if not paragraph:
        return False
    word = paragraph.split()[0].strip().lstrip("'").lstrip('"')
    found = ""
    for letter in word:
        if letter in ".,?!'\"":
            break
        found += letter.lower()
    return found == first_word.lower()


def _number_placeholders(text: str, num_placeholders: int) -> bool:
    """IFEval's ``\\[.*?\\]`` matches, counted without the regex's retries (quadratic on a line of ``[``):
    on each line, a ``[`` to the first ``]`` after it, then on from there."""
    count = 0
    for line in text.split("\n"):
        start = line.find("[")
        while start != -1:
            end = line.find("]", start + 1)
            if end == -1:
                break
            count += 1
            start = line.find("[", end + 1)
    return count >= num_placeholders


def _postscript(text: str, postscript_marker: str) -> bool:
    """IFEval's pattern (``\\s*p\\.\\s?s\\..*$`` for ``P.S.``, per line) can match with no leading space
    and always ends its line, so it holds exactly where the marker's own pattern is found."""
    lowered = text.lower()
    if postscript_marker == "P.P.S":
        pattern = r"p\.\s?p\.\s?s"
    elif postscript_marker == "P.S.":
        pattern = r"p\.\s?s\."
    else:
        pattern = re.escape(postscript_marker.lower())
    return re.search(pattern, lowered) is not None


def _number_bullet_lists(text: str, num_bullets: int) -> bool:
    """Lines starting with ``*`` (not ``**``) or ``-`` after blanks; IFEval's ``^\\s*`` may also run over
    blank lines before the bullet, which finds the same lines (and takes quadratic time on many)."""
    stars = re.findall(r"^[^\S\n]*\*[^\*].*$", text, flags=re.MULTILINE)
    dashes = re.findall(r"^[^\S\n]*-.*$", text, flags=re.MULTILINE)
    return len(stars) + len(dashes) == num_bullets


def _constrained_response(text: str) -> bool:
    stripped = text.strip()
    return any(option in stripped for option in ("My answer is yes.", "My answer is no.", "My answer is maybe."))


def _number_highlighted_sections(text: str, num_highlights: int) -> bool:
    single = [h for h in re.findall(r"\*[^\n\*]*\*", text) if h.strip("*").strip()]
    double = [h for h in re.findall(r"\*\*[^\n\*]*\*\*", text) if h.removeprefix("**").removesuffix("**").strip()]
    return len(single) + len(double) >= num_highlights


def _multiple_sections(text: str, section_spliter: str, num_sections: int) -> bool:
    return len(re.split(r"\s?" + re.escape(section_spliter) + r"\s?\d+\s?", text)) - 1 >= num_sections


def _json_format(text: str) -> bool:
    body = text.strip()
    for prefix in ("```json", "```Json", "```JSON", "```"):
        body = body.removeprefix(prefix)
    body = body.removesuffix("```").strip()
    try:
        json.loads(body)
    except (ValueError, RecursionError):
        return False
    return True


def _title(text: str) -> bool:
    """IFEval's ``<<[^\\n]+>>`` takes, on each line, the first ``<<`` to the last ``>>`` after it (with
    something between); found here without the regex's backtracking, which is quadratic on a line of ``<``."""
    for line in text.split("\n"):
        start, end = line.find("<<"), line.rfind(">>")
        if start != -1 and end >= start + 3 and line[start : end + 2].lstrip("<").rstrip(">").strip():
            return True
    return False


def _two_responses(text: str) -> bool:
    parts = text.split("******")
    kept = []
    for index, part in enumerate(parts):
        if not part.strip():
            if index not in (0, len(parts) - 1):
                return False
        else:
            kept.append(part)
    return len(kept) == 2 and kept[0].strip() != kept[1].strip()


def _repeat_prompt(text: str, prompt_to_repeat: str) -> bool:
    return text.strip().lower().startswith(prompt_to_repeat.strip().lower())


def _end_checker(text: str, end_phrase: str) -> bool:
    return text.strip().strip('"').lower().endswith(end_phrase.strip().lower())


def _quotation(text: str) -> bool:
    body = text.strip()
    return len(body) > 1 and body[0] == '"' and body[-1] == '"'


def _capital_word_frequency(text: str, capital_frequency: int, capital_relation: str) -> bool:
    return _relation(sum(1 for word in _WORD.findall(text) if word.isupper()), capital_relation, capital_frequency)


def _response_language(text: str, language: str) -> bool:
    """IFEval's test: langdetect names ``language``; a text it cannot read passes, as in IFEval."""
    detected = detect_language(text)
    return detected is None or detected == language


def _english_capital(text: str) -> bool:
    """All capitals, and English as langdetect reads it (IFEval's test; unreadable counts as English)."""
    return text.isupper() and _response_language(text, "en")


def _english_lowercase(text: str) -> bool:
    """All lower case, and English as langdetect reads it (IFEval's test; unreadable counts as English)."""
    return text.islower() and _response_language(text, "en")


def _no_comma(text: str) -> bool:
    return "," not in text


#: IFEval's instruction ids and their checks (``check(response, **kwargs)``).
CHECKS: dict[str, Callable[..., bool]] = {
    "keywords:existence": _keywords_exist,
    "keywords:frequency": _keyword_frequency,
    "keywords:forbidden_words": _forbidden_words,
    "keywords:letter_frequency": _letter_frequency,
    "length_constraints:number_words": _number_words,
    "length_constraints:number_sentences": _number_sentences,
    "length_constraints:number_paragraphs": _number_paragraphs,
    "length_constraints:nth_paragraph_first_word": _nth_paragraph_first_word,
    "detectable_content:number_placeholders": _number_placeholders,
    "detectable_content:postscript": _postscript,
    "detectable_format:number_bullet_lists": _number_bullet_lists,
    "detectable_format:constrained_response": _constrained_response,
    "detectable_format:number_highlighted_sections": _number_highlighted_sections,
    "detectable_format:multiple_sections": _multiple_sections,
    "detectable_format:json_format": _json_format,
    "detectable_format:title": _title,
    "combination:two_responses": _two_responses,
    "combination:repeat_prompt": _repeat_prompt,
    "startend:end_checker": _end_checker,
    "startend:quotation": _quotation,
    "change_case:capital_word_frequency": _capital_word_frequency,
    "change_case:english_capital": _english_capital,
    "change_case:english_lowercase": _english_lowercase,
    "punctuation:no_comma": _no_comma,
    "language:response_language": _response_language,
}
#: Every instruction a record may name: IFEval's ids and RLVR-IFeval's function names.
ALL_CHECKS: dict[str, Callable[..., bool]] = {**CHECKS, **RLVR_CHECKS}
#: Checks that count with regular expressions where IFEval's own use NLTK's tokenizers (words, sentences).
APPROXIMATED = frozenset({"length_constraints:number_words", "length_constraints:number_sentences", "change_case:capital_word_frequency"})


@dataclass(frozen=True)
class IFEvalRecord:
    """One IFEval prompt: its key, text and instructions (``(instruction id, kwargs)``)."""

    key: str
    prompt: str
    instructions: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...]
    #: An open-instruct record: the response is graded as open-instruct grades it, its answer only
    #: (:func:`answer_part`: after the last ``</think>``, without ``<answer>`` tags, stripped).
    answer_only: bool = False

    def check(self, response: str, loose: bool = False) -> dict[str, bool]:
        """Whether ``response`` follows each instruction (by id; a repeated id: all of them).
        ``loose``: IFEval's loose evaluation, where it is enough that one of :func:`loose_variants` does."""
        if self.answer_only:
            response = answer_part(response)
        variants = loose_variants(response) if loose else [response]
        met: dict[str, bool] = {}
        for name, kwargs in self.instructions:
            follows = any(ALL_CHECKS[name](variant, **dict(kwargs)) for variant in variants)
            met[name] = met.get(name, True) and follows
        return met


def answer_part(response: str) -> str:
    """What open-instruct grades of a response: the text after the last ``</think>`` (a reasoning
    model's thinking left out), without ``<answer>`` / ``</answer>`` tags, stripped."""
    return response.rsplit("</think>", 1)[-1].replace("<answer>", "").replace("</answer>", "").strip()


def loose_variants(response: str) -> list[str]:
    """The responses IFEval's loose evaluation tries: the response, without its first line, its last
    line or both, each also without ``*`` (Markdown emphasis); empty ones left out."""
    lines = response.split("\n")
    cut = [response, "\n".join(lines[1:]).strip(), "\n".join(lines[:-1]).strip(), "\n".join(lines[1:-1]).strip()]
    return [variant for text in cut for variant in (text, text.replace("*", "")) if variant.strip()]


def load_ifeval(path: str | Path) -> tuple[IFEvalRecord, ...]:
    """The records of an instruction-following JSONL file (or one JSON list); those using an
    instruction without a check here are left out, with one warning naming the instructions.

    Three layouts are read, row by row: IFEval's (``prompt``, ``instruction_id_list``, ``kwargs``);
    open-instruct's ``ground_truth`` holding ``[{"instruction_id": [...], "kwargs": [...]}]`` (IFEval's
    ids, ``allenai/IF_multi_constraints_upto5``); and RLVR-IFeval's ``ground_truth`` holding
    ``{"func_name": ..., ...}`` (``allenai/RLVR-IFeval``, checked as open-instruct checks it:
    :mod:`mathgym.envs.writing.ifeval_rlvr`). The last two take the prompt from ``messages`` (the last user
    message) or ``prompt``, the ground truth also from verl's ``reward_model.ground_truth``.

    A record whose arguments do not fit its instruction (a missing or unknown argument, a value
    of the wrong kind) is left out too, with one warning that counts them and names the first:
    one such row does not cost a large training set its load.

    Raises:
        DatasetError: The file is missing or holds no usable record (naming why the first was
            left out), or a record is malformed (naming its line).
    """
    records, skipped, misfits = [], Counter(), []
    for where, row in jsonl_rows(path, "IFEval data set", json_list=True):
        record = _record(row, where)
        unknown = [name for name, _ in record.instructions if name not in ALL_CHECKS]
        misfit = None if unknown else _misfit(record, where)
        if unknown:
            skipped.update(unknown)
        elif misfit:
            misfits.append(misfit)
        else:
            records.append(record)
    if skipped:
        total = sum(1 for _ in skipped.elements())
        warnings.warn(f"{path}: records left out for instructions without a check here ({', '.join(sorted(skipped))}; "
                      f"{total} use(s))", stacklevel=3)
    if misfits and records:
        warnings.warn(f"{path}: {len(misfits)} record(s) left out whose arguments do not fit their instruction (first: {misfits[0]})",
                      stacklevel=3)
    if not records:
        reason = f" (first left out: {misfits[0]})" if misfits else ""
        raise DatasetError(f"{path} holds no record whose instructions can all be checked{reason}")
    return tuple(records)


def _misfit(record: IFEvalRecord, where: str) -> str | None:
    """Why ``record``'s arguments do not fit its instructions (each check tried on an empty
    response); ``None`` when they fit."""
    for name, args in record.instructions:
        try:
            ALL_CHECKS[name]("", **dict(args))
        except (TypeError, ValueError, AttributeError) as err:
            return f"{where}: the kwargs of {name} do not fit it ({type(err).__name__}: {err})"
    return None


def _record(row: Any, where: str) -> IFEvalRecord:
    """One record in any of the layouts :func:`load_ifeval` reads."""
    if not isinstance(row, Mapping):
        raise DatasetError(f"{where}: a record is a JSON object, not {type(row).__name__}")
    if "instruction_id_list" in row:
        prompt, names, kwargs = row.get("prompt"), row.get("instruction_id_list"), row.get("kwargs")
    else:
        truth = row.get("ground_truth")
        if truth is None and isinstance(row.get("reward_model"), Mapping):
            truth = row["reward_model"].get("ground_truth")
        if truth is None:
            raise DatasetError(f"{where}: a record needs IFEval's prompt and instruction_id_list, or a ground_truth "
                               "(open-instruct's instruction_id and kwargs, or RLVR-IFeval's func_name)")
        prompt = row.get("messages", row.get("prompt"))
        prompt = last_user_message(prompt) if isinstance(prompt, list) else prompt
        names, kwargs = _ground_truth(_parsed_truth(truth, where), where)
    if not isinstance(prompt, str) or not prompt.strip() or not isinstance(names, list) or not names:
        raise DatasetError(f"{where}: an IFEval record needs a prompt and an instruction_id_list")
    if kwargs is None:
        kwargs = [{}] * len(names)
    if isinstance(kwargs, list):
        kwargs = [{} if args is None else args for args in kwargs]
    if not isinstance(kwargs, list) or len(kwargs) != len(names) or not all(isinstance(k, Mapping) for k in kwargs):
        raise DatasetError(f"{where}: kwargs must be one object per instruction ({len(names)})")
    if not all(isinstance(name, str) for name in names):
        raise DatasetError(f"{where}: instruction ids are strings")
    # The data set's rows carry every kwarg of every instruction, unused ones as null.
    instructions = tuple((name, tuple(sorted((k, _frozen(v)) for k, v in args.items() if v is not None))) for name, args in zip(names, kwargs))
    return IFEvalRecord(str(row.get("key", where)), prompt, instructions, answer_only="instruction_id_list" not in row)


def _parsed_truth(truth: Any, where: str) -> Any:
    """A ground truth as data: JSON text, or the Python literal open-instruct writes (``str()`` of a list)."""
    if not isinstance(truth, str):
        return truth
    try:
        return json.loads(truth)
    except (ValueError, RecursionError):
        pass
    try:
        return ast.literal_eval(truth.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise DatasetError(f"{where}: ground_truth is neither JSON nor a Python literal: {truth[:80]!r}") from None


def _ground_truth(truth: Any, where: str) -> tuple[Any, Any]:
    """Instruction ids and kwargs from open-instruct's two ground-truth layouts: RLVR-IFeval's
    ``{"func_name": name, argument: value, ...}`` (one instruction, checked as open-instruct
    checks it: :mod:`mathgym.envs.writing.ifeval_rlvr`), and ``[{"instruction_id": [...], "kwargs": [...]}]``
    (IFEval's ids, as in ``allenai/IF_multi_constraints_upto5``; open-instruct reads the first entry)."""
    if isinstance(truth, list) and truth:
        truth = truth[0]
        if isinstance(truth, str):  # the list's entry itself JSON text, as open-instruct also accepts
            truth = _parsed_truth(truth, where)
    if isinstance(truth, Mapping) and isinstance(truth.get("func_name"), str):
        arguments = {k: v for k, v in truth.items() if k != "func_name"}
        if truth["func_name"] == "validate_choice" and arguments.get("options") is not None:
            arguments["options"] = choice_options(arguments["options"])  # read once, here
        return [truth["func_name"]], [arguments]
    if isinstance(truth, Mapping) and "instruction_id" in truth:
        return truth["instruction_id"], truth.get("kwargs")
    raise DatasetError(f"{where}: ground_truth holds neither a func_name (RLVR-IFeval) nor instruction_id and kwargs")


def _frozen(value: Any) -> Any:
    """A kwarg as a hashable value (lists as tuples): records are compared and hashed."""
    if isinstance(value, list):
        return tuple(_frozen(item) for item in value)
    return value
