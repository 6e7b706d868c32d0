"""Code tasks whose tests are given by input and output: standard input / expected output
(APPS / TACO, LiveCodeBench, CodeContests, Codeforces) or function calls (APPS's ``fn_name``,
LiveCodeBench's functional tests), and the same tests in PrimeIntellect's, DeepCoder's and
verl's layouts, or in a label alone (:func:`tests_task`). Nothing here executes code.
"""

from __future__ import annotations

import json

from mathgym.envs.coding.code_records import CodeTask, io_text, json_cell, json_list, literal, python_solution, record_id, statement
from mathgym.errors import DatasetError
from mathgym.rewards.code import extract_code

def as_apps_or_livecodebench(row: dict) -> dict:
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
        info = json_cell(row["verification_info"], "verification_info")
        cases = info.get("test_cases") if isinstance(info, dict) else None
    elif "tests" in row:
        cases = json_cell(row["tests"], "tests")
    elif isinstance(row.get("reward_model"), dict):
        cases = json_cell(row["reward_model"].get("ground_truth"), "reward_model.ground_truth", optional=True)
        if not (isinstance(cases, dict) and "inputs" in cases):
            return row
    else:
        return row
    rewritten = {**row, "question": statement(row)}
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
    question = statement(row)
    pairs: list[tuple[str, str]] = []
    if "input_output" in row:  # APPS / TACO
        spec = json_cell(row["input_output"], "input_output")
        if not isinstance(spec, dict):
            raise DatasetError("input_output is not an object with inputs and outputs")
        pairs += zip(spec.get("inputs") or [], spec.get("outputs") or [])
    for key in ("public_test_cases", "private_test_cases"):  # LiveCodeBench
        if key in row:
            cases = json_cell(row[key], key, optional=key == "private_test_cases")
            for case in cases if isinstance(cases, list) else []:
                if isinstance(case, dict) and case.get("testtype", "stdin") == "stdin":
                    pairs.append((case.get("input", ""), case.get("output", "")))
    for key in ("public_tests", "private_tests", "generated_tests"):  # CodeContests
        spec = json_cell(row[key], key) if key in row else None
        if isinstance(spec, dict):
            pairs += zip(spec.get("input") or [], spec.get("output") or [])
    reason = None
    if "official_tests" in row:  # Codeforces (open-r1): the official tests, else the statement's examples
        question, reason = _codeforces_statement(row), _codeforces_unverifiable(row)
        cases = json_list(row["official_tests"], "official_tests") or json_list(row.get("examples") or [], "examples")
        pairs += [(case.get("input", ""), case.get("output", "")) for case in cases if isinstance(case, dict)]
    tests = tuple((f"io_{i}", io_text(given), io_text(wanted)) for i, (given, wanted) in enumerate(pairs))
    if not tests:
        raise DatasetError("the record holds no standard input/output test")
    shown = f"{question.strip()}\n\n{STDIO_INSTRUCTION}"
    return CodeTask(record_id(row, default_id), shown, "", (), python_solution(row.get("solutions")), io_tests=tests, unverifiable=reason)


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
    examples = [case for case in json_list(row.get("examples") or [], "examples") if isinstance(case, dict)]
    for i, case in enumerate(examples, 1):
        label = "Example" if len(examples) == 1 else f"Example {i}"
        parts.append(f"{label}\nInput:\n{io_text(case.get('input')).rstrip()}\nOutput:\n{io_text(case.get('output')).rstrip()}")
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
    row = as_apps_or_livecodebench({"question": "(graded by its tests)", "tests": label})
    try:
        return call_task(row, "label") or stdio_task(row, "label")
    except DatasetError:
        return None


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
    spec = json_cell(row["input_output"], "input_output") if "input_output" in row else None
    if isinstance(spec, dict) and spec.get("fn_name"):  # APPS / TACO
        name = spec["fn_name"]
        for given, wanted in zip(spec.get("inputs") or [], spec.get("outputs") or []):
            if not isinstance(given, list):
                raise DatasetError(f"a test of {name} has arguments {str(given)[:40]!r}, not a list of them")
            cases.append((given, [wanted, wanted[0]] if isinstance(wanted, list) and wanted else [wanted]))
    functional = [case for key in ("public_test_cases", "private_test_cases") if key in row
                  for case in json_list(row[key], key) if isinstance(case, dict) and case.get("testtype") == "functional"]
    if functional:  # LiveCodeBench
        metadata = json_cell(row.get("metadata") or {}, "metadata", optional=True)
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
        (f"call_{i}", f"assert {CALL_ADAPTER}({', '.join(map(literal, given))}) in ({''.join(literal(v) + ', ' for v in accepted)})")
        for i, (given, accepted) in enumerate(cases)
    )
    starter = row.get("starter_code") if isinstance(row.get("starter_code"), str) else ""
    shown = f"{statement(row).strip()}\n\nWrite Python code that defines `{name}` (the tests call it; nothing is read from standard input)"
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
    return CodeTask(record_id(row, default_id), shown, name, tests, python_solution(row.get("solutions")), prefix=CALL_PREFIX, suffix=suffix)
