"""Loaders for real math data: GSM8K- and MATH-format JSONL, and ``datasets`` data sets.

Every loader returns a list of :class:`MathRecord` (question, gold answer, reference
solution). ``datasets`` is imported only when a hub/local data set is actually loaded.
"""

from __future__ import annotations

import glob
import json
import os
import re
import socket
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from mathgym.errors import DatasetError

#: 50 GSM8K test problems shipped with mathgym (MIT licence beside the file), for examples that
#: must run offline: ``gym.make("MathReason-v0", dataset=str(GSM8K_SAMPLE))``.
GSM8K_SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "gsm8k_test_sample.jsonl"
from mathgym.rewards.extract import last_boxed
from mathgym.rewards.math import answer_forms

_GSM8K_MARK = re.compile(r"####\s*(.+?)\s*$", re.S)


@dataclass(frozen=True)
class MathRecord:
    """One problem of a data set.

    Attributes:
        question: The problem statement.
        answer: The gold final answer (e.g. ``"18"``, ``"\\frac{1}{2}"``).
        solution: The reference solution as written in the data set ('' if none).
        alternatives: Other forms of the same answer the data set lists (a ground truth given
            as a list of forms, Skywork-OR1's ``'["3", "3.0"]'``); a response matching any
            form, ``answer`` included, is correct.
    """

    question: str
    answer: str
    solution: str = ""
    alternatives: tuple[str, ...] = ()


def gsm8k_final_answer(answer_field: str) -> str:
    """The number after ``####`` in a GSM8K answer, without thousands separators.

    Example:
        >>> gsm8k_final_answer("... so 3 + 4 = 7\\n#### 1,007")
        '1007'
    """
    match = _GSM8K_MARK.search(answer_field)
    if match is None:
        raise DatasetError(f"GSM8K answer has no '#### N' line: {answer_field[-80:]!r}")
    return match.group(1).replace(",", "").strip()


def record_from_row(row: Mapping[str, Any], columns: Mapping[str, str] | None = None) -> MathRecord:
    """Turn one row in GSM8K, MATH or a custom format into a :class:`MathRecord`.

    Args:
        row: The row. GSM8K rows have ``question`` and ``answer`` (with ``#### N``);
            MATH rows have ``problem`` (or ``question``) and ``solution`` (last
            ``\\boxed{}`` is the answer) and maybe ``answer``; verl rows (DAPO, Skywork-OR1...)
            have ``prompt`` and ``reward_model.ground_truth``; ``final_answer`` and
            ``ground_truth`` are answers too. These names are matched in any case
            (``Problem``, ``Answer``). A question given as a chat (a list of
            ``{"role", "content"}`` messages, TRL's conversational format) is its last user message.
        columns: Custom mapping of ``question`` / ``answer`` / ``solution`` to column
            names; a mapped ``answer`` column is taken as the final answer verbatim (a list of
            forms as its forms). A dotted
            name reaches into nested objects (``"reward_model.ground_truth"``, verl's layout).

    Example:
        >>> record_from_row({"Problem": "1+1?", "Answer": 2}).answer
        '2'
        >>> row = {"prompt": [{"role": "user", "content": "2+2?"}], "reward_model": {"ground_truth": "4"}}
        >>> record_from_row(row, {"question": "prompt", "answer": "reward_model.ground_truth"})
        MathRecord(question='2+2?', answer='4', solution='', alternatives=())
    """
    if isinstance(row, list) and _is_chat(row) and not columns:
        row = _chat_row(row)
    if not isinstance(row, Mapping):
        raise DatasetError(f"a row is a JSON object, not {type(row).__name__}")
    if columns:
        unknown = set(columns) - {"question", "answer", "solution"}
        if unknown:
            raise DatasetError(f"column mapping keys must be question/answer/solution, got {sorted(unknown)}")
        if "question" not in columns:
            raise DatasetError("the column mapping must name the 'question' column")
        if not all(isinstance(name, str) for name in columns.values()):
            raise DatasetError(f"column names are strings, got {dict(columns)}")
        question = _text(_column(row, columns["question"]), columns["question"])
        solution = _text(_column(row, columns["solution"]), columns["solution"]) if "solution" in columns else ""
        alternatives: tuple[str, ...] = ()
        if "answer" in columns:
            answer, alternatives = _answer_forms(_column(row, columns["answer"]), columns["answer"])
            if "####" in answer:
                solution, answer = solution or answer, gsm8k_final_answer(answer)
        else:
            answer = last_boxed(solution) or ""
        if not answer:
            raise DatasetError(f"no answer found for question {question[:60]!r}")
        return MathRecord(question, answer, solution, alternatives)
    key = _key(row, "question") or _key(row, "problem") or _key(row, "prompt")
    if key is None:
        raise DatasetError(
            f"row has neither 'question', 'problem' nor 'prompt'; its columns are {sorted(map(str, row))}. Name yours with "
            "the columns option, e.g. columns={'question': 'query', 'answer': 'target'}"
        )
    question = _text(row[key], str(key))
    answer_field = row.get(_key(row, "answer"))
    if isinstance(answer_field, str) and "####" in answer_field:
        return MathRecord(question, gsm8k_final_answer(answer_field), answer_field)
    if answer_field in (None, ""):
        answer_field = next((value for value in _answer_fields(row) if value not in (None, "")), None)
    solution_field = row.get(_key(row, "solution"))
    solution = _solution_text(solution_field) if solution_field is not None else ""
    if row.get("is_multiple_answer") is True and isinstance(answer_field, list) and len(answer_field) > 1:
        answer_field = ", ".join(map(str, answer_field))  # OlympiadBench: every listed answer is asked for, not one of them
    answer, alternatives = _answer_forms(answer_field, "answer") if answer_field is not None else (last_boxed(solution) or "", ())
    if not answer:
        raise DatasetError(
            f"no answer for {question[:60]!r}: no 'answer', 'final_answer' or 'ground_truth' field (nor verl's "
            f"reward_model.ground_truth) and no \\boxed{{}} in 'solution'; its columns are {sorted(map(str, row))}. Name the "
            f"answer's column with the columns option, e.g. columns={{'question': {str(key)!r}, 'answer': 'solution'}} "
            "(TRL's data sets keep the final answer itself in 'solution')"
        )
    return MathRecord(question, answer, solution, alternatives)


