"""Shared helpers of the training-stack tests: a very small tiny model, a multi-turn test env, PRM step labels."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym

from mathgym.core import Judgement, Task, TextEnv
from mathgym.rewards.base import Status

GUESS_ID = "mathgym-tests/GuessNumber-v0"


class GuessNumberTestEnv(TextEnv):
    """Guess a number in 1..``high``; the env answers ``higher``/``lower``; reward 1 when found."""

    def __init__(self, high: int = 8, max_turns: int = 3, infra_failure_every: int = 0, render_mode: str | None = None):
        super().__init__(max_turns=max_turns, max_length=256, system_prompt="", render_mode=render_mode)
        self.high = high
        self.infra_failure_every = infra_failure_every

    def _sample_task(self, options: Mapping[str, Any]) -> Task:
        secret = int(self.np_random.integers(1, self.high + 1))
        return Task(f"guess-{secret}", f"Guess my number (1-{self.high}).", str(secret))

    def _judge(self, action: str) -> Judgement:
        secret = int(self.task.answer)
        if self.infra_failure_every and secret % self.infra_failure_every == 0:
            return Judgement(0.0, Status.SANDBOX_ERROR, True, correct=False)
        found = re.findall(r"-?\d+", action)
        if not found:
            return Judgement(0.0, Status.UNPARSEABLE, False, observation="Say a number.")
        guess = int(found[-1])
        if guess == secret:
            return Judgement(1.0, Status.CORRECT, True, correct=True)
        reply = "higher" if guess < secret else "lower"
        return Judgement(0.0, Status.IN_PROGRESS, False, observation=reply)

    def expert_action(self) -> str:
        return self.task.answer


def register_guess_env() -> str:
    if GUESS_ID not in gym.registry:
        gym.register(GUESS_ID, entry_point=GuessNumberTestEnv)
    return GUESS_ID


def build_small_model(path: Path, seed: int = 0) -> Path:
    """A 2-layer, width-32 char-level Llama (fast enough for unit tests), saved at ``path``."""
    from mathgym.agents.tiny import build_tiny_model

    if not (path / "config.json").is_file():
        model, tokenizer = build_tiny_model(seed=seed, hidden_size=32, num_layers=2)
        model.save_pretrained(path)
        tokenizer.save_pretrained(path)
    return path


def build_dropout_model(path: Path) -> Path:
    """A 2-layer width-32 char-level Llama with attention dropout (training draws from the torch RNG),
    saved at ``path``: what the exact-resume tests need to show that the RNG state is restored."""
    from mathgym.agents.tiny import build_tiny_model

    model, tokenizer = build_tiny_model(seed=0, hidden_size=32, num_layers=2)
    model.config.attention_dropout = 0.1
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def write_step_labels(path: Path, seeds: Any) -> Path:
    """A JSONL of labelled solutions (one per seed) whose steps that say "wrong" are labelled 0
    (learnable from the text alone), for PRM training; returns ``path``."""
    rows = []
    for i in seeds:
        a, b = i % 7 + 1, i % 5 + 2
        good, bad = f"{a} + {b} = {a + b}.", f"this is wrong: {a} + {b} = {a + b + 1}."
        steps = [[good, good], [good, bad, good], [good, good, bad]][i % 3]
        rows.append({"problem": f"What is {a} + {b}?", "steps": steps, "labels": [0.0 if "wrong" in s else 1.0 for s in steps]})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def record_calls(monkeypatch: Any, owner: Any, name: str, size: Any = lambda args: len(args[0])) -> list[Any]:
    """Wrap ``owner.name`` (a function or a method) so that each call appends ``size(args)`` (the
    arguments after ``self`` for a method) to the returned list, then runs as before."""
    original = getattr(owner, name)
    calls: list[Any] = []
    method = isinstance(owner, type)

    def recording(*args: Any, **kwargs: Any) -> Any:
        calls.append(size(args[1:] if method else args))
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, recording)
    return calls
