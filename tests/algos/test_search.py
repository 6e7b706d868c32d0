"""PRM-guided beam search on a scripted proposer and scorer whose best path is known.

The tree: the first step's best-scored choice ("good start", 0.9) leads only to bad steps
(0.1) and a wrong answer; the second ("ok start", 0.6) leads to "good middle" (0.9) and the
right answer (0.95). By the min of the step scores the best solution is
ok start → good middle → \\boxed{right} (0.6): width 2 finds it, width 1 (greedy) does not.
"""

from __future__ import annotations

import pytest

from mathgym.algos.search import beam_search
from mathgym.algos.selection import ProcessRewardScorer
from mathgym.algos.step_labels import StepTask
from mathgym.envs.math.math_step import arithmetic_consistency
from mathgym.errors import ConfigError

CHILDREN = {
    None: ["good start", "ok start", "bad start"],
    "good start": ["bad turn", "bad turn 2", "bad turn 3"],
    "ok start": ["good middle", "bad middle"],
    "good middle": ["\\boxed{right}"],
}
WORD_SCORES = {"good": 0.9, "ok": 0.6, "bad": 0.1, "right": 0.95, "wrong": 0.3}


class ScriptedProposer:
    def __init__(self):
        self.calls = 0

    def propose_steps(self, tasks, prefixes, n):
        self.calls += 1
        out = []
        for prefix in prefixes:
            options = CHILDREN.get(prefix[-1] if prefix else None, ["\\boxed{wrong}"])
            out.append([options[i % len(options)] for i in range(n)])
        return out


class WordScorer:
    def score_steps(self, problems, steps):
        return [[next(v for w, v in WORD_SCORES.items() if w in s) for s in solution] for solution in steps]


TASK = StepTask(0, "a problem", [])


def test_beam_finds_the_best_path_greedy_misses():
    result = beam_search(TASK, ScriptedProposer(), WordScorer(), beam_width=2, expansions=3, max_steps=5)
    assert result.steps == ["ok start", "good middle", "\\boxed{right}"]
    assert result.finished and result.score == pytest.approx(0.6)
    greedy = beam_search(TASK, ScriptedProposer(), WordScorer(), beam_width=1, expansions=3, max_steps=5)
    assert greedy.steps == ["good start", "bad turn", "\\boxed{wrong}"]


def test_last_step_aggregation_and_step_budget():
    # By the last step's score alone, greedy's path looks as good: the search keeps the first of equals.
    cut = beam_search(TASK, ScriptedProposer(), WordScorer(), beam_width=2, expansions=3, max_steps=1)
    assert cut.steps == ["good start"] and not cut.finished and cut.scored == 3


def test_duplicates_are_dropped_and_options_checked():
    proposer = ScriptedProposer()
    result = beam_search(TASK, proposer, WordScorer(), beam_width=3, expansions=6, max_steps=5)
    assert result.steps[-1] == "\\boxed{right}" and result.scored == 3 + 6 + 3
    # depth 0: 6 proposals, 3 distinct; depth 1: good start's 3, ok start's 2, bad start's 1; depth 2: one each
    with pytest.raises(ConfigError, match="beam_width"):
        beam_search(TASK, proposer, WordScorer(), beam_width=0)


def test_rule_based_scorer_steers_to_the_consistent_arithmetic():
    class Arithmetic:
        def propose_steps(self, tasks, prefixes, n):
            return [["2 + 2 = 5", "2 + 2 = 4"][:n] if not p else ["\\boxed{4}" if "= 4" in p[-1] else "\\boxed{5}"] * n
                    for p in prefixes]

    result = beam_search(TASK, Arithmetic(), ProcessRewardScorer(arithmetic_consistency), beam_width=1, expansions=2,
                         max_steps=3, aggregation="mean")
    assert result.steps == ["2 + 2 = 4", "\\boxed{4}"]
