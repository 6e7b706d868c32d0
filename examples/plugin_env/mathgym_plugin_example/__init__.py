"""A minimal mathgym plugin: ReverseWord-v0 asks the agent to spell a word backwards."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mathgym import Judgement, Task, TextEnv, register_env
from mathgym.rewards import Status

WORDS = ("gymnasium", "reward", "policy", "token", "sandbox", "verifier", "gradient", "rollout")


class ReverseWordEnv(TextEnv):
    """Spell a word backwards; reward 1 for the exact reversal (single turn)."""

    def _sample_task(self, options: Mapping[str, Any]) -> Task:
        index = options.get("task_index", int(self.np_random.integers(len(WORDS))))
        word = WORDS[index]
        return Task(f"reverse-{word}", f"Write the word '{word}' backwards.", word[::-1])

    def _judge(self, action: str) -> Judgement:
        correct = action.strip() == self.task.answer
        return Judgement(
            reward=float(correct),
            status=Status.CORRECT if correct else Status.WRONG,
            done=True,
            reward_breakdown={"exact_match": float(correct)},
            correct=correct,
        )


def register() -> None:
    """Called by mathgym through the ``mathgym.envs`` entry point."""
    register_env("ReverseWord-v0", "mathgym_plugin_example:ReverseWordEnv")
