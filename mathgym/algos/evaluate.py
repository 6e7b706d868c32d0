"""Evaluation on a fixed task set: pass@1 (greedy or sampled) and pass@k."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from mathgym.agents.policy import LLMPolicy, SamplingParams
from mathgym.algos.rollout import RolloutCollector, RolloutSettings, VectorEnvFactory


@dataclass
class EvalResult:
    """Accuracy on a fixed task set.

    Attributes:
        pass_at_1: Mean correctness over every sample (greedy when k = 1).
        pass_at_k: Fraction of tasks with at least one correct sample among k.
        k: Samples per task.
        num_tasks: Tasks evaluated.
        mean_reward: Mean episode return.
        statuses: Status → count.
    """

    pass_at_1: float
    pass_at_k: float
    k: int
    num_tasks: int
    mean_reward: float
    statuses: dict[str, int] = field(default_factory=dict)

    def as_metrics(self, prefix: str = "eval/") -> dict[str, float]:
        out = {f"{prefix}pass@1": self.pass_at_1, f"{prefix}reward": self.mean_reward}
        if self.k > 1:
            out[f"{prefix}pass@{self.k}"] = self.pass_at_k
        return out


def evaluate_policy(
    policy: LLMPolicy,
    env_id: str,
    env_kwargs: Mapping[str, Any],
    *,
    num_tasks: int = 200,
    seed: int = 10_000,
    k: int = 1,
    temperature: float = 1.0,
    max_new_tokens: int = 32,
    max_episode_tokens: int = 1024,
    max_turns: int | None = None,
    chunk: int = 100,
    make_envs: VectorEnvFactory | None = None,
    progress: bool = False,
) -> EvalResult:
    """Evaluate on tasks ``seed .. seed + num_tasks - 1``.

    With ``k == 1`` decoding is greedy; with ``k > 1`` each task gets k samples at
    ``temperature`` (seeded, so the result is reproducible). ``make_envs`` builds the
    vector envs (default ``gym.make_vec``; the trainer passes its executor's). ``progress``
    shows a bar on stderr, counting tasks.
    """
    from tqdm.auto import tqdm

    greedy = k == 1
    params = SamplingParams(0.0 if greedy else temperature, 1.0, max_new_tokens)
    settings = RolloutSettings(group_size=k, sampling=params, max_episode_tokens=max_episode_tokens, max_turns=max_turns)
    generator = torch.Generator().manual_seed(seed)
    correct, any_correct, rewards, statuses = [], [], [], {}
    per_chunk = max(1, chunk // k)
    mode = "greedy" if greedy else f"{k} samples each"
    bar = tqdm(total=num_tasks, desc=f"evaluating on {env_id} ({mode})", unit="task", disable=not progress, leave=False)
    for start in range(0, num_tasks, per_chunk):
        seeds = list(range(seed + start, seed + min(start + per_chunk, num_tasks)))
        collector = RolloutCollector(env_id, env_kwargs, policy, len(seeds), settings, make_envs)
        try:
            episodes = collector.collect_episodes(seeds, generator)
        finally:
            collector.close()
        for g in range(len(seeds)):
            group = episodes[g * k : (g + 1) * k]
            correct += [e.correct for e in group]
            any_correct.append(any(e.correct for e in group))
            rewards += [e.reward for e in group]
            for e in group:
                statuses[e.status] = statuses.get(e.status, 0) + 1
        bar.update(len(seeds))
        bar.set_postfix(pass1=f"{sum(correct) / max(len(correct), 1):.1%}")
    bar.close()
    n = max(len(correct), 1)
    return EvalResult(
        pass_at_1=sum(correct) / n,
        pass_at_k=sum(any_correct) / max(len(any_correct), 1),
        k=k,
        num_tasks=num_tasks,
        mean_reward=sum(rewards) / n,
        statuses=statuses,
    )
