"""What a program that does nothing passes of a code task's tests: the floor partial credit is
measured from (issue 48: doing nothing earns nothing).

A test that a trivial program passes (``assert f([]) == 0`` passes for a function returning 0)
says nothing about the program under test. Under ``reward_mode="fraction"`` the code envs pay
the tests passed *beyond* the most that a trivial program passes, as a share of the rest
(:func:`~mathgym.rewards.no_op.credit_beyond`), so every trivial program earns 0 and a full pass still earns 1.

The trivial programs:

* a function task: the task's function ignoring its arguments and returning one of
  :data:`NOTHING_RETURNED` (``None``, ``0``, ``[]`` ..., or its first argument unchanged), each
  run once against the task's tests in the sandbox, judged like any program;
* a standard-input/output task: a program printing the same text whatever its input (the best
  one prints the most frequent expected output; the empty program is one of them), or echoing
  its input. These run nowhere: what they print is known, so their tests are decided here.

The counts are computed once per task and kept (:func:`stub_passes`); a sandbox failure while
measuring them is raised, never kept, so the next grading tries again.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Sequence
from typing import Any

from mathgym.envs.code_records import CodeTask
from mathgym.rewards.base import Status

#: What a function that does nothing returns (Python expressions over its ``args``).
NOTHING_RETURNED = ("None", "0", "1", "-1", "True", "False", "''", "[]", "{}", "()", "args[0] if args else None")
#: Tasks whose counts are kept.
CACHED_TASKS = 65536


class StubRunError(RuntimeError):
    """The sandbox could not run a trivial program (infrastructure, not the model's doing)."""


def stub_source(entry_point: str, returned: str) -> str:
    """A function named ``entry_point`` that ignores its arguments and returns ``returned``."""
    return f"def {entry_point}(*args, **kwargs):\n    return {returned}\n"


def _normalised(text: str) -> str:
    """An output as the sandbox compares it: trailing whitespace of each line and trailing blank lines ignored."""
    return "\n".join(line.rstrip() for line in text.rstrip().splitlines())


def printed_floor(io_tests: Sequence[tuple[str, str, str]]) -> int:
    """Most io tests that a program printing a fixed text, or echoing its input, passes.

    Example:
        >>> printed_floor([("a", "1", "YES"), ("b", "2", "NO"), ("c", "3", "YES\\n")])
        2
    """
    if not io_tests:
        return 0
    fixed = Counter(_normalised(wanted) for _, _, wanted in io_tests).most_common(1)[0][1]
    echoed = sum(_normalised(stdin) == _normalised(wanted) for _, stdin, wanted in io_tests)
    return max(fixed, echoed)


def test_cases(task: CodeTask) -> list[Any]:
    """``task``'s tests as the sandbox runs them (:class:`~mathgym.rewards.sandbox.TestCase`)."""
    from mathgym.rewards.sandbox import TestCase  # noqa: PLC0415 - the sandbox starts nothing on import, but loads late

    cases = [TestCase(name, "assert", source) for name, source in task.tests]
    return cases + [TestCase(name, "io", stdin=stdin, expected_stdout=wanted) for name, stdin, wanted in task.io_tests]


@functools.lru_cache(maxsize=CACHED_TASKS)
def stub_passes(task: CodeTask, limits: Any = None, hidden_paths: tuple[str, ...] = ()) -> int:
    """The most of ``task``'s tests that any trivial program passes (kept per task).

    Raises:
        StubRunError: The sandbox could not run one of the trivial functions (not kept).
    """
    if not task.tests:  # a whole program, judged on its output only
        return printed_floor(task.io_tests)
    from mathgym.rewards.sandbox import default_sandbox  # noqa: PLC0415 - starts workers lazily

    cases, best = test_cases(task), 0
    for returned in NOTHING_RETURNED:
        result = default_sandbox().run_tests(task.program(stub_source(task.entry_point, returned)), cases, limits=limits,
                                             hidden_paths=hidden_paths, support=task.prefix)
        if result.status in (Status.SANDBOX_ERROR, Status.UNVERIFIABLE):
            raise StubRunError(f"the sandbox could not run a stub of {task.task_id} returning {returned}: {result.status}")
        best = max(best, result.passed)
    return best
