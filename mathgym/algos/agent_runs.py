"""Agent programs as RL episodes: tasks played by agent code against the policy's endpoint.

An *agent function* is any program written against OpenAI's Chat Completions API (the ``openai``
client, an agent framework), wrapped as ``agent(task: AgentTask) -> str | None`` (or ``async def``):
it points its client at ``task.base_url`` with ``api_key=task.api_key`` (which names its run), plays
the task (``task.messages``, the tools of ``task.tools``), and returns its final answer, or ``None``
when it acted on the task's env itself (``task.env``: its return is then the reward).

:class:`AgentBatchSource` is the batch source of a training run that drives agents
(``mathgym train --agent module:function``): for each step's tasks (``group_size`` runs of each, a
GRPO group) it resets an env, runs the agent function in a thread per run, all at once against a
:class:`~mathgym.agents.endpoint.PolicyEndpoint` serving the policy (their concurrent calls are the
sampler's batches), scores each run (:func:`score_run`: the answer stepped into the env, whose
verifier grades it; or a reward function) and builds its episodes from the recorded calls
(:func:`run_episodes`): the :class:`~mathgym.algos.batch.RolloutBatch` the collector would return,
which every algorithm's step consumes unchanged.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Union

import gymnasium as gym

from mathgym.agents.endpoint import PolicyEndpoint, RunRecord
from mathgym.agents.endpoint.recorder import HistoryMode
from mathgym.agents.policy import LLMPolicy, SamplingParams
from mathgym.algos.batch import Episode, RolloutBatch
from mathgym.algos.configs import TrainConfig
from mathgym.algos.distributed import Distributed
from mathgym.algos.sources import BatchSource
from mathgym.errors import ConfigError, MathgymError
from mathgym.rewards.base import Status
from mathgym.aio_server import ServerThread

#: The status of a run whose agent program raised (a model-caused crash counts against the model: it trains, reward 0).
AGENT_ERROR = "agent_error"


@dataclass(frozen=True)
class AgentTask:
    """What an agent function is given for one run.

    Attributes:
        base_url: The endpoint's OpenAI base URL (``http://127.0.0.1:PORT/v1``).
        api_key: The key to call it with: it names the run its calls belong to.
        run_id: The run's id (also sent as ``X-Mathgym-Run`` by clients that set headers).
        model: The model name the endpoint serves.
        messages: The task's chat prompt (the env's ``info["messages"]``).
        tools: The env's tools in the OpenAI function form (``info["tools"]``), or ``None``.
        prompt: The env's first observation.
        task_id: The env's task id.
        env: The task's env, reset: an agent may act on it (its return is then the reward).
    """

    base_url: str
    api_key: str
    run_id: str
    model: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    prompt: str
    task_id: str
    env: Any = None

    def client(self, **kwargs: Any) -> Any:
        """An ``openai.OpenAI`` client for this run (``kwargs`` passed on)."""
        import openai  # noqa: PLC0415 - an agent's dependency, not mathgym's

        return openai.OpenAI(base_url=self.base_url, api_key=self.api_key, **kwargs)


AgentFunction = Callable[[AgentTask], Union[str, None, Awaitable[Union[str, None]]]]
#: ``reward(task, answer) -> float``: scores a run instead of the env's verifier.
RewardFunction = Callable[[AgentTask, Union[str, None]], float]


def load_agent(spec: str) -> AgentFunction:
    """The function named ``module:function`` (``--agent``).

    Raises:
        ConfigError: ``spec`` is not ``module:function``, or does not name a callable.
    """
    module_name, _, name = spec.partition(":")
    if not module_name or not name:
        raise ConfigError(f"agent={spec!r}: write it as module:function (e.g. my_agents:solve)")
    try:
        target: Any = importlib.import_module(module_name)
        for part in name.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as err:
        raise ConfigError(f"agent={spec!r} cannot be loaded: {type(err).__name__}: {err}") from None
    if not callable(target):
        raise ConfigError(f"agent={spec!r} is not a function")
    return target


@dataclass
class RunOutcome:
    """How a run ended: its reward, status and correctness, the answer and an error message."""

    reward: float
    status: str
    correct: bool = False
    answer: str | None = None
    error: str = ""


class ReturnTracker(gym.Wrapper):
    """The task's env, summing its rewards: the final state of an agent that acts on it."""

    def reset(self, **kwargs: Any) -> Any:
        self.episode_return, self.done, self.last_info = 0.0, False, {}
        return super().reset(**kwargs)

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, info = super().step(action)
        self.episode_return += float(reward)
        self.done, self.last_info = bool(terminated or truncated), dict(info)
        return obs, reward, terminated, truncated, info


