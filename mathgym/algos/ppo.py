"""PPO with a learned value function and GAE, on any registered env.

What differs from GRPO is visible in :meth:`PPOTrainer.update`: a value model
(:mod:`mathgym.agents.value_head`), per-token rewards with an optional KL penalty, GAE at
token or turn level (:mod:`mathgym.algos.gae`), several epochs of minibatches with a
clipped value loss and an early stop on a target KL. Rollouts, logging, checkpoints, the
CLI and the loop are the shared :class:`~mathgym.algos.trainer.Trainer`'s.

    mathgym train --algo ppo --env MathStep-v0 --advantage-level turn
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch

from mathgym.agents.value_head import ValueModel
from mathgym.algos.batch import RolloutBatch
from mathgym.algos.configs import PPOConfig
from mathgym.algos.forward import ReferencePolicy, policy_forward
from mathgym.algos.gae import compute_gae, place_step_rewards
from mathgym.algos.losses import Normalizer, aggregate_loss, batch_normalizer, masked_mean
from mathgym.algos.ppo_losses import (
    clipped_policy_loss,
    clipped_value_loss,
    explained_variance,
    kl_estimate,
    kl_penalty_rewards,
    whiten,
)
from mathgym.algos.trainer import Trainer



class Targets(NamedTuple):
    """What one batch is trained towards; all ``(B, T)``, computed once before the epochs."""

    old_logprobs: torch.Tensor
    old_values: torch.Tensor
    ref_logprobs: torch.Tensor | None
    advantages: torch.Tensor
    returns: torch.Tensor
    value_mask: torch.Tensor
    kl: torch.Tensor


def split(indices: torch.Tensor, parts: int) -> list[torch.Tensor]:
    """``indices`` in ``parts`` near-equal consecutive chunks (none empty)."""
    return [chunk for chunk in torch.tensor_split(indices, parts) if len(chunk)]


class PPOTrainer(Trainer):
    """PPO on any registered env: single-turn, multi-turn and step-level (see :class:`PPOConfig`)."""

    algo_name = "ppo"
    config: PPOConfig

    def setup(self) -> None:
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

    @property
    def temperature(self) -> float:
        return self.config.temperature or 1.0

    @torch.no_grad()
    def compute_targets(self, batch: RolloutBatch, mask: torch.Tensor) -> Targets:
        """Rollout-time log-probs and values, rewards (with KL penalty), GAE advantages and returns."""
        cfg = self.config
        old_logprobs, old_values = torch.zeros_like(mask), torch.zeros_like(mask)
        ref = torch.zeros_like(mask) if self.reference is not None else None
        for idx in self.micro_batches(batch):
            ids, attention = batch.input_ids[idx], batch.attention_mask[idx]
            out = policy_forward(self.policy.model, ids, attention, self.temperature, self.value_model)
            old_logprobs[idx], old_values[idx] = out.logprobs, out.values
            if ref is not None:
                ref[idx] = self.reference.logprobs(ids, attention, self.temperature)
        rewards = place_step_rewards(batch.step_index, batch.step_rewards).to(mask.device)
        kl = torch.zeros_like(mask)
        if ref is not None:
            kl = kl_estimate(old_logprobs, ref, cfg.kl_estimator) * mask
            if cfg.kl_mode == "reward":
                rewards, kl = kl_penalty_rewards(rewards, old_logprobs, ref, mask, cfg.kl_coef, cfg.kl_estimator)
        step_index = torch.where(mask > 0, batch.step_index, torch.full_like(batch.step_index, -1))
        gae = compute_gae(cfg.advantage_level, rewards, old_values, step_index, cfg.gamma, cfg.lam)
        advantages = whiten(gae.advantages, mask) if cfg.whiten_advantages else gae.advantages
        return Targets(old_logprobs, old_values, ref, advantages, gae.returns, gae.value_mask, kl)

    def minibatch_loss(
        self, batch: RolloutBatch, idx: torch.Tensor, t: Targets, mask: torch.Tensor, norms: tuple[Normalizer, Normalizer]
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """Loss of the episodes ``idx`` of a minibatch (normalised by the minibatch's ``norms``)."""
        cfg = self.config
        policy_norm, value_norm = norms
        ids, attention = batch.input_ids[idx], batch.attention_mask[idx]
        out = policy_forward(self.policy.model, ids, attention, self.temperature, self.value_model)
        m, vm = mask[idx], t.value_mask[idx]
        policy_loss, pstats = clipped_policy_loss(
            out.logprobs, t.old_logprobs[idx], t.advantages[idx], m, cfg.eps_low, cfg.eps_high, cfg.loss_aggregation,
            policy_norm,
        )
        value_loss, vstats = clipped_value_loss(
            out.values, t.old_values[idx], t.returns[idx], vm, cfg.value_clip or None, cfg.loss_aggregation,
            value_norm,
        )
        entropy = aggregate_loss(out.entropy, m, cfg.loss_aggregation, policy_norm)
        loss = policy_loss + cfg.value_coef * value_loss - cfg.entropy_coef * entropy
        if t.ref_logprobs is not None and cfg.kl_mode == "loss":
            kl = kl_estimate(out.logprobs, t.ref_logprobs[idx], cfg.kl_estimator)
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

    def update(self, batch: RolloutBatch) -> dict[str, float]:
        cfg = self.config
        batch = batch.to(self.policy.device)
        mask = batch.loss_mask(cfg.mask_truncated)
        self.policy.model.train()
        targets = self.compute_targets(batch, mask)
        totals: dict[str, float] = {}
        updates, stopped = 0, False
        width = mask.shape[1]
        for _ in range(cfg.ppo_epochs):
            order = torch.randperm(len(batch), generator=self.generator)
            for minibatch in split(order, cfg.num_minibatches):
                norms = (
                    batch_normalizer(mask[minibatch], width), batch_normalizer(targets.value_mask[minibatch], width)
                )
                step_stats: dict[str, float] = {}
                for idx in split(minibatch, cfg.grad_accum_steps):
                    loss, stats = self.minibatch_loss(batch, idx, targets, mask, norms)
                    self.backward(loss)
                    for key, value in stats.items():
                        step_stats[key] = step_stats.get(key, 0.0) + value
                step_stats["loss/grad_norm"] = self.optimizer_step(step_scheduler=False)
                updates += 1
                for key, value in step_stats.items():
                    totals[key] = totals.get(key, 0.0) + value
                if cfg.target_kl and step_stats["loss/approx_kl"] > cfg.target_kl:
                    stopped = True
                    print(
                        f"ppo: step {self.step}: early stop after {updates} minibatch update(s): approx KL "
                        f"{step_stats['loss/approx_kl']:.4f} > target_kl {cfg.target_kl}"
                    )
                    break
            if stopped:
                break
        self.scheduler.step()
        out = {key: value / updates for key, value in totals.items()}
        value_mask = targets.value_mask
        out.update({
            "loss/updates": float(updates),
            "loss/early_stopped": float(stopped),
            "loss/kl_ref": float(masked_mean(targets.kl, mask)),
            "loss/advantage_abs": float(masked_mean(targets.advantages.abs(), mask)),
            "loss/return_mean": float(masked_mean(targets.returns, value_mask)),
            "loss/value_mean": float(masked_mean(targets.old_values, value_mask)),
            "loss/explained_variance": float(explained_variance(targets.old_values, targets.returns, value_mask)),
        })
        return out