def _chat_row(turns: list) -> dict[str, Any]:
    """A row given as a chat whose answer sits in a turn (Open-Reasoner-Zero's
    ``[{"from": "human", "value": Q}, {"from": "assistant", "ground_truth": {"value": A}}]``) as
    ``{"question": Q, "ground_truth": A}``; a chat without one is only its question."""
    row: dict[str, Any] = {"question": turns}
    for turn in turns:
        truth = turn.get("ground_truth")
        if isinstance(truth, Mapping):
            truth = truth.get("value")
        if truth not in (None, ""):
            row["ground_truth"] = truth
    return row


def _solution_text(value: Any) -> str:
    """A solution cell as text; of a list of solutions (OlympiadBench), the first."""
    if isinstance(value, list) and value and all(isinstance(item, str) for item in value):
        return value[0]
    return _text(value, "solution")


def _answer_forms(value: Any, name: str) -> tuple[str, tuple[str, ...]]:
    """An answer cell as its first form and the other forms (:func:`~mathgym.rewards.math.answer_forms`:
    a list of strings or a JSON list of strings in a string); any other cell is one form, as text."""
    if isinstance(value, str) or (isinstance(value, (list, tuple)) and value and all(isinstance(form, str) for form in value)):
        forms = answer_forms(value)
        return forms[0], tuple(forms[1:])
    return _text(value, name), ()


def _answer_fields(row: Mapping[str, Any]) -> Iterator[Any]:
    """Where other layouts keep the final answer: ``final_answer``, ``ground_truth``, and verl's
    ``reward_model.ground_truth`` (DAPO, Skywork-OR1 and DeepScaleR as verl rows hold them there)."""
    for name in ("final_answer", "ground_truth"):
        yield row.get(_key(row, name))
    reward_model = row.get(_key(row, "reward_model"))
    if isinstance(reward_model, Mapping):
        yield reward_model.get("ground_truth")


def _key(row: Mapping[str, Any], name: str) -> Any:
    """The key of ``row`` that is ``name``, else one that is ``name`` in another case; None if none."""
    if name in row:
        return name
    return next((k for k in row if isinstance(k, str) and k.lower() == name), None)


