"""Verifiers-v0: a verifiers environment (``verifiers`` ≥ 0.4, its ``verifiers.v1`` stack) as a
mathgym text env; the optional extra ``mathgym[verifiers]``.

A verifiers environment is a **taskset** (its tasks: prompt, system prompt, the data its rubric
reads) played by an **env** whose ``run(task, agents)`` is the multi-turn protocol: it drives an
agent seat turn by turn and may record rewards of its own; the task's rubric
(``@vf.reward`` methods, plugged judges) scores the trace (``task.score(trace)``). Here:

* ``env=`` a taskset id (resolved by verifiers' own loader, with the env its package exports,
  else the single-agent env: one reply), a ``"package.module:Object"``, or the object: a
  ``vf.Env``, a ``vf.Taskset`` (played single-turn) or a ``Taskset`` class.
* ``reset`` picks a task by the seed (``options={"task_index": i}`` picks task ``i``); the first
  observation is the task's prompt, or the env's opening message for a task without one;
  ``info["messages"]`` is the chat prompt.
* each ``step`` is the seat's reply; the env's next message (its user turn, a tool's or a game's
  output) is the next observation; the env's ``run`` returning ends the episode (``terminated``),
  the turn budget (``max_turns``) truncates it (the seat's next turn comes back ``terminated``,
  as verifiers' own limits do). The reward is the trace's (the rubric's weighted sum and what the
  env recorded), at the last step.

Whose failure is whose (a policy never chooses an infrastructure status): a scorer or an env that
raises, or runs past ``timeout_s``, after the model's reply may have been caused by that reply.
The episode is then played again with the task's reference answer (``answer_field``) as every
reply: only when that fails too is it ``status="error"`` (infrastructure); otherwise, and
whenever the task has no reference answer, it is the reply's (``wrong``, or ``timeout``).
verifiers' coroutines run on an event loop of their own, on a background thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import math
import queue
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mathgym.core import Judgement, Task, TextEnv, copy_messages
from mathgym.envs.interop.openenv_env import load_object
from mathgym.envs.interop.verifiers_seat import BackgroundLoop, Seat, SeatLimits, message_text, play_episode, prompt_messages
from mathgym.errors import ConfigError
from mathgym.install import extra_hint, import_extra
from mathgym.rewards.base import Status
from mathgym.spaces import DEFAULT_MAX_LENGTH

INSTALL_HINT = f"Verifiers-v0 needs verifiers>=0.4: {extra_hint('verifiers')}"


def _verifiers() -> Any:
    return import_extra("verifiers.v1", INSTALL_HINT)


@dataclass(frozen=True)
class _Event:
    """What the episode's coroutine says next: ``ask`` (a turn), ``done`` (a trace), ``failed``."""

    kind: str
    observation: str = ""
    trace: Any = None
    error: BaseException | None = None


class _LiveEpisode:
    """One episode on the background loop; its events come to the gym thread through a queue."""

    def __init__(self, loop: BackgroundLoop, runner: Any, task: Any, seat_name: str, seat_config: Any, max_turns: int):
        self.loop = loop
        self.events: queue.Queue[_Event] = queue.Queue()
        self._reply: asyncio.Future[str] | None = None
        self.seat = Seat(seat_name, seat_config, self._ask, SeatLimits(max_turns))
        self.future: concurrent.futures.Future[None] = loop.submit(self._drive(runner, task))

    async def _ask(self, observation: str) -> str:
        self._reply = asyncio.get_running_loop().create_future()
        self.events.put(_Event("ask", observation))
        return await self._reply

    async def _drive(self, runner: Any, task: Any) -> None:
        try:
            trace = await play_episode(runner, task, self.seat)
        except BaseException as err:  # noqa: BLE001 - reported to the gym thread, which judges it
            self.events.put(_Event("failed", error=err))
            if not isinstance(err, Exception):
                raise
        else:
            failure = self.seat.failures[0] if self.seat.failures else None
            self.events.put(_Event("failed" if failure else "done", trace=trace, error=failure))

    def answer(self, text: str) -> None:
        reply = self._reply
        if reply is not None:
            self.loop.loop.call_soon_threadsafe(lambda: reply.done() or reply.set_result(text))

    def next_event(self, timeout_s: float) -> _Event:
        try:
            return self.events.get(timeout=timeout_s)
        except queue.Empty:
            self.cancel()
            return _Event("failed", error=TimeoutError(f"the verifiers env gave no turn or result within timeout_s={timeout_s:g}"))

    def cancel(self) -> None:
        self.future.cancel()


