"""GRPO: group-relative policy optimisation (Shao et al., 2024), with the variants that
matter in practice: clip-higher (DAPO), Dr. GRPO aggregation, reward scaling choices.

A GRPO step, top to bottom (the step itself is :meth:`~mathgym.algos.trainer.Trainer.train_step`'s,
the same for every algorithm; :class:`GRPO` is the algorithm):

1. the rollouts of ``num_tasks`` tasks × ``group_size`` samples (:class:`~mathgym.algos.sources.RolloutSource`),
   and, where the update needs them before its first gradient (:meth:`GRPO.learner_pass_needed`: several
   iterations, a KL penalty in the reward, a mismatch correction, a stale batch, active dropout), the
   learner's log-probs of them (:meth:`~mathgym.algos.trainer.Trainer.score_learner`); otherwise the loss
   pass's own log-probs stand for them (returned by :meth:`GRPO.loss`; the sampler/learner check is then
   taken on the rows trained on);
2. :meth:`GRPO.plan`: advantages from the rewards of each group
   (:func:`~mathgym.algos.advantages.episode_advantages`; a per-turn estimator such as GiGPO gives
   each turn's tokens that turn's advantage, :meth:`GRPO.advantages`), the loss mask and its full-batch
   normaliser, the rows that carry a gradient, the reference's log-probs when ``beta > 0``;
   ``num_iterations`` optimizer steps over those rows;
3. :meth:`GRPO.loss` on each micro-batch: the policy's log-probs (with gradient) and
   :func:`grpo_loss`, a pure function of tensors.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from mathgym.agents.forward import ReferencePolicy
from mathgym.algos.algorithm import Algorithm, RunParts
from mathgym.algos.advantages import (
    TURN_ADVANTAGE_ESTIMATORS,
    Turns,
    episode_advantages,
    flat_group_fraction,
    longest_turn_lengths,
    overlong_penalty,
    shared_state_fraction,
    turn_advantages,
)
from mathgym.algos.batch import RolloutBatch
from mathgym.algos.choices import KLEstimator, LossAggregation, PolicyLoss
from mathgym.algos.configs import GRPOConfig
from mathgym.algos.gae import broadcast_steps
from mathgym.algos.losses import Normalizer, aggregate_loss, kl_estimate, masked_mean, policy_loss_fn
from mathgym.algos.mismatch import batch_mismatch_weights
from mathgym.algos.trainer import Trainer
from mathgym.algos.update import LossOutput, OptimizerStep, Plan

__all__ = ["GRPO", "GRPOConfig", "GRPOTrainer", "grpo_loss"]


def grpo_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    ref_logprobs: torch.Tensor | None = None,
    beta: float = 0.0,
    eps_low: float = 0.2,
    eps_high: float = 0.2,
    aggregation: LossAggregation = "token_mean",
    norm: Normalizer | None = None,
    policy_loss: PolicyLoss = "clip",
    weights: torch.Tensor | None = None,
    dual_clip_c: float = 3.0,
    kl_estimator: KLEstimator = "k3",
    entropy: torch.Tensor | None = None,
    entropy_coef: float = 0.0,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The GRPO loss of a (micro-)batch: the policy loss, plus ``beta`` times the KL to the
    reference, minus ``entropy_coef`` times the entropy.

    With ``policy_loss="clip"``: ``-min(r A, clip(r, 1-eps_low, 1+eps_high) A)`` per token, reduced by
    ``aggregation`` with the full batch's ``norm``, ``+ beta * aggregate(k3(ref, logp))
    - entropy_coef * aggregate(entropy)``.

    Args:
        logprobs: ``(B, T)`` current log-probs (with grad).
        old_logprobs: ``(B, T)`` the ratio's denominator: the learner's log-probs before the update
            (``logprobs.detach()`` on the first pass over a batch).
        advantages: ``(B,)`` per episode, or ``(B, T)`` per token (a per-turn estimator).
        mask: ``(B, T)`` loss mask.
        ref_logprobs: ``(B, T)`` reference log-probs (needed when ``beta > 0``).
        beta: KL weight.
        eps_low: Lower clip range.
        eps_high: Upper clip range.
        aggregation: ``token_mean`` / ``sequence_mean`` / ``dr_grpo``.
        norm: Full-batch denominators (see :class:`~mathgym.algos.losses.Normalizer`).
        policy_loss: The policy loss (:data:`~mathgym.algos.losses.POLICY_LOSSES`).
        weights: ``(B, T)`` per-token importance weights of the policy loss (none: 1).
        dual_clip_c: The bound of the ``dual_clip`` policy loss.
        kl_estimator: ``k1``, ``k2`` or ``k3`` (:data:`~mathgym.algos.losses.KL_ESTIMATORS`).
        entropy: ``(B, T)`` the policy's entropy per token (with grad), needed when ``entropy_coef > 0``.
        entropy_coef: Weight of the entropy bonus.

    Returns:
        ``(loss, stats)``; stats are detached: ``kl``, ``clip_fraction``, ``ratio``.
    """
    total, pstats = policy_loss_fn(policy_loss)(
        logprobs, old_logprobs, advantages, mask, eps_low, eps_high, aggregation, norm, weights, dual_clip_c=dual_clip_c
    )
    kl = torch.zeros_like(logprobs)
    if beta > 0:
        if ref_logprobs is None:
            raise ValueError("grpo_loss: beta > 0 needs ref_logprobs")
        kl = kl_estimate(logprobs, ref_logprobs, kl_estimator)
        total = total + beta * aggregate_loss(kl, mask, aggregation, norm)
    if entropy_coef > 0:
        if entropy is None:
            raise ValueError("grpo_loss: entropy_coef > 0 needs entropy")
        total = total - entropy_coef * aggregate_loss(entropy, mask, aggregation, norm)
    with torch.no_grad():
        stats = {"kl": masked_mean(kl, mask), "clip_fraction": pstats.clip_fraction, "ratio": pstats.ratio_mean}
    return total, stats