def _column(row: Mapping[str, Any], name: str) -> Any:
    """``row[name]``, a dotted ``name`` reaching into nested objects (a key holding the dot wins)."""
    if name in row:
        return row[name]
    value: Any = row
    for part in name.split("."):
        if not isinstance(value, Mapping) or part not in value:
            raise DatasetError(f"row has no column {name!r}; its columns are {sorted(map(str, row))}")
        value = value[part]
    return value


def message_text(content: Any, where: str) -> str:
    """A message's content as text: a string, nothing, or OpenAI's list of parts (its text parts joined).

    Example:
        >>> message_text([{"type": "text", "text": "1 + "}, {"type": "text", "text": "1?"}], "row 1")
        '1 + 1?'

    Raises:
        DatasetError: A part is not text (an image), or the content is neither (``where`` names the row).
    """
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
                texts.append(part["text"])
            else:
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise DatasetError(f"{where}: a message holds a {str(kind)[:40]!r} part; only text parts are read")
        return "".join(texts)
    raise DatasetError(f"{where}: a message's content must be text or a list of text parts, not {type(content).__name__}")


#: ShareGPT's speakers (a turn's ``from``) as chat roles.
SHAREGPT_ROLES = {"system": "system", "human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant",
                  "chatgpt": "assistant", "bard": "assistant", "bing": "assistant", "model": "assistant", "tool": "tool",
                  "function": "tool", "observation": "tool"}


def last_user_message(value: Any) -> str | None:
    """The last user message of a chat (``{"role", "content"}`` messages, its content a text or
    OpenAI's list of text parts, or ShareGPT's ``{"from": "human", "value"}`` turns); ``None``
    when ``value`` is no chat or has none.

    Example:
        >>> last_user_message([{"role": "user", "content": [{"type": "text", "text": "What is 2 + 2?"}]}])
        'What is 2 + 2?'
    """
    if not isinstance(value, list) or not value or not all(isinstance(m, Mapping) for m in value):
        return None
    if all("content" in m for m in value):
        users = [m["content"] for m in value if m.get("role") == "user"]
    elif all("from" in m for m in value):  # an ORZ assistant turn holds a ground_truth, no value
        users = [m.get("value") for m in value if SHAREGPT_ROLES.get(str(m.get("from")).lower()) == "user"]
    else:
        return None
    if not users or not isinstance(users[-1], (str, list)):
        return None
    try:  # OpenAI's list of parts: its text
        return message_text(users[-1], "") if isinstance(users[-1], list) else users[-1]
    except DatasetError:  # a part that is not text: no problem statement to read
        return None


