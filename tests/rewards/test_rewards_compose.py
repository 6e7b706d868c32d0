"""Format rewards, length penalty and the weighted Rubric."""

from __future__ import annotations

import pytest

from mathgym.errors import ConfigError
from mathgym.rewards import BoxedFormatReward, LengthPenalty, MathVerifier, RewardResult, Rubric, Status, TagFormatReward


class Fixed:
    def __init__(self, name, score, status=Status.CORRECT):
        self.name, self._result = name, RewardResult(score, status)

    def score(self, completion, reference):
        return self._result

    def score_batch(self, completions, references):
        return [self._result for _ in completions]


def test_boxed_format():
    reward = BoxedFormatReward()
    assert reward.score("so \\boxed{3}").score == 1.0
    assert reward.score("\\boxed{3} or \\boxed{4}").status == Status.FORMAT_ERROR
    assert reward.score("3").details == {"boxed_count": 0}


def test_tag_format():
    reward = TagFormatReward(("think", "answer"))
    assert reward.score("<think>hm</think><answer>3</answer>").score == 1.0
    assert reward.score("<answer>3</answer><think>hm</think>").score == 0.5  # out of order
    assert reward.score("<think>a</think><think>b</think><answer>3</answer>").score == 0.5  # think twice
    assert reward.score("<think>unclosed").status == Status.FORMAT_ERROR
    with pytest.raises(ConfigError):
        TagFormatReward(("not a tag",))


def test_length_penalty_is_linear_between_limits():
    penalty = LengthPenalty(soft_limit=10, hard_limit=20, max_penalty=0.5)
    assert [penalty.score("x" * n).score for n in (5, 10, 15, 20, 100)] == [0.0, 0.0, -0.25, -0.5, -0.5]
    assert penalty.score("x" * 15).status == Status.PARTIAL
    assert LengthPenalty(1, 3, length=lambda s: len(s.split())).score("a b c d").score == -1.0
    with pytest.raises(ConfigError):
        LengthPenalty(soft_limit=20, hard_limit=10)


def test_rubric_weights_breakdown_and_metrics():
    rubric = Rubric([(Fixed("a", 1.0), 2.0), (Fixed("b", 0.5), -1.0), (Fixed("metric", 0.25, Status.WRONG), 0.0)])
    result = rubric.score("anything", None)
    assert result.score == pytest.approx(2.0 - 0.5)
    assert result.details["breakdown"] == {"a": 1.0, "b": 0.5, "metric": 0.25, "total": 1.5}
    assert result.status == Status.CORRECT  # the first weighted component's; metric-only statuses do not count


def test_rubric_infra_failure_wins_and_validation():
    rubric = Rubric([(Fixed("a", 1.0), 1.0), (Fixed("tests", 0.0, Status.SANDBOX_ERROR), 1.0)])
    assert rubric.score("x").status == Status.SANDBOX_ERROR
    assert Rubric([(Fixed("a", 1.0), 1.0), (Fixed("m", 0, Status.ERROR), 0.0)]).score("x").status == Status.CORRECT
    with pytest.raises(ConfigError):
        Rubric([(Fixed("a", 1), 1.0), (Fixed("a", 1), 1.0)])
    with pytest.raises(ConfigError):
        Rubric([(Fixed("a", 1), 0.0)])
    with pytest.raises(ConfigError):
        Rubric([])


def test_math_rubric_end_to_end():
    rubric = Rubric([(MathVerifier(), 1.0), (BoxedFormatReward(), 0.1), (LengthPenalty(50, 100), 1.0)])
    results = rubric.score_batch(["so \\boxed{4}", "\\boxed{4} \\boxed{5}", "x" * 200 + " the answer is 4"], ["4", "4", "4"])
    assert [r.details["breakdown"] for r in results] == [
        {"correctness": 1.0, "format_boxed": 1.0, "length_penalty": 0.0, "total": pytest.approx(1.1)},
        {"correctness": 0.0, "format_boxed": 0.0, "length_penalty": 0.0, "total": 0.0},
        {"correctness": 1.0, "format_boxed": 0.0, "length_penalty": -1.0, "total": 0.0},
    ]
    assert [r.status for r in results] == [Status.CORRECT, Status.WRONG, Status.CORRECT]
    nested = Rubric([(rubric, 1.0), (TagFormatReward(("answer",)), 0.0)], name="outer")
    assert nested.score("so \\boxed{4}", "4").details["breakdown"]["rubric"] == pytest.approx(1.1)
