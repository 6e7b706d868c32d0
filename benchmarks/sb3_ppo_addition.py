"""Stable-Baselines3's PPO learning one-digit addition through ``TokenLevelEnv`` (CPU, no language model).

MathReason-v0 on the 45 one-digit sums ``a + b <= 9`` (a JSONL written here), seen token by
token: the observation is the problem's character tokens, the action one digit token, sent
to the env as ``\\boxed{d}`` and verified by mathgym's MathVerifier. A uniform random
policy scores 0.1; the table shows the mean reward of the trained policy (greedy and
sampled) over every problem, next to the untrained one.

    python benchmarks/sb3_ppo_addition.py --timesteps 30000
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import gymnasium as gym
import numpy as np

import mathgym  # noqa: F401
from mathgym.integrations.sb3 import TokenLevelEnv


def one_digit_sums(path: Path) -> Path:
    """Write the 45 problems ``a + b`` with ``a + b <= 9`` as GSM8K-style JSONL."""
    rows = [{"question": f"What is {a} + {b}?", "answer": f"#### {a + b}"} for a in range(10) for b in range(10) if a + b <= 9]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def make_env(data: Path) -> TokenLevelEnv:
    env = gym.make("MathReason-v0", dataset=str(data), system_prompt="")
    return TokenLevelEnv(env, max_obs_tokens=16, max_action_tokens=1, action_tokens=list("0123456789"),
                         action_prefix="\\boxed{", action_suffix="}")


def evaluate(model, env: TokenLevelEnv, deterministic: bool) -> float:
    """Mean reward over every problem of the data set."""
    n = env.env.unwrapped.num_tasks
    total = 0.0
    for i in range(n):
        obs, _ = env.reset(options={"task_index": i})
        done = False
        while not done:
            action, _ = model.predict(obs, deterministic=deterministic)
            obs, reward, terminated, truncated, _ = env.step(int(action))
            total += float(reward)
            done = terminated or truncated
    return total / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timesteps", type=int, default=30_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    from stable_baselines3 import PPO

    data = one_digit_sums(Path(tempfile.mkdtemp()) / "one_digit.jsonl")
    env = make_env(data)
    model = PPO("MlpPolicy", env, n_steps=256, batch_size=64, learning_rate=1e-3, seed=args.seed, verbose=0)
    before = (evaluate(model, env, True), evaluate(model, env, False))
    start = time.perf_counter()
    model.learn(args.timesteps)
    seconds = time.perf_counter() - start
    after = (evaluate(model, env, True), evaluate(model, env, False))
    print(f"load average {os.getloadavg()[0]:.1f}; PPO {args.timesteps} timesteps in {seconds:.0f} s (seed {args.seed})")
    print("| policy | mean reward (greedy) | mean reward (sampled) |")
    print("|---|---|---|")
    print("| uniform random | 0.100 | 0.100 |")
    print(f"| PPO, untrained | {before[0]:.3f} | {before[1]:.3f} |")
    print(f"| PPO, {args.timesteps} steps | {after[0]:.3f} | {after[1]:.3f} |")


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    main()
