"""NeMoGym-v0: a NeMo-Gym resources server and its task set, as a mathgym text env.

NeMo-Gym (NVIDIA's ``nemo-gym``) serves each environment as a *resources server*: an HTTP service
that answers ``/seed_session`` (a rollout's start), its tools (``POST /<tool name>``) and
``/verify`` (the reward of a finished rollout, given as an OpenAI Responses API response object).
Its task sets are JSONL rows holding ``responses_create_params`` (the ``input`` messages, the
``tools``) beside the verifier's own fields (``expected_answer``, ``options``...).

This env speaks that protocol with the standard library (no nemo-gym import; the wire side is
:mod:`mathgym.envs.interop.nemo_gym_http`):

* ``reset``: a row (by seed, or ``options={"task_index": i}``); ``POST /seed_session`` with the row
  opens the rollout's session (a cookie the server sets); the observation is the row's last user
  message, ``info["messages"]`` its whole chat (``developer`` and ``instructions`` as ``system``),
  ``info["tools"]`` its tools in the chat-template form;
* ``step``: a reply holding tool calls (any format :func:`~mathgym.envs.tools.tool_calls.find_tool_calls`
  reads, after the thinking) runs each declared tool at the server, its result in the next
  observation (one ``<tool_response>`` block per call); a reply without one is the final message:
  the episode's output items (reasoning, messages, calls and their results, as NeMo-Gym's agent
  records them) go to ``/verify`` and the reward comes back. At the turn budget the episode is
  verified as it stands (truncated), as NeMo-Gym's agent does at ``max_steps``.

Whose failure is whose: a call that does not parse, names an undeclared tool or is refused by the
tool (an HTTP error is its result, as in NeMo-Gym's agent) is the model's; so is a tool or a verify
that runs past ``timeout_s`` while the server still answers (``timeout``), and a verify that fails
on this reply but not on an empty one. A server that cannot be reached, or a verify that fails on
an empty reply too, is ``status="error"``: an infrastructure failure, left out of training.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mathgym.core import Judgement, Task, TextEnv, copy_messages, fit_observation
from mathgym.envs.math.data import jsonl_rows
from mathgym.envs.interop.nemo_gym_http import INSTALL_HINT, LaunchedServer, Reply, ResourcesServerSession
from mathgym.envs.tools.tool_calls import ToolCall, find_tool_calls
from mathgym.errors import ConfigError, DatasetError, ToolServerError
from mathgym.rewards.base import Status
from mathgym.rewards.extract import THINK_CLOSE, THINK_OPEN, answer_after_thinking
from mathgym.spaces import DEFAULT_MAX_LENGTH
from mathgym.untrusted import clean_text

#: Fields a task set may hold its gold answer in (shown in ``info["answer"]`` at the end only).
ANSWER_FIELDS = ("expected_answer", "ground_truth", "answer")
#: Longest tool result (characters) in an observation.
RESULT_CHARS = 8000
_TEXT_PARTS = ("input_text", "output_text", "text")


def content_text(content: Any) -> str:
    """A Responses API message content as text: a string, or its text parts joined.

    Example:
        >>> content_text([{"type": "input_text", "text": "2 + 2?"}])
        '2 + 2?'
    """
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content if isinstance(p, Mapping) and p.get("type") in _TEXT_PARTS]
        if len(parts) == len(content):
            return "".join(str(p) for p in parts)
    raise DatasetError(f"a message's content holds parts other than text: {str(content)[:120]}")


def chat_messages(params: Mapping[str, Any]) -> list[dict[str, str]]:
    """``responses_create_params``' input as chat messages (``developer`` → ``system``; a recorded
    tool call as the assistant's ``<tool_call>`` text, its result as a ``tool`` message)."""
    messages = [{"role": "system", "content": str(params["instructions"])}] if params.get("instructions") else []
    items = params["input"]
    for item in [{"role": "user", "content": items}] if isinstance(items, str) else items:
        kind = item.get("type", "message")
        if kind == "message":
            role = "system" if item.get("role") == "developer" else str(item.get("role"))
            messages.append({"role": role, "content": content_text(item.get("content"))})
        elif kind == "function_call":
            call = {"name": item.get("name"), "arguments": json.loads(item.get("arguments") or "{}")}
            messages.append({"role": "assistant", "content": f"<tool_call>\n{json.dumps(call)}\n</tool_call>"})
        elif kind == "function_call_output":
            messages.append({"role": "tool", "content": str(item.get("output", ""))})
        else:
            raise DatasetError(f"an input item of type {str(kind)[:40]!r} is not read (messages and function calls are)")
    return messages