def _text(value: Any, name: str) -> str:
    """A cell as text: a string, a number, or a chat (its last user message's content; ShareGPT's
    ``{"from": "human", "value": ...}`` turns too)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None:
        raise DatasetError(f"column {name!r} holds {value!r}, not text")
    if isinstance(value, (int, float)):
        return str(value)
    message = last_user_message(value)
    if message is not None:
        return message
    raise DatasetError(f"column {name!r} holds a {type(value).__name__}, not text, a number or a chat with a user message")


def jsonl_rows(path: str | Path, what: str, json_list: bool = False) -> Iterator[tuple[str, Any]]:
    """Each JSON value of a JSONL file with where it stands (``"FILE:LINE"``), blank lines skipped;
    with ``json_list``, a file that is one JSON list (as Spider's ``dev.json``) gives its items
    (``"FILE: record N"``), unless the list is one chat (turns with ``role`` or ``from``): that
    is one record. A ``.parquet`` file gives its rows (``"FILE: row N"``). A folder or a glob
    pattern gives the rows of each of its data files in turn (:func:`data_files`).

    Raises:
        DatasetError: The file does not exist (``what`` names it in the message) or a line is not JSON.
    """
    for file in data_files(path, what):
        yield from _file_rows(file, json_list)


#: The suffixes of the data files a folder's are read from.
DATA_SUFFIXES = (".jsonl", ".json", ".parquet")


#: A data file's split as hub snapshots name it: ``train-00000-of-00002.parquet``, ``test.jsonl``,
#: ``validation/part-0.parquet`` (the word, then a separator or the end of the name).
_SPLIT_NAME = re.compile(r"(train|test|validation|valid|dev|eval)(?:[-_.]|$)")


def split_named(path: Path) -> str | None:
    """The split a data file's relative path names (its file name first, then its folders), or ``None``.

    Example:
        >>> split_named(Path("data/train-00000-of-00002.parquet")), split_named(Path("validation/0.jsonl"))
        ('train', 'validation')
        >>> split_named(Path("testing.jsonl")) is None
        True
    """
    for part in reversed(path.parts):
        match = _SPLIT_NAME.match(part.lower())
        if match:
            return match.group(1)
    return None


def data_files(path: str | Path, what: str = "data set") -> list[Path]:
    """The files a data set path names: the file itself; a folder's ``.jsonl``, ``.json`` and
    ``.parquet`` files (its subfolders' too, as a hub snapshot's ``data/train-0000N-of-...``
    shards); or the files a glob pattern matches; in name order.

    Raises:
        DatasetError: Nothing is there, a folder or pattern holds no data file, or a folder holds
            files of more than one split (:func:`split_named`: ``train-*`` and ``test-*`` read as
            one data set would put test rows in training; a pattern picks one). ``what`` names
            the data set in the message.
    """
    text = str(path)
    path = Path(path).expanduser()
    if path.is_file():
        return [path]
    if path.is_dir():
        if (path / "dataset_info.json").is_file() and any(path.glob("*.arrow")):  # its JSON files are metadata, not rows
            raise DatasetError(f"{what} folder {text!r} is a data set saved with datasets' save_to_disk (Arrow files): write it "
                               f"out with Dataset.to_parquet, or, for MathReason-v0, pass dataset='hf:{text}'")
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in DATA_SUFFIXES)
        if not files:
            raise DatasetError(f"{what} folder {text!r} holds no {', '.join(DATA_SUFFIXES)} file")
        splits: dict[str, Path] = {}
        for file in files:
            splits.setdefault(split_named(file.relative_to(path)) or "", file)
        splits.pop("", None)
        if len(splits) > 1:  # train and test rows read as one would train on the test set
            examples = ", ".join(f"{name} ({example.relative_to(path)})" for name, example in sorted(splits.items()))
            pattern = Path(text) / splits[sorted(splits)[0]].relative_to(path).parent / f"{sorted(splits)[0]}*"
            raise DatasetError(f"{what} folder {text!r} holds the splits {examples}: name one split's files, "
                               f"e.g. with a pattern such as {str(pattern)!r}")
        return files
    if any(char in text for char in "*?["):
        files = sorted(Path(p) for p in glob.glob(str(path), recursive=True) if Path(p).is_file())
        if not files:
            raise DatasetError(f"{what} pattern {text!r} matches no file")
        return files
    raise DatasetError(f"{what} {text!r} does not exist")


def _file_rows(path: Path, json_list: bool) -> Iterator[tuple[str, Any]]:
    """The rows of one data file (see :func:`jsonl_rows`)."""
    if path.suffix == ".parquet":
        yield from _parquet_rows(path)
        return
    with path.open(encoding="utf-8") as handle:
        if json_list and handle.read(4096).lstrip().startswith("["):
            handle.seek(0)
            try:
                rows = json.loads(handle.read())
            except (json.JSONDecodeError, RecursionError):  # JSONL whose lines are lists (ORZ's pairs): read by line
                rows = None
            if isinstance(rows, list):
                rows = [rows] if _is_chat(rows) else rows  # the whole file is one record given as a chat
                yield from ((f"{path}: record {index}", row) for index, row in enumerate(rows))
                return
        handle.seek(0)
        for number, line in enumerate(handle, 1):
            if line.strip():
                yield f"{path}:{number}", _parsed(line, f"{path}:{number}")


def _parquet_rows(path: Path) -> Iterator[tuple[str, Any]]:
    """The rows of a Parquet file (as verl's and the hub's data sets ship) as JSON-like values,
    read a batch at a time (``"FILE: row N"``)."""
    import pyarrow.parquet as pq  # noqa: PLC0415 - pyarrow comes with datasets

    try:
        batches = pq.ParquetFile(path).iter_batches(batch_size=1024)
        index = 0
        for batch in batches:
            for row in batch.to_pylist():
                yield f"{path}: row {index}", row
                index += 1
    except (OSError, ValueError) as err:  # pyarrow's ArrowInvalid is a ValueError
        raise DatasetError(f"{path}: not a readable Parquet file ({type(err).__name__}: {str(err)[:200]})") from None


def _is_chat(value: Any) -> bool:
    """A list of turns: ``{"role", "content"}`` messages or ShareGPT / ORZ ``{"from", ...}`` turns."""
    return bool(value) and all(isinstance(turn, Mapping) and ("role" in turn or "from" in turn) for turn in value)


def _parsed(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise DatasetError(f"{where}: not valid JSON ({err.msg})") from None
    except RecursionError:
        raise DatasetError(f"{where}: not valid JSON (nested too deeply)") from None


def load_jsonl(path: str | Path, columns: Mapping[str, str] | None = None) -> list[MathRecord]:
    """Read a GSM8K- or MATH-format JSONL file (one JSON object a line), or a JSON file holding
    a list of them; a row may also be a chat with the answer in a turn (:func:`record_from_row`)."""
    records = []
    for where, row in jsonl_rows(path, "data file", json_list=True):
        try:
            records.append(record_from_row(row, columns))
        except DatasetError as err:
            raise DatasetError(f"{where}: {err}") from None
    if not records:
        raise DatasetError(f"data file {str(path)!r} holds no problems")
    return records


def hub_offline(timeout_s: float = 3.0) -> bool:
    """Whether the Hugging Face hub is out of reach: ``HF_HUB_OFFLINE`` / ``HF_DATASETS_OFFLINE`` is
    set, or one connection to the hub fails within ``timeout_s`` (answered once per process)."""
    global _OFFLINE
    if any(os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on") for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")):
        return True
    if _OFFLINE is None:
        url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
        port = url.port or (80 if url.scheme == "http" else 443)
        try:
            socket.create_connection((url.hostname or "huggingface.co", port), timeout=timeout_s).close()
            _OFFLINE = False
        except OSError:
            _OFFLINE = True
    return _OFFLINE


_OFFLINE: bool | None = None


def _enter_offline_mode(datasets: Any) -> None:
    """Make ``datasets`` (already imported) read only its cache, without retrying the hub."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    for module in (getattr(datasets, "config", None), _hf_constants()):
        for flag in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
            if module is not None and hasattr(module, flag):
                setattr(module, flag, True)


def _hf_constants() -> Any:
    try:
        from huggingface_hub import constants
    except ImportError:  # pragma: no cover - datasets depends on huggingface_hub
        return None
    return constants


def load_hf(name: str, split: str, columns: Mapping[str, str] | None = None, subset: str | None = None) -> list[MathRecord]:
    """Load a ``datasets`` data set (hub id or local path) and map its columns."""
    try:
        import datasets  # noqa: PLC0415 - heavy import, only when a data set is loaded
    except ImportError as err:  # pragma: no cover - datasets is a core dependency
        raise DatasetError("loading a hub data set needs the `datasets` package") from err
    local = Path(name).exists()
    offline = not local and hub_offline()
    if offline:  # datasets would retry the hub for ~30 s; the local cache is all there is
        _enter_offline_mode(datasets)
    try:
        if Path(name, "dataset_info.json").is_file():  # a data set saved with save_to_disk
            table = datasets.load_from_disk(name)
        else:
            table = datasets.load_dataset(name, subset, split=split)
    except Exception as err:  # datasets raises many types; say which data set failed
        if offline:
            raise DatasetError(
                f"could not load data set {name!r} (split {split!r}): the Hugging Face hub cannot be reached "
                "(offline) and the data set is not in the local cache. Load it once while online, or give "
                "a local .jsonl file."
            ) from None
        raise DatasetError(f"could not load data set {name!r} (split {split!r}): {err}") from err
    return [record_from_row(row, columns) for row in table]


def load_dataset(spec: str | Path, split: str = "test", columns: Mapping[str, str] | None = None) -> list[MathRecord]:
    """Load problems from ``spec``: a ``.jsonl`` path, or ``hf:NAME[:SUBSET]`` for ``datasets``.

    Example:
        >>> load_dataset("gsm8k_test.jsonl")          # doctest: +SKIP
        >>> load_dataset("hf:openai/gsm8k:main", split="test")  # doctest: +SKIP
    """
    spec = str(spec)
    if spec.startswith("hf:"):
        name, _, subset = spec[3:].partition(":")
        return load_hf(name, split, columns, subset or None)
    return load_jsonl(spec, columns)
