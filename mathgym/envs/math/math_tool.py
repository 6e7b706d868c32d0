"""MathTool-v0: tool-integrated math reasoning; the agent may run Python in the sandbox.

Each turn the agent either runs code (``<python>...</python>``, a fenced ``python``
block, or a Qwen2.5 / Hermes tool call ``<tool_call>{"name": "python", "arguments":
{"code": ...}}</tool_call>`` as chat templates render it) and sees its output as the next
observation, or gives the final answer in ``\\boxed{}``, which ends the episode. Problems, data options and the verifier are
MathReason-v0's. Tool errors (exceptions, timeouts, a tool budget spent) are observations.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mathgym.core import Judgement, Task
from mathgym.envs.ahead import SANDBOX_JOBS, sandbox_call
from mathgym.envs.coding.code_records import syntax_error
from mathgym.envs.math.math_reason import MathReasonEnv
from mathgym.envs.tools.tool_calls import PYTHON_TOOL, find_tool_calls
from mathgym.errors import ConfigError
from mathgym.rewards.base import Status
from mathgym.rewards.code import PYTHON_FENCES
from mathgym.rewards.extract import delimited, extract_answer, fenced_blocks
from mathgym.rewards.math import MathVerifier
from mathgym.spaces import DEFAULT_MAX_LENGTH

DEFAULT_SYSTEM_PROMPT = (
    "Solve the problem. You may run Python: write code inside <python></python> (or a ```python block) "
    "and you will see what it prints. Put the final answer in \\boxed{}."
)
TOOL_INSTRUCTION = "You may run Python in <python></python> and read its output. Give the final answer in \\boxed{}."
OUTPUT_CAP = 2000


def tool_job(code: str, cpu_seconds: float, wall_seconds: float) -> tuple[str, tuple[Any, ...], tuple[tuple[str, Any], ...]]:
    """The sandbox job of one tool run, as a request of :data:`~mathgym.envs.ahead.SANDBOX_JOBS`
    (a vector-env step runs its envs' jobs side by side, with any other env's sandbox jobs)."""
    from mathgym.rewards.sandbox import SandboxLimits  # noqa: PLC0415 - the sandbox module loads on first use

    return ("run", (code,), (("limits", SandboxLimits(cpu_seconds=cpu_seconds, wall_seconds=wall_seconds)),))


def _code_blocks(action: str) -> list[tuple[int, int, str | None, str]]:
    """``(start, end, code, error)`` of every code block: house tags, Python fences and tool
    calls; linear in ``len(action)``."""
    blocks: list[tuple[int, int, str | None, str]] = [
        (start, end, action[body:body_end], "") for start, body, body_end, end in delimited(action, "<python>", "</python>")
    ]
    blocks += [(b.start, b.end, b.body, "") for b in fenced_blocks(action)[0] if b.language in PYTHON_FENCES]
    for call in find_tool_calls(action):
        code, error = call.arguments.get("code"), call.error
        if not error and call.name != PYTHON_TOOL["function"]["name"]:
            error = f"unknown tool {call.name[:40]!r}; the only tool is 'python'"
        elif not error and not isinstance(code, str):
            error = 'the python tool takes {"code": "..."}'
        blocks.append((call.start, call.end, None if error else code, error))
    return sorted(blocks, key=lambda b: (b[0], b[1]))


def parse_tool_call(action: str) -> tuple[str | None, str, str]:
    """``(code, prose, error)``: the code of the last tool call in ``action`` (``None`` when
    there is none or it is malformed), the text outside the calls, and what was wrong with a
    malformed last call (``""`` otherwise).

    Example:
        >>> parse_tool_call('Let me see.<tool_call>{"name": "python", "arguments": {"code": "print(1)"}}</tool_call>')
        ('print(1)', 'Let me see.', '')
    """
    blocks = _code_blocks(action)
    if not blocks:
        return None, action, ""
    prose, last = [], 0
    for start, end, _, _ in blocks:
        if start >= last:
            prose.append(action[last:start])
            last = end
    prose.append(action[last:])
    return blocks[-1][2], "".join(prose), blocks[-1][3]


def split_tool_call(action: str) -> tuple[str | None, str]:
    """The code of the last tool call in ``action`` (or ``None``) and the text outside code.

    Example:
        >>> split_tool_call("Let me compute.<python>print(6*7)</python>")
        ('print(6*7)', 'Let me compute.')
    """
    code, prose, _ = parse_tool_call(action)
    return code, prose


class MathToolEnv(MathReasonEnv):
    """Solve a math problem, optionally running Python between turns; ``\\boxed{}`` ends it.

    Reward 1 for a correct final answer, else 0. Terminated at a final answer; truncated
    after ``max_turns`` turns without one (status ``unparseable``). A turn with neither
    code nor a final answer, or code past ``max_tool_calls``, is a ``format_error``
    observation.

    Args:
        difficulty: Generator level, 0 to 4.
        dataset: A JSONL path or ``hf:NAME[:SUBSET]``; ``None`` uses the generator.
        split: ``"train"`` or ``"test"``.
        columns: Column mapping for other data formats.
        max_turns: Turns allowed (tool calls and the answer).
        max_tool_calls: Code runs allowed per episode.
        tool_wall_seconds: Wall-clock limit of one code run.
        tool_cpu_seconds: CPU-time limit of one code run.
        system_prompt: System message; ``""`` for none.
        max_length: Longest observation/action in characters.
        verifier: The answer checker.
        render_mode: ``None`` or ``"ansi"``.
    """

    def __init__(
        self,
        difficulty: int = 0,
        dataset: str | Path | None = None,
        split: str = "train",
        columns: Mapping[str, str] | None = None,
        max_turns: int = 6,
        max_tool_calls: int = 4,
        tool_wall_seconds: float = 10.0,
        tool_cpu_seconds: float = 5.0,
        system_prompt: str | None = DEFAULT_SYSTEM_PROMPT,
        max_length: int = DEFAULT_MAX_LENGTH,
        verifier: MathVerifier | None = None,
        render_mode: str | None = None,
    ):
        super().__init__(difficulty, dataset, split, columns, system_prompt, max_length, verifier, render_mode)
        if not isinstance(max_turns, int) or max_turns < 1:
            raise ConfigError(f"max_turns={max_turns!r} must be a positive integer.")
        if not isinstance(max_tool_calls, int) or max_tool_calls < 0:
            raise ConfigError(f"max_tool_calls={max_tool_calls!r} must be a non-negative integer.")
        if not (tool_wall_seconds > 0 and tool_cpu_seconds > 0):
            raise ConfigError("tool_wall_seconds and tool_cpu_seconds must be positive.")
        self.max_turns, self.max_tool_calls = max_turns, max_tool_calls
        self.tool_wall_seconds, self.tool_cpu_seconds = float(tool_wall_seconds), float(tool_cpu_seconds)
        self._tool_calls = 0

    def _prompt(self, question: str) -> str:  # type: ignore[override]
        return f"{question}\n{TOOL_INSTRUCTION}"

    def _sample_task(self, options: Mapping[str, Any]) -> Task:
        self._tool_calls = 0
        return super()._sample_task(options)

    def _requests_ahead(self, action: str) -> list[tuple[Any, Any]]:
        """The tool run this action asks for, if it will run: a vector env's step runs its envs'
        code side by side (:mod:`mathgym.envs.ahead`)."""
        code, prose, _ = parse_tool_call(action)
        if code is None or self._tool_calls >= self.max_tool_calls or extract_answer(prose, self.verifier.formats) is not None:
            return []
        if syntax_error(code) is not None:
            return []
        return [(SANDBOX_JOBS, tool_job(code, self.tool_cpu_seconds, self.tool_wall_seconds))]

    def _judge(self, action: str) -> Judgement:
        code, prose, call_error = parse_tool_call(action)
        info: dict[str, Any] = {"tool_calls": self._tool_calls}
        if extract_answer(prose, self.verifier.formats) is not None:
            result = self.verifier.score(prose, self.task.answer)
            info["extracted_answer"] = result.details.get("extracted")
            return Judgement(result.score, result.status, True, "", {"correctness": result.score}, result.score >= 1.0, info)
        left = self.max_turns - self.turn
        if code is None and call_error:
            text = f"Tool call not run: {call_error}. ({left} turns left)"
            return Judgement(0.0, Status.FORMAT_ERROR, False, text, {"correctness": 0.0}, info=info)
        if code is None:
            text = f"No code and no final answer. Run Python in <python></python>, or give the final answer in \\boxed{{}}. ({left} turns left)"
            return Judgement(0.0, Status.FORMAT_ERROR, False, text, {"correctness": 0.0}, info=info)
        if self._tool_calls >= self.max_tool_calls:
            text = f"The tool budget ({self.max_tool_calls} runs) is spent. Give the final answer in \\boxed{{}}. ({left} turns left)"
            return Judgement(0.0, Status.FORMAT_ERROR, False, text, {"correctness": 0.0}, info=info)
        self._tool_calls += 1
        output, status = self._run(code)
        info.update(tool_calls=self._tool_calls, tool_status=str(status))
        text = f"<output>\n{output}\n</output>\n({left} turns left, {self.max_tool_calls - self._tool_calls} code runs left)"
        turn_status = Status.SANDBOX_ERROR if status is Status.SANDBOX_ERROR else Status.IN_PROGRESS
        return Judgement(0.0, turn_status, False, text, {"correctness": 0.0}, info=info)

    def _run(self, code: str) -> tuple[str, Status]:
        """Run ``code`` in the sandbox; its output (stdout, then the end of stderr on failure) and status."""
        error = syntax_error(code)
        if error is not None:
            return error, Status.WRONG
        request = tool_job(code, self.tool_cpu_seconds, self.tool_wall_seconds)
        result = self._scored(SANDBOX_JOBS, request, lambda: sandbox_call(*request))
        if result.status is Status.SANDBOX_ERROR:
            return "The Python tool is unavailable right now (infrastructure error, not your fault).", result.status
        output = result.stdout[-OUTPUT_CAP:]
        if result.status is Status.TIMEOUT:
            output += f"\nTimed out (limit: {result.details.get('limit') or 'time'})."
        elif result.status is not Status.CORRECT:
            output += "\n" + result.stderr.strip()[-OUTPUT_CAP // 2 :]
        return output.strip() or "(no output; use print() to see values)", result.status

    def _final_judgement(self, last: Judgement) -> Judgement:
        info = {**last.info, "feedback": f"no final answer within {self.max_turns} turns"}
        status = last.status if last.status is Status.SANDBOX_ERROR else Status.UNPARSEABLE
        return Judgement(0.0, status, False, "", {"correctness": 0.0}, False, info)

    def expert_action(self) -> str | None:
        """The worked solution (generator tasks), which answers without the tool."""
        return self.task.metadata.get("solution") if self._records is None else None