def chat_tools(params: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The row's function tools in the form chat templates take as ``tools=``."""
    return [
        {"type": "function", "function": {"name": t["name"], "description": t.get("description") or "",
                                          "parameters": t.get("parameters") or {"type": "object", "properties": {}}}}
        for t in params.get("tools") or () if t.get("type", "function") == "function"
    ]


def tool_note(tools: Sequence[Mapping[str, Any]]) -> str:
    """The lines that tell a model which tools it can call and how."""
    lines = [f"- {t['function']['name']}: {json.dumps(t['function']['parameters'].get('properties', {}))}"
             + (f" ({t['function']['description']})" if t["function"]["description"] else "") for t in tools]
    return ("\n\nTools (call one as <tool_call>{\"name\": ..., \"arguments\": {...}}</tool_call>; "
            "its result comes back to you; a reply without a call is your final answer):\n" + "\n".join(lines))


def split_thinking(action: str) -> tuple[str, str | None]:
    """``(thinking, reply)`` of a model's text: the reply after its ``</think>`` (``None`` when the
    thinking never closed), the thinking without its tags."""
    reply = answer_after_thinking(action)
    if reply is None:
        return action.replace(THINK_OPEN, "", 1).strip(), None
    close = action.rfind(THINK_CLOSE)
    thinking = action[:close].replace(THINK_OPEN, "", 1).strip() if close >= 0 else ""
    return thinking, reply


def response_object(response_id: str, params: Mapping[str, Any], output: list[dict[str, Any]]) -> dict[str, Any]:
    """The Responses API response (NeMo-Gym's ``NeMoGymResponse``) of an episode's output items."""
    return {"id": response_id, "object": "response", "created_at": 0.0, "model": "mathgym-policy", "status": "completed",
            "output": output, "parallel_tool_calls": params.get("parallel_tool_calls", True),
            "tool_choice": params.get("tool_choice", "auto"), "tools": list(params.get("tools") or [])}


def load_rows(dataset: Any) -> list[dict[str, Any]]:
    """The task set: a JSONL file (NeMo-Gym's format) or a list of its rows."""
    if isinstance(dataset, (str, Path)):
        located = list(jsonl_rows(dataset, "NeMo-Gym task set"))
    elif isinstance(dataset, Sequence):
        located = [(f"row {i}", row) for i, row in enumerate(dataset)]
    else:
        raise ConfigError(f"dataset={dataset!r} must be the path of a JSONL task set or a list of its rows.")
    for where, row in located:
        params = row.get("responses_create_params") if isinstance(row, Mapping) else None
        if not isinstance(params, Mapping) or not isinstance(params.get("input"), (str, list)):
            raise DatasetError(f"{where}: a NeMo-Gym row needs responses_create_params with its input messages")
    if not located:
        raise DatasetError(f"dataset={dataset!r} holds no rows")
    return [dict(row) for _, row in located]


class NeMoGymEnv(TextEnv):
    """A NeMo-Gym resources server (``server_url=``, or ``resources_server=`` started here) with its
    task set (``dataset=``), as a text env; the module docstring tells the protocol.

    Reward: the server's ``/verify`` reward. Status ``correct`` when it reaches ``success_reward``,
    ``partial`` above 0, else ``wrong``; a tool turn is ``in_progress`` (``format_error`` when none
    of its calls could run); ``timeout`` and ``error`` as the module docstring says.
    ``info["verify"]`` holds the rest of the server's verify reply (its own metrics).

    Args:
        server_url: URL of a running resources server.
        resources_server: Instead, a resources server to start on 127.0.0.1 for this env: the name of
            one nemo-gym ships (``"mcqa"``, ``"example_multi_step"``) or ``"module:Class"``.
        dataset: JSONL task set (or a list of its rows); default with ``resources_server=``: the
            example task set nemo-gym ships beside it.
        python: The interpreter with nemo-gym (Python >= 3.12) that serves ``resources_server``;
            default ``$MATHGYM_NEMO_GYM_PYTHON``, else this one.
        server_config: The started server's config fields (its config class's own options).
        server_paths: Folders ``resources_server="module:Class"`` is imported from.
        max_turns: Turns (tool turns and the final reply) before the episode is verified as it stands.
        success_reward: A reward at least this large counts as solved.
        timeout_s: Seconds allowed to each request (a tool call, a verify).
        startup_timeout_s: Seconds allowed to a started server to answer.
        show_tools: Append the row's tools and the call format to its last user message.
        max_length: Longest observation/action in characters.
        render_mode: ``None`` or ``"ansi"``.

    Example:
        >>> import gymnasium as gym, mathgym
        >>> env = gym.make("NeMoGym-v0", resources_server="mcqa", python=".venv-nemo-gym/bin/python")  # doctest: +SKIP
    """

    def __init__(
        self,
        server_url: str | None = None,
        resources_server: str | None = None,
        dataset: Any = None,
        python: str | None = None,
        server_config: Mapping[str, Any] | None = None,
        server_paths: Sequence[str] = (),
        max_turns: int = 10,
        success_reward: float = 1.0,
        timeout_s: float = 120.0,
        startup_timeout_s: float = 120.0,
        show_tools: bool = True,
        max_length: int = DEFAULT_MAX_LENGTH,
        render_mode: str | None = None,
    ):
        super().__init__(max_turns=max_turns, max_length=max_length, system_prompt="", render_mode=render_mode)
        if (server_url is None) == (resources_server is None):
            raise ConfigError(f"give server_url= or resources_server=, one of them. {INSTALL_HINT}")
        self._launched: LaunchedServer | None = None
        self.rows = load_rows(dataset) if dataset is not None else []  # a bad task set fails before a server starts
        if resources_server is not None:
            self._launched = LaunchedServer(str(resources_server), python, server_config, tuple(server_paths), startup_timeout_s)
            server_url, dataset = self._launched.url, self._launched.dataset if dataset is None else dataset
        try:
            if dataset is None:
                raise ConfigError("NeMoGym-v0 needs dataset=: the JSONL task set (NeMo-Gym's rows) of the server.")
            self.rows = self.rows or load_rows(dataset)
            self.server_url, self.timeout_s = str(server_url), float(timeout_s)
            ResourcesServerSession(self.server_url, self.timeout_s)  # the URL is checked here
        except Exception:
            self.close()  # a server started for nothing stops now
            raise
        self.dataset_name = Path(dataset).stem if isinstance(dataset, (str, Path)) else "rows"
        self.success_reward, self.show_tools = float(success_reward), bool(show_tools)
        self._session: ResourcesServerSession | None = None
        self._output: list[dict[str, Any]] = []  # the episode's Responses API output items
        self._posted: list[tuple[str, Any]] = []  # the tool calls run: a copy replays them on a session of its own

    @property
    def num_tasks(self) -> int:
        return len(self.rows)

    # -- the episode -------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        obs, info = super().reset(seed=seed, options=options)
        self._messages = copy_messages(self.task.metadata["messages"])
        info["messages"] = copy_messages(self._messages)
        info["tools"] = copy.deepcopy(self.task.metadata["tools"])
        return obs, info

    def _sample_task(self, options: Mapping[str, Any]) -> Task:
        index = self._task_index(options, len(self.rows))
        row = self.rows[index]
        params = row["responses_create_params"]
        tools = chat_tools(params)
        messages = [{"role": m["role"], "content": clean_text(m["content"])} for m in chat_messages(params)]
        users = [m for m in messages if m["role"] == "user"] or messages[-1:]
        if tools and self.show_tools and users:
            users[-1]["content"] += tool_note(tools)
        answer = next((str(row[k]) for k in ANSWER_FIELDS if row.get(k) is not None), "")
        self._output, self._posted, self._session = [], [], None
        task = Task(f"nemo-gym-{self.dataset_name}-{index}", users[-1]["content"] if users else "", answer,
                    {"index": index, "messages": messages, "tools": tools})
        self._task = task
        self._live_session()
        return task

    def _live_session(self) -> ResourcesServerSession:
        """The rollout's session at the server: opened by ``/seed_session``; a copy's own replays the calls."""
        if self._session is None:
            session = ResourcesServerSession(self.server_url, self.timeout_s)
            row = self.rows[self.task.metadata["index"]]
            try:
                seeded = session.post("/seed_session", row)
            except TimeoutError:
                raise ToolServerError(f"{self.server_url}/seed_session did not answer within {self.timeout_s:g} s") from None
            if seeded.status != 200:
                raise ToolServerError(f"{self.server_url}/seed_session refused the row ({seeded.status}): {seeded.text()[:300]}")
            for name, arguments in self._posted:
                session.post(f"/{name}", arguments)
            self._session = session
        return self._session

    def _judge(self, action: str) -> Judgement:
        thinking, reply = split_thinking(action)
        turn_items = [{"id": f"rs_{self.turn}", "type": "reasoning", "summary": [{"type": "summary_text", "text": thinking}]}] if thinking else []
        calls = find_tool_calls(reply) if reply and self.task.metadata["tools"] else []
        prose = _outside(reply or "", calls).strip()
        if prose or not calls:
            turn_items.append(_message(f"msg_{self.turn}", prose))
        self._output += turn_items
        if not calls:
            return self._verify()
        return self._run_calls(calls)

    def _run_calls(self, calls: Sequence[ToolCall]) -> Judgement:
        blocks, ran = [], 0
        for k, call in enumerate(calls):
            call_id = f"call_{self.turn}_{k}"
            self._output.append({"id": f"fc_{self.turn}_{k}", "type": "function_call", "call_id": call_id,
                                 "name": call.name, "arguments": json.dumps(call.arguments), "status": "completed"})
            try:
                output, posted = self._call(call)
            except ToolServerError as err:
                return Judgement(0.0, Status.ERROR, True, reward_breakdown={"reward": 0.0}, info={"error": str(err)[:500]})
            ran += posted
            self._output.append({"type": "function_call_output", "call_id": call_id, "output": output})
            blocks.append(f"<tool_response>\n{fit_observation(clean_text(output), RESULT_CHARS)}\n</tool_response>")
        footer = f"({self.max_turns - self.turn} turns left)"
        status = Status.IN_PROGRESS if ran else Status.FORMAT_ERROR
        return Judgement(0.0, status, False, "\n".join([*blocks, footer]), {"reward": 0.0}, info={"tool_calls_run": ran})

    def _call(self, call: ToolCall) -> tuple[str, bool]:
        """One call's result text and whether it reached the server."""
        names = [t["function"]["name"] for t in self.task.metadata["tools"]]
        if call.error:
            return json.dumps({"error": f"Invalid tool call: {call.error}"}), False
        if call.name not in names:
            return json.dumps({"error": f"Unknown tool {call.name[:40]!r}; the tools are {', '.join(names)}"}), False
        try:
            reply = self._live_session().post(f"/{call.name}", call.arguments)
        except TimeoutError:
            return self._timed_out("tool call"), True
        self._posted.append((call.name, call.arguments))
        return reply.text(), True

    def _timed_out(self, what: str) -> str:
        """The model's timeout when the server still answers, else the server's failure."""
        if not self._live_session().alive():
            raise ToolServerError(f"the resources server at {self.server_url} stopped answering")
        return json.dumps({"error": f"the {what} ran past {self.timeout_s:g} s"})

    def _verify(self, output: list[dict[str, Any]] | None = None) -> Judgement:
        """The server's verdict on the episode's output items (``output``: others, for the control)."""
        row = self.rows[self.task.metadata["index"]]
        response = response_object(f"resp_{self.task.task_id}", row["responses_create_params"], self._output if output is None else output)
        try:
            reply = self._live_session().post("/verify", {**row, "response": response})
        except TimeoutError:
            try:
                self._timed_out("verify")
            except ToolServerError as err:
                return _failed(Status.ERROR, str(err))
            return _failed(Status.TIMEOUT, f"the verify ran past {self.timeout_s:g} s")
        except ToolServerError as err:
            return _failed(Status.ERROR, str(err))
        reward = _reward(reply)
        if reward is None:
            problem = f"/verify answered {reply.status}: {reply.text()[:300]}"
            if output is None and self._verify([_message("msg_control", "")]).status is not Status.ERROR:
                return _failed(Status.WRONG, problem)  # it verifies an empty reply: this reply's doing
            return _failed(Status.ERROR, problem)
        status = Status.CORRECT if reward >= self.success_reward else Status.PARTIAL if reward > 0 else Status.WRONG
        details = {k: v for k, v in reply.json().items() if k not in ("reward", "responses_create_params", "response")}
        return Judgement(reward, status, True, reward_breakdown={"reward": reward}, correct=status is Status.CORRECT,
                         info={"verify": details})

    def _final_judgement(self, last: Judgement) -> Judgement:
        """Out of turns in the middle of tool calls: verified as it stands, as NeMo-Gym's agent does."""
        if last.status in (Status.IN_PROGRESS, Status.FORMAT_ERROR):
            return self._verify()
        return last

    # -- copies and the started server ------------------------------------------------------

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_session"] = None  # a copy opens a session of its own and replays the episode's calls
        state["_launched"] = None  # the started server belongs to the original
        return state

    def close(self) -> None:
        if self._launched is not None:
            launched, self._launched = self._launched, None
            launched.stop()
        super().close()


def _message(item_id: str, text: str) -> dict[str, Any]:
    return {"id": item_id, "type": "message", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


def _outside(reply: str, calls: Sequence[ToolCall]) -> str:
    """The text of ``reply`` outside its tool calls."""
    parts, last = [], 0
    for call in sorted(calls, key=lambda c: c.start):
        parts.append(reply[last:max(call.start, last)])
        last = max(last, call.end)
    return "".join(parts) + reply[last:]


def _reward(reply: Reply) -> float | None:
    """The finite reward of a verify reply (``None`` when it has none)."""
    body = reply.json() if reply.status == 200 else None
    reward = body.get("reward") if isinstance(body, dict) else None
    if isinstance(reward, bool) or not isinstance(reward, (int, float)) or not math.isfinite(reward):
        return None
    return float(reward)


def _failed(status: Status, problem: str) -> Judgement:
    return Judgement(0.0, status, True, reward_breakdown={"reward": 0.0}, info={"error": problem[:500]})
