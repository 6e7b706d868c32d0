"""mathgym: Gymnasium text environments for RL of language models, and a thin SDK to train on them.

Importing mathgym registers its environments (and those of installed plugins) with gymnasium::

    import gymnasium as gym, mathgym
    env = gym.make("MathReason-v0")
"""

from __future__ import annotations

from mathgym import spaces  # noqa: F401 - registers the exact shared-memory codec for text
from mathgym.core import Judgement, Task, TextEnv
from mathgym.envs import register_builtin_envs
from mathgym.registry import list_envs, load_plugins, register_env, resolve_env_id

__version__ = "0.1.0"

register_builtin_envs()
load_plugins()

__all__ = ["Judgement", "Task", "TextEnv", "__version__", "list_envs", "register_env", "resolve_env_id"]
