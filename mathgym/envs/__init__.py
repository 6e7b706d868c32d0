"""mathgym's built-in environments and their registration."""

from __future__ import annotations

from mathgym.registry import register_env

#: (id, entry point, one-line description) of every built-in env.
BUILTIN_ENVS: tuple[tuple[str, str, str], ...] = (
    ("MathReason-v0", "mathgym.envs.math_reason:MathReasonEnv", "Single-turn math: answer in \\boxed{}, verified (generator levels 0-4, GSM8K/MATH data)."),
)


def register_builtin_envs() -> None:
    """Register every built-in env with gymnasium (idempotent)."""
    for env_id, entry_point, description in BUILTIN_ENVS:
        register_env(env_id, entry_point, description)
