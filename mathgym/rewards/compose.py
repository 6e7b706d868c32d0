"""Composition: format rewards, length penalties and a weighted :class:`Rubric`.

Example:
    >>> from mathgym.rewards import MathVerifier
    >>> rubric = Rubric([(MathVerifier(), 1.0), (BoxedFormatReward(), 0.1), (LengthPenalty(2000, 4000), 1.0)])
    >>> result = rubric.score("... so \\\\boxed{4}", "4")
    >>> result.details["breakdown"]  # every component, weighted or not, plus the total
    {'correctness': 1.0, 'format_boxed': 1.0, 'length_penalty': 0.0, 'total': 1.1}
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from mathgym.errors import ConfigError
from mathgym.rewards.base import RewardResult, Status
from mathgym.rewards.extract import boxed_contents
from mathgym.rewards.workers import RewardWorker


class _SingleSampleWorker:
    """Gives a per-sample scorer a ``score_batch`` (format checks need no parallelism)."""

    name: str

    def score(self, completion: str, reference: Any = None) -> RewardResult:
        raise NotImplementedError

    def score_batch(self, completions: Sequence[str], references: Sequence[Any] | None = None) -> list[RewardResult]:
        return [self.score(c, None if references is None else r) for c, r in zip(completions, references or [None] * len(completions))]


@dataclass
class BoxedFormatReward(_SingleSampleWorker):
    """1.0 when the text holds exactly one balanced ``\\boxed{}``, else 0.0 (``format_error``)."""

    name: str = "format_boxed"

    def score(self, completion: str, reference: Any = None) -> RewardResult:
        count = len(boxed_contents(completion))
        ok = count == 1
        return RewardResult(float(ok), Status.CORRECT if ok else Status.FORMAT_ERROR, {"boxed_count": count})


@dataclass
class TagFormatReward(_SingleSampleWorker):
    """Share of ``tags`` present exactly once as ``<tag>...</tag>``, in the given order.

    Args:
        tags: Tag names, e.g. ``("think", "answer")``.
        name: Component name.
    """

    tags: Sequence[str] = ("think", "answer")
    name: str = "format_tags"

    def __post_init__(self) -> None:
        if not self.tags or not all(isinstance(t, str) and re.fullmatch(r"[A-Za-z_][\w-]*", t) for t in self.tags):
            raise ConfigError(f"tags={self.tags!r} must be a non-empty list of tag names like 'think'.")

    def score(self, completion: str, reference: Any = None) -> RewardResult:
        position, found = 0, []
        for tag in self.tags:
            opens, closes = completion.count(f"<{tag}>"), completion.count(f"</{tag}>")
            start = completion.find(f"<{tag}>", position)
            end = completion.find(f"</{tag}>", start + 1) if start >= 0 else -1
            ok = opens == 1 and closes == 1 and start >= 0 and end > start
            if ok:
                position = end
                found.append(tag)
        share = len(found) / len(self.tags)
        return RewardResult(share, Status.CORRECT if share == 1.0 else Status.FORMAT_ERROR, {"tags_found": found})


@dataclass
class LengthPenalty(_SingleSampleWorker):
    """0 up to ``soft_limit``, falling linearly to ``-max_penalty`` at ``hard_limit`` and beyond.

    Lengths are counted by ``length`` (characters by default; pass e.g.
    ``lambda s: len(tokenizer(s).input_ids)`` to count tokens).

    Args:
        soft_limit: Length from which the penalty starts.
        hard_limit: Length at which the full penalty applies.
        max_penalty: Size of the full penalty.
        length: How to measure a completion.
        name: Component name.
    """

    soft_limit: int = 2000
    hard_limit: int = 4000
    max_penalty: float = 1.0
    length: Callable[[str], int] = len
    name: str = "length_penalty"

    def __post_init__(self) -> None:
        if not 0 <= self.soft_limit < self.hard_limit:
            raise ConfigError(f"need 0 <= soft_limit < hard_limit; got soft_limit={self.soft_limit}, hard_limit={self.hard_limit}.")
        if self.max_penalty < 0:
            raise ConfigError(f"max_penalty={self.max_penalty!r} must be >= 0 (it is subtracted).")

    def score(self, completion: str, reference: Any = None) -> RewardResult:
        size = self.length(completion)
        excess = min(max(size - self.soft_limit, 0) / (self.hard_limit - self.soft_limit), 1.0)
        status = Status.CORRECT if excess == 0 else (Status.FORMAT_ERROR if excess == 1.0 else Status.PARTIAL)
        return RewardResult(-self.max_penalty * excess if excess else 0.0, status, {"length": size})


@dataclass
class Rubric:
    """A weighted sum of reward workers; weight 0 keeps a component as a logged metric.

    The total is ``sum(weight * score)``. The status is the first weighted component's
    (the "main" verdict), except that an infrastructure failure (``error``,
    ``sandbox_error``) of any weighted component wins, so the sample can be excluded
    from training. ``details["breakdown"]`` maps every component's name to its raw score,
    plus ``"total"``; envs put it in ``info["reward_breakdown"]``.

    Args:
        components: ``(worker, weight)`` pairs; names must be distinct.
        name: Name of the rubric when nested in another rubric.
    """

    components: Sequence[tuple[RewardWorker, float]]
    name: str = "rubric"
    _names: list[str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.components:
            raise ConfigError("a Rubric needs at least one (worker, weight) component.")
        self._names = [getattr(w, "name", type(w).__name__) for w, _ in self.components]
        if len(set(self._names)) != len(self._names):
            raise ConfigError(f"component names must be distinct, got {self._names}; pass name=... to the workers.")
        if not any(weight != 0 for _, weight in self.components):
            raise ConfigError("at least one component needs a non-zero weight.")

    def score(self, completion: str, reference: Any = None) -> RewardResult:
        """Score one completion with every component."""
        return self.score_batch([completion], [reference])[0]

    def score_batch(self, completions: Sequence[str], references: Sequence[Any] | None = None) -> list[RewardResult]:
        """Score a batch: each component sees the whole batch (so it can parallelise)."""
        if references is None:
            references = [None] * len(completions)
        per_component = [worker.score_batch(completions, references) for worker, _ in self.components]
        return [self._combine([column[i] for column in per_component]) for i in range(len(completions))]

    def _combine(self, results: Sequence[RewardResult]) -> RewardResult:
        breakdown = {name: result.score for name, result in zip(self._names, results)}
        total = sum(weight * result.score for (_, weight), result in zip(self.components, results))
        breakdown["total"] = total
        weighted = [r for (_, w), r in zip(self.components, results) if w != 0]
        infra = [r for r in weighted if r.status.is_infra_failure]
        status = infra[0].status if infra else weighted[0].status
        details = {"breakdown": breakdown, "components": dict(zip(self._names, results))}
        return RewardResult(total, status, details)
