"""Scores of responses against other people's labels: what verl's ``compute_score`` and
OpenRLHF's ``reward_func`` share. A label holding a program's tests
(:func:`~mathgym.envs.code_tasks.tests_task`) grades the response's program in the sandbox, as
CodeSandbox-v0 does; any other label is a final answer, graded by the lenient math verifier
(:func:`~mathgym.rewards.math.labels_verifier`)."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from mathgym.envs.ahead import sandbox_width
from mathgym.envs.code import grade
from mathgym.envs.code_tasks import tests_task
from mathgym.rewards.math import labels_verifier


def label_scores(responses: Sequence[str], labels: Sequence[Any]) -> list[float]:
    """One score in ``[0, 1]`` per response: 1.0 when it answers its label (all of a program's
    tests pass, or the final answer equals the label's). An infrastructure failure scores 0.0."""
    if len(responses) != len(labels):
        raise ValueError(f"got {len(responses)} responses but {len(labels)} labels")
    tasks = [tests_task(label) for label in labels]
    scores = [0.0] * len(labels)
    answers = [i for i, task in enumerate(tasks) if task is None]
    if answers:
        results = labels_verifier().score_references([str(responses[i]) for i in answers], [labels[i] for i in answers])
        for i, result in zip(answers, results):
            scores[i] = float(result.score)
    programs = [i for i, task in enumerate(tasks) if task is not None]
    if programs:
        with ThreadPoolExecutor(max(1, min(len(programs), sandbox_width()))) as pool:
            verdicts = pool.map(lambda i: grade(tasks[i], str(responses[i]), "all_pass"), programs)
            for i, verdict in zip(programs, verdicts):
                scores[i] = float(verdict.reward)
    return scores
