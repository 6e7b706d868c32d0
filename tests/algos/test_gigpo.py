"""The per-turn advantage estimators (GiGPO, step-level REINFORCE), against numbers worked out by
hand, and through the GRPO trainer and the CLI: each turn's tokens get that turn's advantage."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from mathgym import train_cli  # noqa: E402
from mathgym.agents.policy import LLMPolicy  # noqa: E402
from mathgym.algos.advantages import (  # noqa: E402
    Turns,
    discounted_returns,
    gigpo_advantages,
    group_normalized_advantages,
    step_reinforce_advantages,
)
from mathgym.algos.batch import Episode, RolloutBatch  # noqa: E402
from mathgym.algos.grpo import GRPOConfig, GRPOTrainer  # noqa: E402
from mathgym.errors import ConfigError  # noqa: E402
from mathgym.options import build_config  # noqa: E402
from tests.trainkit import build_small_model  # noqa: E402

# Group 0 holds three episodes, group 1 one; the observations the turns acted on, and their rewards:
#   A (group 0): s0 -> s1 -> s2, rewards 0, 0, 1   (episode reward 1)
#   B (group 0): s0 -> s1,       rewards 0, 0      (episode reward 0)
#   C (group 0): s0 -> s3,       rewards 0, 1      (episode reward 1)
#   D (group 1): s0 -> s1,       rewards 0, 1      (alone in its group: the same texts as group 0's s0, s1,
#                                                   but not in group 0's step groups)
OBSERVATIONS = [["s0", "s1", "s2"], ["s0", "s1"], ["s0", "s3"], ["s0", "s1"]]
STEP_REWARDS = [[0.0, 0.0, 1.0], [0.0, 0.0], [0.0, 1.0], [0.0, 1.0]]
GROUPS = torch.tensor([0, 0, 0, 1])
TURNS = Turns.of(STEP_REWARDS, OBSERVATIONS)
EPISODE_REWARDS = torch.tensor([sum(r) for r in STEP_REWARDS])

# Returns-to-go with gamma = 0.5:  A: 0 + 0.5*(0 + 0.5*1) = 0.25, 0.5, 1;  B: 0, 0;  C: 0.5, 1;  D: 0.5, 1.
RETURNS = [[0.25, 0.5, 1.0], [0.0, 0.0, 0.0], [0.5, 1.0, 0.0], [0.5, 1.0, 0.0]]


def _close(got: torch.Tensor, expected: list[list[float]], atol: float) -> None:
    torch.testing.assert_close(got, torch.tensor(expected), atol=atol, rtol=0)


def test_turns_grid_ids_equal_observations_and_adds_episode_terms_to_the_last_turn():
    turns = Turns.of([[0.0, 1.0], [2.0]], [["x", "y"], []], bonus=torch.tensor([-0.5, 0.25]))
    # 1 - 0.5 on the first episode's last turn; 2 + 0.25 on the second's only turn
    assert turns.rewards.tolist() == [[0.0, 0.5], [2.25, 0.0]]
    assert turns.mask.tolist() == [[True, True], [True, False]]
    assert turns.states.tolist() == [[0, 1], [-1, -1]]  # the second episode's observations are unknown
    assert TURNS.states.tolist() == [[0, 1, 2], [0, 1, -1], [0, 3, -1], [0, 1, -1]]


def test_discounted_returns_by_hand():
    _close(discounted_returns(TURNS.rewards, 0.5), RETURNS, 1e-7)
    # gamma 1: the undiscounted rewards-to-go
    assert discounted_returns(torch.tensor([[1.0, 2.0, 3.0]]), 1.0).tolist() == [[6.0, 5.0, 3.0]]


def test_gigpo_unscaled_by_hand():
    # Episode level, group 0 rewards 1, 0, 1 (mean 2/3): A, C +1/3, B -2/3; D alone: 0.
    # Step groups (gamma 0.5): (g0, s0) = A0 .25, B0 0, C0 .5, mean .25 -> 0, -.25, +.25;
    # (g0, s1) = A1 .5, B1 0, mean .25 -> +.25, -.25; (g0, s2), (g0, s3), (g1, s0), (g1, s1) alone -> 0.
    got = gigpo_advantages(EPISODE_REWARDS, GROUPS, TURNS, gamma=0.5, omega=1.0, scale_rewards="none")
    third = 1 / 3
    _close(got, [
        [third, third + 0.25, third],
        [-2 * third - 0.25, -2 * third - 0.25, 0.0],  # its third turn was not played: 0
        [third + 0.25, third, 0.0],
        [0.0, 0.0, 0.0],  # D's s0 and s1 are not group 0's step groups
    ], 1e-6)
    # omega scales the step part only: A's second turn 1/3 + 2 * .25
    doubled = gigpo_advantages(EPISODE_REWARDS, GROUPS, TURNS, gamma=0.5, omega=2.0, scale_rewards="none")
    assert doubled[0, 1].item() == pytest.approx(third + 0.5)


def test_gigpo_group_scaled_by_hand():
    # Episode level: 1, 0, 1 centred 1/3, -2/3, 1/3; unbiased std sqrt((1/9 + 4/9 + 1/9) / 2) = sqrt(1/3) = .57735
    #   -> .57735, -1.15470, .57735.
    # (g0, s0): centred 0, -.25, .25, std sqrt((.0625 + .0625) / 2) = .25 -> 0, -1, 1.
    # (g0, s1): centred .25, -.25, std sqrt(.125 / 1) = .35355 -> .70711, -.70711.
    got = gigpo_advantages(EPISODE_REWARDS, GROUPS, TURNS, gamma=0.5, scale_rewards="group")
    e = 0.57735
    _close(got, [
        [e, e + 0.70711, e],
        [-2 * e - 1.0, -2 * e - 0.70711, 0.0],
        [e + 1.0, e, 0.0],
        [0.0, 0.0, 0.0],
    ], 1e-3)


def test_gigpo_on_single_turn_episodes_is_grpo_scaled_by_one_plus_omega():
    # Every first turn acts on its task's prompt: one step group per group whose returns are the
    # episode rewards, so the step advantage equals the episode advantage.
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0, 0.3, 0.9, 0.2, 0.2])
    groups = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])
    turns = Turns.of([[r] for r in rewards.tolist()], [["prompt 0"]] * 4 + [["prompt 1"]] * 4)
    for scale in ("group", "batch", "none"):
        grpo = group_normalized_advantages(rewards, groups, scale)
        assert gigpo_advantages(rewards, groups, turns, omega=0.0, scale_rewards=scale)[:, 0].tolist() == pytest.approx(
            grpo.tolist(), abs=1e-6)
        assert gigpo_advantages(rewards, groups, turns, omega=1.0, scale_rewards=scale)[:, 0].tolist() == pytest.approx(
            (2 * grpo).tolist(), abs=1e-5)


def test_step_reinforce_whitens_the_turn_returns_over_the_batch_by_hand():
    # The played turns' returns (gamma 0.5): .25, .5, 1, 0, 0, .5, 1, .5, 1; sum 4.75, mean .52778.
    # Deviations: -.27778, -.02778, .47222, -.52778, -.52778, -.02778, .47222, -.02778, .47222;
    # squares sum .07716 + .00077 + .22299 + .27855 + .27855 + .00077 + .22299 + .00077 + .22299 = 1.30556;
    # unbiased variance 1.30556 / 8 = .16319, std .40398.
    got = step_reinforce_advantages(EPISODE_REWARDS, GROUPS, TURNS, gamma=0.5, eps=0.0)
    s = 0.40398
    _close(got, [
        [-0.27778 / s, -0.02778 / s, 0.47222 / s],
        [-0.52778 / s, -0.52778 / s, 0.0],
        [-0.02778 / s, 0.47222 / s, 0.0],
        [-0.02778 / s, 0.47222 / s, 0.0],
    ], 1e-3)


@pytest.mark.parametrize(("override", "message"), [
    ({"gamma": "0"}, "gamma=0.0 is not allowed"),
    ({"gamma": "1.5"}, "gamma=1.5 is not allowed"),
    ({"omega": "-1"}, "omega=-1.0 is not allowed"),
    ({"advantage": "gigpoo"}, "advantage='gigpoo' is not allowed"),
])
def test_bad_gamma_and_omega_are_refused_at_the_config(override, message):
    with pytest.raises(ConfigError, match=message):
        build_config(GRPOConfig, overrides=override)


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    return build_small_model(tmp_path_factory.mktemp("model"))


def _multi_turn_batch(policy: LLMPolicy) -> RolloutBatch:
    """The episodes A-D above as tokens: prompt, then per turn an action and an env reply."""
    gen = torch.Generator().manual_seed(0)
    episodes = []
    for b, (rewards, observations) in enumerate(zip(STEP_REWARDS, OBSERVATIONS)):
        ep = Episode("test", f"t{int(GROUPS[b])}", int(GROUPS[b]), observations=list(observations))
        ep.extend(torch.randint(10, 90, (5,), generator=gen).tolist())
        for k in range(len(rewards)):
            if k:
                ep.extend(torch.randint(10, 90, (3,), generator=gen).tolist())  # the env's reply
            ep.extend(torch.randint(10, 90, (2 + k,), generator=gen).tolist(), action_step=k, logprobs=[0.0] * (2 + k))
        ep.step_rewards = list(rewards)
        episodes.append(ep)
    batch = RolloutBatch.from_episodes(episodes, policy.pad_token_id)
    with torch.no_grad():
        batch.sampler_logprobs = policy.token_logprobs(batch.input_ids, batch.attention_mask)[0] * batch.action_mask
    return batch


def test_the_trainer_gives_each_turns_tokens_that_turns_advantage(model_path, tmp_path):
    policy = LLMPolicy.from_pretrained(str(model_path), device="cpu")
    config = GRPOConfig(model=str(model_path), num_tasks=2, group_size=2, eval_tasks=0, progress=False,
                        advantage="gigpo", gamma=0.5, scale_rewards="none")
    trainer = GRPOTrainer(config, run_dir=tmp_path / "run", policy=policy)
    batch = trainer.score_learner(_multi_turn_batch(policy))
    stats = trainer.loop.optimize(batch, trainer.algorithm.plan(batch))
    # the hand numbers of test_gigpo_unscaled_by_hand
    expected = gigpo_advantages(EPISODE_REWARDS, GROUPS, TURNS, gamma=0.5, scale_rewards="none")
    assert batch.advantages.shape == batch.input_ids.shape
    for b in range(len(batch)):
        for t, k in enumerate(batch.step_index[b].tolist()):
            want = expected[b, k].item() if k >= 0 else 0.0  # prompt, env replies and padding: 0
            assert batch.advantages[b, t].item() == pytest.approx(want, abs=1e-6), (b, t, k)
    # D's advantages are all 0 (alone in its group): it carries no gradient; A, B and C do.
    assert stats["loss/trained_sequences"] == pytest.approx(3 / 4)
    # turns sharing their observation within their group: A0, B0, C0 (s0) and A1, B1 (s1), of 9 played
    assert stats["loss/shared_state_turns"] == pytest.approx(5 / 9)


def test_episodes_record_the_observation_each_turn_acted_on(model_path):
    from mathgym.agents.policy import SamplingParams
    from mathgym.algos.rollout import RolloutCollector, RolloutSettings

    policy = LLMPolicy.from_pretrained(str(model_path), device="cpu")
    settings = RolloutSettings(group_size=2, sampling=SamplingParams(max_new_tokens=6), max_turns=3)
    collector = RolloutCollector("GuessNumber-v0", {}, policy, num_tasks=2, settings=settings)
    try:
        batch = collector.collect([1, 2], torch.Generator().manual_seed(1))
    finally:
        collector.close()
    assert any(len(r) > 1 for r in batch.step_rewards)
    for observations, rewards, messages in zip(batch.observations, batch.step_rewards, batch.messages):
        # one per turn: the reset's observation (the task), then each reply the next turn acted on
        assert len(observations) == len(rewards)
        assert observations == [m["content"] for m in messages if m["role"] == "user"][: len(rewards)]
    assert batch.observations[0][0] == batch.observations[1][0]  # a group's samples start from its task


@pytest.mark.parametrize("advantage", ["gigpo", "step_reinforce"])
def test_cli_trains_a_multi_turn_env_with_a_per_turn_advantage(model_path, tmp_path, advantage):
    run = tmp_path / "run"
    code = train_cli.main("train", [
        "--algo", "grpo", "--advantage", advantage, "--env", "GuessNumber-v0", "--model", str(model_path),
        "--steps", "1", "--num-tasks", "2", "--group-size", "2", "--max-new-tokens", "4", "--max-turns", "3",
        "--eval-tasks", "0", "--progress", "false", "--run-dir", str(run),
    ])
    assert code == 0
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in records if "rollout/reward" in r]
    assert [r["step"] for r in steps] == [1]
    assert steps[0]["rollout/turns"] > 1  # the episodes went past their first turn
