"""A code task, and the readers of a data set record's cells that every code layout shares
(:mod:`mathgym.envs.coding.code_tasks` detects the layouts). Nothing here executes code.
"""

from __future__ import annotations

import ast
import base64
import io
import json
import math
import pickle
import warnings
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mathgym.envs.math.data import last_user_message
from mathgym.errors import DatasetError
from mathgym.rewards.sandbox.trusted_judge import unverifiable_reason
from mathgym.rewards.code import defines

@dataclass(frozen=True)
class CodeTask:
    """One programming task.

    Attributes:
        task_id: Stable id (``builtin/fizzbuzz_word``, ``HumanEval/0``, ``mbpp/11``...).
        prompt: What the agent sees (description and signature).
        entry_point: Name of the function the tests call.
        tests: ``(name, source)`` pairs; each source runs after the solution, in its namespace.
        reference: A complete reference solution (runs as is).
        prefix: Code placed before a model's solution (imports, helpers from the prompt).
        suffix: Trusted code placed after it (the adapter through which the tests of a
            function-call record reach the function: :func:`call_task`).
        completion_base: For completion-style answers (a function body), the code the body continues.
        level: Difficulty, 0 (easy) to 3 (hard); ``None`` when unknown.
        io_tests: ``(name, stdin, expected stdout)`` triples: each runs the whole program on the
            input and passes when it exits 0 and prints the output (trailing whitespace of each
            line and trailing blank lines ignored). A task of these has no ``entry_point`` (``""``).
        unverifiable: Set when the task loads: why its tests cannot be judged without
            trusting the program (they read an attribute of its function, or need a
            generator function's items, or a pytest fixture); ``None`` when
            they can. Such a task scores 0 with status ``unverifiable``, which trainers leave
            out of the loss. A loader that knows a reason already passes it.
    """

    task_id: str
    prompt: str
    entry_point: str
    tests: tuple[tuple[str, str], ...]
    reference: str
    prefix: str = ""
    completion_base: str = ""
    level: int | None = None
    io_tests: tuple[tuple[str, str, str], ...] = ()
    suffix: str = ""
    unverifiable: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        reason = self.unverifiable or unverifiable_reason([source for _, source in self.tests], self.reference, self.prefix)
        object.__setattr__(self, "unverifiable", reason)

    @property
    def test_names(self) -> list[str]:
        """The names of every test, the assert tests' first."""
        return [name for name, _ in self.tests] + [name for name, _, _ in self.io_tests]

    def program(self, code: str) -> str:
        """The program to run for a model's ``code``: a full definition, or a body continuing the prompt."""
        if self.completion_base and not defines(code, self.entry_point):
            program = self.completion_base + code
        else:
            program = f"{self.prefix}\n\n{code}" if self.prefix else code
        return f"{program}\n\n\n{self.suffix}" if self.suffix else program


