"""The integrations stay optional: importing mathgym and using its envs loads none of them."""

from __future__ import annotations

import subprocess
import sys

CHECK = """
import sys
import gymnasium as gym
import mathgym
env = gym.make("GuessNumber-v0"); env.reset(seed=0); env.step("5")
loaded = sorted(m for m in sys.modules if m.split(".")[0] in {"trl", "stable_baselines3", "verl", "openrlhf"}
                or m.startswith("mathgym.integrations"))
print(loaded)
"""


def test_import_mathgym_loads_no_integration():
    out = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
