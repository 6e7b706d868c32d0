"""The rows of ``ADVANTAGE_ESTIMATORS`` beyond GRPO's, against numbers worked out by hand."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from mathgym.algos.advantages import episode_advantages, group_normalized_advantages  # noqa: E402

# group 0: rewards 1, 0, 0 (mean 1/3); group 1: 2, 0 (mean 1); group 2: a lone sample
REWARDS = torch.tensor([1.0, 0.0, 0.0, 2.0, 0.0, 5.0])
GROUPS = torch.tensor([0, 0, 0, 1, 1, 2])


def test_rloo_subtracts_the_mean_of_the_other_samples_of_the_group():
    # group 0: 1 - (0+0)/2 = 1, 0 - (1+0)/2 = -0.5 (twice); group 1: 2 - 0 = 2, 0 - 2 = -2; alone: 0
    expected = [1.0, -0.5, -0.5, 2.0, -2.0, 0.0]
    assert episode_advantages("rloo", REWARDS, GROUPS, "none").tolist() == pytest.approx(expected)
    # it is G/(G-1) times GRPO's centred reward (3/2 and 2/1 here), so "group" scaling gives GRPO's exactly
    grpo = group_normalized_advantages(REWARDS, GROUPS, "group")
    assert episode_advantages("rloo", REWARDS, GROUPS, "group").tolist() == pytest.approx(grpo.tolist(), abs=1e-4)
    # "batch": divided by the batch's reward std: mean 8/6, squares 1/9+16/9+16/9+4/9+16/9+121/9 = 174/9, /5 -> 3.8667
    std = math.sqrt(174 / 9 / 5)
    batch = episode_advantages("rloo", REWARDS, GROUPS, "batch").tolist()
    assert batch == pytest.approx([a / (std + 1e-4) for a in expected])


def test_reinforce_pp_normalises_the_returns_over_the_whole_batch():
    rewards, groups = REWARDS[:5], GROUPS[:5]
    # rewards 1, 0, 0, 2, 0: mean 0.6, deviations .4 -.6 -.6 1.4 -.6, squares sum 3.2, unbiased var 0.8
    std = math.sqrt(0.8)
    expected = [d / (std + 1e-4) for d in (0.4, -0.6, -0.6, 1.4, -0.6)]
    for scale in ("group", "batch", "none"):  # the batch normalisation is the method
        assert episode_advantages("reinforce++", rewards, groups, scale).tolist() == pytest.approx(expected)


def test_reinforce_pp_baseline_subtracts_the_group_mean_then_divides_by_the_batch_std():
    rewards, groups = REWARDS[:5], GROUPS[:5]
    # centred on the group means 1/3 and 1: 2/3, -1/3, -1/3, 1, -1 (sum 0); squares 4/9+1/9+1/9+1+1 = 8/3,
    # unbiased var (8/3)/4 = 2/3
    std = math.sqrt(2 / 3)
    expected = [c / (std + 1e-4) for c in (2 / 3, -1 / 3, -1 / 3, 1.0, -1.0)]
    assert episode_advantages("reinforce++-baseline", rewards, groups, "group").tolist() == pytest.approx(expected)
    # a batch whose groups are all flat has no signal left: all 0
    flat = episode_advantages("reinforce++-baseline", torch.tensor([1.0, 1.0, 0.0, 0.0]), torch.tensor([0, 0, 1, 1]))
    assert flat.tolist() == [0.0] * 4


def test_overlong_penalty_grows_linearly_over_the_buffer_before_the_budget():
    from mathgym.algos.advantages import overlong_penalty

    # budget 20, buffer 8: free up to 12; 14 -> (12 - 14) / 8 = -0.25; 18 -> -0.75; 20 -> -1; beyond: -1; times 0.5
    lengths = torch.tensor([5, 12, 14, 18, 20, 25])
    assert overlong_penalty(lengths, 20, 8, 0.5).tolist() == pytest.approx([0, 0, -0.125, -0.375, -0.5, -0.5])
    assert overlong_penalty(lengths, 20, 0, 0.5).tolist() == [0.0] * 6  # buffer 0: off
