"""Code reward worker: extract the program from a completion and run its tests in the sandbox."""

from __future__ import annotations

import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from mathgym.errors import ConfigError
from mathgym.rewards.base import RewardResult, Status
from mathgym.rewards.sandbox import CodeSandbox, SandboxLimits, TestCase, default_sandbox

_FENCE = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)


def extract_code(text: str) -> str | None:
    """The program in a completion: the last fenced code block, else the whole text.

    Returns ``None`` for empty text.

    Example:
        >>> extract_code("Here:\\n```python\\nprint(1)\\n```")
        'print(1)\\n'
    """
    blocks = _FENCE.findall(text)
    if blocks:
        return blocks[-1]
    return text if text.strip() else None


@dataclass
class CodeTestsReward:
    """Scores a completion by running its code against the sample's tests.

    The reference of each sample is a sequence of :class:`TestCase`. Score 1.0 when every
    test passes (or the share passed with ``partial_credit``); ``sandbox_error`` results
    are infrastructure failures, never a model failure.

    Args:
        limits: Sandbox limits (default: the sandbox's own).
        partial_credit: Score the share of tests passed instead of all-or-nothing.
        sandbox: A sandbox to use; default: the process-wide :func:`default_sandbox`
            (looked up at call time, so the worker pickles).
        parallel: Samples of a batch run at once (threads waiting on warm workers).
        name: Component name.
    """

    limits: SandboxLimits | None = None
    partial_credit: bool = False
    sandbox: CodeSandbox | None = None
    parallel: int = 2
    name: str = "tests"

    def __post_init__(self) -> None:
        if not isinstance(self.parallel, int) or self.parallel < 1:
            raise ConfigError(f"parallel={self.parallel!r} must be a positive integer.")

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "sandbox": None}  # a sandbox holds processes: use the default one after unpickling

    def score(self, completion: str, reference: Sequence[TestCase]) -> RewardResult:
        """Run one completion's code against its tests."""
        code = extract_code(completion)
        if code is None:
            return RewardResult(0.0, Status.UNPARSEABLE, {"reason": "no code found"})
        result = (self.sandbox or default_sandbox()).run_tests(code, reference, limits=self.limits)
        if result.status == Status.SANDBOX_ERROR:
            score = 0.0
        elif self.partial_credit:
            score = result.fraction
        else:
            score = float(result.status == Status.CORRECT)
        status = result.status
        if self.partial_credit and status == Status.WRONG and result.passed > 0:
            status = Status.PARTIAL
        details = {"passed": result.passed, "total": result.total, "tests": result.tests, **result.details}
        return RewardResult(score, status, details)

    def score_batch(self, completions: Sequence[str], references: Sequence[Sequence[TestCase]]) -> list[RewardResult]:
        """Score many completions, ``parallel`` at a time."""
        if len(completions) != len(references):
            raise ConfigError(f"got {len(completions)} completions but {len(references)} test lists.")
        if self.parallel == 1 or len(completions) < 2:
            return [self.score(c, r) for c, r in zip(completions, references)]
        with ThreadPoolExecutor(self.parallel) as threads:
            return list(threads.map(self.score, completions, references))