def play_agent(agent: AgentFunction, task: AgentTask) -> str | None:
    """Run ``agent`` on ``task`` (an ``async`` one in its own event loop); its answer as text or ``None``."""
    answer = agent(task)
    if inspect.isawaitable(answer):
        answer = asyncio.run(_awaited(answer))
    return None if answer is None else str(answer)


async def _awaited(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


def score_run(env: ReturnTracker, task: AgentTask, answer: str | None, reward: RewardFunction | None = None) -> RunOutcome:
    """A run's outcome: ``reward(task, answer)`` when given; else the env's: ``answer`` stepped into it
    (unless the agent ended its episode itself), the env's return, ``info["status"]`` and ``info["correct"]``."""
    if reward is not None:
        value = float(reward(task, answer))
        return RunOutcome(value, Status.CORRECT if value > 0 else Status.WRONG, value > 0, answer)
    if answer is not None and not env.done:
        env.step(answer)
    info = env.last_info
    return RunOutcome(env.episode_return, str(info.get("status", Status.IN_PROGRESS)), bool(info.get("correct", False)), answer)


def failed_run(err: BaseException) -> RunOutcome:
    """The outcome of an agent that raised: the endpoint failing (a 5xx, no connection) is an
    infrastructure failure (``error``, left out of training); anything else is the agent's (reward 0)."""
    from_client = type(err).__module__.split(".")[0] in ("openai", "httpx")
    infra = from_client and (getattr(err, "status_code", None) is None or int(getattr(err, "status_code", 0)) >= 500)
    return RunOutcome(0.0, Status.ERROR if infra else AGENT_ERROR, error=f"{type(err).__name__}: {err}"[:500])


def run_episodes(run: RunRecord, env_id: str, task_id: str, group_id: int, outcome: RunOutcome) -> list[Episode]:
    """The episodes of one agent run: one per *segment*, a chain of calls each continuing the last
    (its prompt the previous sample's tokens and the template's tokens for the new messages), ending
    at a sample no call continued. The model's samples are the action tokens, everything else
    (prompt, tool results, user turns) is masked; a sample shared by several chains (``n > 1``
    branches) trains in the first only. Each segment carries the run's reward."""
    calls = {call.index: call for call in run.calls if call.samples}
    continued = {call.parent for call in calls.values() if call.parent is not None}
    leaves = [(i, j) for i, call in calls.items() for j in range(len(call.samples)) if (i, j) not in continued]
    trained: set[tuple[int, int]] = set()
    episodes = []
    for leaf in leaves:
        path = [leaf]
        while calls[path[-1][0]].parent is not None:
            path.append(calls[path[-1][0]].parent)
        path.reverse()
        ep = Episode(env_id, task_id, group_id, sampled=True, status=outcome.status, correct=outcome.correct)
        for turn, (i, j) in enumerate(path):
            call, sample = calls[i], calls[i].samples[j]
            if call.prompt_ids[: len(ep.token_ids)] != ep.token_ids:
                raise MathgymError(f"run {run.run_id!r}: call {i} does not continue the tokens of its parent")
            ep.extend(call.prompt_ids[len(ep.token_ids):])  # the prompt, or the turns added since: masked
            ep.extend(sample.completion_ids, action_step=None if (i, j) in trained else turn, logprobs=sample.logprobs)
            trained.add((i, j))
            ep.completions.append(str(sample.message.get("content") or ""))
            ep.truncated_tokens |= sample.finish_reason == "length"
        ep.step_rewards = [0.0] * (len(path) - 1) + [outcome.reward]
        last = calls[path[-1][0]]
        ep.messages = [*last.messages, last.samples[path[-1][1]].message]
        ep.observations.append(str(last.messages[-1].get("content", "")))
        episodes.append(ep)
    return episodes


class AgentBatchSource(BatchSource):
    """Batches from agent runs: ``config.num_tasks`` tasks of ``config.env``, ``config.group_size`` runs
    of each, every run an agent program calling the policy's endpoint (see the module docstring).

    Args:
        config: The run's configuration (``env``, ``num_tasks``, ``group_size``, sampling, ``max_episode_tokens``).
        dist: The data-parallel group (one process only).
        policy: The policy the endpoint samples from (the learner).
        env_kwargs: The env's options.
        agent: The agent function (default: ``config.agent`` loaded, :func:`load_agent`).
        reward: Scores a run instead of the env's verifier (:data:`RewardFunction`).
        history: How a continued conversation is prompted (:mod:`mathgym.agents.endpoint.recorder`).
        host: Where the endpoint listens (127.0.0.1: only this machine's programs reach it).
    """

    def __init__(
        self, config: TrainConfig, dist: Distributed, policy: LLMPolicy, env_kwargs: dict[str, Any],
        agent: AgentFunction | None = None, reward: RewardFunction | None = None, history: HistoryMode = "template",
        host: str = "127.0.0.1",
    ):
        super().__init__()
        if dist.world_size > 1:
            raise ConfigError("agent runs (--agent) train in one process: run without accelerate/torchrun")
        if config.off_policy_steps:
            raise ConfigError("agent runs (--agent) sample with the learner's weights: set off_policy_steps=0")
        self.config, self.policy, self.env_kwargs, self.reward = config, policy, env_kwargs, reward
        self.agent = agent if agent is not None else load_agent(config.agent)
        sampling = SamplingParams(config.temperature, config.top_p, config.max_new_tokens)
        self.endpoint = PolicyEndpoint(
            policy, sampling, history=history, max_context_tokens=config.max_episode_tokens, sampling_seed=config.seed,
        )
        self.server = ServerThread(self.endpoint, host=host)
        self.base_url = self.server.start() + "/v1"
        self.envs = [ReturnTracker(gym.make(config.env, **env_kwargs)) for _ in range(config.num_tasks * config.group_size)]

    def task_seeds(self, step: int) -> list[int]:
        """The seeds of ``step``'s tasks, as :class:`~mathgym.algos.sources.RolloutSource` draws them."""
        n = self.config.num_tasks
        return [self.config.seed * 1_000_003 + step * n + i for i in range(n)]

    def make_batch(self, step: int) -> tuple[RolloutBatch, dict[str, float]]:
        """Play ``group_size`` agent runs of each task of ``step`` at once; their episodes, and what the runs did."""
        G, start = self.config.group_size, len(self.endpoint.batch_sizes)
        runs = [(t, seed, g) for t, seed in enumerate(self.task_seeds(step)) for g in range(G)]
        with self.policy.reusing_turns(), ThreadPoolExecutor(len(runs), thread_name_prefix="mathgym-agent") as pool:
            played = list(pool.map(lambda k: self._play(step, k, *runs[k]), range(len(runs))))
        episodes = [e for run_episodes_, _, _ in played for e in run_episodes_]
        if not episodes:
            raise MathgymError(f"step {step}: no agent run called the endpoint at {self.base_url}; nothing to train on")
        sizes = self.endpoint.batch_sizes[start:]
        calls = [len(record.calls) for _, record, _ in played]
        stats = {
            "agent/calls_per_run": sum(calls) / len(calls),
            "agent/segments_per_run": len(episodes) / len(played),
            "agent/errors": float(sum(outcome.status in (AGENT_ERROR, Status.ERROR) for _, _, outcome in played)),
            "agent/sampler_batch_mean": sum(sizes) / max(len(sizes), 1),
        }
        return RolloutBatch.from_episodes(episodes, self.policy.pad_token_id), stats

    def _play(self, step: int, k: int, group: int, seed: int, sample: int) -> tuple[list[Episode], RunRecord, RunOutcome]:
        """Run ``k`` of the step: reset its env, run the agent, score it, build its episodes."""
        env = self.envs[k]
        obs, info = env.reset(seed=seed)
        run_id = f"step{step}-task{group}-run{sample}"  # its samples' streams are keyed by it: same seed, same runs
        task = AgentTask(
            self.base_url, run_id, run_id, self.endpoint.model_name, [dict(m) for m in info.get("messages", [])],
            info.get("tools") or None, str(obs), str(info.get("task_id", "")), env,
        )
        self.endpoint.recorder.open(run_id)
        try:
            answer = play_agent(self.agent, task)
        except Exception as err:  # noqa: BLE001 - an agent program's failure is its run's outcome
            outcome = failed_run(err)
        else:
            try:
                outcome = score_run(env, task, answer, self.reward)
            except Exception as err:  # noqa: BLE001 - the verifier's failure, not the model's
                outcome = RunOutcome(0.0, Status.ERROR, answer=answer, error=f"{type(err).__name__}: {err}"[:500])
        record = self.endpoint.recorder.pop(run_id)  # later calls of this run are refused
        return run_episodes(record, self.config.env, task.task_id, group, outcome), record, outcome

    def close(self) -> None:
        self.server.stop()
        for env in self.envs:
            env.close()
        self.envs = []

