"""Step-level beam search guided by a process reward model.

At each depth every live beam proposes ``expansions`` next steps; each candidate prefix is
scored by the PRM (its step scores aggregated, ``min`` by default) and the ``beam_width``
best candidates are kept. A candidate whose last step states a final answer is finished
and leaves the beam; the search ends when no beam is live or after ``max_steps``. The
answer is the best-scored finished solution (or, when none finished, the best unfinished
one). Equal scores keep the earlier candidate (beams in rank order, each beam's proposals
in the order they were sampled), and a candidate equal to an earlier one is dropped, so
the beam does not fill with copies.

    mathgym eval --env MathStep-v0 --model DIR --search beam --prm PRM_DIR --beam-width 4 --expansions 4
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from mathgym.algos.selection import Aggregation, StepScorer, aggregate_scores
from mathgym.algos.step_labels import StepTask
from mathgym.errors import ConfigError
from mathgym.rewards.extract import extract_answer


class StepProposer(Protocol):
    """Proposes next steps: :class:`~mathgym.algos.step_policy.PolicyStepWriter` or a scripted one."""

    def propose_steps(self, tasks: Sequence[StepTask], prefixes: Sequence[Sequence[str]], n: int) -> list[list[str]]:
        """``n`` candidates for the step after each prefix."""
        ...


@dataclass
class BeamResult:
    """The solution a beam search chose.

    Attributes:
        steps: Its steps.
        score: Its aggregated PRM score.
        finished: Whether its last step states a final answer.
        scored: Candidate prefixes the PRM scored (the search's cost).
    """

    steps: list[str]
    score: float
    finished: bool
    scored: int


def beam_search(
    task: StepTask,
    proposer: StepProposer,
    scorer: StepScorer,
    *,
    beam_width: int = 4,
    expansions: int = 4,
    max_steps: int = 8,
    aggregation: Aggregation = "min",
) -> BeamResult:
    """Search the steps of ``task``'s solution, keeping the ``beam_width`` best prefixes at each depth."""
    for name, value in (("beam_width", beam_width), ("expansions", expansions), ("max_steps", max_steps)):
        if not isinstance(value, int) or value < 1:
            raise ConfigError(f"{name}={value!r} must be a positive integer.")
    beams: list[list[str]] = [[]]
    finished: list[tuple[list[str], float]] = []
    live: list[tuple[list[str], float]] = []
    scored = 0
    for _ in range(max_steps):
        proposals = proposer.propose_steps([task] * len(beams), beams, expansions)
        candidates: list[list[str]] = []
        for beam, steps in zip(beams, proposals):
            for step in steps:
                candidate = [*beam, step]
                if step.strip() and candidate not in candidates:
                    candidates.append(candidate)
        if not candidates:
            break
        scores = scorer.score_steps([task.problem] * len(candidates), [[s.strip() for s in c] for c in candidates])
        scored += len(candidates)
        values = [aggregate_scores(s, aggregation) for s in scores]
        order = sorted(range(len(candidates)), key=lambda i: (-values[i], i))[:beam_width]
        kept = [(candidates[i], values[i]) for i in order]
        finished += [(c, v) for c, v in kept if extract_answer(c[-1]) is not None]
        live = [(c, v) for c, v in kept if extract_answer(c[-1]) is None]
        beams = [c for c, _ in live]
        if not beams:
            break
    pool, done = (finished, True) if finished else (live, False)
    if not pool:
        return BeamResult([], float("-inf"), False, scored)
    best = max(range(len(pool)), key=lambda i: (pool[i][1], -i))
    return BeamResult(list(pool[best][0]), pool[best][1], done, scored)
