"""Step labels: Monte-Carlo labelling on a scripted writer whose steps are known right or wrong; public-format loaders."""

from __future__ import annotations

import json

import pytest

from mathgym.algos.step_labels import (
    StepTask, label_steps, math_shepherd_row, prm800k_row, read_step_labels, write_rows,
)
from mathgym.algos.step_policy import EnvSteps
from mathgym.errors import ConfigError


class ScriptedWriter:
    """Writes ``solution`` from scratch. A continuation finishes right unless its prefix holds a
    "mistake" step; after a "shaky" step only the first quarter of the ``n`` continuations do."""

    def __init__(self, solution, golds):
        self.solution, self.golds = solution, golds

    def continue_steps(self, tasks, prefixes, n):
        out = []
        for task, prefix in zip(tasks, prefixes):
            if not prefix:
                out.append([list(self.solution(task))] * n)
                continue
            text = " ".join(prefix)
            right = [("mistake" not in text) and ("shaky" not in text or j < n // 4) for j in range(n)]
            out.append([[f"\\boxed{{{self.golds[task.seed] if ok else 'wrong'}}}"] for ok in right])
        return out


@pytest.fixture(params=["MathReason-v0", "MathStep-v0"])
def env_steps(request):
    steps = EnvSteps(request.param, {"difficulty": 1})
    yield steps
    steps.close()


def _golds(env_steps, seeds):
    return {s: env_steps.check(env_steps.task(s), ["\\boxed{x}"])[1] for s in seeds}


def test_soft_and_hard_labels_follow_the_known_steps(env_steps):
    golds = _golds(env_steps, [0, 1])
    tasks = [env_steps.task(s) for s in (0, 1)]
    wrong = ["Read the problem.", "A shaky step.", "A mistake here.", "\\boxed{wrong}"]
    right = lambda t: ["Read the problem.", f"So \\boxed{{{golds[t.seed]}}}"]  # noqa: E731
    pick = lambda t: wrong if t.seed == 0 else right(t)  # noqa: E731
    soft = label_steps(tasks, ScriptedWriter(pick, golds), env_steps.check, k=8, kind="soft")
    assert [r.labels for r in soft] == [[1.0, 0.25, 0.0, 0.0], [1.0, 1.0]]
    assert [r.answer for r in soft] == [golds[0], golds[1]]
    assert soft[0].steps == wrong and soft[0].problem == tasks[0].problem
    one_by_one = label_steps(tasks, ScriptedWriter(pick, golds), env_steps.check, k=8, kind="soft", batch_tasks=1)
    assert one_by_one == soft
    hard = label_steps(tasks, ScriptedWriter(pick, golds), env_steps.check, k=8, kind="hard")
    assert [r.labels for r in hard] == [[1.0, 1.0, 0.0, 0.0], [1.0, 1.0]]


class SamplingWriter(ScriptedWriter):
    """Writes the solutions of ``solutions(task)`` in turn, one per sample, then continues as ScriptedWriter."""

    def continue_steps(self, tasks, prefixes, n):
        out = super().continue_steps(tasks, prefixes, n)
        for i, (task, prefix) in enumerate(zip(tasks, prefixes)):
            if not prefix:
                choices = self.solution(task)
                out[i] = [list(choices[j % len(choices)]) for j in range(n)]
        return out


def test_several_samples_per_problem_label_each_distinct_solution(env_steps):
    golds = _golds(env_steps, [0, 1])
    tasks = [env_steps.task(s) for s in (0, 1)]
    right = lambda t: ["Read the problem.", f"So \\boxed{{{golds[t.seed]}}}"]  # noqa: E731
    wrong = ["Read the problem.", "A mistake here.", "\\boxed{wrong}"]
    both = lambda t: [right(t), wrong]  # noqa: E731: samples alternate right, wrong, right (a repeat), ...
    ticks = []
    rows = label_steps(tasks, SamplingWriter(both, golds), env_steps.check, k=4, samples=3, on_task=lambda: ticks.append(1))
    assert [(r.problem, r.labels) for r in rows] == [
        (tasks[0].problem, [1.0, 1.0]), (tasks[0].problem, [1.0, 0.0, 0.0]),
        (tasks[1].problem, [1.0, 1.0]), (tasks[1].problem, [1.0, 0.0, 0.0]),
    ]
    assert len(ticks) == 2  # the progress is per problem
    assert label_steps(tasks, SamplingWriter(both, golds), env_steps.check, k=4, samples=1) == rows[::2]
    with pytest.raises(ConfigError, match="samples=0"):
        label_steps(tasks, SamplingWriter(both, golds), env_steps.check, samples=0)


def test_rows_round_trip_as_jsonl(tmp_path):
    tasks = [StepTask(0, "p", [])]
    writer = ScriptedWriter(lambda t: ["a", "\\boxed{1}"], {0: "1"})
    rows = label_steps(tasks, writer, lambda t, s: ("\\boxed{1}" in s[-1], "1"), k=2)
    assert write_rows(rows, tmp_path / "l.jsonl") == 1
    assert list(read_step_labels(tmp_path / "l.jsonl")) == rows


SHEPHERD = {
    "input": "Tom has 3 apples and buys 2. How many? Step 1: 3 + 2 = 5 ки\nStep 2: He eats one: 5 - 1 = 3 ки\n"
             "Step 3: The answer is: 3 ки",
    "label": "Tom has 3 apples and buys 2. How many? Step 1: 3 + 2 = 5 +\nStep 2: He eats one: 5 - 1 = 3 -\n"
             "Step 3: The answer is: 3 -",
    "task": "GSM8K",
}

PRM800K = {
    "labeler": "x", "question": {"problem": "What is $2+2$?", "ground_truth_answer": "4"},
    "label": {"steps": [
        {"completions": [{"text": "2+2 is 4.", "rating": 1}, {"text": "Hmm.", "rating": 0}], "chosen_completion": 0},
        {"completions": [{"text": "Let me double check.", "rating": 0}], "chosen_completion": 0},
        {"completions": [{"text": "I add.", "rating": 1}], "chosen_completion": None,
         "human_completion": {"text": "So it is 4.", "rating": None}},
        {"completions": [{"text": "So 5.", "rating": -1}, {"text": "# Answer\n\n4", "rating": 1}], "chosen_completion": None},
        {"completions": [{"text": "never read", "rating": 1}], "chosen_completion": 0},
    ], "finish_reason": "found_error"},
}


def test_math_shepherd_tags_become_labels():
    row = math_shepherd_row(SHEPHERD)
    assert row.problem == "Tom has 3 apples and buys 2. How many?"
    assert row.steps == ["Step 1: 3 + 2 = 5", "Step 2: He eats one: 5 - 1 = 3", "Step 3: The answer is: 3"]
    assert row.labels == [1.0, 0.0, 0.0] and row.answer == "3"


def test_math_shepherd_label_that_is_not_the_input_is_refused():
    with pytest.raises(ValueError, match="differs"):
        math_shepherd_row({**SHEPHERD, "label": SHEPHERD["label"].replace("Tom", "Tim")})
    with pytest.raises(ValueError, match="expected"):
        math_shepherd_row({**SHEPHERD, "label": SHEPHERD["label"].replace("= 5 +", "= 5 ?")})


def test_prm800k_ratings_map_and_the_first_error_ends_the_solution():
    row = prm800k_row(PRM800K)
    assert row.steps == ["2+2 is 4.", "Let me double check.", "So it is 4.", "So 5."]
    assert row.labels == [1.0, 1.0, 1.0, 0.0] and row.answer == "4" and row.problem == "What is $2+2$?"
    assert prm800k_row(PRM800K, neutral=0.5).labels == [1.0, 0.5, 1.0, 0.0]


def test_reader_tells_the_formats_apart_and_names_a_bad_line(tmp_path):
    mine = {"problem": "p", "steps": ["s"], "labels": [0.5], "answer": "1"}
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in (SHEPHERD, PRM800K, mine)) + "\n")
    rows = list(read_step_labels(path))
    assert [len(r.steps) for r in rows] == [3, 4, 1] and rows[2].labels == [0.5]
    path.write_text(json.dumps({"foo": 1}) + "\n")
    with pytest.raises(ValueError, match=r"mixed.jsonl:1: .*unknown step-label format"):
        list(read_step_labels(path))
