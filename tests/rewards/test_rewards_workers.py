"""Worker interface: executors agree, and the TRL adapter (tested without TRL)."""

from __future__ import annotations

import pytest

from mathgym.errors import ConfigError
from mathgym.rewards import (
    BoxedFormatReward,
    InlineExecutor,
    MathVerifier,
    ProcessExecutor,
    RewardResult,
    RewardWorker,
    Status,
    ThreadExecutor,
    completion_text,
    score_in_parallel,
    trl_reward_function,
)

COMPLETIONS = ["\\boxed{4}", "\\boxed{5}", "no answer", "\\boxed{\\frac{1}{2}}", "\\boxed{x+x}", "#### 1,000"]
GOLDS = ["4", "4", "4", "0.5", "$2x$", "1000"]  # a bare "2x" is read by math-verify (and so MathVerifier) as 2
EXPECTED = [Status.CORRECT, Status.WRONG, Status.UNPARSEABLE, Status.CORRECT, Status.CORRECT, Status.CORRECT]


class BrokenWorker:
    """A worker whose infrastructure fails on every other sample."""

    name = "flaky"

    def score(self, completion, reference):
        return RewardResult(0.0, Status.ERROR) if "boom" in completion else RewardResult(0.5, Status.PARTIAL)

    def score_batch(self, completions, references):
        return [self.score(c, r) for c, r in zip(completions, references)]


def test_workers_satisfy_the_protocol():
    assert isinstance(MathVerifier(), RewardWorker)
    assert isinstance(BoxedFormatReward(), RewardWorker)
    assert isinstance(BrokenWorker(), RewardWorker)


@pytest.mark.parametrize("make_executor", [InlineExecutor, lambda: ThreadExecutor(3), lambda: ProcessExecutor(2)], ids=["inline", "threads", "processes"])
def test_executors_give_the_same_results_in_order(make_executor):
    executor = make_executor()
    try:
        results = score_in_parallel(MathVerifier(), COMPLETIONS, GOLDS, executor=executor, chunk_size=2)
    finally:
        executor.close()
    assert [r.status for r in results] == EXPECTED


def test_score_in_parallel_validates():
    with pytest.raises(ConfigError):
        score_in_parallel(MathVerifier(), ["a", "b"], ["1"])
    with pytest.raises(ConfigError):
        score_in_parallel(MathVerifier(), ["a"], ["1"], chunk_size=0)
    assert [r.score for r in score_in_parallel(BoxedFormatReward(), ["\\boxed{1}", "x"])] == [1.0, 0.0]


def test_completion_text_handles_trl_formats():
    assert completion_text("plain") == "plain"
    assert completion_text([{"role": "assistant", "content": "chat \\boxed{1}"}]) == "chat \\boxed{1}"
    parts = [{"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]
    assert completion_text(parts) == "ab"
    assert completion_text([{"role": "user", "content": "q"}, {"role": "assistant", "content": "x"}]) == "x"
    assert completion_text(None) == "" and completion_text([42]) == ""


def test_trl_adapter_with_string_and_chat_completions():
    reward = trl_reward_function(MathVerifier(), reference_column="answer")
    assert reward.__name__ == "correctness"
    prompts = ["2+2?"] * len(COMPLETIONS)
    scores = reward(prompts=prompts, completions=COMPLETIONS, answer=GOLDS, other_column=[0] * len(GOLDS))
    assert scores == [1.0 if s == Status.CORRECT else 0.0 for s in EXPECTED]
    chat = [[{"role": "assistant", "content": c}] for c in COMPLETIONS]
    assert reward(prompts, chat, answer=GOLDS) == scores
    assert [r.status for r in reward.last_results] == EXPECTED
    with pytest.raises(ConfigError, match="solution"):
        trl_reward_function(MathVerifier(), reference_column="solution")(prompts, COMPLETIONS, answer=GOLDS)


def test_trl_adapter_keeps_infra_failures_out_of_the_reward():
    reward = trl_reward_function(BrokenWorker(), reference_column=None)
    assert reward(["p", "p"], ["boom", "fine"]) == [None, 0.5]
    assert trl_reward_function(BrokenWorker(), reference_column=None, infra_value=0.0)(["p"], ["boom"]) == [0.0]
    assert trl_reward_function(BoxedFormatReward(), reference_column=None)(["p"], ["\\boxed{1}"]) == [1.0]
