"""The agent seat a mathgym episode gives a verifiers env (``verifiers`` ≥ 0.4, ``verifiers.v1``).

A verifiers env plays a task by driving its agents: ``agents.<seat>.run(task)`` (one reply,
the single-agent case) or ``agents.<seat>.interaction(task)`` and ``interaction.turn(message)``
(multi-turn: the env is the run's user; each ``turn`` sends the env's message and returns the
model's reply as a ``Segment``). Here the seat is mathgym's policy: each turn hands the env's
message to the gym thread as the next observation (``ask``) and waits for the action the
policy steps with. The trace is verifiers' own ``Trace``, built from the episode's messages,
and the task's rubric scores it (``task.score(trace)``) when the interaction closes, as
verifiers' rollout does.

Everything here runs on the event loop of :class:`BackgroundLoop` (a thread of its own), so
verifiers' async APIs never need the gym thread's loop. verifiers is imported by the caller
(:mod:`mathgym.envs.interop.verifiers_env`), which hands its ``verifiers.v1`` module in.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

#: What a seat asks for each reply: the env's message as text in, the model's reply out.
Ask = Callable[[str], Awaitable[str]]


class BackgroundLoop:
    """An asyncio event loop on a daemon thread: verifiers' coroutines run there, the gym
    thread waits on their results (:meth:`submit`)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._closed = False
        self._thread = threading.Thread(target=self.loop.run_forever, name="mathgym-verifiers-loop", daemon=True)
        self._thread.start()

    def submit(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        """Start ``coroutine`` on the loop; a ``concurrent.futures.Future`` of its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def close(self) -> None:
        """Cancel what still runs (each task unwinds its ``finally`` blocks), then stop the loop."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._cancel_all(), self.loop).result(timeout=5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self.loop.close()

    @staticmethod
    async def _cancel_all() -> None:
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.get_running_loop().shutdown_asyncgens()


def message_text(message: Any) -> str:
    """The text of a verifiers message (a typed message or a chat dict), images dropped."""
    from verifiers.v1.types import content_text  # noqa: PLC0415 - optional dependency

    content = message.get("content") if isinstance(message, dict) else message.content
    return content_text(content) if content is not None else ""


def prompt_messages(data: Any) -> list[Any]:
    """A task's opening messages as verifiers types: its system prompt, then its prompt."""
    import verifiers.v1 as vf  # noqa: PLC0415

    messages: list[Any] = []
    if data.system_prompt:
        messages.append(vf.SystemMessage(content=data.system_prompt))
    return messages + as_messages(data.prompt)


def as_messages(message: Any) -> list[Any]:
    """A turn's input (``None``, a string, or messages typed or as dicts) as typed messages."""
    import verifiers.v1 as vf  # noqa: PLC0415
    from verifiers.v1.dialects.chat import parse_message  # noqa: PLC0415

    if message is None:
        return []
    if isinstance(message, str):
        return [vf.UserMessage(content=message)]
    return [parse_message(m) if isinstance(m, dict) else m for m in message]


@dataclass
class SeatLimits:
    """How far a seat lets an episode go: replies before the run is cut (``max_turns``)."""

    max_turns: int


class SeatInteraction:
    """One rollout of the seat, held open turn by turn (verifiers' ``Interaction`` surface:
    ``turn``, ``trace``, ``close``); the env calling ``turn`` is the run's user."""

    def __init__(self, seat: Seat, task: Any):
        import verifiers.v1 as vf  # noqa: PLC0415
        from verifiers.v1.state import state_cls  # noqa: PLC0415

        self.seat, self.task = seat, task
        self.trace = vf.Trace(
            task=vf.TraceTask(type=type(task).__name__, data=task.data, key=task.key, hash=task.hash),
            state=state_cls(type(task))(),
            agent=vf.AgentInfo(config=seat.config, name=seat.name, trainable=seat.trainable),
        )
        self._started = False
        self._over = False
        self._closed = False
        for message in prompt_messages(task.data):
            self._append(message, sampled=False)

    def _append(self, message: Any, sampled: bool) -> None:
        from verifiers.v1.graph import MessageNode  # noqa: PLC0415

        parent = len(self.trace.nodes) - 1 if self.trace.nodes else None
        self.trace.nodes.append(MessageNode(parent=parent, message=message, sampled=sampled))

    async def turn(self, message: Any = None) -> Any:
        """Send the env's ``message`` (``None``: a prompted task's opening), return the reply."""
        import verifiers.v1 as vf  # noqa: PLC0415

        if self._closed:
            raise RuntimeError("this interaction is closed")
        if self._over:
            raise RuntimeError("the exchange is over (the run ended); read interaction.trace")
        prompted = not self._started and self.task.data.prompt is not None
        if message is None and not prompted:
            raise ValueError("nothing to run a turn on: a bare turn() takes a prompted task's opening reply")
        if message is not None and prompted:
            raise ValueError("the task's prompt opens this exchange: take its first reply with a bare turn()")
        self._started = True
        if self.trace.num_turns >= self.seat.limits.max_turns:  # the turn budget: the run ends unanswered
            self._over = True
            self.seat.cut_short = True
            self.trace.stop("max_turns")
            return vf.Segment(messages=[], terminated=True)
        incoming = as_messages(message)
        for item in incoming:
            self._append(item, sampled=False)
        observation = self.task.data.prompt_text if message is None else "\n\n".join(message_text(m) for m in incoming)
        reply = vf.AssistantMessage(content=await self.seat.ask(observation))
        self._append(reply, sampled=True)
        return vf.Segment(messages=[reply])

    def abandon(self) -> None:
        """Close without scoring (the episode was cancelled)."""
        self._closed = True
        self.trace.stop("cancelled")

    async def close(self) -> Any:
        """End the exchange; the task's rubric scores the trace (``task.score``), as verifiers'
        rollout does. A scorer that raises leaves the trace failed (``trace.ok`` false) and the
        exception on the seat (:attr:`Seat.failures`)."""
        if self._closed:
            return self.trace
        self._closed = True
        if not self.trace.errors:  # a run the env broke off is not scored (verifiers' rollout: the same)
            self.trace.stop("user_closed")
            try:
                await self.task.score(self.trace)
            except Exception as err:  # noqa: BLE001 - whose failure it is, the env decides (reference probe)
                self.seat.failures.append(err)
                self.trace.record_error(err)
        self.trace.is_completed = True
        self.trace.ok = not self.trace.errors
        return self.trace


@dataclass
class Seat:
    """The seat of an episode's one agent, played by ``ask`` (the policy, or a scripted probe).

    Attributes:
        name: The seat's name in the env's config (``agent``, ``player``...).
        config: Its ``AgentConfig`` (stamped on the trace).
        ask: Gets the model's reply to the env's message.
        limits: The turn budget.
        traces: The traces of its finished runs, in order.
        failures: Exceptions of the task's scorer.
        trainable: Set by an env's ``setup``; recorded on the trace.
        cut_short: Whether the turn budget ended a run (the episode is truncated, not over).
    """

    name: str
    config: Any
    ask: Ask
    limits: SeatLimits
    traces: list[Any] = field(default_factory=list)
    failures: list[BaseException] = field(default_factory=list)
    trainable: bool = True
    cut_short: bool = False

    @contextlib.asynccontextmanager
    async def interaction(self, task: Any, **_: Any) -> AsyncIterator[SeatInteraction]:
        """verifiers' ``agent.interaction(task)``: the caller is the run's user."""
        interaction = SeatInteraction(self, task)
        try:
            yield interaction
        except Exception as err:
            interaction.trace.record_error(err)
            raise
        except BaseException:  # cancelled (the episode was abandoned): nothing to score
            interaction.abandon()
            raise
        finally:
            self.traces.append(await interaction.close())

    async def run(self, task: Any, **_: Any) -> Any:
        """verifiers' ``agent.run(task)``: the task's prompt, one reply, scored."""
        if task.data.prompt is None:
            raise ValueError("a task without a prompt cannot be run alone: its env opens the exchange")
        async with self.interaction(task) as interaction:
            await interaction.turn()
        interaction.trace.stop("agent_completed", override=True)
        return interaction.trace


class SeatAgents:
    """verifiers' ``Agents`` of an episode with one seat: ``agents.<name>`` is the seat."""

    def __init__(self, seat: Seat):
        self._seat = seat

    def __getattr__(self, name: str) -> Seat:
        seat = self.__dict__.get("_seat")
        if seat is None or name != seat.name:
            raise AttributeError(f"no agent {name!r}; this env's one seat is {getattr(seat, 'name', None)!r}")
        return seat


async def play_episode(runner: Any, task: Any, seat: Seat) -> Any:
    """One episode of ``task`` with ``seat``: ``runner``'s ``setup``, ``run`` and ``finalize``
    (a verifiers ``Env``), or, for ``runner=None``, the single-agent protocol (``run(task)``).
    Returns the seat's last trace; raises what the env raises."""
    import verifiers.v1 as vf  # noqa: PLC0415

    agents = SeatAgents(seat)
    if runner is None:
        await seat.run(task)
    else:
        await runner.setup(agents)
        await runner.run(task, agents)
    if not seat.traces:
        raise ValueError(f"{type(runner).__name__}.run() ran no agent: there is no trace to score")
    if runner is not None:
        episode = vf.Episode(
            env=vf.EnvInfo(id=str(getattr(runner.config, "env_id", "") or "")),
            task=vf.TraceTask(type=type(task).__name__, data=task.data, key=task.key, hash=task.hash),
            traces=list(seat.traces),
        )
        await runner.finalize(task, episode)
    return seat.traces[-1]
