"""PPO with a learned value function and GAE, on any registered env.

What differs from GRPO is visible in :meth:`PPO.plan` and :meth:`PPO.loss`: a value
model (:mod:`mathgym.agents.value_head`) read on the learner's pass before the update, per-token
rewards with an optional KL penalty, GAE at token or turn level (:mod:`mathgym.algos.gae`),
several epochs of shuffled minibatches with a clipped value loss, and an early stop on a target
KL. Rollouts, the step, the update loop, logging, checkpoints and the CLI are the shared
:class:`~mathgym.algos.trainer.Trainer`'s.

    mathgym train --algo ppo --env MathStep-v0 --advantage-level turn
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

import torch

from mathgym.agents.forward import ReferencePolicy
from mathgym.agents.value_head import ValueModel
from mathgym.algos.algorithm import Algorithm, RunParts
from mathgym.algos.batch import RolloutBatch
from mathgym.algos.configs import PPOConfig
from mathgym.algos.gae import compute_gae, place_step_rewards
from mathgym.algos.losses import (
    Normalizer,
    aggregate_loss,
    batch_normalizer,
    kl_estimate,
    kl_penalty_rewards,
    masked_mean,
    policy_loss_fn,
)
from mathgym.algos.mismatch import batch_mismatch_weights
from mathgym.algos.ppo_losses import clipped_value_loss, explained_variance, whiten
from mathgym.algos.trainer import Trainer
from mathgym.algos.update import OptimizerStep, Plan, micro_batches

__all__ = ["PPO", "PPOConfig", "PPOTrainer"]


class Targets(NamedTuple):
    """What one batch is trained towards besides the batch's own fields; all ``(B, T)``, computed once."""

    mask: torch.Tensor  # policy loss mask
    returns: torch.Tensor
    value_mask: torch.Tensor
    kl: torch.Tensor  # per-token KL to the reference at rollout time (0 without one)
    weights: torch.Tensor | None = None  # mismatch-correction weights of the policy loss


class Minibatch(NamedTuple):
    """An optimizer step's context: the batch's targets and the minibatch's own normalisers."""

    targets: Targets
    policy_norm: Normalizer
    value_norm: Normalizer


