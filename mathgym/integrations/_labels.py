"""Scores of responses against other people's labels: what verl's ``compute_score`` and
OpenRLHF's ``reward_func`` share. A label holding a program's tests
(:func:`~mathgym.envs.coding.code_tasks.tests_task`) grades the response's program in the sandbox, as
CodeSandbox-v0 does; any other label is a final answer, graded by the lenient math verifier
(:func:`~mathgym.rewards.math.labels_verifier`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mathgym.core import Judgement
from mathgym.envs.coding.code import GRADER
from mathgym.envs.coding.code_tasks import CodeTask, tests_task
from mathgym.rewards.math import labels_verifier


def grade_programs(responses: Sequence[str], tasks: Sequence[CodeTask]) -> list[Judgement | None]:
    """Each response's program graded against its task's tests (all must pass), side by side as
    the code env's steps are (:data:`~mathgym.envs.coding.code.GRADER`); ``None`` where the grading itself
    failed (the sandbox could not run)."""
    verdicts = GRADER.score_ahead([(task, str(response), "all_pass") for response, task in zip(responses, tasks)]) if tasks else []
    return [verdict if isinstance(verdict, Judgement) else None for verdict in verdicts]


def label_scores(responses: Sequence[str], labels: Sequence[Any]) -> list[float]:
    """One score in ``[0, 1]`` per response: 1.0 when it answers its label (all of a program's
    tests pass, or the final answer equals the label's). An infrastructure failure scores 0.0."""
    if len(responses) != len(labels):
        raise ValueError(f"got {len(responses)} responses but {len(labels)} labels")
    tasks = [tests_task(label) for label in labels]
    scores = [0.0] * len(labels)
    answers = [i for i, task in enumerate(tasks) if task is None]
    if answers:
        results = labels_verifier().score_batch([str(responses[i]) for i in answers], [labels[i] for i in answers])
        for i, result in zip(answers, results):
            scores[i] = float(result.score)
    programs = [i for i, task in enumerate(tasks) if task is not None]
    for i, verdict in zip(programs, grade_programs([responses[i] for i in programs], [tasks[i] for i in programs])):
        scores[i] = 0.0 if verdict is None else float(verdict.reward)
    return scores
