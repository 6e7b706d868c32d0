"""Policies over language models (needs the ``train`` extra: torch, transformers, peft).

The names below load on first use, so that the torch-free parts of this package (the model
settings file :mod:`~mathgym.agents.settings`, the option choices :mod:`~mathgym.agents.choices`,
the tiny model's name) import without the training stack.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "ChatFormat": "mathgym.agents.chat_format",
    "Generation": "mathgym.agents.sampling",
    "LLMPolicy": "mathgym.agents.policy",
    "LocalJudge": "mathgym.agents.local_judge",
    "LoraSettings": "mathgym.agents.policy",
    "PRM": "mathgym.agents.prm_model",
    "RewardModel": "mathgym.agents.reward_model",
    "SamplingParams": "mathgym.agents.sampling",
    "cache_dir": "mathgym.agents.tiny",
    "load_prm": "mathgym.agents.prm_model",
    "tiny_model_path": "mathgym.agents.tiny",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'mathgym.agents' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