class GRPOStep(NamedTuple):
    """What each optimizer step of a GRPO batch trains towards (the same for every iteration)."""

    mask: torch.Tensor  # (B, T) loss mask
    norm: Normalizer  # full-batch (every rank's) denominators
    trained_tokens: float  # mask tokens of the rows that carry a gradient (the statistics' weights)
    weights: torch.Tensor | None = None  # (B, T) mismatch-correction weights of the policy loss


class GRPO(Algorithm):
    """GRPO's plan and loss (see :class:`GRPOConfig` and the module docstring)."""

    name = "grpo"
    config: GRPOConfig

    def __init__(self, parts: RunParts):
        super().__init__(parts)
        # The KL reference: the adapter-disabled model under LoRA, else a frozen copy.
        self.reference = ReferencePolicy(self.policy) if self.config.beta > 0 else None

    @property
    def kl_in_loss(self) -> bool:
        """The KL to the reference is a loss term (``kl_mode="loss"``, ``beta > 0``)."""
        return self.config.beta > 0 and self.config.kl_mode == "loss"

    @property
    def kl_in_reward(self) -> bool:
        """The KL to the reference is a reward penalty (``kl_mode="reward"``, ``beta > 0``)."""
        return self.config.beta > 0 and self.config.kl_mode == "reward"

    def shaped_rewards(self, batch: RolloutBatch, mask: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
        """``(B,)`` the rewards the advantages see: the episodes' returns, with DAPO's overlong
        penalty (``overlong_buffer > 0``) and ``beta`` times the sequence's KL to the reference
        (``kl_mode="reward"``: the sum of its tokens' estimates, the learner before the update)."""
        cfg, rewards, stats = self.config, batch.rewards, {}
        if cfg.overlong_buffer > 0:
            lengths = longest_turn_lengths(batch.step_index, batch.action_mask).to(rewards.device)
            penalty = overlong_penalty(lengths, cfg.max_new_tokens, cfg.overlong_buffer, cfg.overlong_penalty)
            rewards = rewards + penalty
            stats["loss/overlong_penalty"] = float(penalty.mean())
        if self.kl_in_reward:
            self.score_reference(batch, torch.nonzero(mask.sum(-1) > 0).flatten())
            kl = kl_estimate(batch.learner_logprobs, batch.ref_logprobs, cfg.kl_estimator) * mask
            rewards = rewards - cfg.beta * kl.sum(-1).to(rewards.device)
            stats["loss/kl_ref"] = float(masked_mean(kl, mask))
        return rewards, stats

    def learner_rows(self, batch: RolloutBatch) -> torch.Tensor:
        """The sampled rows (the mismatch metric), and with ``num_iterations > 1`` every trainable row:
        later passes take their ratio against the learner's log-probs before the first (so does the KL
        as a reward penalty)."""
        rows = super().learner_rows(batch)
        if self.config.num_iterations > 1 or self.kl_in_reward:
            trainable = batch.loss_mask(self.config.mask_truncated).sum(-1) > 0
            rows = torch.unique(torch.cat([rows, torch.nonzero(trainable).flatten()]))
        return rows

    def token_advantages(
        self, batch: RolloutBatch, mask: torch.Tensor, scores: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """The advantages the loss uses, from the episodes' ``(B,)`` ``batch.advantages``: those as they are
        here; a subclass may return ``(B, T)`` per-token ones from ``scores``, the ``(B, T)`` per-token scores
        its plan handed on (on-policy distillation: the teacher's log-probs)."""
        return batch.advantages, {}

    def advantages(self, batch: RolloutBatch, rewards: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
        """The ``advantage`` estimator's values over every rank's episodes (this rank's rows):
        ``(B,)`` per episode, or for a per-turn estimator (``gigpo``, ``step_reinforce``) ``(B, T)``,
        each turn's advantage on that turn's tokens (0 on prompt and env tokens).

        ``rewards`` are the shaped episode rewards; a per-turn estimator sees the env's reward of each
        turn, with the shaping terms (overlong and KL penalties) added to the episode's last turn; it
        logs ``loss/shared_state_turns`` (:func:`~mathgym.algos.advantages.shared_state_fraction`)."""
        cfg = self.config
        everyone, group_ids, own = self.dist.gather_groups(rewards, batch.group_ids)
        if cfg.advantage not in TURN_ADVANTAGE_ESTIMATORS:
            return episode_advantages(cfg.advantage, everyone, group_ids, cfg.scale_rewards)[own], {}
        observations = batch.observations if batch.observations is not None else [[] for _ in range(len(batch))]
        bonus = (rewards - batch.rewards.to(rewards.device)).tolist()
        parts = self.dist.gather_objects((batch.step_rewards, observations, bonus))
        turns = Turns.of(
            [r for part in parts for r in part[0]], [o for part in parts for o in part[1]],
            torch.tensor([x for part in parts for x in part[2]]),
        )
        values = turn_advantages(
            cfg.advantage, everyone.cpu(), group_ids.cpu(), turns, gamma=cfg.gamma, omega=cfg.omega, scale_rewards=cfg.scale_rewards
        )[own]
        stats = {"loss/shared_state_turns": shared_state_fraction(group_ids.cpu(), turns)}
        return broadcast_steps(values.to(batch.step_index.device), batch.step_index), stats

    def plan(self, batch: RolloutBatch, scores: torch.Tensor | None = None) -> Plan:
        """Advantages, the loss mask and its normaliser, the rows that carry a gradient, the reference's
        log-probs; ``num_iterations`` optimizer steps over those rows (``scores``: see :meth:`token_advantages`)."""
        cfg = self.config
        mask = batch.loss_mask(cfg.mask_truncated)
        rewards, reward_stats = self.shaped_rewards(batch, mask)
        batch.advantages, advantage_stats = self.advantages(batch, rewards)
        batch.advantages, signal_stats = self.token_advantages(batch, mask, scores)
        norm = self.dist.normalizer(mask, cfg.max_new_tokens * max(1, max(len(s) for s in batch.step_rewards)))
        # Without a KL or entropy term a sequence whose advantage is 0 (a group where every sample scored the
        # same) adds exactly 0 to the loss and its gradient: leave it out of the passes. The
        # normaliser still counts its tokens, so the update is the same as with it.
        carries = mask.sum(-1) > 0
        if not self.kl_in_loss and cfg.entropy_coef == 0:
            carries &= (batch.advantages != 0).reshape(len(batch), -1).any(-1).to(carries.device)
        rows = torch.nonzero(carries).flatten()
        if self.kl_in_loss:
            self.score_reference(batch, rows)
        correction = batch_mismatch_weights(batch, mask, cfg.mismatch_correction, cfg.mismatch_cap)
        weights = None if correction is None else correction.weights
        step = OptimizerStep(rows, GRPOStep(mask, norm, float(mask[rows].sum()) if len(rows) else 1.0, weights))
        stats = {
            **reward_stats,
            **advantage_stats,
            **signal_stats,
            **({} if correction is None else correction.stats),
            "loss/policy": 0.0, "loss/kl": 0.0, "loss/clip_fraction": 0.0,  # what a batch without signal logs
            "loss/trained_sequences": len(rows) / max(len(batch), 1),
            "loss/advantage_abs": float(  # a per-turn estimator's: over the action tokens
                masked_mean(batch.advantages.abs(), mask) if batch.advantages.dim() == 2
                else batch.advantages.abs().mean()
            ),
            "loss/zero_std_groups": flat_group_fraction(batch.rewards, batch.group_ids),
        }
        return Plan([step] * cfg.num_iterations, stats)

    def learner_pass_needed(self, batch: RolloutBatch) -> bool:
        """The separate learner pass is needed for later passes' ratios (``num_iterations > 1``), the KL as a
        reward penalty, mismatch-correction weights, a stale batch (``off_policy_steps``) and a model with
        active dropout; otherwise the loss's own forward pass gives the learner's log-probs before the update."""
        cfg = self.config
        return (
            cfg.num_iterations > 1 or self.kl_in_reward or cfg.mismatch_correction != "none" or cfg.off_policy_steps > 0
            or self.policy.has_active_dropout
        )

    def loss(self, batch: RolloutBatch, items: torch.Tensor, step: OptimizerStep) -> LossOutput:
        """The GRPO loss of rows ``items`` as their share of the step's, and the policy's log-probs of them
        (what stands for the learner's pass where the update runs without it)."""
        cfg, target = self.config, step.context
        mb = batch.select(items)
        out = self.policy.forward(
            mb.input_ids, mb.attention_mask, self.temperature, groups=mb.group_ids, entropy_grad=cfg.entropy_coef > 0,
            positions=mb.action_mask,
        )
        # The ratio's denominator: the learner before the update (the current log-probs themselves on a single pass).
        old = mb.learner_logprobs if cfg.num_iterations > 1 else out.logprobs.detach()
        mask = target.mask[items]
        loss, stats = grpo_loss(
            out.logprobs, old, mb.advantages, mask, ref_logprobs=mb.ref_logprobs, beta=cfg.beta if self.kl_in_loss else 0.0,
            eps_low=cfg.eps_low, eps_high=cfg.eps_high, aggregation=cfg.loss_aggregation, norm=target.norm,
            policy_loss=cfg.policy_loss,
            dual_clip_c=cfg.dual_clip_c, weights=None if target.weights is None else target.weights[items],
            kl_estimator=cfg.kl_estimator, entropy=out.entropy, entropy_coef=cfg.entropy_coef,
        )
        stats["entropy"] = masked_mean(out.entropy.detach(), mask)  # measured on the sequences trained on
        weight = float(mask.sum()) / target.trained_tokens
        shares = {"loss/policy": float(loss.detach()), **{f"loss/{k}": float(v) * weight for k, v in stats.items()}}
        return LossOutput(loss, shares, out.logprobs)


class GRPOTrainer(Trainer):
    """GRPO on any registered env (see :class:`GRPOConfig`): rollouts, :class:`GRPO`, the run's machinery."""

    algo_name = "grpo"
    algorithm_class = GRPO
    config: GRPOConfig
    data_parallel = True  # advantages and loss normalisers are computed over every rank's episodes
    summed_stats = ("loss/policy",)
