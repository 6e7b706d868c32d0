"""Stable-Baselines3's PPO on a mathgym env, one token per action (CPU, no language model).

    python examples/integrations/sb3_ppo.py
"""

from __future__ import annotations

import gymnasium as gym
from stable_baselines3 import PPO
from stable_baselines3.common.env_checker import check_env

import mathgym  # noqa: F401
from mathgym.integrations.sb3 import TokenLevelEnv

env = TokenLevelEnv(gym.make("GuessNumber-v0", low=1, high=9), action_tokens=list("0123456789"), max_action_tokens=2)
check_env(env)
model = PPO("MlpPolicy", env, n_steps=256, batch_size=64, verbose=1)
model.learn(2_048)
