"""RepoRepair-v0: fix a bug in a small generated Python project, working through commands.

Each episode is a project of :mod:`mathgym.envs.repo.repo_repair_tasks` (a package of 2-4
modules, a visible test suite, one or two injected bugs). The agent sends one command per
turn, in the house format or as a Hermes / Qwen tool call::

    <run>ls -R</run>                      {"name": "run", "arguments": {"command": "ls -R"}}
    <read>textkit/words.py</read>         {"name": "read", "arguments": {"path": "..."}}
    <write path="a.py">text</write>       {"name": "write", "arguments": {"path": "...", "content": "..."}}
    <patch>unified diff</patch>           {"name": "patch", "arguments": {"diff": "..."}}
    <test/>                               {"name": "test", "arguments": {}}
    <submit/>                             {"name": "submit", "arguments": {}}

(a tool call is written ``<tool_call>{...}</tool_call>``). The workspace lives here, as
text (path -> contents, bounded). ``run`` and ``test`` execute in mathgym's code sandbox
(allow-list filesystem view, limits, no network): the workspace is written into the
job's scratch dir, the command runs there under a trusted harness, and the files it
leaves come back as the new workspace. ``read``, ``write`` and ``patch`` are plain text
operations here. At ``submit``, or when the turn budget runs out, HIDDEN tests grade the
final workspace (outputs compared outside the sandbox, as in CodeSandbox-v0; the hidden tests
never enter the workspace) as SWE-bench grades a fix: the tests the bugs break
(fail-to-pass) must pass and the others (pass-to-pass) must keep passing. Most hidden tests
are pass-to-pass, so the share of all of them passed would pay most of the reward for
submitting the repository untouched; here that earns 0 (:func:`repair_verdict`).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from mathgym.core import Judgement, Task, TextEnv
from mathgym.envs.ahead import SANDBOX_JOBS, sandbox_call
from mathgym.envs.repo.repo_repair_tasks import LEVELS, RepoTask, build_task
from mathgym.envs.tools.tool_calls import find_tool_calls
from mathgym.envs.repo.unified_diff import PatchError, apply_unified_diff
from mathgym.errors import ConfigError, require_option
from mathgym.rewards.base import Status
from mathgym.rewards.extract import delimited
from mathgym.spaces import DEFAULT_MAX_LENGTH

if TYPE_CHECKING:
    from mathgym.rewards.sandbox import ExecutionResult

RewardMode = Literal["fraction", "all_pass"]
COMMANDS = ("run", "read", "write", "patch", "test", "submit")
#: Bounds of the workspace: files, characters in all, characters of a path.
MAX_FILES, MAX_CHARS, MAX_PATH = 64, 200_000, 200
_HARNESS = Path(__file__).with_name("_repo_harness.py")
_RUNNER = Path(__file__).with_name("_repo_runner.py")
RUNNER_NAME = "runner.py"

DEFAULT_SYSTEM_PROMPT = (
    "You are a software engineer fixing a bug in a Python repository. Work one command per turn:\n"
    "<run>shell command</run> runs it in the repository (e.g. ls, cat, python);\n"
    "<read>path</read> shows a file; <write path=\"path\">full new contents</write> replaces a file;\n"
    "<patch>unified diff</patch> applies a diff; <test/> runs the test suite; <submit/> ends the episode.\n"
    'Tool calls also work: <tool_call>{"name": "test", "arguments": {}}</tool_call> '
    "(tools: run{command}, read{path}, write{path, content}, patch{diff}, test{}, submit{}).\n"
    "Fix the code, not the tests: hidden tests decide the grade."
)


def parse_command(action: str) -> tuple[str, dict[str, str], str, int]:
    """``(name, arguments, error, count)``: the first command of ``action`` (``name`` is
    ``""`` when there is none or it is malformed), what was wrong with it, and how many
    commands the action holds. Linear in ``len(action)``.

    Example:
        >>> parse_command("Let me look. <read>pkg/mod.py</read>")
        ('read', {'path': 'pkg/mod.py'}, '', 1)
    """
    found: list[tuple[int, str, dict[str, str], str]] = []
    for name, key in (("run", "command"), ("read", "path"), ("patch", "diff")):
        found += [(start, name, {key: action[body:end]}, "") for start, body, end, _ in delimited(action, f"<{name}>", f"</{name}>")]
    for start, body, end, _ in delimited(action, '<write path="', "</write>"):
        path, quote, content = action[body:end].partition('">')
        found.append((start, "write", {"path": path, "content": content.removeprefix("\n")}, "" if quote else 'write as <write path="PATH">CONTENTS</write>'))
    for name in ("test", "submit"):
        for tag in (f"<{name}/>", f"<{name} />", f"<{name}></{name}>"):
            at = action.find(tag)
            if at >= 0:
                found.append((at, name, {}, ""))
    for call in find_tool_calls(action):
        error = call.error or ("" if call.name in COMMANDS else f"unknown tool {call.name[:40]!r}; the tools are {', '.join(COMMANDS)}")
        arguments = {k: v for k, v in call.arguments.items() if isinstance(v, str)}
        found.append((call.start, call.name if not error else "", arguments, error))
    if not found:
        return "", {}, "", 0
    start, name, arguments, error = min(found, key=lambda item: item[0])
    return name, arguments, error, len(found)


def _path_error(path: str) -> str:
    """Why ``path`` is not a workspace path ("" when it is)."""
    parts = path.split("/")
    if not path or len(path) > MAX_PATH or path.startswith("/") or any(p in ("", ".", "..") for p in parts) or any(ord(c) < 32 for c in path):
        return f"{path[:80]!r} is not a relative path inside the repository (no '..', at most {MAX_PATH} characters)"
    return ""


def _clean(text: str) -> str:
    """``text`` as valid UTF-8 (a lone surrogate, which no file can hold, becomes '?')."""
    return text.encode("utf-8", "replace").decode("utf-8")


class RepoRepairEnv(TextEnv):
    """Repair a generated Python project with shell, file and test commands; graded by hidden tests.

    Reward 0 on every turn but the last; at ``submit`` (terminated) or when ``max_turns``
    runs out (truncated) the final workspace runs against the hidden tests (:func:`repair_verdict`):
    1 when every test the bugs break passes and every other one still does; else, with
    ``reward_mode="fraction"``, the share of the broken tests fixed, as long as no other test
    fails (``"all_pass"``: 0). The repository as given earns 0. Statuses of a
    command turn: ``in_progress``, ``format_error`` (no command, a malformed one, a path
    outside the repository, a patch that does not apply, a workspace over its limits) and
    ``sandbox_error`` (the sandbox could not run the command: not the agent's fault).

    Args:
        level: 0 (2 modules of 2 functions, an obvious bug), 1 (3 x 3, any bug), 2 (4 x 3,
            two subtle bugs).
        max_turns: Commands allowed, ``submit`` included.
        reward_mode: ``"fraction"`` (partial credit: the share of fail-to-pass tests fixed) or
            ``"all_pass"``.
        output_cap: Most characters of a command's output shown in an observation.
        command_seconds: Wall-clock limit of one ``run`` or ``test`` command.
        system_prompt: System message; ``""`` for none.
        max_length: Longest observation/action in characters.
        render_mode: ``None`` or ``"ansi"``.
    """

    def __init__(
        self,
        level: int = 0,
        max_turns: int = 16,
        reward_mode: RewardMode = "fraction",
        output_cap: int = 4000,
        command_seconds: float = 10.0,
        system_prompt: str | None = DEFAULT_SYSTEM_PROMPT,
        max_length: int = DEFAULT_MAX_LENGTH,
        render_mode: str | None = None,
    ):
        super().__init__(max_turns=max_turns, max_length=max_length, system_prompt=system_prompt, render_mode=render_mode)
        require_option("level", level, tuple(LEVELS))
        require_option("reward_mode", reward_mode, ("fraction", "all_pass"))
        if not isinstance(output_cap, int) or output_cap < 200:
            raise ConfigError(f"output_cap={output_cap!r} must be an integer of at least 200.")
        if not command_seconds > 0:
            raise ConfigError(f"command_seconds={command_seconds!r} must be positive.")
        self.level, self.reward_mode = level, reward_mode
        self.output_cap, self.command_seconds = output_cap, float(command_seconds)
        self.workspace: dict[str, str] = {}
        self._tested = False

    @classmethod
    def catalogue_listing(cls) -> str:
        """The packages and levels, for ``mathgym envs``."""
        from mathgym.envs.repo.repo_repair_library import PACKAGES  # noqa: PLC0415

        return f"packages: {', '.join(sorted(PACKAGES))}; levels 0-2 (level=N): " + "; ".join(
            f"{n}: {m} modules x {f} functions, {b} bug{'s' if b > 1 else ''}" for n, (m, f, b, _) in LEVELS.items()
        )

    # -- the task ----------------------------------------------------------------------

    @property
    def repo_task(self) -> RepoTask:
        """The current project (its reference and hidden tests included: trusted side only)."""
        return self.task.metadata["repo"]

    def _sample_task(self, options: Mapping[str, Any]) -> Task:
        repo = build_task(self.np_random, self.level)
        self.workspace = dict(repo.files)
        self._tested = False
        answer = "; ".join(f"{b.path}: {b.function} ({b.kind}: {b.description})" for b in repo.bugs)
        return Task(repo.task_id, self._prompt(repo), answer, {"repo": repo})

    def _prompt(self, repo: RepoTask) -> str:
        tree = "\n".join(f"  {path}" for path in sorted(repo.files))
        return (
            f"The repository below has failing tests: {len(repo.bugs)} bug{'s' if len(repo.bugs) > 1 else ''} in the package "
            f"`{repo.package}`. Find and fix {'them' if len(repo.bugs) > 1 else 'it'}, then submit.\n\n"
            f"Files:\n{tree}\n\n{repo.files['README.md']}\nYou have {self.max_turns} commands, submit included."
        )

    # -- one turn ------------------------------------------------------------------------

    def _judge(self, action: str) -> Judgement:
        name, arguments, error, count = parse_command(action)
        left = self.max_turns - self.turn
        if not name:
            hint = error or "no command found; use one of <run>, <read>, <write path=...>, <patch>, <test/>, <submit/> (or a tool call)"
            return self._turn_result(f"Command not run: {hint}. ({left} turns left)", Status.FORMAT_ERROR, name)
        if name == "submit":
            return self._grade()
        handler = {"run": self._run, "test": self._test, "read": self._read, "write": self._write, "patch": self._patch}[name]
        text, status = handler(arguments)
        extra = f"\n(only the first of {count} commands was run)" if count > 1 else ""
        return self._turn_result(f"{text}{extra}\n({left} turns left)", status, name)

    def _requests_ahead(self, action: str) -> list[tuple[Any, Any]]:
        """The sandbox job this command will run (``run``, ``test``, ``submit``): a vector env's
        step runs its envs' jobs side by side (:mod:`mathgym.envs.ahead`)."""
        name, arguments, _, _ = parse_command(action)
        if name == "submit":
            return [(SANDBOX_JOBS, self._grading_job())]
        if name == "test" or (name == "run" and arguments.get("command", "").strip()):
            job = {"test": True, "runner": RUNNER_NAME} if name == "test" else {"command": arguments["command"]}
            return [(SANDBOX_JOBS, self._command_job(job))]
        return []

    def _sandbox(self, request: tuple[str, tuple[Any, ...], tuple[tuple[str, Any], ...]]) -> Any:
        """A sandbox job's result: run ahead with the step's others, else now."""
        return self._scored(SANDBOX_JOBS, request, lambda: sandbox_call(*request))

    def _turn_result(self, text: str, status: Status, command: str) -> Judgement:
        breakdown = {"hidden_tests": 0.0}
        return Judgement(0.0, status, False, text, breakdown, info={"command": command, "files": len(self.workspace)})

    def _final_judgement(self, last: Judgement) -> Judgement:
        return self._grade()

    def _read(self, arguments: Mapping[str, str]) -> tuple[str, Status]:
        path = arguments.get("path", "").strip()
        if path not in self.workspace:
            near = difflib.get_close_matches(path[:MAX_PATH], list(self.workspace), n=3)
            return f"No file {path[:80]!r} in the repository." + (f" Did you mean: {', '.join(near)}?" if near else ""), Status.FORMAT_ERROR
        return self._capped(self.workspace[path]), Status.IN_PROGRESS

    def _write(self, arguments: Mapping[str, str]) -> tuple[str, Status]:
        path, content = arguments.get("path", "").strip(), arguments.get("content")
        if content is None:
            return 'write needs a "path" and a "content"', Status.FORMAT_ERROR
        error = _path_error(path)
        if error:
            return f"Not written: {error}.", Status.FORMAT_ERROR
        return self._replace({**self.workspace, path: _clean(content)}, f"Wrote {path} ({len(content)} characters).")

    def _patch(self, arguments: Mapping[str, str]) -> tuple[str, Status]:
        try:
            patched = apply_unified_diff(self.workspace, arguments.get("diff", ""))
        except PatchError as err:
            return f"Patch not applied: {str(err)[: self.output_cap]}", Status.FORMAT_ERROR
        changed = sorted(p for p in set(patched) | set(self.workspace) if patched.get(p) != self.workspace.get(p))
        bad = next((e for e in map(_path_error, changed) if e), "")
        if bad:
            return f"Patch not applied: {bad}.", Status.FORMAT_ERROR
        return self._replace({p: _clean(t) for p, t in patched.items()}, f"Patch applied: {', '.join(changed) or 'no change'}.")

    def _replace(self, files: dict[str, str], message: str) -> tuple[str, Status]:
        if len(files) > MAX_FILES or sum(map(len, files.values())) > MAX_CHARS:
            return f"Not done: the repository may hold at most {MAX_FILES} files and {MAX_CHARS} characters.", Status.FORMAT_ERROR
        self.workspace = files
        self._tested = False
        return message, Status.IN_PROGRESS

    def _test(self, arguments: Mapping[str, str]) -> tuple[str, Status]:
        return self._execute({"test": True, "runner": RUNNER_NAME})

    def _run(self, arguments: Mapping[str, str]) -> tuple[str, Status]:
        command = arguments.get("command", "")
        if not command.strip():
            return "Empty command.", Status.FORMAT_ERROR
        return self._execute({"command": command})

    def _command_job(self, job: dict[str, Any]) -> tuple[str, tuple[Any, ...], tuple[tuple[str, Any], ...]]:
        """The sandbox job of a ``run`` or ``test`` command on a copy of the workspace."""
        from mathgym.rewards.sandbox import SandboxLimits  # noqa: PLC0415

        job = {**job, "timeout": self.command_seconds, "output_cap": self.output_cap, "max_files": MAX_FILES, "max_chars": MAX_CHARS}
        program = f"import json\nJOB = json.loads({json.dumps(job)!r})\n" + _HARNESS.read_text()
        files = {f"repo/{p}": t for p, t in self.workspace.items()}
        files[RUNNER_NAME] = _RUNNER.read_text()
        limits = SandboxLimits(cpu_seconds=self.command_seconds, wall_seconds=self.command_seconds + 5.0, max_output_bytes=8192)
        return "run_with_lines", (program,), (("limits", limits), ("files", files))

    def _execute(self, job: dict[str, Any]) -> tuple[str, Status]:
        """Run a command in the sandbox on a copy of the workspace; take back the files it left."""
        result, lines = self._sandbox(self._command_job(job))
        report = _report(lines)
        if result.status is Status.SANDBOX_ERROR:
            return "The sandbox could not run the command (not your fault); the repository is unchanged.", Status.SANDBOX_ERROR
        if report is None:  # the harness started, then the command or a limit stopped it before it reported
            why = f"the {result.details.get('limit') or 'time'} limit" if result.status is Status.TIMEOUT else "the command ended the harness"
            return f"The command was stopped ({why}); the repository is unchanged.", Status.IN_PROGRESS
        self.workspace = {p: t for p, t in report["files"].items()}
        if job.get("test"):
            self._tested = True
        # The harness cut the output to output_cap already (head and tail, with a note between).
        lines_out = [self._capped(report["output"], self.output_cap + 100).rstrip() or "(no output)"]
        if report["timed_out"]:
            lines_out.append(f"[stopped after {self.command_seconds:g} s]")
        else:
            lines_out.append(f"[exit code {report['exit_code']}]")
        for path, reason in report["skipped"]:
            lines_out.append(f"[not kept in the repository: {path[:MAX_PATH]}: {reason}]")
        return "\n".join(lines_out), Status.IN_PROGRESS

    def _capped(self, text: str, cap: int | None = None) -> str:
        cap = cap or self.output_cap
        if len(text) <= cap:
            return text
        half = cap // 2
        return f"{text[:half]}\n[... {len(text) - 2 * half} characters cut ...]\n{text[-half:]}"

    # -- the grade -----------------------------------------------------------------------

    def _grading_job(self) -> tuple[str, tuple[Any, ...], tuple[tuple[str, Any], ...]]:
        """The sandbox job of the hidden tests on the workspace."""
        from mathgym.rewards.sandbox import SandboxLimits, TestCase  # noqa: PLC0415

        repo = self.repo_task
        cases = [TestCase(name, "assert", source) for name, source in repo.hidden_tests]
        files = {f"repo/{p}": t for p, t in self.workspace.items()}
        return "run_tests", (repo.imports, cases), (("limits", SandboxLimits(cpu_seconds=5.0, wall_seconds=10.0)), ("files", files))

    def _grade(self) -> Judgement:
        """Run the hidden tests on the workspace; the episode's reward."""
        result = self._sandbox(self._grading_job())
        repo = self.repo_task
        reward, status, counts = repair_verdict(result, [n for n, _ in repo.hidden_tests], repo.fail_to_pass, self.reward_mode == "fraction")
        info = {"passed": result.passed, "total": result.total, **counts, "verdict": result.details.get("verdict"), "files": len(self.workspace)}
        return Judgement(reward, status, True, "", {"hidden_tests": reward}, status is Status.CORRECT, info)

    def expert_action(self) -> str:
        """Run the tests, patch the buggy modules back to the reference, test again, submit."""
        if not self._tested:
            return "<test/>"
        reference, current = self.repo_task.reference, self.workspace
        diff = "".join(
            "\n".join(difflib.unified_diff(current.get(p, "").splitlines(), reference[p].splitlines(), f"a/{p}" if p in current else "/dev/null", f"b/{p}", lineterm="")) + "\n"
            for p in sorted(reference)
            if p not in current or current[p].splitlines() != reference[p].splitlines()
        )
        return f"The failing tests point at the bug; restoring the intended behaviour.\n<patch>\n{diff}</patch>" if diff else "<submit/>"


def repair_verdict(
    result: ExecutionResult, tests: Sequence[str], fail_to_pass: Collection[str], partial_credit: bool
) -> tuple[float, Status, dict[str, int]]:
    """The grade of a hidden-test run, as SWE-bench grades a fix; ``(reward, status, counts)``.

    Resolved (1.0, ``correct``) when every fail-to-pass test (one the bugs break) passes and
    every pass-to-pass test (the rest of ``tests``) still does. Otherwise 0.0, ``wrong`` (or
    ``timeout``); with ``partial_credit``, the share of fail-to-pass tests passed, ``partial``,
    when no pass-to-pass test fails. A test the run does not report counts as failed.
    ``sandbox_error`` and ``unverifiable`` score 0 and stay infrastructure statuses.

    Example:
        >>> from mathgym.rewards.sandbox import ExecutionResult, TestOutcome
        >>> run = ExecutionResult(Status.WRONG, "", "", 0, 0.1, (TestOutcome("f_0", False, Status.WRONG), TestOutcome("g_0", True, Status.CORRECT)))
        >>> repair_verdict(run, ["f_0", "g_0"], {"f_0"}, partial_credit=True)[:2]  # the repository as given
        (0.0, <Status.WRONG: 'wrong'>)
    """
    passed = {test.name for test in result.tests if test.passed}
    broken = set(fail_to_pass)
    counts = {
        "fail_to_pass": len(broken), "fail_to_pass_passed": len(broken & passed),
        "pass_to_pass": sum(name not in broken for name in tests),
        "pass_to_pass_passed": sum(name not in broken and name in passed for name in tests),
    }
    if result.status in (Status.SANDBOX_ERROR, Status.UNVERIFIABLE):
        return 0.0, result.status, counts
    others_pass = counts["pass_to_pass_passed"] == counts["pass_to_pass"]
    if others_pass and counts["fail_to_pass_passed"] == len(broken):
        return 1.0, Status.CORRECT, counts
    fixed = counts["fail_to_pass_passed"] / len(broken) if broken else 0.0
    reward = fixed if partial_credit and others_pass else 0.0
    if result.status is Status.TIMEOUT:
        return reward, Status.TIMEOUT, counts
    return reward, (Status.PARTIAL if reward > 0 else Status.WRONG), counts


def _report(lines: list[str]) -> dict[str, Any] | None:
    """The harness's report line, checked for shape (the line comes from the sandboxed process)."""
    for line in lines:
        try:
            report = json.loads(line)
        except ValueError:
            continue
        files = report.get("files") if isinstance(report, dict) else None
        if not (isinstance(files, dict) and all(isinstance(k, str) and isinstance(v, str) and not _path_error(k) for k, v in files.items())):
            continue
        if len(files) > MAX_FILES or sum(map(len, files.values())) > MAX_CHARS or not isinstance(report.get("output"), str):
            continue
        skipped = report.get("skipped")
        report["skipped"] = [s for s in skipped if isinstance(s, list) and len(s) == 2 and all(isinstance(x, str) for x in s)][:20] if isinstance(skipped, list) else []
        return report
    return None
