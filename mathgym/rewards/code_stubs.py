"""Programs that do nothing, and what they pass of a test list: the floor partial credit of code
is measured from (issue 48: doing nothing earns nothing).

A test that a trivial program passes (``assert f([]) == 0`` passes for a function returning 0)
says nothing about the program under test. Partial credit pays the tests passed *beyond* the
most a trivial program passes, as a share of the rest
(:func:`~mathgym.rewards.no_op.credit_beyond`), so every trivial program earns 0 and a full
pass still earns 1.

The trivial programs:

* functions: each function the tests call ignoring its arguments and returning one of
  :data:`NOTHING_RETURNED` (``None``, ``0``, ``[]`` ..., or its first argument unchanged), run
  in the sandbox against the tests and judged like any program;
* a standard-input/output program: one printing the same text whatever its input (the best one
  prints the most frequent expected output; the empty program is one of them), or echoing its
  input. These run nowhere: what they print is known, so their tests are decided here.

The code envs keep the floor per task (:mod:`mathgym.envs.coding.code_stubs`); :class:`~mathgym.rewards.code.CodeTestsReward`
keeps it per (functions, tests) (:func:`stub_floor`).
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from mathgym.rewards.base import Status

#: What a function that does nothing returns (Python expressions over its ``args``).
NOTHING_RETURNED = ("None", "0", "1", "-1", "True", "False", "''", "[]", "{}", "()", "args[0] if args else None")
#: Floors kept (tasks, or distinct test lists).
CACHED_FLOORS = 65536
_TOP_LEVEL_DEF = re.compile(r"^(?:async[ \t]+)?def[ \t]+([A-Za-z_]\w*)[ \t]*\(", re.MULTILINE)


class StubRunError(RuntimeError):
    """The sandbox could not run a trivial program (infrastructure, not the model's doing)."""


def stub_source(entry_point: str, returned: str) -> str:
    """A function named ``entry_point`` that ignores its arguments and returns ``returned``."""
    return f"def {entry_point}(*args, **kwargs):\n    return {returned}\n"


def _normalised(text: str) -> str:
    """An output as the sandbox compares it: trailing whitespace of each line and trailing blank lines ignored."""
    return "\n".join(line.rstrip() for line in text.rstrip().splitlines())


def printed_floor(io_tests: Sequence[tuple[str, str, str]]) -> int:
    """Most io tests (name, stdin, expected output) that a program printing a fixed text, or
    echoing its input, passes.

    Example:
        >>> printed_floor([("a", "1", "YES"), ("b", "2", "NO"), ("c", "3", "YES\\n")])
        2
    """
    if not io_tests:
        return 0
    fixed = Counter(_normalised(wanted) for _, _, wanted in io_tests).most_common(1)[0][1]
    echoed = sum(_normalised(stdin) == _normalised(wanted) for _, stdin, wanted in io_tests)
    return max(fixed, echoed)


def most_stubs_pass(run: Callable[[str], Any], entry_points: Sequence[str], what: str) -> int:
    """The most tests any set of trivial functions named ``entry_points`` passes, each set run by
    ``run(program) -> ExecutionResult``.

    Raises:
        StubRunError: The sandbox could not run one of them (``what`` names the task).
    """
    best = 0
    for returned in NOTHING_RETURNED:
        result = run("".join(stub_source(name, returned) for name in entry_points))
        if result.status in (Status.SANDBOX_ERROR, Status.UNVERIFIABLE):
            raise StubRunError(f"the sandbox could not run a stub of {what} returning {returned}: {result.status}")
        best = max(best, result.passed)
    return best


def defined_functions(code: str) -> tuple[str, ...]:
    """The functions ``code`` defines at top level, in order, once each (linear in ``code``)."""
    return tuple(dict.fromkeys(_TOP_LEVEL_DEF.findall(code)))


@functools.lru_cache(maxsize=CACHED_FLOORS)
def stub_floor(entry_points: tuple[str, ...], tests: tuple[Any, ...], limits: Any = None) -> int:
    """The most of ``tests`` (:class:`~mathgym.rewards.sandbox.TestCase`) a trivial program passes:
    stubs of ``entry_points`` where the program defines functions, else a fixed-output or echoing
    program for the io tests (kept per arguments; a sandbox failure is raised, never kept)."""
    if not entry_points:
        return printed_floor([(t.name, t.stdin, t.expected_stdout) for t in tests if t.kind == "io"])
    from mathgym.rewards.sandbox import default_sandbox  # noqa: PLC0415 - starts workers lazily

    return most_stubs_pass(lambda program: default_sandbox().run_tests(program, list(tests), limits=limits),
                           entry_points, f"the functions {', '.join(entry_points)}")
