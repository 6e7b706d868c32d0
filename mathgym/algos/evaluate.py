"""Evaluation on a fixed task set: pass@1 (greedy or sampled), pass@k, maj@k, a selection rule's
accuracy (:mod:`mathgym.algos.selection`), and PRM-guided beam search (:mod:`mathgym.algos.search`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from mathgym.agents.policy import LLMPolicy, SamplingParams
from mathgym.algos.batch import Episode
from mathgym.algos.rollout import EVAL_CHUNK, RolloutCollector, RolloutSettings, VectorEnvFactory
from mathgym.algos.selection import SelectRule, StepScorer, answer_groups, math_equal, select


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
        maj_at_k: Accuracy of the most frequent final answer among the k samples (``None`` when k = 1).
        select: The selection rule (``None``: none asked for).
        selected: Accuracy of the sample the rule chose.
        task_ids: The distinct tasks evaluated (a data set smaller than ``num_tasks`` repeats
            its tasks; a trainer reports those it also trained on).
    """

    pass_at_1: float
    pass_at_k: float
    k: int
    num_tasks: int
    mean_reward: float
    statuses: dict[str, int] = field(default_factory=dict)
    maj_at_k: float | None = None
    select: str | None = None
    selected: float | None = None
    task_ids: tuple[str, ...] = ()

    def as_metrics(self, prefix: str = "eval/") -> dict[str, float]:
        out = {f"{prefix}pass@1": self.pass_at_1, f"{prefix}reward": self.mean_reward}
        if self.k > 1:
            out[f"{prefix}pass@{self.k}"] = self.pass_at_k
        if self.maj_at_k is not None:
            out[f"{prefix}maj@{self.k}"] = self.maj_at_k
        if self.select not in (None, "majority") and self.selected is not None:  # majority's is maj@k
            out[f"{prefix}{self.select}@{self.k}"] = self.selected
        return out


def episode_steps(episode: Episode) -> list[str]:
    """An episode's solution as steps (stripped): its actions on a step-level env, the pieces of its one
    action otherwise (:func:`mathgym.algos.step_policy.split_steps`)."""
    from mathgym.algos.step_policy import split_steps

    if len(episode.completions) == 1 and sum(m.get("role") == "assistant" for m in episode.messages) <= 1:
        return [s.strip() for s in split_steps(episode.completions[0])]
    return [c.strip() for c in episode.completions]


def episode_problem(episode: Episode) -> str:
    """The problem an episode solved: the first user message of its chat."""
    return next((str(m["content"]) for m in episode.messages if m.get("role") == "user"), "")


@dataclass
class Selector:
    """How ``evaluate_policy`` picks one of k samples: a rule and the models it needs."""

    rule: SelectRule
    prm: StepScorer | None = None
    orm: StepScorer | None = None

    def choose(self, group: list[Episode], same: Any) -> tuple[int, int]:
        """``(majority's pick, the rule's pick)`` among a task's samples."""
        from mathgym.rewards.extract import extract_answer

        answers = [extract_answer("\n".join(e.completions)) for e in group]
        groups = answer_groups([a[0] if a else None for a in answers], same)
        steps = [episode_steps(e) for e in group]
        problems = [episode_problem(e) for e in group]
        step_scores = self.prm.score_steps(problems, steps) if self.prm is not None and self.rule.startswith("prm") else None
        outcome = None
        if self.orm is not None and self.rule == "orm":
            outcome = [s[-1] if s else float("-inf") for s in self.orm.score_steps(problems, [["\n".join(x)] for x in steps])]
        return select("majority", groups), select(self.rule, groups, step_scores, outcome)


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
    chunk: int = EVAL_CHUNK,
    make_envs: VectorEnvFactory | None = None,
    progress: bool = False,
    selector: Selector | None = None,
) -> EvalResult:
    """Evaluate on tasks ``seed .. seed + num_tasks - 1``.

    With ``k == 1`` decoding is greedy; with ``k > 1`` each task gets k samples at
    ``temperature`` (seeded, so the result is reproducible). ``make_envs`` builds the
    vector envs (default ``gym.make_vec``; the trainer passes its executor's). ``progress``
    shows a bar on stderr, counting tasks. With ``k > 1`` the result holds maj@k, and with
    ``selector`` the accuracy of the sample its rule chose (see :mod:`mathgym.algos.selection`).
    """
    from tqdm.auto import tqdm

    greedy = k == 1
    params = SamplingParams(0.0 if greedy else temperature, 1.0, max_new_tokens)
    settings = RolloutSettings(group_size=k, sampling=params, max_episode_tokens=max_episode_tokens, max_turns=max_turns)
    generator = torch.Generator().manual_seed(seed)
    correct, any_correct, rewards, statuses = [], [], [], {}
    majority, chosen, task_ids = [], [], set()
    same = math_equal() if k > 1 else None
    selector = selector if k > 1 else None
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
            if same is not None:
                picks = (selector or Selector("majority")).choose(group, same)
                majority.append(group[picks[0]].correct)
                chosen.append(group[picks[1]].correct)
            rewards += [e.reward for e in group]
            task_ids.update(e.task_id for e in group if e.task_id)
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
        maj_at_k=sum(majority) / len(majority) if majority else None,
        select=selector.rule if selector is not None else None,
        selected=sum(chosen) / len(chosen) if selector is not None and chosen else None,
        task_ids=tuple(sorted(task_ids)),
    )


def evaluate_beam_search(
    policy: LLMPolicy,
    env_id: str,
    env_kwargs: Mapping[str, Any],
    prm: StepScorer,
    *,
    num_tasks: int = 200,
    seed: int = 10_000,
    beam_width: int = 4,
    expansions: int = 4,
    max_steps: int | None = None,
    aggregation: str = "min",
    temperature: float = 1.0,
    max_new_tokens: int = 64,
    progress: bool = False,
) -> EvalResult:
    """Accuracy of PRM-guided beam search (:func:`mathgym.algos.search.beam_search`) on tasks ``seed ..``.

    Each solution is judged by the env (its steps played into a fresh episode). ``max_steps``
    defaults to the env's turn budget on a step-level env, else 16 lines. The result's
    ``pass_at_1`` and ``selected`` are the search's accuracy (``select="beam"``).
    """
    from tqdm.auto import tqdm

    from mathgym.algos.search import beam_search
    from mathgym.algos.step_policy import EnvSteps, PolicyStepWriter

    steps = EnvSteps(env_id, env_kwargs)
    writer = PolicyStepWriter(policy, steps, temperature=temperature, max_new_tokens=max_new_tokens, seed=seed)
    statuses: dict[str, int] = {}
    right = 0
    bar = tqdm(total=num_tasks, desc=f"beam search on {env_id} ({beam_width}x{expansions})", unit="task",
               disable=not progress, leave=False)
    try:
        for t in range(num_tasks):
            task = steps.task(seed + t)
            found = beam_search(task, writer, prm, beam_width=beam_width, expansions=expansions,
                                max_steps=max_steps or task.max_steps, aggregation=aggregation)  # type: ignore[arg-type]
            ok = steps.check(task, found.steps)[0] if found.steps else False
            right += ok
            status = "correct" if ok else ("wrong" if found.finished else "unparseable")
            statuses[status] = statuses.get(status, 0) + 1
            bar.update(1)
    finally:
        bar.close()
        steps.close()
    accuracy = right / max(num_tasks, 1)
    return EvalResult(accuracy, accuracy, 1, num_tasks, accuracy, statuses, None, "beam", accuracy)
