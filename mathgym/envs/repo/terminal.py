"""Terminal-v0: a terminal-bench or Harbor task in a container, worked through RepoRepair-v0's commands.

Each episode is one task directory (:mod:`mathgym.envs.repo.terminal_tasks`) and one container of its
image (:mod:`mathgym.rewards.sandbox.container`: no network, memory / process / CPU limits,
container root an unprivileged host uid under podman as root), started at the episode's first
command and removed at its end. The commands are RepoRepair-v0's (:func:`~mathgym.envs.repo.repo_repair.parse_command`)::

    <run>shell command</run>   <read>path</read>   <write path="p">text</write>
    <patch>unified diff</patch>   <test/>   <submit/>          (or the same as tool calls)

Paths are the container's (relative ones from the task's ``WORKDIR``). At ``submit``, or when the
turns run out, the task's tests are copied to ``/tests`` (never earlier: the agent does not see
them) and run in the container as the benchmark runs them: terminal-bench's ``run-tests.sh``
(resolved when every pytest test of its ``-rA`` summary passed), Harbor's ``tests/test.sh`` (the
reward it writes to ``/logs/verifier/reward.txt``).

Trust: as in terminal-bench and Harbor, the tests run in the container the agent worked in, so
the grade trusts that container's tools (an agent that rewrote its ``python3`` or ``bash`` could
forge a pass); the agent never sees the tests, and what they print is parsed with bounds.
Infrastructure failures are statuses of their own: no container runtime here
(``sandbox_error``), or an image that cannot be built without the network (``unverifiable``);
either ends the episode at once with reward 0, to be left out of training.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from mathgym.core import Judgement, Task, TextEnv
from mathgym.envs.repo.repo_repair import parse_command
from mathgym.envs.repo.terminal_tasks import DEFAULT_BASE_IMAGES, SAMPLE_TASKS, TerminalTask, read_tasks, task_image
from mathgym.envs.repo.unified_diff import PatchError, apply_unified_diff, parse_unified_diff
from mathgym.errors import ConfigError, require_option
from mathgym.rewards.base import Status
from mathgym.rewards.sandbox.container import Container, ContainerError, ContainerLimits, RuntimeProbe, find_runtime
from mathgym.rewards.sandbox.container_image import BASE_IMAGE
from mathgym.spaces import DEFAULT_MAX_LENGTH

RewardMode = Literal["all_pass", "fraction"]
#: Most characters of the tests' output read for the verdict.
GRADE_OUTPUT_CAP = 200_000
_PYTEST_LINE = re.compile(r"^(PASSED|FAILED|ERROR|XPASS|XFAIL|SKIPPED)\s+(\S+)", re.MULTILINE)

DEFAULT_SYSTEM_PROMPT = (
    "You are working in a Linux terminal to complete a task. Work one command per turn:\n"
    "<run>shell command</run> runs it; <read>path</read> shows a file; <write path=\"path\">contents</write> "
    "replaces a file; <patch>unified diff</patch> applies a diff; <submit/> ends the episode and runs the hidden tests.\n"
    'Tool calls also work: <tool_call>{"name": "run", "arguments": {"command": "ls"}}</tool_call>.'
)


class TerminalEnv(TextEnv):
    """A terminal-bench / Harbor task in a container; the task's own tests grade the final state.

    Reward 0 on every turn but the last; at ``submit`` (terminated) or when ``max_turns`` runs out
    (truncated) the tests run: 1.0 when they pass (terminal-bench: every pytest test; Harbor: the
    reward file's value, in [0, 1]); with ``reward_mode="fraction"`` a terminal-bench task pays the
    share of its tests passed. Statuses: ``in_progress``, ``format_error`` (no command, a malformed
    one, a patch that does not apply), ``correct`` / ``partial`` / ``wrong`` / ``timeout`` at the end,
    ``sandbox_error`` (no container runtime, or it failed) and ``unverifiable`` (the task's image
    cannot be built here: the reason is in ``info["why"]``).

    Args:
        tasks: A task directory, or a folder of them (default: the two sample tasks).
        runtime: ``"podman"``, ``"docker"`` or ``None`` (whichever works).
        base_images: ``FROM`` image patterns → local image built instead (default: Debian, Ubuntu,
            Python and terminal-bench's images → ``localhost/mathgym/debian:bookworm``).
        max_turns: Commands allowed, ``submit`` included.
        reward_mode: ``"all_pass"`` or ``"fraction"`` (terminal-bench tasks: the share of tests passed).
        command_seconds: Wall-clock limit of one command.
        output_cap: Most characters of a command's output shown.
        memory: The container's memory limit.
        pids: The container's process limit.
        cpus: The container's CPUs.
        show_tests: Whether ``<test/>`` runs the hidden tests and shows their output (off: the
            benchmarks' setting, tests unseen until the grade).
        system_prompt: System message; ``""`` for none.
        max_length: Longest observation/action in characters.
        render_mode: ``None`` or ``"ansi"``.
    """

    default_system_prompt = DEFAULT_SYSTEM_PROMPT

    def __init__(
        self,
        tasks: str | None = None,
        runtime: str | None = None,
        base_images: Mapping[str, str] | None = None,
        max_turns: int = 16,
        reward_mode: RewardMode = "all_pass",
        command_seconds: float = 30.0,
        output_cap: int = 4000,
        memory: str = "1g",
        pids: int = 256,
        cpus: float = 1.0,
        show_tests: bool = False,
        system_prompt: str | None = None,
        max_length: int = DEFAULT_MAX_LENGTH,
        render_mode: str | None = None,
    ):
        super().__init__(max_turns=max_turns, max_length=max_length, system_prompt=system_prompt, render_mode=render_mode)
        require_option("runtime", runtime, (None, "podman", "docker"))
        require_option("reward_mode", reward_mode, ("all_pass", "fraction"))
        if not command_seconds > 0 or not isinstance(output_cap, int) or output_cap < 200:
            raise ConfigError(f"command_seconds={command_seconds!r} must be positive and output_cap={output_cap!r} an integer of at least 200.")
        self.tasks_path = str(tasks) if tasks else str(SAMPLE_TASKS)
        self.terminal_tasks = read_tasks(self.tasks_path)
        self.runtime_name, self.reward_mode, self.show_tests = runtime, reward_mode, bool(show_tests)
        self.base_images = dict(DEFAULT_BASE_IMAGES if base_images is None else base_images)
        self.command_seconds, self.output_cap = float(command_seconds), output_cap
        self.limits = ContainerLimits(memory=memory, pids=pids, cpus=cpus)
        self._box: Container | None = None
        self._runtime: ContainerRuntime | None = None

    @classmethod
    def catalogue_listing(cls) -> str:
        """The sample tasks, for ``mathgym envs``."""
        return "sample tasks: " + ", ".join(f"{t.task_id} ({t.format})" for t in read_tasks(SAMPLE_TASKS)) + "; tasks=DIR for your own"

    # -- the task and its container -----------------------------------------------------

    @property
    def terminal_task(self) -> TerminalTask:
        """The current task directory, read."""
        return self.task.metadata["terminal"]

    def _sample_task(self, options: Mapping[str, Any]) -> Task:
        self._remove_container()
        task = self.terminal_tasks[self._task_index(options, len(self.terminal_tasks))]
        prompt = f"{task.instruction}\n\nYou are in {task.workdir} of a Linux container with no network. You have {self.max_turns} commands, submit included."
        return Task(f"terminal/{task.task_id}", prompt, "the task's tests pass", {"terminal": task})

    def _container(self) -> tuple[Container | None, Status, str]:
        """This episode's container, started at first use; else the infrastructure status and why."""
        if self._box is not None:
            return self._box, Status.IN_PROGRESS, ""
        probe = _working_runtime(self.runtime_name)
        if probe.runtime is None:
            return None, Status.SANDBOX_ERROR, f"no container runtime works here: {probe.reason}"
        image = task_image(probe.runtime, self.terminal_task, self.base_images)
        if image.image is None:
            return None, Status.UNVERIFIABLE, image.reason
        try:
            self._box = Container.start(probe.runtime, image.image, self.terminal_task.workdir, self.limits)
        except ContainerError as err:
            return None, Status.SANDBOX_ERROR, str(err)
        return self._box, Status.IN_PROGRESS, ""

    def _remove_container(self) -> None:
        if self._box is not None:
            self._box.close()
            self._box = None

    def close(self) -> None:
        self._remove_container()
        super().close()

    def __del__(self) -> None:
        try:
            self._remove_container()
        except Exception:  # noqa: BLE001 - interpreter shutdown: nothing left to do
            pass

    def __getstate__(self) -> dict[str, Any]:
        """A pickled copy does not share the container (closing one would remove the other's): it starts its own."""
        return {**self.__dict__, "_box": None}

    # -- one turn ----------------------------------------------------------------------

    def _judge(self, action: str) -> Judgement:
        name, arguments, error, count = parse_command(action)
        left = self.max_turns - self.turn
        if not name:
            hint = error or "no command found; use one of <run>, <read>, <write path=...>, <patch>, <submit/> (or a tool call)"
            return self._turn_result(f"Command not run: {hint}. ({left} turns left)", Status.FORMAT_ERROR, name)
        box, status, why = self._container()
        if box is None:
            return self._infra(status, why)
        if name == "submit":
            return self._grade()
        handler = {"run": self._run, "test": self._test, "read": self._read, "write": self._write, "patch": self._patch}[name]
        try:
            text, status = handler(box, arguments)
        except ContainerError as err:
            return self._infra(Status.SANDBOX_ERROR, str(err))
        extra = f"\n(only the first of {count} commands was run)" if count > 1 else ""
        return self._turn_result(f"{text}{extra}\n({left} turns left)", status, name)

    def _final_judgement(self, last: Judgement) -> Judgement:
        return last if last.done or last.status.is_infra_failure else self._grade()

    def _turn_result(self, text: str, status: Status, command: str) -> Judgement:
        return Judgement(0.0, status, False, text, {"tests": 0.0}, info={"command": command})

    def _infra(self, status: Status, why: str) -> Judgement:
        self._remove_container()
        return Judgement(0.0, status, True, "", {"tests": 0.0}, False, {"why": why[:1000]})

    def _run(self, box: Container, arguments: Mapping[str, str]) -> tuple[str, Status]:
        command = arguments.get("command", "")
        if not command.strip():
            return "Empty command.", Status.FORMAT_ERROR
        result = box.exec(command, self.command_seconds, self.output_cap)
        end = f"[stopped after {self.command_seconds:g} s]" if result.timed_out else f"[exit code {result.exit_code}]"
        return f"{result.output.rstrip() or '(no output)'}\n{end}", Status.IN_PROGRESS

    def _read(self, box: Container, arguments: Mapping[str, str]) -> tuple[str, Status]:
        path = arguments.get("path", "").strip()
        result = box.exec(f"cat -- {_quote(path)}", self.command_seconds, self.output_cap)
        if result.exit_code != 0:
            return f"Cannot read {path[:200]!r}: {result.output.strip()[:300]}", Status.FORMAT_ERROR
        return result.output, Status.IN_PROGRESS

    def _write(self, box: Container, arguments: Mapping[str, str]) -> tuple[str, Status]:
        path, content = arguments.get("path", "").strip(), arguments.get("content")
        if not path or content is None:
            return 'write needs a "path" and a "content"', Status.FORMAT_ERROR
        result = box.write_file(path, content.encode("utf-8", "replace"), self.command_seconds)
        if result.exit_code != 0:
            return f"Not written: {result.output.strip()[:300]}", Status.FORMAT_ERROR
        return f"Wrote {path} ({len(content)} characters).", Status.IN_PROGRESS

    def _patch(self, box: Container, arguments: Mapping[str, str]) -> tuple[str, Status]:
        diff = arguments.get("diff", "")
        try:
            paths = sorted({p for patch in parse_unified_diff(diff) for p in (patch.old, patch.new) if p != "/dev/null"})
            files = {}
            for path in paths:
                result = box.exec(f"cat -- {_quote(path)}", self.command_seconds, 10**7)
                if result.exit_code == 0:
                    files[path] = result.output
            patched = apply_unified_diff(files, diff)
        except PatchError as err:
            return f"Patch not applied: {str(err)[: self.output_cap]}", Status.FORMAT_ERROR
        changed = sorted(p for p in patched if patched[p] != files.get(p))
        for path in changed:
            box.write_file(path, patched[path].encode("utf-8", "replace"), self.command_seconds)
        return f"Patch applied: {', '.join(changed) or 'no change'}.", Status.IN_PROGRESS

    def _test(self, box: Container, arguments: Mapping[str, str]) -> tuple[str, Status]:
        if not self.show_tests:
            return "This task's tests are hidden; <submit/> runs them.", Status.IN_PROGRESS
        result = self._run_tests(box)
        box.exec("rm -rf /tests /logs/verifier", 30)
        return f"{result.output[-self.output_cap:].rstrip()}\n[exit code {result.exit_code}]", Status.IN_PROGRESS

    # -- the grade -----------------------------------------------------------------------

    def _run_tests(self, box: Container) -> Any:
        task = self.terminal_task
        box.exec("rm -rf /tests /logs/verifier && mkdir -p /tests /logs/verifier", 30)
        for source, target in task.tests:
            box.write_file(target, source.read_bytes(), 60)
        return box.exec(task.test_command, task.test_seconds, GRADE_OUTPUT_CAP, user_env=("TEST_DIR=/tests",))

    def _grade(self) -> Judgement:
        """Run the task's tests in the container; the episode's reward."""
        box, status, why = self._container()
        if box is None:
            return self._infra(status, why)
        try:
            result = self._run_tests(box)
            if self.terminal_task.format == "harbor":
                reward_file = box.exec("cat /logs/verifier/reward.txt 2>/dev/null || cat /logs/verifier/rewards.json", 30, 2000)
                reward, counts = harbor_reward(reward_file.output), {}
            else:
                reward, counts = pytest_reward(result.output, self.reward_mode == "fraction")
        except ContainerError as err:
            return self._infra(Status.SANDBOX_ERROR, str(err))
        finally:
            self._remove_container()
        status = Status.CORRECT if reward >= 1.0 else Status.TIMEOUT if result.timed_out else Status.PARTIAL if reward > 0 else Status.WRONG
        info = {**counts, "tests_exit_code": result.exit_code, "tests_output": result.output[-2000:]}
        return Judgement(reward, status, True, "", {"tests": reward}, status is Status.CORRECT, info)

    def expert_action(self) -> str | None:
        """The task's reference solution as one ``run`` command, then ``submit`` (``None``: no solution)."""
        solution = self.terminal_task.solution
        if solution is None:
            return None
        if self.turn == 0:
            return f"Running the reference steps.\n<run>bash <<'MATHGYM_SOLUTION'\n{solution}\nMATHGYM_SOLUTION</run>"
        return "<submit/>"


_RUNTIMES: dict[str | None, RuntimeProbe] = {}


def _working_runtime(name: str | None) -> RuntimeProbe:
    """:func:`find_runtime`'s answer, kept for the process once a runtime works (a probe costs a container start)."""
    if name not in _RUNTIMES or _RUNTIMES[name].runtime is None:
        _RUNTIMES[name] = find_runtime(BASE_IMAGE, name)
    return _RUNTIMES[name]


def _quote(path: str) -> str:
    import shlex  # noqa: PLC0415

    return shlex.quote(path)


def pytest_reward(output: str, partial_credit: bool) -> tuple[float, dict[str, int]]:
    """The reward of pytest's ``-rA`` summary lines in ``output`` (terminal-bench's rule: passed, skipped
    and xfail pass; failed, error and xpass fail; resolved when every test passes and there is one).

    Example:
        >>> pytest_reward("PASSED t.py::test_a\\nFAILED t.py::test_b - assert 0", partial_credit=True)
        (0.5, {'tests': 2, 'tests_passed': 1})
    """
    results: dict[str, bool] = {}
    for kind, name in _PYTEST_LINE.findall(output):
        results[name.split("::", 1)[-1]] = kind in ("PASSED", "SKIPPED", "XFAIL")
    passed = sum(results.values())
    counts = {"tests": len(results), "tests_passed": passed}
    if not results:
        return 0.0, counts
    if passed == len(results):
        return 1.0, counts
    return (passed / len(results) if partial_credit else 0.0), counts


def harbor_reward(text: str) -> float:
    """The reward a Harbor test script wrote: a number in ``reward.txt`` or ``{"reward": x}`` in
    ``rewards.json``, clipped to [0, 1]; 0.0 when there is none or it is not a number."""
    text = text.strip()[:1000]
    try:
        value = json.loads(text)
    except ValueError:
        return 0.0
    if isinstance(value, dict):
        value = value.get("reward")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return 0.0
    return min(1.0, max(0.0, float(value)))
