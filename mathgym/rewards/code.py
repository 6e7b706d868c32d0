"""Code reward worker: extract the program from a completion and run its tests in the sandbox."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from mathgym.errors import ConfigError
from mathgym.rewards.base import RewardResult, Status
from mathgym.rewards.code_stubs import StubRunError, defined_functions, stub_floor
from mathgym.rewards.extract import answer_after_thinking, fenced_blocks
from mathgym.rewards.no_op import credit_beyond
from mathgym.rewards.sandbox import CodeSandbox, ExecutionResult, SandboxLimits, TestCase, default_sandbox
from mathgym.spaces import DEFAULT_MAX_LENGTH

#: The fence tags of Python code (``""``: untagged).
PYTHON_FENCES = ("", "python", "py", "python3")


def defines(code: str, name: str) -> bool:
    """Whether ``code`` defines ``name`` at top level (textual check, tolerant of syntax errors)."""
    return re.search(rf"^(?:async\s+)?def\s+{re.escape(name)}\s*\(|^class\s+{re.escape(name)}\b|^{re.escape(name)}\s*=", code, re.MULTILINE) is not None


def extract_code(text: str, entry_point: str | None = None) -> str:
    """The program in a model's answer.

    A reasoning model's answer is what follows its thinking (:func:`answer_after_thinking`):
    the drafts it wrote while thinking are never run, and a completion whose thinking never
    closed holds no code. In the answer, the last fenced block that defines ``entry_point``
    wins; else the last ``python`` (or untagged) fenced block; else the last fenced block;
    else an unclosed fence's remainder; else the whole answer. Blank when it holds no code.
    Linear in ``len(text)``.

    Example:
        >>> extract_code("Here:\\n```python\\ndef f():\\n    return 1\\n```\\nDone.")
        'def f():\\n    return 1\\n'
    """
    answer = answer_after_thinking(text)
    if answer is None:
        return ""
    blocks, unclosed = fenced_blocks(answer)
    if entry_point:
        for block in reversed(blocks):
            if entry_point in block.body and defines(block.body, entry_point):
                return block.body
    for block in reversed(blocks):
        if block.language in PYTHON_FENCES:
            return block.body
    if blocks:
        return blocks[-1].body
    if unclosed is not None:
        return unclosed.body
    return answer.strip("\n") + "\n"


def tests_verdict(result: ExecutionResult, partial_credit: bool) -> tuple[float, Status]:
    """Score and status of a sandbox test run (shared by :class:`CodeTestsReward` and the code envs).

    All tests pass: 1.0 and ``correct``. Otherwise 0.0 (the share passed with
    ``partial_credit``) and the run's own status (``wrong``, ``timeout``), ``partial`` where
    some tests passed and partial credit is on. ``sandbox_error`` and ``unverifiable`` (a
    test that cannot be judged without trusting the program) score 0 and stay
    infrastructure statuses, never blamed on the model.
    """
    if result.status in (Status.SANDBOX_ERROR, Status.UNVERIFIABLE):
        return 0.0, result.status
    fraction = result.fraction
    if fraction == 1.0:
        return 1.0, Status.CORRECT
    status = Status.TIMEOUT if result.status is Status.TIMEOUT else Status.WRONG
    if partial_credit and status is Status.WRONG and result.passed > 0:
        status = Status.PARTIAL
    return (fraction if partial_credit else 0.0), status


def verdict_beyond_stubs(result: ExecutionResult, partial_credit: bool, floor: Callable[[], int]) -> tuple[float, Status, int | None]:
    """:func:`tests_verdict`, with partial credit counted beyond what doing nothing passes.

    Where a run earns partial credit, ``floor()`` is the most tests a trivial program passes
    (:mod:`mathgym.rewards.code_stubs`), and the score is the share of the way from there to every
    test (:func:`~mathgym.rewards.no_op.credit_beyond`): a trivial program earns 0. Returns the
    score, the status and the floor (``None`` where none was needed).

    Raises:
        StubRunError: The sandbox could not run a trivial program (an infrastructure failure).
    """
    score, status = tests_verdict(result, partial_credit)
    if not 0.0 < score < 1.0:
        return score, status, None
    passed_floor = floor()
    score = credit_beyond(result.passed, result.total, passed_floor)
    return score, (status if score > 0.0 or status is Status.TIMEOUT else Status.WRONG), passed_floor


@dataclass
class CodeTestsReward:
    """Scores a completion by running its code against the sample's tests.

    The reference of each sample is a sequence of :class:`TestCase`. Score 1.0 when every
    test passes; with ``partial_credit``, the share of the tests passed beyond what a trivial
    program passes (stubs of the functions the program defines, or a fixed-output program:
    :func:`verdict_beyond_stubs`), so doing nothing earns 0. ``sandbox_error`` results
    are infrastructure failures, never a model failure.

    Args:
        limits: Sandbox limits (default: the sandbox's own).
        partial_credit: Score the share of tests passed beyond what doing nothing passes,
            instead of all-or-nothing.
        sandbox: A sandbox to use; default: the process-wide :func:`default_sandbox`
            (looked up at call time, so the worker pickles).
        parallel: Samples of a batch run at once (threads waiting on warm workers).
        max_completion_chars: A longer completion is refused unread: ``too_long``, score 0. The
            default is every env's bound (:data:`~mathgym.spaces.DEFAULT_MAX_LENGTH`), a 32k-token
            answer: a long chain of thought before the code is graded, not refused.
        name: Component name.
    """

    limits: SandboxLimits | None = None
    partial_credit: bool = False
    sandbox: CodeSandbox | None = None
    parallel: int = 2
    name: str = "tests"
    max_completion_chars: int = DEFAULT_MAX_LENGTH

    def __post_init__(self) -> None:
        if not isinstance(self.parallel, int) or self.parallel < 1:
            raise ConfigError(f"parallel={self.parallel!r} must be a positive integer.")

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "sandbox": None}  # a sandbox holds processes: use the default one after unpickling

    def score(self, completion: str, reference: Sequence[TestCase]) -> RewardResult:
        """Run one completion's code against its tests."""
        if len(completion) > self.max_completion_chars:
            reason = f"completion of {len(completion)} characters; at most max_completion_chars={self.max_completion_chars}"
            return RewardResult(0.0, Status.TOO_LONG, {"reason": reason})
        code = extract_code(completion)
        if not code.strip():
            return RewardResult(0.0, Status.UNPARSEABLE, {"reason": "no code found"})
        result = (self.sandbox or default_sandbox()).run_tests(code, reference, limits=self.limits)
        details = {"passed": result.passed, "total": result.total, "tests": result.tests, **result.details}
        try:
            score, status, floor = verdict_beyond_stubs(
                result, self.partial_credit, lambda: stub_floor(defined_functions(code), tuple(reference), self.limits))
        except StubRunError as err:
            return RewardResult(0.0, Status.SANDBOX_ERROR, {**details, "stub_error": str(err)})
        if floor is not None:
            details["stub_passed"] = floor
        return RewardResult(score, status, details)

    def score_batch(self, completions: Sequence[str], references: Sequence[Sequence[TestCase]]) -> list[RewardResult]:
        """Score many completions, ``parallel`` at a time."""
        if len(completions) != len(references):
            raise ConfigError(f"got {len(completions)} completions but {len(references)} test lists.")
        if self.parallel == 1 or len(completions) < 2:
            return [self.score(c, r) for c, r in zip(completions, references)]
        with ThreadPoolExecutor(self.parallel) as threads:
            return list(threads.map(self.score, completions, references))
