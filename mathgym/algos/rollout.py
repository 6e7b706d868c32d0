"""Rollouts: drive any registered env (through a gymnasium vector env) with a policy.

Groups: ``collect(task_seeds)`` resets the vector env with each seed repeated
``group_size`` times, so every group holds G samples of the same task.

Randomness: with ``sampling_seed``, sample ``j`` of the task of seed ``s`` draws its turn ``k``
from the stream keyed by ``(sampling_seed, s, j, k)`` (:func:`sample_stream_seed`), whatever
else the batch holds: any split of a batch's tasks over collectors (data-parallel ranks)
gives the episodes of one collector with them all. Without it, the streams are drawn from
``generator`` in batch order.

The policy samples; the chat format (``policy.chat`` unless given,
:class:`~mathgym.agents.chat_format.ChatFormat`) writes the prompts, reads the actions and
writes the env's turns; an env's ``info["tools"]`` at reset (the OpenAI function schemas of the
tools it serves, MCPTools-v0's) go to the chat template's ``tools``. Multi-turn episodes stay token-faithful: the policy's next prompt is the
episode's token sequence so far, the single source of truth (the history is never re-rendered or
re-tokenised); the env's reply is appended as the tokens of the text the chat template
inserts after an assistant turn (:meth:`ChatFormat.env_turn_ids
<mathgym.agents.chat_format.ChatFormat.env_turn_ids>`). A completion
ends at EOS or at the template's end-of-turn token; when the model sampled the token the
template would insert next, it is not inserted a second time. Only action tokens enter the loss.

With a template that rewrites earlier turns (Qwen3 drops their reasoning), the episode keeps
what the model actually saw and produced: ``decode(token_ids)`` is the rendering of the
env's messages *turn by turn* (each turn rendered when it was played), not the template's
rendering of the finished chat, which would drop the earlier reasoning.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from mathgym.agents.chat_format import ChatFormat
from mathgym.agents.policy import LLMPolicy, SamplingParams
from mathgym.algos.batch import Episode, RolloutBatch
from mathgym.algos.choices import VectorizationMode
from mathgym.envs.ahead import score_step_ahead
from mathgym.envs.served.remote import check_session_room

#: Builds a collector's vector env: ``(env_id, num_envs, env_kwargs) -> VectorEnv`` with the
#: results of ``gym.make_vec(..., vectorization_mode="sync")`` (e.g. the Ray executor's).
VectorEnvFactory = Callable[[str, int, Mapping[str, Any]], gym.vector.VectorEnv]


@dataclass
class RolloutSettings:
    """Knobs of the collector.

    Attributes:
        group_size: Samples per task (G).
        sampling: Sampling parameters of each turn.
        max_episode_tokens: Token budget of a whole episode (prompt + all turns).
        max_turns: Collector-side cap on turns (``None``: the env's own budget).
        vectorization_mode: ``"sync"`` or ``"async"`` gymnasium vector env.
        score_ahead: Before each step of a synchronous vector env, score what its envs will
            ask of batching scorers (a PRM) in one call (:mod:`mathgym.envs.ahead`).
    """

    group_size: int = 8
    sampling: SamplingParams = field(default_factory=SamplingParams)
    max_episode_tokens: int = 1024
    max_turns: int | None = None
    vectorization_mode: VectorizationMode = "sync"
    score_ahead: bool = True


_SEED_MASK = 2**64 - 1


def sample_stream_seed(sampling_seed: int, task_seed: int, sample: int, turn: int) -> int:
    """The seed of one episode's turn: a hash of ``(sampling_seed, task_seed, sample, turn)``.

    Example:
        >>> sample_stream_seed(0, 5, 1, 0) == sample_stream_seed(0, 5, 1, 0) != sample_stream_seed(0, 5, 2, 0)
        True
    """
    key = [int(sampling_seed) & _SEED_MASK, int(task_seed) & _SEED_MASK, int(sample), int(turn)]
    return int(np.random.SeedSequence(key).generate_state(1, np.uint64)[0])


def _info_value(infos: Mapping[str, Any], key: str, i: int, default: Any = None) -> Any:
    """Entry ``i`` of a vector env's ``infos[key]`` (``default`` where it is unset)."""
    if key not in infos:
        return default
    present = infos.get(f"_{key}")
    if present is not None and not bool(present[i]):
        return default
    return infos[key][i]


#: Tasks an evaluation plays at once (``evaluate_policy``'s ``chunk``), each with its samples.
EVAL_CHUNK = 100


def check_run_room(config: Any, env_kwargs: Mapping[str, Any], num_tasks: int) -> None:
    """Ask a served env's server (``mathgym/Remote-v0``) for a whole training run's sessions at once,
    before its first rollout: the rollouts' envs and, open beside them at the end (or every
    ``eval_every`` steps), its evaluation's; a server too small says so now, naming the number.

    Args:
        config: The run's ``TrainConfig`` (``env``, ``group_size``, ``eval_tasks``, ``eval_samples``).
        env_kwargs: The env's options (the client's ``url``...).
        num_tasks: This process' tasks per batch.
    """
    rollouts = num_tasks * config.group_size
    k = max(1, int(getattr(config, "eval_samples", 1)))
    evaluation = min(config.eval_tasks, max(1, EVAL_CHUNK // k)) * k if config.eval_tasks else 0
    also = f", and {evaluation} for its evaluation: --eval-tasks {config.eval_tasks}" if evaluation else ""
    what = f"this run ({rollouts} envs for its rollouts: --num-tasks {num_tasks} × --group-size {config.group_size}{also})"
    check_session_room(config.env, env_kwargs, rollouts + evaluation, what)


class RolloutCollector:
    """Collects groups of episodes from ``env_id`` with ``policy``.

    Args:
        env_id: Any registered env id.
        env_kwargs: Constructor options of the env.
        policy: The policy that acts.
        num_tasks: Tasks per batch (the vector env has ``num_tasks * group_size`` copies).
        settings: Group size, sampling and budgets.
        make_envs: Where the vector env comes from (default: ``gym.make_vec`` in
            ``settings.vectorization_mode``).
        chat: The chat format episodes are written in (default: the policy's, ``policy.chat``).
    """

    def __init__(
        self,
        env_id: str,
        env_kwargs: Mapping[str, Any],
        policy: LLMPolicy,
        num_tasks: int,
        settings: RolloutSettings,
        make_envs: VectorEnvFactory | None = None,
        chat: ChatFormat | None = None,
    ):
        self.env_id = env_id
        self.policy = policy
        self.chat = policy.chat if chat is None else chat
        self.settings = settings
        self.num_tasks = int(num_tasks)
        self.scored_ahead = 0  # scoring requests answered in batches (mathgym.envs.ahead)
        num_envs = self.num_tasks * settings.group_size
        # a served env (mathgym/Remote-v0): its server is asked for them all before the first is made
        check_session_room(env_id, env_kwargs, num_envs, f"{num_envs} envs ({self.num_tasks} tasks × {settings.group_size} samples)")
        if make_envs is not None:
            self.envs = make_envs(env_id, num_envs, dict(env_kwargs))
        else:
            self.envs = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode=settings.vectorization_mode, **dict(env_kwargs))

    def close(self) -> None:
        self.envs.close()

    def collect(
        self, task_seeds: Sequence[int], generator: torch.Generator | None = None, *, sampling_seed: int | None = None
    ) -> RolloutBatch:
        """Run one batch of groups; ``task_seeds`` has ``num_tasks`` entries.

        Args:
            task_seeds: The seed each task's env is reset with.
            generator: Where the samples' streams are drawn from (in batch order) without ``sampling_seed``.
            sampling_seed: Key each episode's samples by ``(sampling_seed, task seed, sample, turn)``
                (see the module doc), so that they do not depend on the rest of the batch.
        """
        episodes = self.collect_episodes(task_seeds, generator, sampling_seed=sampling_seed)
        return RolloutBatch.from_episodes(episodes, self.policy.pad_token_id)

    def collect_episodes(
        self, task_seeds: Sequence[int], generator: torch.Generator | None = None, *, sampling_seed: int | None = None
    ) -> list[Episode]:
        """Like :meth:`collect`, but returns the :class:`Episode` list."""
        G = self.settings.group_size
        if len(task_seeds) != self.num_tasks:
            raise ValueError(f"collect() needs {self.num_tasks} task seeds, got {len(task_seeds)}")
        seeds = [int(s) for s in task_seeds for _ in range(G)]
        # each episode's stream key but the turn: (sampling_seed, task seed, sample in the group)
        keys = None if sampling_seed is None else [(sampling_seed, s, i % G) for i, s in enumerate(seeds)]
        observations, infos = self.envs.reset(seed=seeds)
        n = len(seeds)
        episodes = []
        chats: list[list[dict[str, str]]] = []
        tools: list[list[dict[str, Any]] | None] = []  # an env's info["tools"]: the template's tools
        encoded: dict[str, list[int]] = {}  # a group's G copies of a prompt: encode once
        for i in range(n):
            messages = [dict(m) for m in _info_value(infos, "messages", i, [])]
            task_id = str(_info_value(infos, "task_id", i, ""))
            ep = Episode(self.env_id, task_id, group_id=i // G, messages=list(messages), sampled=True)
            ep.observations.append(str(observations[i]))
            tools.append(_info_value(infos, "tools", i, None) or None)
            key = repr((messages, tools[i]))
            if key not in encoded:
                encoded[key] = self.chat.prompt_ids(messages, tools=tools[i])
            ep.extend(list(encoded[key]))
            episodes.append(ep)
            chats.append(messages)
        active = np.ones(n, dtype=bool)
        turn = 0
        with self.policy.reusing_turns():  # each turn runs the episode's new tokens only
            while active.any():
                self._play_turn(episodes, chats, active, turn, generator, keys, tools)
                turn += 1
        return episodes

    def _play_turn(
        self, episodes: list[Episode], chats: list[list[dict[str, str]]], active: np.ndarray, turn: int,
        generator: torch.Generator | None, keys: Sequence[tuple[int, int, int]] | None = None,
        tools: Sequence[list[dict[str, Any]] | None] | None = None,
    ) -> None:
        """Generate one action for every active episode, step the envs, extend the episodes."""
        settings, policy = self.settings, self.policy
        idx = [i for i in range(len(episodes)) if active[i]]
        budget = [settings.max_episode_tokens - len(episodes[i].token_ids) for i in idx]
        max_new = max(1, min(settings.sampling.max_new_tokens, max(budget)))
        params = SamplingParams(settings.sampling.temperature, settings.sampling.top_p, max_new, settings.sampling.stop)
        prompts = [episodes[i].token_ids for i in idx]
        if keys is None:
            gens = policy.generate(prompts, params, generator)
        else:
            seeds = [sample_stream_seed(*keys[i], turn) for i in idx]
            gens = policy.generate(prompts, params, generator, seeds=seeds)
        actions = [""] * len(episodes)
        for i, gen, room in zip(idx, gens, budget):
            tokens, logprobs = gen.token_ids[: max(room, 0)], gen.logprobs[: max(room, 0)]
            text = self.chat.action_text(tokens)
            episodes[i].extend(tokens, action_step=turn, logprobs=logprobs)
            episodes[i].completions.append(text)
            episodes[i].truncated_tokens |= gen.finish_reason == "length" or len(tokens) < len(gen.token_ids)
            actions[i] = text
        if settings.score_ahead:
            self.scored_ahead += score_step_ahead(self.envs, actions, idx)
        obs, rewards, terminated, truncated, infos = self.envs.step(np.array(actions, dtype=object))
        for i in idx:
            ep = episodes[i]
            ep.step_rewards.append(float(rewards[i]))
            ep.status = str(_info_value(infos, "status", i, ep.status))
            ep.messages = [dict(m) for m in _info_value(infos, "messages", i, ep.messages)]
            ended = bool(terminated[i] or truncated[i])
            ep.truncated_turns |= bool(truncated[i])
            if ended:
                ep.correct = bool(_info_value(infos, "correct", i, False))
                active[i] = False
                continue
            if settings.max_turns is not None and turn + 1 >= settings.max_turns:
                ep.truncated_turns = True
                active[i] = False
                continue
            reply = self.chat.env_turn_ids(
                chats[i], str(obs[i]), ep.token_ids[-1] if ep.token_ids else None, tools=tools[i] if tools else None,
            )
            if len(ep.token_ids) + len(reply) >= settings.max_episode_tokens:  # no room left to act
                ep.truncated_tokens = True
                active[i] = False
                continue
            chats[i] += [{"role": "assistant", "content": ep.completions[-1]}, {"role": "user", "content": str(obs[i])}]
            ep.extend(reply)
            ep.observations.append(str(obs[i]))