class VerifiersEnv(TextEnv):
    """A verifiers environment (``env=`` a taskset id or object) as a text env.

    Reward: the trace's reward (verifiers' weighted sum of the rubric's rewards and those the env
    recorded), given at the episode's last step (0 before). ``correct`` when it reaches
    ``success_reward``; ``partial`` when above 0; else ``wrong``. A failing scorer or env is
    ``wrong`` (``timeout`` past ``timeout_s``) unless it fails on the task's reference answer
    too: then ``error``, an infrastructure failure.

    Args:
        env: A verifiers taskset id (``"my-taskset"``, resolved by verifiers' loader), a
            ``"package.module:Object"``, or the object: a ``verifiers.v1.Env``, a ``Taskset``
            (played single-turn) or a ``Taskset`` subclass.
        taskset_kwargs: The taskset's config fields (``--env.taskset.*`` in verifiers' CLI).
        env_kwargs: The env's config fields (``--env.*``), e.g. ``{"id": "an-env-id"}``.
        num_tasks: Tasks taken from the taskset (default all; an endless taskset needs it).
        answer_field: The task data's field with the reference answer (for telling a broken
            scorer from a reply that breaks it, and ``info["answer"]`` at the end).
        success_reward: A trace reward at least this large counts as solved.
        max_turns: Replies before the episode is truncated.
        timeout_s: Seconds the verifiers env may take for each turn, and for scoring.
        system_prompt: Replaces each task's system prompt (``""``: none); default the task's.
        max_length: Longest observation/action in characters.
        render_mode: ``None`` or ``"ansi"``.

    Example:
        >>> import gymnasium as gym, mathgym
        >>> env = gym.make("Verifiers-v0", env="my-taskset", taskset_kwargs={"num_tasks": 10})  # doctest: +SKIP
    """

    def __init__(
        self,
        env: Any = None,
        taskset_kwargs: Mapping[str, Any] | None = None,
        env_kwargs: Mapping[str, Any] | None = None,
        num_tasks: int | None = None,
        answer_field: str = "answer",
        success_reward: float = 1.0,
        max_turns: int = 10,
        timeout_s: float = 60.0,
        system_prompt: str | None = None,
        max_length: int = DEFAULT_MAX_LENGTH,
        render_mode: str | None = None,
    ):
        super().__init__(max_turns=max_turns, max_length=max_length, system_prompt="", render_mode=render_mode)
        _verifiers()
        if env is None:
            raise ConfigError("Verifiers-v0 needs env=: a verifiers taskset id, 'package.module:Object', or the taskset or env itself.")
        if num_tasks is not None and (isinstance(num_tasks, bool) or not isinstance(num_tasks, int) or num_tasks < 1):
            raise ConfigError(f"num_tasks={num_tasks!r} must be a positive integer (or None for the whole taskset).")
        if not float(timeout_s) > 0:
            raise ConfigError(f"timeout_s={timeout_s!r} must be a positive number of seconds.")
        self.source = env
        self.taskset_kwargs = dict(taskset_kwargs or {})
        self.env_kwargs = dict(env_kwargs or {})
        self.num_tasks = num_tasks
        self.answer_field = answer_field
        self.success_reward = float(success_reward)
        self.timeout_s = float(timeout_s)
        self.system_override = system_prompt
        self._loop: BackgroundLoop | None = None
        self._live: _LiveEpisode | None = None
        self._played: tuple[int, list[str]] | None = None  # (task index, replies): a copy replays them
        self._load()

    # -- loading the verifiers env ----------------------------------------------------------

    def _load(self) -> None:
        """The runner (a ``vf.Env``, or ``None`` for the single-agent protocol), its seat and tasks."""
        vf = _verifiers()
        source = self.source
        if isinstance(source, str) and ":" in source:
            source = load_object(source, "env")
        if isinstance(source, str):
            from verifiers.v1.utils.loaders import load_environment, resolve_env_config  # noqa: PLC0415

            try:
                source = load_environment(resolve_env_config({**self.env_kwargs, "taskset": {**self.taskset_kwargs, "id": source}}))
            except (ImportError, ValueError, TypeError, AttributeError) as err:
                raise ConfigError(f"env={self.source!r}: verifiers could not load it: {err}") from None
        if isinstance(source, type) and issubclass(source, vf.Taskset):
            from verifiers.v1.utils.generic import concrete_type  # noqa: PLC0415

            config_type = concrete_type(source, vf.TasksetConfig, origin=vf.Taskset) or vf.TasksetConfig
            source = source(config_type(**self.taskset_kwargs))
        if isinstance(source, vf.Env):
            self.runner, taskset = source, source.taskset
            seats = self._seats(source.config)
        elif isinstance(source, vf.Taskset):
            self.runner, taskset = None, source
            seats = {"agent": vf.AgentConfig()}
        else:
            raise ConfigError(f"env={self.source!r} is neither a verifiers Env nor a Taskset (got {type(source).__name__}).")
        (self.seat_name, self.seat_config), = seats.items()
        self._refuse_tools(taskset)
        if not taskset.bounded and self.num_tasks is None:
            raise ConfigError(f"the taskset of env={self.source!r} is endless: say how many of its tasks to take with num_tasks=.")
        self.tasks = list(taskset.take(self.num_tasks) if self.num_tasks is not None else taskset)
        if not self.tasks:
            raise ConfigError(f"the taskset of env={self.source!r} has no tasks.")

    def _seats(self, config: Any) -> dict[str, Any]:
        from verifiers.v1.configs.agent import agent_config_fields  # noqa: PLC0415

        seats = agent_config_fields(config)
        if len(seats) != 1:
            raise ConfigError(
                f"env={self.source!r} seats {len(seats)} agents ({', '.join(seats) or 'none'}); "
                "Verifiers-v0 plays envs with one agent seat, the policy's."
            )
        return seats

    def _refuse_tools(self, taskset: Any) -> None:
        task_config = getattr(taskset.config, "task", None)
        served = [*taskset.toolsets(taskset.config), *type(taskset).task_type().toolsets(task_config)]
        if served or type(taskset).task_type().NEEDS_CONTAINER:
            raise ConfigError(
                f"env={self.source!r} needs {'tool servers (MCP)' if served else 'a container'} for its tasks; "
                "Verifiers-v0 plays text exchanges only (an env's own turns may still run tools host-side)."
            )

    # -- episodes on the background loop --------------------------------------------------------

    def _start(self, index: int) -> _LiveEpisode:
        if self._loop is None:
            self._loop = BackgroundLoop()
            weakref.finalize(self, self._loop.close)  # an env dropped without close(): its loop still winds down
            if self.runner is not None:  # the env's own shared resources (vf.Env.start), up before any episode
                self._loop.submit(self.runner.start()).result(timeout=self.timeout_s)
        task = self.tasks[index]
        if self.system_override is not None:
            task = task.with_data(system_prompt=self.system_override or None)
        return _LiveEpisode(self._loop, self.runner, task, self.seat_name, self.seat_config, self.max_turns)

    def _abandon(self) -> None:
        if self._live is not None:
            self._live.cancel()
            self._live = None

    def reference_answer(self, index: int) -> str | None:
        """Task ``index``'s reference answer (its ``answer_field``), or ``None`` where it has none."""
        answer = getattr(self.tasks[index].data, self.answer_field, None)
        if isinstance(answer, (list, tuple)):
            answer = answer[0] if answer else None
        return None if answer is None else str(answer)

    def _fails_on_reference(self, index: int) -> str | None:
        """Why the episode fails when the reference answer is every reply (``None``: it does not)."""
        reference = self.reference_answer(index)
        if reference is None:
            return None
        probe = self._start(index)
        deadline = self.timeout_s * (self.max_turns + 1)
        try:
            while True:
                event = probe.next_event(deadline)
                if event.kind == "ask":
                    probe.answer(reference)
                    continue
                return None if event.kind == "done" else _describe(event.error)
        finally:
            probe.cancel()

    # -- the TextEnv hooks ---------------------------------------------------------------------

    def _sample_task(self, options: Mapping[str, Any]) -> Task:
        self._abandon()
        index = self._task_index(options, len(self.tasks))
        self._live = self._start(index)
        event = self._live.next_event(self.timeout_s)
        if event.kind != "ask":
            self._abandon()
            why = _describe(event.error) if event.error else "it ended before asking the model anything"
            raise ConfigError(f"env={self.source!r}: task {index} could not start ({why}).")
        self._played = (index, [])
        data = self.tasks[index].data
        self.system_prompt = (data.system_prompt or "") if self.system_override is None else self.system_override
        task_id = str(data.id) if data.id else f"verifiers-{self.tasks[index].key[:16]}"
        return Task(task_id, event.observation, self.reference_answer(index) or "", {"index": index})

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        observation, info = super().reset(seed=seed, options=options)
        data = self.tasks[self.task.metadata["index"]].data
        if isinstance(data.prompt, list):  # a prompt of several messages: info["messages"] carries them all
            prompt = data.model_copy(update={"system_prompt": self.system_prompt or None})
            self._messages = [{"role": m.role, "content": message_text(m)} for m in prompt_messages(prompt)]
            info["messages"] = copy_messages(self._messages)
        return observation, info

    def _judge(self, action: str) -> Judgement:
        live = self._resumed()
        live.answer(action)
        if self._played is not None:
            self._played[1].append(action)
        event = live.next_event(self.timeout_s)
        if event.kind == "ask":
            return Judgement(0.0, Status.IN_PROGRESS, False, event.observation, {"reward": 0.0})
        self._live = None
        if event.kind == "done":
            return self._scored(event.trace, cut_short=live.seat.cut_short)
        return self._failed(event)

    def _scored(self, trace: Any, cut_short: bool) -> Judgement:
        rewards = {name: r for name, r in trace.rewards.items() if r is not None}
        reward = float(trace.reward)
        reward = reward if math.isfinite(reward) else 0.0
        status = Status.CORRECT if reward >= self.success_reward else Status.PARTIAL if reward > 0 else Status.WRONG
        breakdown = {name: float(r.value) for name, r in rewards.items()} or {"reward": reward}
        info = {"verifiers_rewards": {name: float(r.score) for name, r in rewards.items()},
                "verifiers_metrics": dict(trace.metrics), "stop_condition": trace.stop_condition}
        return Judgement(reward, status, not cut_short, reward_breakdown=breakdown, correct=status is Status.CORRECT, info=info)

    def _failed(self, event: _Event) -> Judgement:
        error = _describe(event.error)
        index = self.task.metadata["index"]
        on_reference = self._fails_on_reference(index)
        if on_reference is not None:
            return Judgement(0.0, Status.ERROR, True, reward_breakdown={"reward": 0.0},
                             info={"error": f"the verifiers env fails on the reference answer too: {on_reference}"[:500]})
        status = Status.TIMEOUT if isinstance(event.error, TimeoutError) else Status.WRONG
        return Judgement(0.0, status, True, reward_breakdown={"reward": 0.0}, info={"verifier_error": error[:500]})

    # -- copies (pickle) replay the episode on a loop of their own ---------------------------------

    def _resumed(self) -> _LiveEpisode:
        if self._live is not None:
            return self._live
        if self._played is None:
            raise ConfigError("Verifiers-v0: the episode's verifiers run is gone; call reset().")
        index, replies = self._played
        live = self._start(index)
        for reply in [None, *replies]:
            if reply is not None:
                live.answer(reply)
            event = live.next_event(self.timeout_s)
            if event.kind != "ask":
                raise ConfigError(f"Verifiers-v0: replaying the episode in a copy failed ({event.kind}: {_describe(event.error)}).")
        self._live = live
        return live

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_loop"] = None
        state["_live"] = None
        if isinstance(self.source, str):  # the copy loads its own (verifiers' envs hold live resources)
            state.update(runner=None, tasks=None, seat_config=None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if self.__dict__.get("tasks") is None:
            self._load()

    def close(self) -> None:
        self._abandon()
        if self._loop is not None:
            loop, self._loop = self._loop, None
            if self.runner is not None:
                with contextlib.suppress(Exception):
                    loop.submit(self.runner.stop()).result(timeout=self.timeout_s)
            loop.close()
        super().close()


def _describe(error: BaseException | None) -> str:
    return "no error" if error is None else f"{type(error).__name__}: {error}"
