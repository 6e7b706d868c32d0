"""MCPTools-v0: math problems solved with tools from any MCP server.

The tasks and the verifier are MathReason-v0's (the generator, or a data set); the tools are
whatever an MCP server lists (``server=``: a command line started over stdio, or an ``http(s)://``
URL of a streamable-HTTP server), optionally cut to an allow-list (``tools=``). Their schemas go
to ``info["tools"]`` at reset, in the OpenAI function form a chat template takes as ``tools=``.

Each turn the agent calls tools, in any format :func:`~mathgym.envs.tools.tool_calls.find_tool_calls`
reads (Hermes / Qwen ``<tool_call>`` JSON, Qwen3-Coder XML, Mistral, gpt-oss, Llama 3), and reads
their results in the next observation (one ``<tool_response>`` block per call, as Qwen's template
renders a tool message), or gives the final answer in ``\\boxed{}``, which ends the episode. A
reasoning model's calls are read after its thinking.

Whose failure is whose:

* a tool that fails (its result has ``isError``, the server refuses the arguments), a call that
  does not parse, an unknown tool or a spent budget: the model's; it reads why and goes on;
* a call that runs past ``call_timeout_s`` while the server still answers: the model's (its
  arguments asked for the long run);
* a server that is gone (its process died, the connection closed): ``status="error"``, an
  infrastructure failure that ends the episode and leaves the sample out of training.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mathgym.core import Judgement, Task, fit_observation
from mathgym.envs.math.math_reason import MathReasonEnv
from mathgym.envs.tools.mcp_client import MCPConnection, ToolReply, acquire, openai_tool, release
from mathgym.envs.tools.tool_calls import ToolCall, find_tool_calls
from mathgym.errors import ConfigError, ToolServerError
from mathgym.rewards.base import Status
from mathgym.rewards.extract import answer_after_thinking, extract_answer
from mathgym.rewards.math import MathVerifier
from mathgym.spaces import DEFAULT_MAX_LENGTH
from mathgym.untrusted import clean_text

DEFAULT_SYSTEM_PROMPT = (
    "Solve the problem. You may call the tools you are given; each call's result comes back to you. "
    "Put the final answer in \\boxed{}."
)
#: Longest tool name quoted back to the model.
NAME_CHARS = 40


def _prose(reply: str, calls: Sequence[ToolCall]) -> str:
    """The text of ``reply`` outside its tool calls."""
    parts, last = [], 0
    for call in sorted(calls, key=lambda c: c.start):
        if call.start >= last:
            parts.append(reply[last:call.start])
            last = call.end
    parts.append(reply[last:])
    return "".join(parts)


class MCPToolsEnv(MathReasonEnv):
    """Solve a math problem with tools from an MCP server; ``\\boxed{}`` ends it.

    Reward 1 for a correct final answer, else 0. Terminated at a final answer (or when the server
    is gone: ``status="error"``); truncated after ``max_turns`` turns without one (status
    ``unparseable``). A turn whose calls all fail to run (malformed, unknown tool, budget spent)
    is a ``format_error`` observation; a turn that ran a tool is ``in_progress``, whatever the
    tool answered.

    Args:
        server: The MCP server: a command line (string or list) that serves MCP over stdio, or
            an ``http(s)://`` URL of a streamable-HTTP server.
        tools: The names of the server's tools the agent gets (``None``: every tool it lists).
        difficulty: Generator level, 0 to 4.
        dataset: A JSONL path or ``hf:NAME[:SUBSET]``; ``None`` uses the generator.
        split: ``"train"`` or ``"test"``.
        columns: Column mapping for other data formats.
        max_turns: Turns allowed (tool calls and the answer).
        max_tool_calls: Tool calls allowed per episode.
        call_timeout_s: Most seconds one tool call may take.
        connect_timeout_s: Most seconds to start or reach the server.
        result_chars: Longest result of one call shown to the agent (its start and end kept).
        server_env: Environment variables for a server started from a command line.
        system_prompt: System message; ``""`` for none.
        max_length: Longest observation/action in characters.
        verifier: The answer checker.
        render_mode: ``None`` or ``"ansi"``.

    Raises:
        ToolServerError: At reset, when the server cannot be started or reached.

    Example:
        >>> import gymnasium as gym, mathgym
        >>> env = gym.make("MCPTools-v0", server="python -m mathgym.mcp_server --tools run_python")  # doctest: +SKIP
    """

    reward_only_options = frozenset({"verifier"})

    def __init__(
        self,
        server: str | Sequence[str] | None = None,
        tools: Sequence[str] | None = None,
        difficulty: int = 0,
        dataset: str | Path | None = None,
        split: str = "train",
        columns: Mapping[str, str] | None = None,
        max_turns: int = 6,
        max_tool_calls: int = 8,
        call_timeout_s: float = 30.0,
        connect_timeout_s: float = 30.0,
        result_chars: int = 4000,
        server_env: Mapping[str, str] | None = None,
        system_prompt: str | None = DEFAULT_SYSTEM_PROMPT,
        max_length: int = DEFAULT_MAX_LENGTH,
        verifier: MathVerifier | None = None,
        render_mode: str | None = None,
    ):
        super().__init__(difficulty=difficulty, dataset=dataset, split=split, columns=columns, system_prompt=system_prompt,
                         max_length=max_length, verifier=verifier, render_mode=render_mode)
        if server is None or (isinstance(server, str) and not server.strip()) or (not isinstance(server, str) and not list(server)):
            raise ConfigError("MCPTools-v0 needs server=: a command line that serves MCP over stdio, or an http(s):// URL.")
        _check_counts(max_turns=max_turns, max_tool_calls=max_tool_calls, result_chars=result_chars)
        if not (call_timeout_s > 0 and connect_timeout_s > 0):
            raise ConfigError(f"call_timeout_s={call_timeout_s!r} and connect_timeout_s={connect_timeout_s!r} must be positive.")
        self.server = server if isinstance(server, str) else [str(part) for part in server]
        self.allowed = None if tools is None else [str(name) for name in tools]
        self.max_turns, self.max_tool_calls, self.result_chars = max_turns, max_tool_calls, result_chars
        self.call_timeout_s, self.connect_timeout_s = float(call_timeout_s), float(connect_timeout_s)
        self.server_env = dict(server_env or {})
        self._connection: MCPConnection | None = None
        self._tools: list[dict[str, Any]] = []  # the schemas of the episode's tools
        self._tool_calls = 0

    # -- the server ---------------------------------------------------------------

    def _connect(self) -> MCPConnection:
        """The session this env calls through, (re)opened when there is none in this process."""
        conn = self._connection
        if conn is not None and (conn.broken or not conn.alive):
            self._drop_connection()
            conn = None
        if conn is None:
            conn = acquire(self.server, env=self.server_env, connect_timeout_s=self.connect_timeout_s, call_timeout_s=self.call_timeout_s)
            self._connection = conn
        return conn

    def _drop_connection(self) -> None:
        conn, self._connection = self._connection, None
        if conn is not None:
            release(conn)

    def _list_tools(self) -> list[dict[str, Any]]:
        """The schemas of the tools the agent gets, in the server's order."""
        listed = [openai_tool(tool) for tool in self._connect().list_tools()]
        if self.allowed is None:
            return listed
        names = [schema["function"]["name"] for schema in listed]
        missing = [name for name in self.allowed if name not in names]
        if missing:
            raise ConfigError(f"tools={self.allowed!r}: the server does not list {missing!r}; it lists {names!r}.")
        return [schema for schema in listed if schema["function"]["name"] in self.allowed]

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_connection"] = None  # a session belongs to its process: a copy opens its own on first use
        return state

    def close(self) -> None:
        self._drop_connection()
        super().close()

    # -- the episode --------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        try:  # before the task: the prompt names the tools
            self._tools = self._list_tools()
        except ToolServerError:  # a server that died between episodes: a new session, once
            self._drop_connection()
            self._tools = self._list_tools()
        obs, info = super().reset(seed=seed, options=options)
        info["tools"] = copy.deepcopy(self._tools)
        return obs, info

    def _sample_task(self, options: Mapping[str, Any]) -> Task:
        self._tool_calls = 0
        return super()._sample_task(options)

    def _prompt(self, question: str) -> str:  # type: ignore[override]
        names = ", ".join(schema["function"]["name"] for schema in self._tools) or "(none)"
        return (
            f"{question}\nTools: {names}. Call one as <tool_call>{{\"name\": ..., \"arguments\": {{...}}}}</tool_call> "
            "and read its result. Give the final answer in \\boxed{}."
        )

    def _read(self, action: str) -> tuple[list[ToolCall], str | None]:
        """The reply's tool calls, and its text outside them when that holds a final answer (else ``None``).
        A reasoning model's reply is read after its thinking; thinking never closed holds neither."""
        reply = answer_after_thinking(action) or ""
        calls = find_tool_calls(reply)
        prose = _prose(reply, calls)
        return calls, prose if extract_answer(prose, self.verifier.formats) is not None else None

    def _requests_ahead(self, action: str) -> list[tuple[Any, Any]]:
        """The verifier's requests when the reply is a final answer (a tool turn asks none)."""
        _, answer = self._read(action)
        return [] if answer is None else super()._requests_ahead(answer)

    def _judge(self, action: str) -> Judgement:
        calls, answer = self._read(action)
        if answer is not None:  # an answer outside the calls ends the episode: a \boxed{} inside code is not one
            final = super()._judge(answer)
            return Judgement(final.reward, final.status, True, "", final.reward_breakdown, final.correct,
                             {**final.info, "tool_calls": self._tool_calls})
        left = self.max_turns - self.turn
        if not calls:
            text = f"No tool call and no final answer. Call a tool, or give the final answer in \\boxed{{}}. ({left} turns left)"
            return Judgement(0.0, Status.FORMAT_ERROR, False, text, {"correctness": 0.0}, info={"tool_calls": self._tool_calls})
        return self._run_calls(calls, left)

    def _run_calls(self, calls: Sequence[ToolCall], left: int) -> Judgement:
        """Run the turn's calls in order; one ``<tool_response>`` block each."""
        blocks, statuses = [], []
        for call in calls:
            status, text = self._run_call(call)
            statuses.append(status)
            if status == "unavailable":  # the server is gone: no later call could run either
                info = {"tool_calls": self._tool_calls, "tool_statuses": statuses, "feedback": f"the MCP server is unavailable: {text}"}
                return Judgement(0.0, Status.ERROR, True, "", {"correctness": 0.0}, False, info)
            blocks.append(f"<tool_response>\n{text}\n</tool_response>")
        ran = any(s in ("ok", "error", "timeout") for s in statuses)
        footer = f"({left} turns left, {self.max_tool_calls - self._tool_calls} tool calls left)"
        info = {"tool_calls": self._tool_calls, "tool_statuses": statuses}
        status = Status.IN_PROGRESS if ran else Status.FORMAT_ERROR
        return Judgement(0.0, status, False, "\n".join([*blocks, footer]), {"correctness": 0.0}, info=info)

    def _run_call(self, call: ToolCall) -> tuple[str, str]:
        """``(status, text)`` of one call: ``ok``, ``error``, ``timeout``, ``unavailable`` or ``not_run``."""
        names = [schema["function"]["name"] for schema in self._tools]
        if call.error:
            return "not_run", f"Tool call not run: {call.error}."
        if call.name not in names:
            return "not_run", f"Tool call not run: unknown tool {call.name[:NAME_CHARS]!r}; the tools are {', '.join(names)}."
        if self._tool_calls >= self.max_tool_calls:
            return "not_run", f"Tool call not run: the tool budget ({self.max_tool_calls} calls) is spent. Give the final answer."
        self._tool_calls += 1
        result: ToolReply = self._connect().call(call.name, call.arguments)
        if result.unavailable:
            self._drop_connection()  # the next episode opens a new session
            return "unavailable", clean_text(result.text, 500)
        text = fit_observation(clean_text(result.text), self.result_chars)
        if result.timed_out:
            return "timeout", f"Error: {text}"
        if result.is_error:
            return "error", f"Error: {text}"
        return "ok", text

    def _final_judgement(self, last: Judgement) -> Judgement:
        info = {**last.info, "feedback": f"no final answer within {self.max_turns} turns"}
        return Judgement(0.0, Status.UNPARSEABLE, False, "", {"correctness": 0.0}, False, info)

    def expert_action(self) -> str | None:
        """The worked solution (generator tasks), which answers without a tool."""
        return self.task.metadata.get("solution") if self._records is None else None


def _check_counts(**counts: int) -> None:
    for name, value in counts.items():
        least = 0 if name == "max_tool_calls" else 1
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ConfigError(f"{name}={value!r} must be an integer of at least {least}.")
