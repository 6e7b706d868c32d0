"""The verifiers taskset ``mathgym-verifiers``: verifiers resolves a taskset id to a top-level
module exporting its ``Taskset`` and ``Env``; this one is :mod:`mathgym.integrations.verifiers`."""

from mathgym.integrations.verifiers import MathgymEnv, MathgymTaskset

__all__ = ["MathgymEnv", "MathgymTaskset"]
