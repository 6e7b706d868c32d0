"""GAE at token and turn level against hand-computed advantages for a 3-turn episode."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from mathgym.algos.gae import (  # noqa: E402
    broadcast_steps,
    compute_gae,
    first_token_mask,
    masked_gae,
    place_step_rewards,
    sum_over_steps,
    token_level_gae,
    turn_level_gae,
)
from mathgym.errors import ConfigError  # noqa: E402

# One 3-turn episode laid out as tokens:
#   idx:         0   1   2   3   4   5   6   7   8   9
#   kind:        p   p   a0  a0  env a1  a1  env a2  pad
STEP_INDEX = torch.tensor([[-1, -1, 0, 0, -1, 1, 1, -1, 2, -1]])
# Rewards on the last token of each step (0, 0.5, 1); the 7.0 on an env token must be ignored.
REWARDS = torch.tensor([[0.0, 0.0, 0.0, 0.0, 7.0, 0.0, 0.5, 0.0, 1.0, 0.0]])
# Values on action tokens; the 9.0s sit on non-action tokens and must be ignored.
VALUES = torch.tensor([[9.0, 9.0, 0.1, 0.2, 9.0, 0.3, 0.4, 9.0, 0.5, 9.0]])
GAMMA, LAM = 0.9, 0.5


def test_turn_level_gae_matches_hand_computation():
    # Steps: r = (0, 0.5, 1), V = value at each step's first token = (0.1, 0.3, 0.5).
    # k=2: delta = 1 - 0.5 = 0.5                    A2 = 0.5
    # k=1: delta = 0.5 + 0.9*0.5 - 0.3 = 0.65       A1 = 0.65 + 0.45*0.5 = 0.875
    # k=0: delta = 0 + 0.9*0.3 - 0.1 = 0.17         A0 = 0.17 + 0.45*0.875 = 0.56375
    out = turn_level_gae(REWARDS, VALUES, STEP_INDEX, GAMMA, LAM)
    a0, a1, a2 = 0.56375, 0.875, 0.5
    expected_adv = [0, 0, a0, a0, 0, a1, a1, 0, a2, 0]
    assert out.advantages[0].tolist() == pytest.approx(expected_adv)
    # Returns = A + V, trained only at the first token of each step.
    expected_ret = [0, 0, a0 + 0.1, 0, 0, a1 + 0.3, 0, 0, a2 + 0.5, 0]
    assert out.returns[0].tolist() == pytest.approx(expected_ret)
    assert out.value_mask[0].tolist() == [0, 0, 1, 0, 0, 1, 0, 0, 1, 0]


def test_token_level_gae_matches_hand_computation():
    # Action tokens in order: (V, r) = (.1,0) (.2,0) (.3,0) (.4,.5) (.5,1); env tokens skipped.
    # t8: delta = 1 - .5 = .5                       A = .5
    # t6: delta = .5 + .9*.5 - .4 = .55             A = .55 + .45*.5 = .775
    # t5: delta = .9*.4 - .3 = .06                  A = .06 + .45*.775 = .40875
    # t3: delta = .9*.3 - .2 = .07                  A = .07 + .45*.40875 = .2539375
    # t2: delta = .9*.2 - .1 = .08                  A = .08 + .45*.2539375 = .194271875
    out = token_level_gae(REWARDS, VALUES, STEP_INDEX >= 0, GAMMA, LAM)
    expected = [0, 0, 0.194271875, 0.2539375, 0, 0.40875, 0.775, 0, 0.5, 0]
    assert out.advantages[0].tolist() == pytest.approx(expected)
    values_on_actions = [0, 0, 0.1, 0.2, 0, 0.3, 0.4, 0, 0.5, 0]
    assert out.returns[0].tolist() == pytest.approx([a + v for a, v in zip(expected, values_on_actions)])
    assert out.value_mask[0].tolist() == [0, 0, 1, 1, 0, 1, 1, 0, 1, 0]


def test_gamma_one_lambda_one_gives_reward_to_go_minus_value():
    rewards = torch.tensor([[1.0, 0.0, 2.0]])
    values = torch.tensor([[0.5, 0.25, 1.0]])
    adv, ret = masked_gae(rewards, values, torch.ones(1, 3), 1.0, 1.0)
    assert adv[0].tolist() == pytest.approx([3 - 0.5, 2 - 0.25, 2 - 1.0])
    assert ret[0].tolist() == pytest.approx([3.0, 2.0, 2.0])


def test_lambda_zero_is_one_step_td():
    rewards = torch.tensor([[1.0, 0.0, 2.0]])
    values = torch.tensor([[0.5, 0.25, 1.0]])
    adv, _ = masked_gae(rewards, values, torch.ones(1, 3), 0.5, 0.0)
    assert adv[0].tolist() == pytest.approx([1 + 0.5 * 0.25 - 0.5, 0.5 * 1.0 - 0.25, 2 - 1.0])


def test_rows_are_independent_and_padding_is_zero():
    index = torch.cat([STEP_INDEX, torch.tensor([[-1, 0, 0, 0, 0, -1, -1, -1, -1, -1]])])
    rewards = torch.cat([REWARDS, torch.tensor([[0, 0, 0, 0, 2.0, 0, 0, 0, 0, 0]])])
    values = torch.cat([VALUES, torch.zeros(1, 10)])
    out = turn_level_gae(rewards, values, index, GAMMA, LAM)
    single = turn_level_gae(REWARDS, VALUES, STEP_INDEX, GAMMA, LAM)
    assert torch.allclose(out.advantages[0], single.advantages[0])
    assert out.advantages[1].tolist() == pytest.approx([0, 2, 2, 2, 2, 0, 0, 0, 0, 0])


def test_step_helpers():
    steps = torch.tensor([[-1, 0, 0, -1, 1]])
    x = torch.tensor([[5.0, 1.0, 2.0, 5.0, 3.0]])
    assert sum_over_steps(x, steps, 2).tolist() == [[3.0, 3.0]]
    assert broadcast_steps(torch.tensor([[7.0, 8.0]]), steps).tolist() == [[0, 7, 7, 0, 8]]
    assert first_token_mask(steps).tolist() == [[False, True, False, False, True]]
    # Two consecutive steps with no env tokens between them still start separately.
    assert first_token_mask(torch.tensor([[0, 0, 1, 1]])).tolist() == [[True, False, True, False]]


def test_compute_gae_dispatch_and_bad_option():
    token = compute_gae("token", REWARDS, VALUES, STEP_INDEX, GAMMA, LAM)
    assert torch.allclose(token.advantages, token_level_gae(REWARDS, VALUES, STEP_INDEX >= 0, GAMMA, LAM).advantages)
    with pytest.raises(ConfigError, match="granularity"):
        compute_gae("episode", REWARDS, VALUES, STEP_INDEX, GAMMA, LAM)  # type: ignore[arg-type]


def test_values_are_not_differentiated_through():
    values = VALUES.clone().requires_grad_(True)
    out = turn_level_gae(REWARDS, values, STEP_INDEX, GAMMA, LAM)
    assert not out.advantages.requires_grad


def test_place_step_rewards_on_last_token_of_each_step():
    rewards = place_step_rewards(STEP_INDEX, [[0.0, 0.5, 1.0]])
    assert rewards[0].tolist() == [0, 0, 0, 0.0, 0, 0, 0.5, 0, 1.0, 0]
    # Step 1 produced no token (budget): its reward goes to step 0's last token.
    index = torch.tensor([[-1, 0, 0, -1, 2, -1]])
    assert place_step_rewards(index, [[0.25, 0.5, 1.0]])[0].tolist() == [0, 0, 0.75, 0, 1.0, 0]
    assert place_step_rewards(torch.tensor([[-1, -1]]), [[1.0]])[0].tolist() == [0.0, 0.0]
