"""PPO trainer: CLI smoke runs (single-turn, multi-turn, step-level), step rewards on the right tokens, resume."""

from __future__ import annotations

import json
import math

import pytest

torch = pytest.importorskip("torch")

from mathgym import train_cli  # noqa: E402
from mathgym.agents.policy import LLMPolicy, SamplingParams  # noqa: E402
from mathgym.algos.gae import place_step_rewards, turn_level_gae  # noqa: E402
from mathgym.algos.ppo import PPOConfig, PPOTrainer  # noqa: E402
from mathgym.algos.rollout import RolloutCollector, RolloutSettings  # noqa: E402
from mathgym.errors import ConfigError  # noqa: E402
from tests.trainkit import build_small_model, register_guess_env  # noqa: E402


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    return build_small_model(tmp_path_factory.mktemp("model"))


def records(run):
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


SMALL = ["--steps", "2", "--num-tasks", "2", "--group-size", "2", "--max-new-tokens", "6", "--eval-tasks", "0",
         "--progress", "false"]


def test_cli_smoke_single_turn_lora_token_level_with_kl_loss_and_early_stop(model_path, tmp_path, capsys):
    run = tmp_path / "run"
    code = train_cli.main("train", [
        "--algo", "ppo", "--model", str(model_path), *SMALL, "--run-dir", str(run), "--advantage-level", "token",
        "--kl-coef", "0.1", "--kl-mode", "loss", "--kl-estimator", "k3", "--entropy-coef", "0.01",
        "--ppo-epochs", "4", "--target-kl", "1e-12", "--learning-rate", "1e-2", "--lora-r", "4",
    ])
    assert code == 0
    step = [r for r in records(run) if r["step"] == 1][0]
    for key in ("loss/policy", "loss/value", "loss/entropy", "loss/approx_kl", "loss/clip_fraction",
                "loss/value_clip_fraction", "loss/explained_variance", "loss/early_stopped", "loss/updates", "rollout/reward"):
        assert key in step, key
    # A tiny target KL stops after the first minibatch update, and says so.
    assert step["loss/early_stopped"] == 1.0 and step["loss/updates"] < 4 * 2
    assert "early stop" in capsys.readouterr().out
    state = torch.load(run / "checkpoints" / "step-000002" / "state.pt", weights_only=False)
    assert "value_model" in state["extra"]


def test_cli_smoke_multi_turn_separate_critic_kl_reward(model_path, tmp_path):
    env_id = register_guess_env()
    run = tmp_path / "run"
    code = train_cli.main("train", [
        "--algo", "ppo", "--env", env_id, "--env-kwargs", "{high: 5, max_turns: 3}", "--model", str(model_path), *SMALL,
        "--run-dir", str(run), "--value-model", "separate", "--kl-coef", "0.05", "--grad-accum-steps", "2",
    ])
    assert code == 0
    step = records(run)[-1]
    assert step["rollout/turns"] > 1 and "loss/kl_ref" in step


def test_cli_smoke_step_level_math_step(model_path, tmp_path):
    run = tmp_path / "run"
    code = train_cli.main("train", [
        "--algo", "ppo", "--env", "MathStep-v0", "--env-kwargs", "{max_steps: 2, system_prompt: ''}",
        "--model", str(model_path), *SMALL, "--run-dir", str(run),
    ])
    assert code == 0
    steps = [r for r in records(run) if "rollout/reward" in r]
    assert [r["step"] for r in steps] == [1, 2]
    for rec in steps:
        # one reasoning step per turn: the untrained model never boxes an answer, so every episode takes both steps
        assert rec["rollout/turns"] == 2.0, rec["rollout/turns"]
        assert rec["loss/updates"] >= 1 and all(map(math.isfinite, (rec["loss/policy"], rec["loss/value"])))
    assert (run / "checkpoints" / "latest").read_text() == "step-000002"


def step_length_reward(problem, steps):
    """A process reward that differs per step (so a misplaced reward shows): 0.1 * step number + 0.01 * length."""
    return 0.1 * len(steps) + 0.01 * min(len(steps[-1]), 9)


def test_math_step_process_rewards_reach_the_tokens_of_their_step(model_path):
    policy = LLMPolicy.from_pretrained(str(model_path), device="cpu")
    settings = RolloutSettings(group_size=2, sampling=SamplingParams(max_new_tokens=5), max_episode_tokens=1024)
    kwargs = {"max_steps": 3, "process_reward": step_length_reward, "system_prompt": ""}
    collector = RolloutCollector("MathStep-v0", kwargs, policy, num_tasks=2, settings=settings)
    batch = collector.collect([3, 4], torch.Generator().manual_seed(0))
    collector.close()
    token_rewards = place_step_rewards(batch.step_index, batch.step_rewards)
    episodes = 0
    for b in range(len(batch)):
        steps = batch.step_rewards[b]
        index = batch.step_index[b]
        for k, reward in enumerate(steps):
            positions = torch.nonzero(index == k).flatten()
            if not len(positions):
                continue
            assert token_rewards[b, positions[-1]].item() == pytest.approx(reward)
            assert token_rewards[b, positions[:-1]].abs().sum() == 0  # nothing on the step's other tokens
        assert token_rewards[b][index < 0].abs().sum() == 0  # nothing on prompt/env tokens
        # The env's own rewards for those actions, replayed independently, are the ones placed.
        import gymnasium as gym

        env = gym.make("MathStep-v0", **kwargs)
        env.reset(seed=[3, 3, 4, 4][b])
        replayed = [env.step(text)[1] for text in batch.completions[b]]
        assert replayed == pytest.approx(steps)
        episodes += len(steps) > 1
        # Turn-level GAE with gamma = lam = 1 and zero values: each step's tokens get its reward-to-go.
        adv = turn_level_gae(token_rewards[b : b + 1], torch.zeros(1, index.numel()), index[None], 1.0, 1.0).advantages[0]
        for k in range(len(steps)):
            on_step = adv[index == k]
            if len(on_step):
                assert on_step.tolist() == pytest.approx([sum(steps[k:])] * len(on_step), abs=1e-5)
    assert episodes > 0  # multi-step episodes were exercised


def test_value_head_is_resumed(model_path, tmp_path):
    cfg = PPOConfig(model=str(model_path), steps=1, num_tasks=2, group_size=2, max_new_tokens=4, eval_tasks=0,
                    progress=False, run_dir=str(tmp_path / "run"), value_learning_rate=0.1)
    trainer = PPOTrainer(cfg)
    trainer.train()
    with torch.no_grad():  # give the head distinctive weights, then checkpoint them
        trainer.algorithm.value_model.head.summary.weight.normal_()
    trainer.save()
    head = trainer.algorithm.value_model.head.summary.weight.detach().clone()
    again = PPOTrainer(cfg)
    assert again.resume()
    assert torch.equal(again.algorithm.value_model.head.summary.weight, head)


@pytest.mark.parametrize("override, field", [({"gamma": 1.5}, "gamma"), ({"advantage_level": "episode"}, "advantage_level"),
                                             ({"ppo_epochs": 0}, "ppo_epochs"), ({"kl_mode": "both"}, "kl_mode")])
def test_bad_options(override, field):
    from mathgym.options import build_config

    with pytest.raises(ConfigError, match=field):
        build_config(PPOConfig, overrides=override)
