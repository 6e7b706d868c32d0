"""The multi-turn comparison with TRL is honest: both sides play the same tasks under the same rules.

``benchmarks/grpo_vs_trl_multiturn.py`` times mathgym's GRPO step against TRL's ``GRPOTrainer``
driven through ``rollout_func``. Here one batch of each, built by the benchmark's own functions,
is checked: TRL's groups are mathgym's tasks in mathgym's order, each side's episodes replayed
action by action on the *other* side's env give the rewards that side got (so the env options,
the model's own settings merged in included, agree), and both keep the same turn and
per-turn token budgets.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl")
torch = pytest.importorskip("torch")

import gymnasium as gym

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import grpo_vs_trl_multiturn as bench

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
SETTING = bench.Setting(turns=3, high=6, max_new_tokens=6, num_tasks=2, group_size=2, steps=2, seed=3)


def replay(env_id: str, env_kwargs: dict, seed: int, actions: list[str]) -> list[float]:
    """The rewards ``env_id`` gives ``actions`` on the task of ``seed``."""
    env = gym.make(env_id, **env_kwargs)
    env.reset(seed=seed)
    rewards = []
    for action in actions:
        _, reward, terminated, truncated, _ = env.step(action)
        rewards.append(float(reward))
        if terminated or truncated:
            break
    env.close()
    return rewards


def expert_play(env_kwargs: dict, seed: int) -> list[str]:
    """The env's own binary search on the task of ``seed``, played to the end: its actions."""
    env = gym.make(bench.ENV, **env_kwargs)
    env.reset(seed=seed)
    actions, done = [], False
    while not done:
        actions.append(env.unwrapped.expert_action())
        _, _, terminated, truncated, _ = env.step(actions[-1])
        done = terminated or truncated
    env.close()
    return actions


def turns_of(ids: list[int], mask: list[int]) -> list[list[int]]:
    """The model's turns in a TRL completion: the runs of tokens with ``env_mask`` 1."""
    turns: list[list[int]] = []
    previous = 0
    for token, own in zip(ids, mask):
        if own and not previous:
            turns.append([])
        if own:
            turns[-1].append(token)
        previous = own
    return turns


@pytest.mark.torch
def test_trl_side_plays_mathgyms_tasks_with_the_same_rewards(tmp_path):
    model_path = bench.prepare_model(tmp_path)
    ours = bench.mathgym_trainer(SETTING, model_path, tmp_path)
    seeds = ours.source.task_seeds(0)
    batch, _ = ours.source.sample(0)
    trainer, trl_env = bench.trl_trainer(SETTING, model_path, seeds, tmp_path, callbacks=[])
    outputs = []

    def recording_rollout(prompts, trl_trainer):
        outputs.append(trl_env.rollout_func(prompts, trl_trainer))
        return outputs[-1]

    trainer.rollout_func = recording_rollout
    inputs = next(iter(trainer.get_train_dataloader()))  # TRL's own sampler: rows in order, each G times
    trainer.model.train()  # as in TRL's training step (its metrics go under "train")
    trainer._generate_and_score_completions(inputs)
    (out,) = outputs
    G = SETTING.group_size

    # the same tasks, in the same order and groups
    assert out["env_task_id"] == batch.task_ids == [t for t in batch.task_ids[::G] for _ in range(G)]
    assert len(set(batch.task_ids[::G])) == SETTING.num_tasks
    # the same env: each side's episodes replayed on the other side's env options give that side's rewards
    assert ours.env_kwargs == trl_env.env_kwargs and ours.config.env == trl_env.env_id == bench.ENV
    for seed in seeds:  # a winning play scores the same on both sides' envs: non-zero rewards compared
        won = expert_play(ours.env_kwargs, seed)
        assert replay(trl_env.env_id, trl_env.env_kwargs, seed, won) == replay(bench.ENV, ours.env_kwargs, seed, won)
        assert sum(replay(trl_env.env_id, trl_env.env_kwargs, seed, won)) == 1.0
    task_seed = [s for s in seeds for _ in range(G)]
    for i, actions in enumerate(batch.completions):
        assert replay(trl_env.env_id, trl_env.env_kwargs, task_seed[i], actions) == batch.step_rewards[i]
    tokenizer = trainer.processing_class
    for i, (ids, mask) in enumerate(zip(out["completion_ids"], out["env_mask"])):
        turns = turns_of(ids, mask)
        assert len(turns) == out["env_turns"][i] <= SETTING.turns
        assert all(len(turn) <= SETTING.max_new_tokens for turn in turns)  # TRL's per-turn budget is mathgym's
        actions = [tokenizer.decode(turn, skip_special_tokens=True) for turn in turns]
        assert sum(replay(bench.ENV, ours.env_kwargs, task_seed[i], actions)) == out["env_reward"][i]
    # both sides run every episode to the turn budget unless it is won (GuessNumber counts every turn)
    assert max(len(r) for r in batch.step_rewards) == SETTING.turns == max(out["env_turns"])
    # the reward TRL trains on is the env's return
    assert trainer._metrics["train"]["rewards/env_reward/mean"][-1] == pytest.approx(sum(out["env_reward"]) / len(out["env_reward"]))
    trl_env.close()
    ours.close()