class PPO(Algorithm):
    """PPO's plan and loss, with its value model (see :class:`PPOConfig`)."""

    name = "ppo"
    config: PPOConfig

    def __init__(self, parts: RunParts):
        super().__init__(parts)
        cfg = self.config
        self.value_model = ValueModel.for_policy(self.policy.model, cfg.value_model).to(self.policy.device)
        self.reference = ReferencePolicy(self.policy, cfg.reference) if cfg.kl_coef > 0 else None

    def parameters_to_train(self) -> list[Any]:
        # Param groups: the value head (and critic) learn at their own rate.
        return [
            {"params": self.policy.trainable_parameters()},
            {"params": self.value_model.trainable_parameters(), "lr": self.config.value_learning_rate},
        ]

    def extra_state(self) -> dict[str, Any]:
        return {"value_model": {k: v.detach().cpu() for k, v in self.value_model.state_dict().items()}}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        if "value_model" in state:
            self.value_model.load_state_dict(state["value_model"])

    def learner_rows(self, batch: RolloutBatch) -> torch.Tensor:
        """Every row: the learner's log-probs are the ratio's denominator, and its values GAE's baseline."""
        return torch.arange(len(batch), device=batch.input_ids.device)

    @torch.no_grad()
    def plan(self, batch: RolloutBatch) -> Plan:
        """Rewards (with the KL penalty), GAE advantages and returns; ``ppo_epochs`` shuffles of minibatches."""
        cfg = self.config
        mask = batch.loss_mask(cfg.mask_truncated)
        rewards = place_step_rewards(batch.step_index, batch.step_rewards).to(mask.device)
        kl = torch.zeros_like(mask)
        if self.reference is not None:
            self.score_reference(batch, torch.arange(len(batch)))
            kl = kl_estimate(batch.learner_logprobs, batch.ref_logprobs, cfg.kl_estimator) * mask
            if cfg.kl_mode == "reward":
                rewards, kl = kl_penalty_rewards(
                    rewards, batch.learner_logprobs, batch.ref_logprobs, mask, cfg.kl_coef, cfg.kl_estimator
                )
        step_index = torch.where(mask > 0, batch.step_index, torch.full_like(batch.step_index, -1))
        gae = compute_gae(cfg.advantage_level, rewards, batch.values, step_index, cfg.gamma, cfg.lam)
        batch.advantages = whiten(gae.advantages, mask) if cfg.whiten_advantages else gae.advantages
        correction = batch_mismatch_weights(batch, mask, cfg.mismatch_correction, cfg.mismatch_cap)
        targets = Targets(mask, gae.returns, gae.value_mask, kl, None if correction is None else correction.weights)
        stats = {
            **({} if correction is None else correction.stats),
            "loss/kl_ref": float(masked_mean(kl, mask)),
            "loss/advantage_abs": float(masked_mean(batch.advantages.abs(), mask)),
            "loss/return_mean": float(masked_mean(gae.returns, gae.value_mask)),
            "loss/value_mean": float(masked_mean(batch.values, gae.value_mask)),
            "loss/explained_variance": float(explained_variance(batch.values, gae.returns, gae.value_mask)),
        }
        return Plan(self.minibatches(len(batch), targets), stats)

    def minibatches(self, size: int, targets: Targets) -> Iterator[OptimizerStep]:
        """``ppo_epochs`` passes, each a fresh shuffle (drawn when its pass starts) in ``num_minibatches`` steps."""
        width = targets.mask.shape[1]
        for _ in range(self.config.ppo_epochs):
            order = torch.randperm(size, generator=self.generator)
            for rows in micro_batches(order, self.config.num_minibatches):
                norms = batch_normalizer(targets.mask[rows], width), batch_normalizer(targets.value_mask[rows], width)
                yield OptimizerStep(rows, Minibatch(targets, *norms))

    def loss(self, batch: RolloutBatch, items: torch.Tensor, step: OptimizerStep) -> tuple[torch.Tensor, dict[str, float]]:
        """Policy loss + ``value_coef`` × value loss − ``entropy_coef`` × entropy (+ the KL term), normalised by the minibatch."""
        cfg, (t, policy_norm, value_norm) = self.config, step.context
        mb = batch.select(items)
        out = self.policy.forward(
            mb.input_ids, mb.attention_mask, self.temperature, value_model=self.value_model, entropy_grad=True
        )
        m, vm = t.mask[items], t.value_mask[items]
        policy_loss, pstats = policy_loss_fn(cfg.policy_loss)(
            out.logprobs, mb.learner_logprobs, mb.advantages, m, cfg.eps_low, cfg.eps_high, cfg.loss_aggregation, policy_norm,
            None if t.weights is None else t.weights[items], dual_clip_c=cfg.dual_clip_c,
        )
        value_loss, vstats = clipped_value_loss(
            out.values, mb.values, t.returns[items], vm, cfg.value_clip or None, cfg.loss_aggregation, value_norm
        )
        entropy = aggregate_loss(out.entropy, m, cfg.loss_aggregation, policy_norm)
        loss = policy_loss + cfg.value_coef * value_loss - cfg.entropy_coef * entropy
        if mb.ref_logprobs is not None and cfg.kl_mode == "loss":
            kl = kl_estimate(out.logprobs, mb.ref_logprobs, cfg.kl_estimator)
            loss = loss + cfg.kl_coef * aggregate_loss(kl, m, cfg.loss_aggregation, policy_norm)
        weight, value_weight = float(m.sum()) / policy_norm.num_tokens, float(vm.sum()) / value_norm.num_tokens
        stats = {
            "loss/policy": policy_loss.item(), "loss/value": value_loss.item(), "loss/entropy": entropy.item(),
            "loss/clip_fraction": float(pstats.clip_fraction) * weight,
            "loss/approx_kl": float(pstats.approx_kl) * weight,
            "loss/ratio": float(pstats.ratio_mean) * weight,
            "loss/value_clip_fraction": float(vstats.clip_fraction) * value_weight,
        }
        return loss, stats

    def stop_early(self, stats: dict[str, float]) -> str | None:
        """Stop the batch's passes once a minibatch's approx KL(old || new) exceeds ``target_kl``."""
        target = self.config.target_kl
        if target and stats["loss/approx_kl"] > target:
            return f"approx KL {stats['loss/approx_kl']:.4f} > target_kl {target}"
        return None


class PPOTrainer(Trainer):
    """PPO on any registered env: single-turn, multi-turn and step-level (see :class:`PPOConfig`)."""

    algo_name = "ppo"
    algorithm_class = PPO
    config: PPOConfig
