"""GRPO: group-relative policy optimisation (Shao et al., 2024), with the variants that
matter in practice: clip-higher (DAPO), Dr. GRPO aggregation, reward scaling choices.

The loss is :func:`grpo_loss`, a pure function of tensors; :class:`GRPOTrainer` only
computes advantages, log-probs and reference log-probs and feeds them to it.
"""

from __future__ import annotations

import torch

from mathgym.algos.advantages import ScaleRewards, group_normalized_advantages
from mathgym.algos.batch import RolloutBatch
from mathgym.algos.configs import GRPOConfig
from mathgym.algos.forward import ReferencePolicy
from mathgym.algos.losses import (
    LossAggregation,
    Normalizer,
    aggregate_loss,
    clipped_surrogate,
    k3_kl,
    masked_mean,
)
from mathgym.algos.trainer import Trainer



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
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The GRPO loss of a (micro-)batch.

    ``per_token = -min(r A, clip(r, 1-eps_low, 1+eps_high) A) + beta * k3(ref, logp)``,
    reduced by ``aggregation`` with the full batch's ``norm``.

    Args:
        logprobs: ``(B, T)`` current log-probs (with grad).
        old_logprobs: ``(B, T)`` log-probs of the sampling policy.
        advantages: ``(B,)`` group-normalised advantages.
        mask: ``(B, T)`` loss mask.
        ref_logprobs: ``(B, T)`` reference log-probs (needed when ``beta > 0``).
        beta: KL weight.
        eps_low: Lower clip range.
        eps_high: Upper clip range.
        aggregation: ``token_mean`` / ``sequence_mean`` / ``dr_grpo``.
        norm: Full-batch denominators (see :class:`~mathgym.algos.losses.Normalizer`).

    Returns:
        ``(loss, stats)``; stats are detached: ``kl``, ``clip_fraction``, ``ratio``.
    """
    surrogate = clipped_surrogate(logprobs, old_logprobs, advantages, eps_low, eps_high)
    per_token = surrogate.loss
    kl = torch.zeros_like(per_token)
    if beta > 0:
        if ref_logprobs is None:
            raise ValueError("grpo_loss: beta > 0 needs ref_logprobs")
        kl = k3_kl(logprobs, ref_logprobs)
        per_token = per_token + beta * kl
    loss = aggregate_loss(per_token, mask, aggregation, norm)
    with torch.no_grad():
        stats = {
            "kl": masked_mean(kl, mask),
            "clip_fraction": masked_mean(surrogate.clipped.float(), mask),
            "ratio": masked_mean(surrogate.ratio, mask),
        }
    return loss, stats


class GRPOTrainer(Trainer):
    """GRPO on any registered env (see :class:`GRPOConfig`)."""

    algo_name = "grpo"
    config: GRPOConfig
    data_parallel = True  # advantages and loss normalisers are computed over every rank's episodes
    summed_stats = ("loss/policy",)

    def setup(self) -> None:
        # The KL reference: the adapter-disabled model under LoRA, else a frozen copy (shared with PPO/DPO).
        self.reference = ReferencePolicy(self.policy) if self.config.beta > 0 else None

    def reference_logprobs(self, batch: RolloutBatch) -> torch.Tensor:
        """``(B, T)`` token log-probs of ``batch`` under the reference policy."""
        return self.reference.logprobs(batch.input_ids, batch.attention_mask, self.config.temperature or 1.0)

    @torch.no_grad()
    def _per_micro(self, batch: RolloutBatch, micro: list[list[int]], fn) -> torch.Tensor:
        out = torch.zeros_like(batch.old_logprobs)
        for idx in micro:
            out[idx] = fn(batch.select(idx))
        return out

    def update(self, batch: RolloutBatch) -> dict[str, float]:
        cfg = self.config
        batch = batch.to(self.policy.device)
        temperature = cfg.temperature or 1.0
        rewards, group_ids, own = self.dist.gather_groups(batch.rewards, batch.group_ids)  # every rank's
        advantages = group_normalized_advantages(rewards, group_ids, cfg.scale_rewards)[own]
        mask = batch.loss_mask(cfg.mask_truncated)
        norm = self.dist.normalizer(mask, cfg.max_new_tokens * max(1, max(len(s) for s in batch.step_rewards)))
        # Without a KL term a sequence whose advantage is 0 (a group where every sample scored the
        # same) adds exactly 0 to the loss and its gradient: leave it out of the passes. The
        # normaliser still counts its tokens, so the update is the same as with it.
        carries = mask.sum(-1) > 0
        if cfg.beta == 0:
            carries &= advantages != 0
        rows = torch.nonzero(carries).flatten().tolist()
        micro = self.micro_batches(batch, rows)
        self.policy.model.train()

        def logprobs_of(mb: RolloutBatch) -> tuple[torch.Tensor, torch.Tensor]:
            return self.policy.token_logprobs(mb.input_ids, mb.attention_mask, temperature, mb.group_ids)

        old = None
        if cfg.num_iterations > 1:  # recompute so that iteration 0 has ratio exactly 1
            old = self._per_micro(batch, micro, lambda mb: logprobs_of(mb)[0])
        ref = self._per_micro(batch, micro, self.reference_logprobs) if cfg.beta > 0 else None
        kept_tokens = float(mask[rows].sum()) if rows else 1.0
        # Entropy is measured on the sequences trained on (absent when a batch has none).
        totals: dict[str, float] = {"loss/policy": 0.0, "loss/kl": 0.0, "loss/clip_fraction": 0.0}
        for iteration in range(cfg.num_iterations):
            for idx in micro:
                mb = batch.select(idx)
                logprobs, entropy = logprobs_of(mb)
                loss, stats = grpo_loss(
                    logprobs, old[idx] if old is not None else logprobs.detach(), advantages[idx], mask[idx],
                    ref_logprobs=ref[idx] if ref is not None else None, beta=cfg.beta, eps_low=cfg.eps_low,
                    eps_high=cfg.eps_high, aggregation=cfg.loss_aggregation, norm=norm,
                )
                self.backward(loss)
                weight = float(mask[idx].sum()) / kept_tokens / cfg.num_iterations
                totals["loss/policy"] = totals.get("loss/policy", 0.0) + float(loss.detach()) / cfg.num_iterations
                stats["entropy"] = masked_mean(entropy, mask[idx])
                for key, value in stats.items():
                    totals[f"loss/{key}"] = totals.get(f"loss/{key}", 0.0) + float(value) * weight
            if not micro:  # nothing carried a gradient: a zero one, so that the optimizer steps as it would have
                for param in (p for group in self.optimizer.param_groups for p in group["params"]):
                    param.grad = torch.zeros_like(param)
            last = iteration == cfg.num_iterations - 1  # the LR schedule advances once per batch
            grad_norm = self.optimizer_step(step_scheduler=last)
            totals["loss/grad_norm"] = totals.get("loss/grad_norm", 0.0) + grad_norm / cfg.num_iterations
        totals["loss/trained_sequences"] = len(rows) / max(len(batch), 1)
        totals["loss/advantage_abs"] = float(advantages.abs().mean())
        totals["loss/zero_std_groups"] = _zero_std_fraction(batch.rewards, batch.group_ids)
        return totals


def _zero_std_fraction(rewards: torch.Tensor, group_ids: torch.Tensor) -> float:
    """Fraction of groups whose rewards are all equal (they carry no GRPO signal)."""
    groups = group_ids.unique()
    flat = sum(bool((rewards[group_ids == g] == rewards[group_ids == g][0]).all()) for g in groups)
    return flat / max(len(groups), 1)
