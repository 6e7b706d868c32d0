"""Labelled steps: reading them, and measuring a process reward model on them (no torch).

A labelled solution is one JSONL row ``{"problem": str, "steps": [str, ...], "labels": [float, ...]}``,
a label per step: 1 (or a soft value near it) for a right step, 0 for a wrong one. The public
labelled sets are read as they ship too (Math-Shepherd, PRM800K, ProcessBench, RLHFlow:
:mod:`mathgym.algos.step_labels`). The same rows train a PRM (``mathgym train --algo prm --data
FILE``) and measure one:

- **step AUC**: the probability that a right step scores above a wrong one (Mann–Whitney; ties
  count half), over every labelled step of the held-out rows (a label of 0.5 or more is "right");
- **first-error accuracy** (ProcessBench's task): the predicted first error is the first step
  scoring below 0.5 (``-1``: none), the gold one the first step labelled below 0.5; reported on
  solutions with an error, on those without, and as their harmonic mean (ProcessBench's F1);
- **pairwise accuracy** (what best-of-N selection asks of a PRM): over the pairs of one problem's
  solutions where one ends right (last label 0.5 or more) and the other wrong, the share where the
  right one's lowest step score is the higher (ties count half). Step AUC mixes problems, so a PRM
  that only knows which problems are hard scores well on it and no better than chance here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from mathgym.algos.step_labels import step_label_row
from mathgym.envs.math.data import jsonl_rows
from mathgym.errors import DatasetError
from mathgym.rewards.prm import StepScorer

__all__ = [
    "LabelledSolution", "PRMEvalResult", "evaluate_prm", "first_error_accuracy", "first_error_step", "load_labelled_steps",
    "pairwise_accuracy", "step_auc",
]


@dataclass(frozen=True)
class LabelledSolution:
    """A solution's steps and each step's label in ``[0, 1]``."""

    problem: str
    steps: tuple[str, ...]
    labels: tuple[float, ...]


def _row(row: Any, where: str) -> LabelledSolution:
    if not isinstance(row, dict) or not {"problem", "steps", "labels"} <= set(row):
        raise DatasetError(f"{where}: expected {{'problem': str, 'steps': [str, ...], 'labels': [float, ...]}}.")
    problem, steps, labels = row["problem"], row["steps"], row["labels"]
    if not isinstance(problem, str) or not isinstance(steps, list) or not all(isinstance(s, str) for s in steps):
        raise DatasetError(f"{where}: 'problem' must be a string and 'steps' a list of strings.")
    if not isinstance(labels, list) or len(labels) != len(steps) or not steps:
        raise DatasetError(f"{where}: 'labels' must be a list with one label per step ({len(steps)} steps, at least one).")
    for label in labels:
        if isinstance(label, bool) or not isinstance(label, (int, float)) or not 0.0 <= float(label) <= 1.0:
            raise DatasetError(f"{where}: label {label!r} is not a number in [0, 1].")
    return LabelledSolution(problem, tuple(steps), tuple(float(x) for x in labels))


def load_labelled_steps(path: str | Path) -> list[LabelledSolution]:
    """Read labelled solutions (see the module docstring) in mathgym's layout or in any public
    one :func:`~mathgym.algos.step_labels.read_step_labels` reads (Math-Shepherd, PRM800K,
    ProcessBench, RLHFlow), told apart per record; :class:`DatasetError` names the bad line."""
    rows = []
    for where, record in jsonl_rows(path, "labelled steps", json_list=True):
        if isinstance(record, dict) and {"problem", "steps", "labels"} <= set(record):
            rows.append(_row(record, where))
            continue
        try:
            row = step_label_row(record)
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise DatasetError(f"{where}: {err}") from None
        if row is not None:
            rows.append(_row({"problem": row.problem, "steps": row.steps, "labels": row.labels}, where))
    if not rows:
        raise DatasetError(f"{path} holds no labelled solutions.")
    return rows


def step_auc(scores: Sequence[float], labels: Sequence[float]) -> float:
    """Mann–Whitney AUC of ``scores`` against binary ``labels`` (``>= 0.5`` is positive); ties count half.

    ``nan`` when either class is missing.

    Example:
        >>> step_auc([0.9, 0.4, 0.4, 0.1], [1, 1, 0, 0])  # pairs: (0.9>0.4) (0.9>0.1) (0.4=0.4: half) (0.4>0.1)
        0.875
    """
    if len(scores) != len(labels):
        raise ValueError(f"{len(scores)} scores but {len(labels)} labels")
    order = sorted(range(len(scores)), key=lambda i: scores[i])
    ranks = [0.0] * len(scores)
    start = 0
    while start < len(order):  # tied scores share the mean of their ranks (1-based)
        end = start
        while end + 1 < len(order) and scores[order[end + 1]] == scores[order[start]]:
            end += 1
        for k in range(start, end + 1):
            ranks[order[k]] = (start + end) / 2 + 1
        start = end + 1
    positives = [r for r, label in zip(ranks, labels) if label >= 0.5]
    num_pos, num_neg = len(positives), len(scores) - len(positives)
    if not num_pos or not num_neg:
        return math.nan
    return (sum(positives) - num_pos * (num_pos + 1) / 2) / (num_pos * num_neg)


def first_error_step(scores: Sequence[float], threshold: float = 0.5) -> int:
    """The index of the first value below ``threshold`` (``-1``: none); for scores and for labels.

    Example:
        >>> first_error_step([0.9, 0.7, 0.2, 0.8]), first_error_step([1, 1])
        (2, -1)
    """
    return next((i for i, s in enumerate(scores) if s < threshold), -1)


def first_error_accuracy(predicted: Sequence[int], gold: Sequence[int]) -> dict[str, float]:
    """ProcessBench's measures: accuracy on solutions with an error (``gold >= 0``), on those without,
    and their harmonic mean ``f1`` (``nan`` where a subset is empty).

    Example:
        >>> first_error_accuracy([1, -1, 2, -1], [1, 0, -1, -1])
        {'error_accuracy': 0.5, 'correct_accuracy': 0.5, 'f1': 0.5, 'accuracy': 0.5}
    """
    def share(pairs: list[tuple[int, int]]) -> float:
        return sum(p == g for p, g in pairs) / len(pairs) if pairs else math.nan

    pairs = list(zip(predicted, gold, strict=True))
    err, ok = share([x for x in pairs if x[1] >= 0]), share([x for x in pairs if x[1] < 0])
    f1 = 2 * err * ok / (err + ok) if err + ok > 0 else (math.nan if math.isnan(err + ok) else 0.0)
    return {"error_accuracy": err, "correct_accuracy": ok, "f1": f1, "accuracy": share(pairs)}


def pairwise_accuracy(rows: Sequence[LabelledSolution], scores: Sequence[Sequence[float]]) -> tuple[float, int]:
    """Within-problem pairwise accuracy of the solutions' lowest step scores, and the number of pairs.

    ``nan`` (and 0 pairs) when no problem has both a right and a wrong solution. Steps scored ``nan``
    (outside the PRM's window) are left out of a solution's lowest score.

    Example:
        >>> rows = [LabelledSolution("p", ("a",), (1.0,)), LabelledSolution("p", ("b", "c"), (1.0, 0.0)),
        ...         LabelledSolution("q", ("d",), (0.0,))]
        >>> pairwise_accuracy(rows, [[0.7], [0.9, 0.2], [0.5]])  # one pair: 0.7 > 0.2
        (1.0, 1)
    """
    by_problem: dict[str, tuple[list[float], list[float]]] = {}
    for row, ss in zip(rows, scores, strict=True):
        seen = [s for s in ss if math.isfinite(s)]
        if seen:
            right, wrong = by_problem.setdefault(row.problem, ([], []))
            (right if row.labels[-1] >= 0.5 else wrong).append(min(seen))
    won = pairs = 0.0
    for right, wrong in by_problem.values():
        for r in right:
            for w in wrong:
                won += 1.0 if r > w else 0.5 if r == w else 0.0
                pairs += 1
    return (won / pairs if pairs else math.nan), int(pairs)


@dataclass(frozen=True)
class PRMEvalResult:
    """A PRM measured on labelled solutions (see the module docstring)."""

    step_auc: float
    first_error_accuracy: float
    error_accuracy: float
    correct_accuracy: float
    processbench_f1: float
    num_solutions: int
    num_steps: int
    pairwise_accuracy: float = math.nan  # after step_auc &c. so that results saved before it still load
    num_pairs: int = 0

    def as_metrics(self, prefix: str = "eval/") -> dict[str, float]:
        return {f"{prefix}{k}": float(v) for k, v in asdict(self).items()}


def evaluate_prm(prm: StepScorer, rows: Sequence[LabelledSolution], batch_size: int = 32) -> PRMEvalResult:
    """Score every step of ``rows`` with ``prm`` and measure step AUC and first-error accuracy.

    Steps the PRM could not see (``nan``, cut off by its window) are left out of the AUC.
    """
    scores: list[list[float]] = []
    for start in range(0, len(rows), batch_size):
        part = rows[start : start + batch_size]
        scores += prm.score_steps([r.problem for r in part], [list(r.steps) for r in part])
    flat = [(s, label) for row, ss in zip(rows, scores) for s, label in zip(ss, row.labels) if math.isfinite(s)]
    auc = step_auc([s for s, _ in flat], [label for _, label in flat])
    firsts = first_error_accuracy([first_error_step(s) for s in scores], [first_error_step(r.labels) for r in rows])
    pairwise, pairs = pairwise_accuracy(rows, scores)
    return PRMEvalResult(
        auc, firsts["accuracy"], firsts["error_accuracy"], firsts["correct_accuracy"], firsts["f1"], len(rows), len(flat),
        pairwise, pairs,
    )
