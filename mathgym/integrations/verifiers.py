"""Any mathgym env as a verifiers environment (``verifiers`` ≥ 0.4, its ``verifiers.v1`` stack;
the extra ``mathgym[verifiers]``), for prime-rl and the verifiers tools.

In verifiers' vocabulary a mathgym env is a **taskset** (``MathgymTaskset``: task ``i`` is the
env's ``reset(seed=seed + i)``: its system prompt and first user message) played by an **env**
(``MathgymEnv``) whose ``run()`` steps the real mathgym env host-side as the run's user, the way
verifiers' own TextArena env steps its game engine: each assistant reply is the env's action, the
env's observation is the next user turn, the episode's end ends the exchange, and the episode's
return is the trace's reward (``env_reward``). An infrastructure failure (a sandbox or verifier
down) raises, so verifiers records an episode error instead of a reward of 0.

verifiers finds a taskset by a top-level module name: this one is ``mathgym_verifiers`` (shipped
with mathgym), so ``vf-eval mathgym-verifiers --env.taskset.env-id GuessNumber-v0`` and prime-rl's
``[env.taskset] id = "mathgym-verifiers"`` load it. In Python, :func:`load_environment` builds it.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from typing import Any

from mathgym.install import extra_hint

try:
    import verifiers.v1 as vf
    from pydantic import Field
except ModuleNotFoundError as _err:  # the module is only imported by someone who wants verifiers
    # still a ModuleNotFoundError naming the missing package, so callers can tell it from a broken install
    raise ModuleNotFoundError(f"mathgym.integrations.verifiers needs verifiers>=0.4: {extra_hint('verifiers')} ({_err})",
                              name=_err.name) from None

#: The taskset id verifiers resolves to this module (through the ``mathgym_verifiers`` package).
TASKSET_ID = "mathgym-verifiers"

__all__ = ["MathgymEnv", "MathgymTaskset", "TASKSET_ID", "load_environment"]


class MathgymTasksetConfig(vf.TasksetConfig):
    """Which mathgym env, with which options, and which of its tasks (``--env.taskset.*``)."""

    env_id: str = "MathReason-v0"
    """The mathgym env id (``mathgym envs`` lists them)."""
    env_kwargs: dict[str, Any] = Field(default_factory=dict)
    """Options of the env's constructor."""
    num_tasks: int | None = Field(1000, ge=1)
    """Tasks in the taskset (None: endless)."""
    seed: int = Field(0, ge=0)
    """Task i is the env's reset(seed=seed + i)."""


class MathgymData(vf.TaskData):
    """One mathgym task: the env and the seed that reproduce it."""

    env_id: str
    env_kwargs: dict[str, Any] = Field(default_factory=dict)
    seed: int


class MathgymTask(vf.Task[MathgymData]):
    """A mathgym task; its reward is recorded by :class:`MathgymEnv` while it plays the env."""


def _make_env(env_id: str, env_kwargs: dict[str, Any]) -> Any:
    import gymnasium as gym

    import mathgym  # noqa: F401 - registers the ids

    return gym.make(env_id, **env_kwargs)


class MathgymTaskset(vf.Taskset[MathgymTask, MathgymTasksetConfig]):
    """The tasks of a mathgym env, one per seed."""

    def load(self) -> Iterator[MathgymTask]:
        config = self.config
        self.INFINITE = config.num_tasks is None
        env = _make_env(config.env_id, config.env_kwargs)
        try:
            indices = itertools.count() if config.num_tasks is None else range(config.num_tasks)
            for i in indices:
                seed = config.seed + i
                _, info = env.reset(seed=seed)
                system = [m["content"] for m in info["messages"] if m["role"] == "system"]
                prompt = [m for m in info["messages"] if m["role"] != "system"]
                data = MathgymData(
                    id=str(info["task_id"]), name=f"{config.env_id}#{seed}",
                    prompt=prompt[0]["content"] if len(prompt) == 1 else prompt,
                    system_prompt=system[0] if system else None,
                    env_id=config.env_id, env_kwargs=dict(config.env_kwargs), seed=seed,
                )
                yield MathgymTask(data, config.task)
        finally:
            env.close()


def _reply(segment: Any) -> str:
    """The segment's reply as the model wrote it (verifiers' ``last_reply`` strips it)."""
    if segment.root_reply is not None:
        return str(segment.root_reply)
    for message in reversed(segment.messages):
        if isinstance(message, vf.AssistantMessage):
            return message.content or ""
    return ""


class MathgymEnvConfig(vf.EnvConfig):
    """The one seat: the policy playing the mathgym env (``--env.player.*``)."""

    player: vf.AgentConfig = vf.AgentConfig()


class MathgymEnv(vf.Env[MathgymEnvConfig]):
    """Plays a :class:`MathgymTask` on the real mathgym env, the env acting as the run's user."""

    async def run(self, task: MathgymTask, agents: Any) -> None:
        data = task.data
        env = _make_env(data.env_id, data.env_kwargs)
        env.reset(seed=data.seed)
        total, info = 0.0, {}
        try:
            async with agents.player.interaction(task) as interaction:
                segment = await interaction.turn()  # the task's prompt speaks first
                while not segment.terminated:
                    observation, reward, terminated, truncated, info = await asyncio.to_thread(env.step, _reply(segment))
                    total += float(reward)
                    if terminated or truncated:
                        break
                    segment = await interaction.turn(observation)
        finally:
            env.close()
        trace = interaction.trace
        status = str(info.get("status", "unfinished"))
        trace.info.update(mathgym_status=status, mathgym_task_id=str(data.id), mathgym_correct=bool(info.get("correct", False)))
        if status in {"error", "sandbox_error", "actor_error", "unverifiable"}:
            raise RuntimeError(f"{data.env_id} could not judge the episode ({status}): an infrastructure failure, not the model's")
        trace.record_reward("env_reward", total, 1.0)


def load_environment(env_id: str = "MathReason-v0", num_tasks: int | None = 1000, seed: int = 0, **env_kwargs: Any) -> MathgymEnv:
    """A verifiers env playing mathgym env ``env_id`` (options ``env_kwargs``), built through
    verifiers' own loader (``verifiers.v1.utils.loaders.load_environment``).

    Example:
        >>> env = load_environment("GuessNumber-v0", num_tasks=2, max_turns=5)  # doctest: +SKIP
        >>> [t.data.name for t in env.taskset]  # doctest: +SKIP
        ['GuessNumber-v0#0', 'GuessNumber-v0#1']
    """
    from verifiers.v1.utils.loaders import load_environment as vf_load_environment
    from verifiers.v1.utils.loaders import resolve_env_config

    import mathgym  # noqa: F401
    from mathgym.registry import check_env_kwargs, resolve_env_id

    check_env_kwargs(resolve_env_id(env_id), env_kwargs)
    taskset = {"id": TASKSET_ID, "env_id": env_id, "env_kwargs": env_kwargs, "num_tasks": num_tasks, "seed": seed}
    return vf_load_environment(resolve_env_config({"taskset": taskset}))
