"""The algorithms' config classes (no torch: ``mathgym train --help`` and option errors stay fast).

Each trainer module re-exports its config (``from mathgym.algos.grpo import GRPOConfig``
keeps working); :mod:`mathgym.algos.registry` points ``--algo NAME`` here for the options,
and loads the trainer (and torch) only when training starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from mathgym.config import TrainConfig, option
from mathgym.errors import ConfigError

DPO_LOSS_TYPES: tuple[str, ...] = ("sigmoid", "ipo", "hinge", "robust")


def check_preference_options(loss_type: str, beta: float, label_smoothing: float) -> None:
    """Raise :class:`ConfigError` for options no preference loss can use."""
    if loss_type not in DPO_LOSS_TYPES:
        raise ConfigError(f"loss_type={loss_type!r} is not allowed; choose one of {', '.join(DPO_LOSS_TYPES)}.")
    if not beta > 0:
        raise ConfigError(f"beta={beta!r} must be > 0.")
    upper = 0.5 if loss_type == "robust" else 1.0
    if not 0.0 <= label_smoothing < upper:
        raise ConfigError(f"label_smoothing={label_smoothing!r} must be in [0, {upper}) for loss_type={loss_type!r}.")


@dataclass
class GRPOConfig(TrainConfig):
    """GRPO options (on top of :class:`~mathgym.config.TrainConfig`)."""

    beta: float = option(0.0, "weight of the k3 KL penalty to the reference model (0: no reference)")
    eps_low: float = option(0.2, "clip range below 1 of the probability ratio")
    eps_high: float = option(0.28, "clip range above 1 of the probability ratio (clip-higher)")
    scale_rewards: Literal["group", "batch", "none"] = option("group", "divide centred rewards by the std of the group, the batch, or not at all")
    loss_aggregation: Literal["token_mean", "sequence_mean", "dr_grpo"] = option("token_mean", "how per-token losses are averaged")
    num_iterations: int = option(1, "optimizer passes over each batch (old log-probs stored at sampling)")
    mask_truncated: bool = option(False, "leave completions that hit the token/turn budget out of the loss")

    def validate(self) -> None:
        super().validate()
        if self.beta < 0:
            raise ConfigError(f"beta={self.beta!r} is not allowed; it must be >= 0.")
        if not (0 <= self.eps_low < 1 and self.eps_high >= 0):
            raise ConfigError(f"eps_low={self.eps_low!r}, eps_high={self.eps_high!r}: need 0 <= eps_low < 1 and eps_high >= 0.")
        if self.num_iterations < 1:
            raise ConfigError(f"num_iterations={self.num_iterations!r} is not allowed; it must be at least 1.")


@dataclass
class PPOConfig(TrainConfig):
    """PPO options (on top of :class:`~mathgym.config.TrainConfig`)."""

    group_size: int = option(4, "samples per task (PPO needs no groups; more samples per prompt help the critic)")
    value_model: Literal["shared", "separate"] = option(
        "shared", "value head on the policy's trunk, or a separate critic copy"
    )
    advantage_level: Literal["token", "turn"] = option(
        "turn", "GAE over tokens (TPPO) or over env steps, broadcast to their tokens (APPO)"
    )
    gamma: float = option(1.0, "discount factor of GAE")
    lam: float = option(0.95, "lambda of GAE")
    eps_low: float = option(0.2, "clip range below 1 of the probability ratio")
    eps_high: float = option(0.2, "clip range above 1 of the probability ratio")
    value_clip: float = option(0.2, "clip range of the value update around the rollout-time values (0: unclipped)")
    value_coef: float = option(0.5, "weight of the value loss")
    value_learning_rate: float = option(1e-3, "learning rate of the value head (and of the separate critic)")
    entropy_coef: float = option(0.0, "weight of the entropy bonus")
    kl_coef: float = option(0.0, "weight of the KL to the reference model (0: no reference)")
    kl_mode: Literal["reward", "loss"] = option("reward", "KL as a per-token reward penalty, or as a loss term")
    kl_estimator: Literal["k1", "k2", "k3"] = option("k1", "per-token KL estimator")
    reference: Literal["auto", "copy", "adapter"] = option(
        "auto", "reference: frozen copy, or the adapter-disabled model under LoRA"
    )
    whiten_advantages: bool = option(True, "normalise advantages to zero mean and unit variance over the batch")
    ppo_epochs: int = option(2, "passes over each batch of rollouts")
    num_minibatches: int = option(2, "optimizer steps per pass (the batch is split into this many minibatches)")
    target_kl: float = option(0.0, "stop a batch's passes once approx KL(old || new) exceeds it (0: never); logged")
    loss_aggregation: Literal["token_mean", "sequence_mean"] = option(
        "token_mean", "how per-token losses are averaged"
    )
    mask_truncated: bool = option(False, "leave episodes that hit the token/turn budget out of the loss")

    def validate(self) -> None:
        super().validate()
        for name in ("gamma", "lam"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ConfigError(f"{name}={getattr(self, name)!r} is not allowed; choose a value in [0, 1].")
        for name in ("eps_low", "eps_high", "value_clip", "value_coef", "entropy_coef", "kl_coef", "target_kl"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name}={getattr(self, name)!r} is not allowed; it must be >= 0.")
        if self.eps_low >= 1:
            raise ConfigError(f"eps_low={self.eps_low!r} is not allowed; it must be below 1.")
        if self.value_learning_rate <= 0:
            raise ConfigError(f"value_learning_rate={self.value_learning_rate!r} is not allowed; it must be > 0.")
        for name in ("ppo_epochs", "num_minibatches"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name}={getattr(self, name)!r} is not allowed; it must be at least 1.")
        if self.num_minibatches * self.grad_accum_steps > self.num_tasks * self.group_size:
            raise ConfigError(
                f"num_minibatches * grad_accum_steps = {self.num_minibatches * self.grad_accum_steps} exceeds the batch "
                f"num_tasks * group_size = {self.num_tasks * self.group_size}."
            )


@dataclass
class DPOConfig(TrainConfig):
    """DPO options (on top of :class:`~mathgym.config.TrainConfig`)."""

    beta: float = option(0.1, "strength of the implicit KL constraint to the reference")
    loss_type: Literal["sigmoid", "ipo", "hinge", "robust"] = option("sigmoid", "preference loss")
    label_smoothing: float = option(0.0, "assumed label-noise rate (cDPO for sigmoid; robust needs < 0.5)")
    reference: Literal["auto", "copy", "adapter", "precomputed"] = option(
        "auto", "reference: frozen copy, adapter-disabled model (LoRA), or the ref_*_logp fields of the file"
    )
    preference_file: str = option("", "JSONL of {prompt, chosen, rejected} pairs; empty: online pairs from the env")
    eval_preference_file: str = option("", "held-out pairs: implicit-reward accuracy logged as eval/preference_accuracy")
    pairs_per_step: int = option(32, "pairs per optimizer step (offline)")
    logprob_reduction: Literal["sum", "mean"] = option("sum", "sequence log-prob: sum over completion tokens, or mean")
    min_reward_gap: float = option(0.0, "online: pair best and worst only if their rewards differ by more than this")
    max_length: int = option(512, "offline: longest prompt + completion in tokens (prompt cut from the left)")
    epochs_per_batch: int = option(1, "optimizer steps on each batch of pairs")

    def validate(self) -> None:
        super().validate()
        check_preference_options(self.loss_type, self.beta, self.label_smoothing)
        for name in ("pairs_per_step", "max_length", "epochs_per_batch"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name}={getattr(self, name)!r} is not allowed; it must be at least 1.")
        if self.min_reward_gap < 0:
            raise ConfigError(f"min_reward_gap={self.min_reward_gap!r} is not allowed; it must be >= 0.")
        if self.reference == "precomputed" and not self.preference_file:
            raise ConfigError("reference='precomputed' needs a preference_file with ref_chosen_logp/ref_rejected_logp.")


@dataclass
class SFTConfig(TrainConfig):
    """SFT options (on top of :class:`~mathgym.config.TrainConfig`)."""

    data: str = option("", "JSONL demonstrations (plain or chat); empty: the env's expert on train tasks")
    num_demonstrations: int = option(20_000, "demonstrations drawn from the env's expert when data is empty")
    batch_size: int = option(64, "demonstrations per optimizer step")

    def validate(self) -> None:
        super().validate()
        if self.batch_size < 1 or self.num_demonstrations < 1:
            raise ConfigError("batch_size and num_demonstrations must be at least 1.")
