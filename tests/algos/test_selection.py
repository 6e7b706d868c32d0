"""Test-time selection rules on a scripted set of k = 6 solutions whose right answer (1/2) is known.

Hand-computed table (step scores → min / last / mean / product):
    0: "0.5"          [0.9, 0.3]       .3  .3  .6    .27    right
    1: "3"            [0.5, 0.9]       .5  .9  .7    .45    wrong
    2: no answer      [0.4]            .4  .4  .4    .4     wrong
    3: "\\frac{1}{2}" [0.7, 0.65]      .65 .65 .675  .455   right
    4: "3"            [0.5, 0.8, 0.5]  .5  .5  .6    .2     wrong
    5: "7"            [0.55, 0.55]     .55 .55 .55   .3025  wrong
Majority: 1/2 (samples 0, 3) and 3 (samples 1, 4) tie at two → the earlier answer, 1/2 → sample 0.
PRM vote (min scores): 1/2 weighs .3 + .65 = .95, 3 weighs .5 + .5 = 1.0 → sample 1.
ORM scores [.1, .2, .9, .3, .3, 0] → sample 2.
"""

from __future__ import annotations

import pytest

from mathgym.algos.selection import aggregate_scores, answer_groups, best_scored, math_equal, select
from mathgym.errors import ConfigError

ANSWERS = ["0.5", "3", None, "\\frac{1}{2}", "3", "7"]
STEP_SCORES = [[0.9, 0.3], [0.5, 0.9], [0.4], [0.7, 0.65], [0.5, 0.8, 0.5], [0.55, 0.55]]
ORM = [0.1, 0.2, 0.9, 0.3, 0.3, 0.0]
EXPECTED = {"majority": 0, "orm": 2, "prm-min": 3, "prm-last": 1, "prm-mean": 1, "prm-product": 3, "prm-vote": 1}


def test_answers_are_grouped_by_math_equivalence():
    assert answer_groups(ANSWERS, math_equal()) == [0, 1, -1, 0, 1, 2]


@pytest.mark.parametrize("rule", sorted(EXPECTED))
def test_each_rule_picks_the_hand_computed_sample(rule):
    groups = answer_groups(ANSWERS, math_equal())
    assert select(rule, groups, STEP_SCORES, ORM) == EXPECTED[rule]


def test_ties_go_to_the_earliest():
    assert best_scored([0.5, 0.7, 0.7]) == 1
    assert select("majority", [1, 0, 0, 1]) == 0  # groups 1 and 0 tie at two: group 1's first sample comes first
    assert select("majority", [-1, -1]) == 0  # no answer anywhere: the first sample


def test_aggregations_and_missing_models():
    assert aggregate_scores([], "min") == float("-inf")
    assert aggregate_scores([0.5, 0.5], "product") == 0.25
    with pytest.raises(ConfigError, match="--prm"):
        select("prm-min", [0])
    with pytest.raises(ConfigError, match="--orm"):
        select("orm", [0])
