"""What a program that does nothing passes of a code task's tests: the floor partial credit is
measured from (issue 48: doing nothing earns nothing).

A test that a trivial program passes (``assert f([]) == 0`` passes for a function returning 0)
says nothing about the program under test. Under ``reward_mode="fraction"`` the code envs pay
the tests passed *beyond* the most that a trivial program passes, as a share of the rest
(:func:`~mathgym.rewards.no_op.credit_beyond`), so every trivial program earns 0 and a full pass still earns 1.

The trivial programs are :mod:`mathgym.rewards.code_stubs`' (stubs of the task's function, or
a program printing a fixed text or echoing its input).

The counts are computed once per task and kept (:func:`stub_passes`); a sandbox failure while
measuring them is raised, never kept, so the next grading tries again.
"""

from __future__ import annotations

import functools
from typing import Any

from mathgym.envs.coding.code_records import CodeTask
from mathgym.rewards.code_stubs import CACHED_FLOORS, StubRunError, most_stubs_pass, printed_floor

__all__ = ["StubRunError", "printed_floor", "stub_passes", "test_cases"]


def test_cases(task: CodeTask) -> list[Any]:
    """``task``'s tests as the sandbox runs them (:class:`~mathgym.rewards.sandbox.TestCase`)."""
    from mathgym.rewards.sandbox import TestCase  # noqa: PLC0415 - the sandbox starts nothing on import, but loads late

    cases = [TestCase(name, "assert", source) for name, source in task.tests]
    return cases + [TestCase(name, "io", stdin=stdin, expected_stdout=wanted) for name, stdin, wanted in task.io_tests]


@functools.lru_cache(maxsize=CACHED_FLOORS)
def stub_passes(task: CodeTask, limits: Any = None, hidden_paths: tuple[str, ...] = ()) -> int:
    """The most of ``task``'s tests that any trivial program passes (kept per task).

    Raises:
        StubRunError: The sandbox could not run one of the trivial functions (not kept).
    """
    if not task.tests:  # a whole program, judged on its output only
        return printed_floor(task.io_tests)
    from mathgym.rewards.sandbox import default_sandbox  # noqa: PLC0415 - starts workers lazily

    cases = test_cases(task)

    def run(program: str) -> Any:
        return default_sandbox().run_tests(task.program(program), cases, limits=limits, hidden_paths=hidden_paths, support=task.prefix)

    return most_stubs_pass(run, (task.entry_point,), task.task_id)
