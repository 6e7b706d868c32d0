"""Algorithm registry: ``--algo NAME`` → trainer and config classes.

Entries are import strings, so adding an algorithm is one line and importing the
registry stays cheap::

    ALGORITHMS["ppo"] = AlgoSpec("mathgym.algos.ppo:PPOTrainer", "mathgym.algos.configs:PPOConfig", "PPO with GAE")
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from mathgym.errors import ConfigError


@dataclass(frozen=True)
class AlgoSpec:
    """Where an algorithm's trainer and config classes live (``module:Class``)."""

    trainer: str
    config: str
    description: str = ""

    def load(self) -> tuple[type, type]:
        """Import and return ``(trainer_class, config_class)``."""
        return _import(self.trainer), _import(self.config)


def _import(spec: str) -> type:
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


ALGORITHMS: dict[str, AlgoSpec] = {
    "grpo": AlgoSpec("mathgym.algos.grpo:GRPOTrainer", "mathgym.algos.configs:GRPOConfig", "group-relative policy optimisation"),
    "sft": AlgoSpec("mathgym.algos.sft:SFTTrainer", "mathgym.algos.configs:SFTConfig", "supervised fine-tuning on demonstrations"),
    "ppo": AlgoSpec("mathgym.algos.ppo:PPOTrainer", "mathgym.algos.configs:PPOConfig", "PPO with a value head and token/turn-level GAE"),
    "dpo": AlgoSpec("mathgym.algos.dpo:DPOTrainer", "mathgym.algos.configs:DPOConfig", "DPO/IPO/hinge/robust, offline pairs or online best-vs-worst"),
    "distill": AlgoSpec(
        "mathgym.algos.distill:DistillTrainer", "mathgym.algos.configs:DistillConfig",
        "off-policy distillation from a teacher: (1 - w) CE + w D(teacher || student)",
    ),
    "prm": AlgoSpec(
        "mathgym.algos.prm:PRMTrainer", "mathgym.algos.configs:PRMConfig",
        "a process reward model from labelled steps (BCE at each step tag)",
    ),
    "onpolicy-distill": AlgoSpec(
        "mathgym.algos.onpolicy_distill:OnPolicyDistillTrainer", "mathgym.algos.configs:OnPolicyDistillConfig",
        "on-policy distillation: the student samples, reward -KL(student || teacher) per token (+ env reward)",
    ),
}


def register_algorithm(name: str, trainer: str, config: str, description: str = "") -> None:
    """Add an algorithm (e.g. from a plugin)."""
    ALGORITHMS[name] = AlgoSpec(trainer, config, description)


def _spec(name: str) -> AlgoSpec:
    if name not in ALGORITHMS:
        raise ConfigError(f"--algo {name!r} is not an algorithm; choose one of {', '.join(sorted(ALGORITHMS))}.")
    return ALGORITHMS[name]


def get_algorithm(name: str) -> tuple[type, type]:
    """``(trainer_class, config_class)`` of ``name``; :class:`ConfigError` lists the known ones."""
    return _spec(name).load()


def get_config_class(name: str) -> type:
    """The config class of ``name`` alone: cheap (the built-in ones import no torch), for ``--help`` and option checks."""
    return _import(_spec(name).config)

ALGORITHMS["rm"] = AlgoSpec(
    "mathgym.algos.reward_model:RMTrainer", "mathgym.algos.configs:RMConfig",
    "reward model (Bradley-Terry) on preference pairs: a JSONL file or online best-vs-worst of any env",
)
