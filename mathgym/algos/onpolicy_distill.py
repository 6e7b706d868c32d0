"""On-policy distillation (``mathgym train --algo onpolicy-distill``): the student samples, the teacher grades every token.

The student plays any env as in GRPO (single- or multi-turn; the env's replies are not its tokens
and stay out of the loss). The teacher reads each episode, without gradient, and gives every
sampled token the log-probability it would have given it. The per-token reverse KL
``KL(student || teacher)``, estimated at the sampled token, is the learning signal:

- ``k1 = log p_s(x_t) - log p_t(x_t)``;
- ``k3 = r - 1 - log r`` with ``r = p_t(x_t) / p_s(x_t)`` (Schulman, 2020: unbiased, never negative).

Each action token's advantage is

    A_t = env_reward_coef * A_env - kl_coef * KL_t

where ``A_env`` is GRPO's group-relative advantage of the episode's env reward. With
``env_reward_coef=0`` (the default) this is on-policy distillation as in Agarwal et al. (GKD, 2024)
and Thinking Machines' "On-Policy Distillation" (2025): a policy gradient whose per-token reward
is minus the reverse KL to the teacher, with no discount. The rest of the update is GRPO's
(clipped ratio, ``num_iterations``, loss aggregation, data-parallel normalisation), so every
:class:`~mathgym.algos.configs.GRPOConfig` option still applies.

Teacher and student must share a vocabulary (:func:`~mathgym.algos.distill.check_shared_vocabulary`).
Both are scored at the sampling temperature, as GRPO's reference is. The teacher may sit on
another device (``teacher_device``); its log-probs come back to the student's.

    mathgym train --algo onpolicy-distill --teacher runs/grpo-MathReason-v0-.../final --model ./small-student
    mathgym train --algo onpolicy-distill --teacher Qwen/Qwen2.5-1.5B-Instruct --model Qwen/Qwen2.5-0.5B-Instruct \\
        --env-reward-coef 1.0 --kl-coef 0.5
"""

from __future__ import annotations

import torch

from mathgym.agents.forward import ForwardOutput, logprobs_from_logits
from mathgym.algos.batch import RolloutBatch
from mathgym.algos.choices import TeacherKLEstimator
from mathgym.algos.configs import OnPolicyDistillConfig
from mathgym.algos.distill import load_teacher, shared_vocab_width
from mathgym.algos.grpo import GRPOTrainer
from mathgym.algos.losses import kl_estimate, masked_mean

__all__ = ["OnPolicyDistillConfig", "OnPolicyDistillTrainer", "distillation_advantages"]


def distillation_advantages(
    student_logprobs: torch.Tensor,
    teacher_logprobs: torch.Tensor,
    env_advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    kl_coef: float = 1.0,
    env_reward_coef: float = 0.0,
    estimator: TeacherKLEstimator = "k1",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token advantages of on-policy distillation: ``env_reward_coef * A_env - kl_coef * KL_t``.

    Args:
        student_logprobs: ``(B, T)`` the student's log-probs of the sampled tokens (before the update).
        teacher_logprobs: ``(B, T)`` the teacher's log-probs of the same tokens.
        env_advantages: ``(B,)`` the episodes' advantages from the env reward, or ``(B, T)`` per token
            (``--advantage gigpo`` / ``step_reinforce``).
        mask: ``(B, T)`` the loss mask (the student's own tokens).
        kl_coef: Weight of the reverse KL.
        env_reward_coef: Weight of the env advantage.
        estimator: ``k1`` or ``k3`` (see the module docstring).

    Returns:
        ``(advantages, kl)``, both ``(B, T)`` and 0 off the mask; ``kl`` is the per-token estimate.

    Example:
        >>> s, t = torch.log(torch.tensor([[0.5, 0.25]])), torch.log(torch.tensor([[0.25, 0.5]]))
        >>> adv, kl = distillation_advantages(s, t, torch.zeros(1), torch.ones(1, 2))
        >>> [round(v, 4) for v in kl[0].tolist()]   # log 2, -log 2
        [0.6931, -0.6931]
    """
    kl = kl_estimate(student_logprobs.detach(), teacher_logprobs.detach(), estimator) * mask
    env = env_advantages.to(kl.dtype)
    env = env[:, None] if env.dim() == 1 else env  # per episode, or per token (a per-turn estimator)
    advantages = (env_reward_coef * env - kl_coef * kl) * mask
    return advantages, kl


class OnPolicyDistillTrainer(GRPOTrainer):
    """On-policy distillation on any registered env (see :class:`OnPolicyDistillConfig` and the module docstring)."""

    algo_name = "onpolicy-distill"
    config: OnPolicyDistillConfig
    progress_metric = "loss/teacher_kl"

    def setup(self) -> None:
        super().setup()
        cfg = self.config
        device = None if cfg.teacher_device == "auto" else cfg.teacher_device
        self.teacher = load_teacher(cfg.teacher, cfg, self.policy, device)
        self.vocab_width = shared_vocab_width(self.teacher, self.policy)

    def learner_rows(self, batch: RolloutBatch) -> torch.Tensor:
        """Every trainable row: the student's log-probs before the update are one side of the KL."""
        trainable = batch.loss_mask(self.config.mask_truncated).sum(-1) > 0
        return torch.unique(torch.cat([super().learner_rows(batch), torch.nonzero(trainable).flatten()]))

    def learner_pass_needed(self, batch: RolloutBatch) -> bool:
        """Always: the advantages read the student's log-probs before the update."""
        return True

    def teacher_logprobs(self, batch: RolloutBatch, rows: torch.Tensor) -> torch.Tensor:
        """``(B, T)`` the teacher's log-probs of ``batch``'s tokens on ``rows`` (0 elsewhere), no gradient,
        on the student's device; its logits are cut to the ids both models share."""
        device = self.teacher.device

        def forward(mb: RolloutBatch) -> ForwardOutput:
            ids = mb.input_ids.to(device)
            with self.teacher.autocast():
                logits = self.teacher.model(input_ids=ids, attention_mask=mb.attention_mask.to(device), use_cache=False).logits
            logprobs, entropy = logprobs_from_logits(logits[..., : self.vocab_width], ids, self.temperature, entropy_grad=False)
            return ForwardOutput(logprobs.to(mb.input_ids.device), entropy.to(mb.input_ids.device))

        return self.score(batch, rows, forward).logprobs

    def token_signal(self, batch: RolloutBatch, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(advantages, kl)`` of ``batch`` (see :func:`distillation_advantages`); ``batch.advantages``
        holds the episodes' env advantages and ``batch.learner_logprobs`` the student's log-probs."""
        cfg = self.config
        rows = torch.nonzero(mask.sum(-1) > 0).flatten()
        if batch.learner_logprobs is None:  # no row to train (every episode failed on infrastructure)
            return torch.zeros_like(mask), torch.zeros_like(mask)
        teacher = self.teacher_logprobs(batch, rows)
        return distillation_advantages(
            batch.learner_logprobs, teacher, batch.advantages, mask,
            kl_coef=cfg.kl_coef, env_reward_coef=cfg.env_reward_coef, estimator=cfg.teacher_kl_estimator,
        )

    def token_advantages(self, batch: RolloutBatch, mask: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
        advantages, kl = self.token_signal(batch, mask)
        return advantages, {"loss/teacher_kl": float(masked_mean(kl, mask))}
