"""Every call an agent run makes, token for token, and the prompt each call is sampled from.

A run is the calls an agent program makes for one task, grouped by the run id its client sends
(the ``X-Mathgym-Run`` header, or the API key). Each call is recorded with the prompt token ids the
policy was fed and, for each of its ``n`` samples, the completion's token ids and the sampler's
log-probs (:class:`Sample`), so that an episode is built from the tokens the model saw and wrote,
never from a re-tokenisation of the messages.

How a call's prompt is made (:meth:`Recorder.prompt`). An agent sends its whole conversation each
time. When the messages are an earlier call's messages, the assistant message the endpoint answered
it with (one of its samples), and new messages (tool results, a user turn), the call *continues*
that sample: its prompt is that sample's prompt and completion tokens followed by the tokens the
chat template writes for the new messages (:func:`~mathgym.agents.chat.turn_suffix`), exactly as the
rollout collector appends an env's turn. Otherwise (the first call, an agent that edited or cut its
history, other tools) the prompt is the template's rendering of the messages: a new *segment*.

``history`` decides what happens when the template would render the continued conversation
differently from the tokens sampled (Qwen3's template drops the ``<think>`` block of assistant turns
before the last user message; a template that writes a tool call with other whitespace than the
model did):

- ``"template"`` (default): the prompt is what the template renders, as a deployed model served
  by vLLM would be prompted; where that text is not the continuation of the sampled tokens, the call
  starts a new segment (its prompt re-rendered; the earlier tokens stay in their own segment).
- ``"sampled"``: the prompt is always the continuation: the model sees its own earlier turns as it
  wrote them (reasoning included), as in the collector's multi-turn episodes; one segment per branch.

Either way the learner trains on the sampled tokens with the very prompt they were sampled from.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from mathgym.agents import chat as template
from mathgym.agents.chat_format import ChatFormat
from mathgym.agents.endpoint.openai_messages import message_key
from mathgym.errors import ConfigError, MathgymError

HistoryMode = Literal["template", "sampled"]


@dataclass
class Sample:
    """One sampled completion of a call (one of its ``n`` choices).

    Attributes:
        completion_ids: The tokens the model wrote (its stop token included when it wrote one).
        logprobs: The sampler's log-prob of each of them.
        finish_reason: ``"stop"``, ``"length"`` or ``"tool_calls"``.
        message: The assistant message the endpoint answered with.
        seed: The seed of its sampling stream (the same prompt and seed sample the same tokens).
    """

    completion_ids: list[int]
    logprobs: list[float]
    finish_reason: str
    message: dict[str, Any]
    seed: int = 0


@dataclass
class CallRecord:
    """One call of a run.

    Attributes:
        index: Its place in the run (0, 1, ...).
        messages: The request's messages, as the template reads them.
        tools: The request's tools (``None``: none).
        prompt_ids: The tokens the policy was fed.
        parent: ``(call index, sample index)`` of the sample this call continues, or ``None`` (a new segment).
        samples: Its completions, filled in when sampled.
        max_new_tokens: The completion length it was allowed.
    """

    index: int
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    prompt_ids: list[int]
    parent: tuple[int, int] | None
    samples: list[Sample] = field(default_factory=list)
    max_new_tokens: int = 0

    def sequence(self, sample: int) -> list[int]:
        """Prompt and completion tokens of sample ``sample``."""
        return self.prompt_ids + self.samples[sample].completion_ids


@dataclass
class RunRecord:
    """The calls of one agent run (its id, and whether the driver closed it)."""

    run_id: str
    calls: list[CallRecord] = field(default_factory=list)
    closed: bool = False


class RunClosedError(MathgymError):
    """A call for a run its driver has closed (answered 409): a late call of a finished agent."""


class Recorder:
    """The runs' calls (thread-safe: the server records, a driver opens, closes and reads runs).

    Args:
        chat: The chat format prompts are rendered in.
        history: ``"template"`` or ``"sampled"`` (see the module docstring).
    """

    def __init__(self, chat: ChatFormat, history: HistoryMode = "template"):
        if history not in ("template", "sampled"):
            raise ConfigError(f"history={history!r}; choose 'template' or 'sampled'")
        self.chat, self.history = chat, history
        self._runs: dict[str, RunRecord] = {}
        self._forgotten: set[str] = set()  # runs closed and popped: their late calls are refused too
        self._lock = threading.Lock()

    # -- runs ---------------------------------------------------------------------------------

    def open(self, run_id: str) -> RunRecord:
        """Start recording run ``run_id`` afresh (an earlier run of that id is forgotten)."""
        with self._lock:
            self._forgotten.discard(run_id)
            self._runs[run_id] = RunRecord(run_id)
            return self._runs[run_id]

    def close(self, run_id: str) -> RunRecord:
        """End run ``run_id``: later calls with its id are refused. Returns its record."""
        with self._lock:
            run = self._runs.setdefault(run_id, RunRecord(run_id))
            run.closed = True
            return run

    def pop(self, run_id: str) -> RunRecord:
        """Close run ``run_id`` and forget its calls (returns its record); its later calls stay refused."""
        run = self.close(run_id)
        with self._lock:
            self._runs.pop(run_id, None)
            self._forgotten.add(run_id)
        return run

    def run(self, run_id: str) -> RunRecord:
        """The record of ``run_id`` (an empty one when it made no call)."""
        with self._lock:
            return self._runs.get(run_id) or RunRecord(run_id)

    # -- calls --------------------------------------------------------------------------------

    def start_call(self, run_id: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> CallRecord:
        """Record a call of ``run_id`` and make its prompt (see the module docstring). A run not opened
        is opened by its first call; a closed one refuses it.

        Raises:
            RunClosedError: The run was closed.
            ConfigError: The chat template cannot render the messages.
        """
        with self._lock:
            run = self._runs.setdefault(run_id, RunRecord(run_id, closed=run_id in self._forgotten))
            if run.closed:
                raise RunClosedError(f"run {run_id!r} has ended; its calls are no longer served")
            earlier = list(run.calls)
        parent, prompt = self._continuation(earlier, messages, tools)
        if prompt is None:
            parent, prompt = None, self.chat.prompt_ids(messages, tools=tools)
        with self._lock:
            call = CallRecord(len(run.calls), messages, tools, prompt, parent)
            run.calls.append(call)
        return call

    def finish_call(self, call: CallRecord, samples: Sequence[Sample]) -> None:
        """Record the samples of ``call``."""
        with self._lock:
            call.samples = list(samples)

    def _continuation(
        self, earlier: Sequence[CallRecord], messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
    ) -> tuple[tuple[int, int] | None, list[int] | None]:
        """``(parent, prompt ids)`` of the latest sample these messages continue, or ``(None, None)``."""
        keys = [message_key(m) for m in messages]
        for call in reversed(earlier):
            if call.tools != tools or not call.samples:
                continue
            head = [message_key(m) for m in call.messages]
            for j, sample in enumerate(call.samples):
                known = head + [message_key(sample.message)]
                if len(keys) > len(known) and keys[: len(known)] == known:
                    prompt = self._continued_prompt(call, j, messages[: len(call.messages)], messages[len(known):], messages, tools)
                    return ((call.index, j), prompt) if prompt is not None else (None, None)
        return None, None

    def _continued_prompt(
        self, call: CallRecord, j: int, history: list[dict[str, Any]], following: list[dict[str, Any]],
        messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
    ) -> list[int] | None:
        """Sample ``j`` of ``call`` followed by the template's text for ``following`` (``None`` where the
        template cannot append them, or, under ``history="template"``, renders the chat otherwise)."""
        chat = self.chat

        def render(chat_messages: Sequence[dict[str, Any]], gen: bool = True) -> str:
            return chat.render(chat_messages, gen, tools)

        try:
            suffix = template.turn_suffix(render, history, "", chat.template_name, following=following)
        except Exception:  # noqa: BLE001 - a template that refuses or rewrites: the call is a new segment
            return None
        sampled = call.sequence(j)
        ids = sampled + chat.after_action(chat.encode(suffix), sampled[-1] if sampled else None)
        if self.history == "template" and chat.decode(ids, skip_special_tokens=False) != render(messages):
            return None
        return ids
