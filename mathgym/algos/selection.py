"""Test-time selection: pick one of k sampled solutions by vote or by a reward model's score.

Rules (``--select`` in ``mathgym eval``):

* ``majority``: the most frequent final answer (maj@k, self-consistency).
* ``orm``: the solution an outcome reward model scores highest (the whole solution scored as one step).
* ``prm-min`` / ``prm-last`` / ``prm-mean`` / ``prm-product``: the solution whose step scores,
  aggregated by the min / last / mean / product, are highest (PRM best-of-k).
* ``prm-vote``: answers weighted by the sum of their solutions' aggregated (min) PRM scores.

Answers are compared with mathgym's math grading (:class:`~mathgym.rewards.math.MathVerifier`:
``1/2``, ``0.5`` and ``\\frac{1}{2}`` are one answer). A solution with no final answer never
wins a vote; if none has one, the first sample is chosen.

Ties are broken by order: among answers with the same count (or weight), the one whose first
sample comes earliest wins, and its first sample is chosen; among equal scores, the earliest
sample wins. The samples' order is the sampler's (seeded), so a selection is reproducible.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Literal, Protocol

from mathgym.errors import ConfigError
from mathgym.rewards.prm import AggregationRule, aggregate

SelectRule = Literal["majority", "orm", "prm-min", "prm-last", "prm-mean", "prm-product", "prm-vote"]
SELECT_RULES: tuple[SelectRule, ...] = ("majority", "orm", "prm-min", "prm-last", "prm-mean", "prm-product", "prm-vote")
Aggregation = AggregationRule


class StepScorer(Protocol):
    """Anything that scores steps: a process reward model (``mathgym.rewards.prm``) or a rule."""

    def score_steps(self, problems: list[str], steps: list[list[str]]) -> list[list[float]]:
        """One score per step of each solution."""
        ...


def aggregate_scores(scores: Sequence[float], rule: Aggregation) -> float:
    """One number for a solution from its step scores: :func:`mathgym.rewards.prm.aggregate`, and
    ``-inf`` for a solution with no step (or none the scorer could see), so that it is never selected.

    Example:
        >>> [aggregate_scores([0.5, 0.8], r) for r in ("min", "last", "mean", "product")]
        [0.5, 0.8, 0.65, 0.4]
    """
    try:
        return aggregate(scores, rule)
    except ValueError:
        return -math.inf


def answer_groups(answers: Sequence[str | None], same: Callable[[str, str], bool]) -> list[int]:
    """A group number per answer (equal answers share one, numbered by first appearance); ``-1`` for no answer.

    Example:
        >>> answer_groups(["2", None, "3", "2.0"], lambda a, b: float(a) == float(b))
        [0, -1, 1, 0]
    """
    heads: list[str] = []
    groups = []
    for answer in answers:
        if answer is None:
            groups.append(-1)
            continue
        found = next((g for g, head in enumerate(heads) if answer == head or same(answer, head)), None)
        if found is None:
            heads.append(answer)
            found = len(heads) - 1
        groups.append(found)
    return groups


def weighted_vote(groups: Sequence[int], weights: Sequence[float]) -> int:
    """The first sample of the answer group with the largest total weight (ties: the earliest group)."""
    totals: dict[int, float] = {}
    for g, w in zip(groups, weights):
        if g >= 0:
            totals[g] = totals.get(g, 0.0) + w
    if not totals:
        return 0
    first = {g: list(groups).index(g) for g in totals}
    return first[max(totals, key=lambda g: (totals[g], -first[g]))]


def best_scored(values: Sequence[float]) -> int:
    """The index of the highest value (ties: the earliest)."""
    return max(range(len(values)), key=lambda i: (values[i], -i))


def select(
    rule: SelectRule,
    groups: Sequence[int],
    step_scores: Sequence[Sequence[float]] | None = None,
    outcome_scores: Sequence[float] | None = None,
) -> int:
    """The index of the chosen sample.

    Args:
        rule: One of :data:`SELECT_RULES`.
        groups: Each sample's answer group (:func:`answer_groups`).
        step_scores: Each sample's PRM step scores (``prm-*`` rules).
        outcome_scores: Each sample's ORM score (``orm``).
    """
    if rule == "majority":
        return weighted_vote(groups, [1.0] * len(groups))
    if rule == "orm":
        if outcome_scores is None:
            raise ConfigError("select 'orm' needs an outcome reward model (--orm DIR).")
        return best_scored(outcome_scores)
    if rule not in SELECT_RULES:
        raise ConfigError(f"select {rule!r}: choose one of {', '.join(SELECT_RULES)}.")
    if step_scores is None:
        raise ConfigError(f"select {rule!r} needs a process reward model (--prm DIR).")
    if rule == "prm-vote":
        return weighted_vote(groups, [max(aggregate_scores(s, "min"), 0.0) for s in step_scores])
    aggregation: Aggregation = rule.removeprefix("prm-")  # type: ignore[assignment]
    return best_scored([aggregate_scores(s, aggregation) for s in step_scores])


def math_equal(verifier: object | None = None) -> Callable[[str, str], bool]:
    """``same(a, b)`` for two final answers by mathgym's math grading (memoised per pair)."""
    from mathgym.rewards.math import MathVerifier

    checker = verifier if verifier is not None else MathVerifier()
    seen: dict[tuple[str, str], bool] = {}

    def same(a: str, b: str) -> bool:
        if (a, b) not in seen:
            seen[(a, b)] = checker.score(f"\\boxed{{{a}}}", b).score >= 1.0  # type: ignore[attr-defined]
        return seen[(a, b)]

    return same


class ProcessRewardScorer:
    """A rule-based process reward ``(problem, steps) -> float`` (such as
    :func:`mathgym.envs.math.math_step.arithmetic_consistency`) as a :class:`StepScorer`.

    Example:
        >>> from mathgym.envs.math.math_step import arithmetic_consistency
        >>> ProcessRewardScorer(arithmetic_consistency).score_steps(["p"], [["2 + 2 = 4", "2 * 3 = 7"]])
        [[1.0, 0.0]]
    """

    def __init__(self, reward: Callable[[str, Sequence[str]], float]):
        self.reward = reward

    def score_steps(self, problems: list[str], steps: list[list[str]]) -> list[list[float]]:
        return [[float(self.reward(p, s[: i + 1])) for i in range(len(s))] for p, s in zip(problems, steps)]
