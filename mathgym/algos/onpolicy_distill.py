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
another device (``teacher_device``); its log-probs come back to the student's. Or it may be served
apart, by vLLM (``teacher_url``; :mod:`mathgym.agents.remote_teacher`): each episode's tokens go to
the server as a prompt and its prompt log-probs come back; a sequence the server could not score is
an infrastructure failure (``infra/teacher_failures``), left out of the loss.

    mathgym train --algo onpolicy-distill --teacher runs/grpo-MathReason-v0-.../final --model ./small-student
    mathgym train --algo onpolicy-distill --teacher Qwen/Qwen2.5-1.5B-Instruct --model Qwen/Qwen2.5-0.5B-Instruct \\
        --env-reward-coef 1.0 --kl-coef 0.5
    vllm serve Qwen/Qwen2.5-1.5B-Instruct --port 8000 &   # the teacher on its own GPU
    mathgym train --algo onpolicy-distill --teacher-url http://127.0.0.1:8000/v1 --model Qwen/Qwen2.5-0.5B-Instruct
"""

from __future__ import annotations

import torch

from mathgym.agents.forward import ForwardOutput, logprobs_from_logits
from mathgym.agents.policy import LLMPolicy
from mathgym.agents.remote_teacher import RemoteTeacher
from mathgym.algos.batch import RolloutBatch
from mathgym.algos.choices import TeacherKLEstimator
from mathgym.algos.configs import OnPolicyDistillConfig
from mathgym.algos.distill import load_teacher, shared_vocab_width
from mathgym.algos.algorithm import RunParts
from mathgym.algos.grpo import GRPO, GRPOTrainer
from mathgym.algos.losses import kl_estimate, masked_mean
from mathgym.algos.update import Plan

__all__ = ["OnPolicyDistill", "OnPolicyDistillConfig", "OnPolicyDistillTrainer", "distillation_advantages"]


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


class OnPolicyDistill(GRPO):
    """GRPO whose advantages are the teacher's per-token signal (see the module docstring)."""

    name = "onpolicy-distill"
    config: OnPolicyDistillConfig

    def __init__(self, parts: RunParts):
        super().__init__(parts)
        cfg = self.config
        self.teacher: LLMPolicy | None = None
        self.remote_teacher: RemoteTeacher | None = None
        if cfg.teacher_url:
            self.remote_teacher = RemoteTeacher(
                cfg.teacher_url, cfg.teacher, api_key_env=cfg.teacher_api_key_env, timeout_s=cfg.teacher_timeout_s,
                max_concurrency=cfg.teacher_concurrency,
            )
            self.remote_teacher.connect(self.policy.tokenizer)
        else:
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

    def teacher_logprobs(self, batch: RolloutBatch, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(B, T)`` the teacher's log-probs of ``batch``'s tokens on ``rows`` (0 elsewhere), no gradient,
        on the student's device, and ``(B,)`` bool: the rows a teacher server could not score.
        An in-process teacher's logits are cut to the ids both models share."""
        if self.remote_teacher is not None:
            return remote_logprobs(self.remote_teacher, batch, rows)
        assert self.teacher is not None
        device = self.teacher.device

        def forward(mb: RolloutBatch) -> ForwardOutput:
            ids = mb.input_ids.to(device)
            with self.teacher.autocast():
                logits = self.teacher.model(input_ids=ids, attention_mask=mb.attention_mask.to(device), use_cache=False).logits
            logprobs, entropy = logprobs_from_logits(logits[..., : self.vocab_width], ids, self.temperature, entropy_grad=False)
            return ForwardOutput(logprobs.to(mb.input_ids.device), entropy.to(mb.input_ids.device))

        return self.score(batch, rows, forward).logprobs, torch.zeros(len(batch), dtype=torch.bool)

    def plan(self, batch: RolloutBatch) -> Plan:
        """The teacher scores the trainable rows first: a row it could not score (a teacher server that
        failed) becomes an infrastructure failure, out of the loss like an episode whose env failed.
        Its log-probs go to :meth:`token_advantages` through GRPO's plan (its ``scores``)."""
        rows = torch.nonzero(batch.loss_mask(self.config.mask_truncated).sum(-1) > 0).flatten()
        teacher, failed = self.teacher_logprobs(batch, rows)
        batch.infra_failure = batch.infra_failure | failed.to(batch.infra_failure.device)
        plan = super().plan(batch, teacher)
        plan.stats["infra/teacher_failures"] = float(failed.sum())
        return plan

    def token_signal(
        self, batch: RolloutBatch, mask: torch.Tensor, teacher: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(advantages, kl)`` of ``batch`` (see :func:`distillation_advantages`); ``batch.advantages``
        holds the episodes' env advantages and ``batch.learner_logprobs`` the student's log-probs;
        ``teacher``: the teacher's ``(B, T)`` log-probs where already scored (else scored here)."""
        cfg = self.config
        if batch.learner_logprobs is None:  # no row to train (every episode failed on infrastructure)
            return torch.zeros_like(mask), torch.zeros_like(mask)
        if teacher is None:
            teacher, _ = self.teacher_logprobs(batch, torch.nonzero(mask.sum(-1) > 0).flatten())
        return distillation_advantages(
            batch.learner_logprobs, teacher, batch.advantages, mask,
            kl_coef=cfg.kl_coef, env_reward_coef=cfg.env_reward_coef, estimator=cfg.teacher_kl_estimator,
        )

    def token_advantages(
        self, batch: RolloutBatch, mask: torch.Tensor, scores: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, dict[str, float]]:
        advantages, kl = self.token_signal(batch, mask, scores)
        return advantages, {"loss/teacher_kl": float(masked_mean(kl, mask))}


class OnPolicyDistillTrainer(GRPOTrainer):
    """On-policy distillation on any registered env (see :class:`OnPolicyDistillConfig` and the module docstring)."""

    algo_name = "onpolicy-distill"
    algorithm_class = OnPolicyDistill
    config: OnPolicyDistillConfig
    progress_metric = "loss/teacher_kl"


def remote_logprobs(teacher: RemoteTeacher, batch: RolloutBatch, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(B, T)`` a teacher server's log-probs of ``batch``'s tokens on ``rows``, token-aligned as
    :func:`~mathgym.agents.forward.logprobs_from_logits` aligns them (each row's first token: 0), and
    ``(B,)`` bool: the rows it could not score."""
    out = torch.zeros(batch.input_ids.shape, dtype=torch.float32)
    failed = torch.zeros(len(batch), dtype=torch.bool)
    positions = [torch.nonzero(batch.attention_mask[r].cpu()).flatten() for r in rows.tolist()]
    sequences = [batch.input_ids[r].cpu()[p].tolist() for r, p in zip(rows.tolist(), positions)]
    for r, p, values in zip(rows.tolist(), positions, teacher.logprobs(sequences)):
        if values is None:
            failed[r] = True
        elif len(p) > 1:
            out[r, p[1:]] = torch.tensor(values, dtype=torch.float32)
    return out.to(batch.input_ids.device), failed