def syntax_error(code: str) -> str | None:
    """``None`` when ``code`` compiles, else the error message (compiling never runs code)."""
    try:
        compile(code, "<solution>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError) as err:
        return f"{type(err).__name__}: {err}"
    return None


def report_unverifiable(tasks: Sequence[CodeTask], source: str) -> None:
    """Warn, once per load, about tasks whose tests cannot be judged without trusting the program."""
    found = [t for t in tasks if t.unverifiable]
    if found:
        examples = "; ".join(f"{t.task_id}: {t.unverifiable}" for t in found[:3])
        warnings.warn(
            f"{source}: {len(found)} of {len(tasks)} code tasks score 'unverifiable' (left out of training), "
            f"their tests cannot grade the program here ({examples})",
            stacklevel=3,
        )


def statement(row: dict) -> str:
    """The problem statement of a record in any layout: a text field, or a chat's last user message."""
    for key in ("question", "question_content", "description", "problem", "prompt"):
        value = row.get(key)
        if isinstance(value, str) and value.strip():
            return value
        message = last_user_message(value)
        if message:
            return message
    raise DatasetError("the record needs its statement (question, question_content, description, problem or prompt)")


def record_id(row: dict, default_id: str) -> str:
    return str(next((row[k] for k in ("task_id", "problem_id", "question_id", "id", "name") if row.get(k) not in (None, "")), default_id))


def literal(value: object) -> str:
    """Python source for a value decoded from JSON (``float('inf')`` for JSON's Infinity)."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"float({str(value)!r})"
    if isinstance(value, list):
        return "[" + ", ".join(map(literal, value)) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{literal(k)}: {literal(v)}" for k, v in value.items()) + "}"
    return repr(value)


def json_list(value: object, key: str) -> list:
    cases = json_cell(value, key, optional=key == "private_test_cases")
    return cases if isinstance(cases, list) else []


def json_cell(value: object, key: str, optional: bool = False) -> object:
    """A cell that holds JSON, or JSON in a string (LiveCodeBench's private tests also compressed:
    :func:`compressed_json`); ``None`` for an optional cell that is neither."""
    if not isinstance(value, str):
        return value
    if not value.strip():
        return None
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        decoded = compressed_json(value)
        if decoded is not None:
            return decoded
        if optional:
            return None
        raise DatasetError(f"{key} is not JSON") from None


#: Most bytes a compressed cell may expand to.
MAX_EXPANDED_BYTES = 1 << 28


class _PlainUnpickler(pickle.Unpickler):
    """Loads only what pickle's own opcodes build (strings, numbers, lists, dicts...): any class
    or function a pickle names is refused, so loading can run no code (Python's "restricting
    globals", with nothing allowed)."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"the cell names {module}.{name}; only plain data is read")


def compressed_json(text: str) -> object | None:
    """JSON packed as LiveCodeBench packs its private tests (base64 of zlib of a pickled JSON
    string), or ``None`` when ``text`` is not that. The pickle is read by an unpickler that
    refuses every class and function, and the text may expand to :data:`MAX_EXPANDED_BYTES`.

    Example:
        >>> import base64, pickle, zlib
        >>> compressed_json(base64.b64encode(zlib.compress(pickle.dumps('[{"input": "1", "output": "2"}]'))).decode())
        [{'input': '1', 'output': '2'}]
    """
    try:
        packed = base64.b64decode(text.strip(), validate=True)
        inflater = zlib.decompressobj()
        raw = inflater.decompress(packed, MAX_EXPANDED_BYTES)
        if inflater.unconsumed_tail:
            return None
        loaded = _PlainUnpickler(io.BytesIO(raw)).load()
        return json.loads(loaded) if isinstance(loaded, (str, bytes)) else None
    except (ValueError, zlib.error, pickle.UnpicklingError, EOFError, TypeError, IndexError, KeyError, AttributeError,
            RecursionError, MemoryError, OverflowError):
        return None


def io_text(value: object) -> str:
    """A test's input or output as text (a list of lines joined)."""
    if isinstance(value, list):
        return "\n".join(str(v) for v in value) + "\n"
    return "" if value is None else str(value)


PYTHON3 = 3  #: CodeContests' language code of Python 3 solutions


def python_solution(solutions: object) -> str:
    """The first Python solution of a record (APPS: a JSON list of programs; CodeContests:
    ``{"language": [...], "solution": [...]}``, Python 3 only), else ``""``."""
    solutions = json_cell(solutions, "solutions", optional=True) if solutions is not None else None
    if isinstance(solutions, list):
        return next((s for s in solutions if isinstance(s, str) and s.strip()), "")
    if isinstance(solutions, dict):
        for language, program in zip(solutions.get("language") or [], solutions.get("solution") or []):
            if language == PYTHON3 and isinstance(program, str):
                return program
    return ""


def prompt_prefix(prompt: str, entry_point: str) -> str:
    """Everything in a HumanEval prompt except the entry-point function (imports, helpers)."""
    try:
        module = ast.parse(prompt + "    pass\n")
    except SyntaxError:
        return ""
    keep = [n for n in module.body if not (isinstance(n, ast.FunctionDef) and n.name == entry_point)]
    return "\n\n".join(ast.get_source_segment(prompt + "    pass\n", n) or "" for n in keep)
