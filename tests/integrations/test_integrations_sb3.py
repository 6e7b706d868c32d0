"""Stable-Baselines3 on mathgym envs through ``TokenLevelEnv``: SB3's own env checker and PPO."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

import mathgym  # noqa: E402,F401
from mathgym.errors import ConfigError, InvalidActionError  # noqa: E402
from mathgym.integrations.sb3 import TokenLevelEnv  # noqa: E402


@pytest.mark.parametrize("env_id", ["MathReason-v0", "Countdown-v0", "GuessNumber-v0"])
def test_sb3_check_env_passes(env_id):
    import warnings

    from stable_baselines3.common.env_checker import check_env

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # SB3's checker warns on anything it would not train well on
        check_env(TokenLevelEnv(gym.make(env_id)), warn=True)


def test_ppo_learns_runs():
    from stable_baselines3 import PPO

    env = TokenLevelEnv(gym.make("GuessNumber-v0", low=1, high=9), action_tokens=list("0123456789"), max_action_tokens=2)
    model = PPO("MlpPolicy", env, n_steps=32, batch_size=16, n_epochs=1, seed=0, verbose=0)
    model.learn(64)
    action, _ = model.predict(env.reset(seed=0)[0])
    assert env.action_space.contains(action)


def encode(env: TokenLevelEnv, text: str) -> list[int]:
    return list(env.tokenizer(text, add_special_tokens=False)["input_ids"])


def test_tokens_accumulate_until_the_end_token_then_the_env_is_stepped_with_the_text():
    env = TokenLevelEnv(gym.make("GuessNumber-v0", low=1, high=9), max_obs_tokens=256, action_tokens=list("0123456789"))
    obs, info = env.reset(seed=0)
    secret = env.env.unwrapped.task.metadata["secret"]
    prompt = encode(env, env.env.unwrapped.task.prompt)
    assert obs.shape == (256,) and obs.dtype == np.int64
    assert list(obs[-len(prompt) :]) == prompt and set(obs[: -len(prompt)]) == {env.pad_id}
    wrong = 1 if secret != 1 else 2
    obs, reward, terminated, truncated, info = env.step(wrong)  # index i is the digit i
    assert (reward, terminated, info["action_tokens"]) == (0.0, False, 1)
    obs, reward, terminated, truncated, info = env.step(env.action_space.n - 1)  # end token: the env steps
    assert info["action_text"] == str(wrong) and info["status"] == "in_progress" and not terminated
    reply = encode(env, "is too low" if wrong < secret else "is too high")
    tail = [int(t) for t in obs if t != env.pad_id]
    assert any(tail[i : i + len(reply)] == reply for i in range(len(tail))), "the env's reply is appended"
    env.step(secret)
    obs, reward, terminated, truncated, info = env.step(env.action_space.n - 1)
    assert (reward, terminated, info["status"]) == (1.0, True, "correct")


def test_length_limit_sends_the_action_and_prefix_suffix_wrap_it():
    probe = gym.make("MathReason-v0")
    probe.reset(seed=0)
    answer = probe.unwrapped.task.answer  # the action is sent after len(answer) tokens, with no end token
    env = TokenLevelEnv(gym.make("MathReason-v0"), max_action_tokens=len(answer), action_tokens=list("0123456789"),
                        action_prefix="\\boxed{", action_suffix="}")
    env.reset(seed=0)
    results = [env.step(int(d)) for d in answer]
    assert all(r[1] == 0.0 and not r[2] for r in results[:-1])
    _, reward, terminated, _, info = results[-1]
    assert info["action_text"] == f"\\boxed{{{answer}}}"
    assert terminated and reward == 1.0


def test_bad_inputs_raise_mathgym_errors():
    with pytest.raises(ConfigError, match="one token"):
        TokenLevelEnv(gym.make("MathReason-v0"), action_tokens=["twelve"])
    with pytest.raises(ConfigError, match="max_action_tokens"):
        TokenLevelEnv(gym.make("MathReason-v0"), max_obs_tokens=4, max_action_tokens=8)
    env = TokenLevelEnv(gym.make("MathReason-v0"), action_tokens=list("01"))
    env.reset(seed=0)
    with pytest.raises(InvalidActionError):
        env.step(7)
