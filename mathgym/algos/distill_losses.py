"""Divergences of knowledge distillation, as pure functions of a teacher's and a student's logits.

Every divergence is ``D(teacher || student)`` at each position, computed on the teacher's
**top-k** tokens plus one **rest bucket**:

- the teacher's distribution (at ``teacher_temperature``, normalised over its whole vocabulary)
  is kept on its ``k`` most likely tokens; the mass it puts on every other token is not dropped
  but kept as one more outcome, ``p_rest = 1 - sum(p_topk)`` (:class:`TeacherTopK`);
- the student's distribution (at ``student_temperature``) is read on the same ``k`` tokens, and
  its rest bucket is its mass on every token *outside the teacher's top-k*,
  ``q_rest = 1 - sum(q[teacher's top-k])`` (:func:`student_buckets`).

So both sides are proper distributions over the same ``k + 1`` outcomes and the divergence is an
ordinary one between them. Merging outcomes never increases an f-divergence, so the value is a
lower bound on the full-vocabulary divergence, equal to it when ``k`` is the vocabulary size
(the rest buckets are then empty) and close to it when the teacher's tail is small; the
student is still pushed to put no more (or less) than ``p_rest`` outside the teacher's top-k,
which a renormalised top-k alone would not say. Both rest masses are computed exactly
(a log-sum-exp over the tokens outside the top-k), not as ``1 - sum``.

The divergences (``p``: teacher, ``q``: student, over the ``k + 1`` buckets):

======================  ============================================================  =====================================
``forward_kl``          ``KL(p || q) = sum p log(p / q)`` (mode-covering)              Hinton et al. 2015; Kim & Rush 2016
``reverse_kl``          ``KL(q || p) = sum q log(q / p)`` (mode-seeking)               Gu et al. 2024 (MiniLLM)
``jsd``                 ``beta KL(p || m) + (1 - beta) KL(q || m)``,                   Agarwal et al. 2024 (GKD)
                        ``m = beta p + (1 - beta) q``, ``0 < beta < 1``
``skew_forward_kl``     ``KL(p || lam p + (1 - lam) q)``, ``0 <= lam < 1``              Ko et al. 2024 (DistiLLM)
``skew_reverse_kl``     ``KL(q || lam q + (1 - lam) p)``, ``0 <= lam < 1``              Ko et al. 2024 (DistiLLM)
======================  ============================================================  =====================================

``jsd`` with ``beta = 0.5`` is the Jensen-Shannon divergence (at most ``ln 2``); it tends to 0 at
either end of ``beta``. The skewed KLs are the plain ones at ``lam = 0``; a larger ``lam`` mixes
the other side's own distribution into the one it is compared with, which bounds the log-ratio
(by ``-log lam``) and so the gradients when the student puts almost no mass where the teacher
puts some. No ``temperature ** 2`` factor is applied: scale the loss's weight instead.

Example:
    >>> import torch
    >>> teacher = teacher_top_k(torch.tensor([[0.0, 0.0]]).log_softmax(-1), k=2)
    >>> round(float(token_divergence(teacher, torch.tensor([[0.0, 0.0]]), "forward_kl")), 6)
    0.0
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import torch

from mathgym.algos.choices import DIVERGENCE_INPUTS, Divergence
from mathgym.options import pick, select

#: Log-probabilities below it are taken as it (``exp`` of it is 0 in fp32): a rest bucket that is
#: empty (``log 0``) then adds exactly 0 to a divergence, with finite gradients everywhere.
LOG_FLOOR = -1e4


class TeacherTopK(NamedTuple):
    """The part of a teacher's next-token distributions a distillation loss keeps (``...``: any
    leading shape, e.g. ``(B, T)``).

    Attributes:
        indices: ``(..., k)`` token ids of the teacher's ``k`` most likely tokens.
        logprobs: ``(..., k)`` their log-probs, normalised over the *whole* vocabulary.
        rest_logprob: ``(...)`` log of the teacher's mass on every other token (``-inf`` when
            ``k`` is the vocabulary size).
    """

    indices: torch.Tensor
    logprobs: torch.Tensor
    rest_logprob: torch.Tensor

    def buckets(self) -> torch.Tensor:
        """``(..., k + 1)`` log-probs of the top-k tokens and the rest bucket (last)."""
        return torch.cat([self.logprobs, self.rest_logprob[..., None]], dim=-1)

    def select(self, index: torch.Tensor) -> TeacherTopK:
        """The rows ``index`` of the first dimension."""
        return TeacherTopK(*(t[index.to(t.device)] for t in self))


def _rest_logprob(logprobs: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    """``(...)`` log of the mass of ``logprobs`` (``(..., V)``) outside ``indices`` (``(..., k)``)."""
    if indices.shape[-1] >= logprobs.shape[-1]:
        return torch.full(logprobs.shape[:-1], -math.inf, device=logprobs.device)
    outside = logprobs.scatter(-1, indices, -math.inf)
    return torch.logsumexp(outside, dim=-1)


def teacher_top_k(logits: torch.Tensor, k: int = 0, temperature: float = 1.0) -> TeacherTopK:
    """Keep a teacher's ``k`` most likely tokens and the log of its remaining mass.

    Args:
        logits: ``(..., V)`` teacher logits.
        k: Tokens kept per position (``0`` or ``>= V``: the whole vocabulary).
        temperature: The logits are divided by it before the softmax.

    Example:
        >>> top = teacher_top_k(torch.tensor([0.5, 0.25, 0.25]).log(), k=1)
        >>> top.indices.tolist(), round(float(top.logprobs.exp()), 4), round(float(top.rest_logprob.exp()), 4)
        ([0], 0.5, 0.5)
    """
    logprobs = torch.log_softmax(logits.float() / temperature, dim=-1)
    vocab = logprobs.shape[-1]
    k = vocab if k <= 0 else min(k, vocab)
    top, indices = logprobs.topk(k, dim=-1)
    return TeacherTopK(indices, top, _rest_logprob(logprobs, indices))


def student_buckets(logits: torch.Tensor, indices: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """``(..., k + 1)`` student log-probs on the teacher's top-k ``indices`` and on every other token (last).

    Args:
        logits: ``(..., V)`` student logits (with gradient).
        indices: ``(..., k)`` the teacher's top-k token ids (:attr:`TeacherTopK.indices`).
        temperature: The logits are divided by it before the softmax.
    """
    logprobs = torch.log_softmax(logits.float() / temperature, dim=-1)
    kept = logprobs.gather(-1, indices)
    return torch.cat([kept, _rest_logprob(logprobs, indices)[..., None]], dim=-1)


def _kl(log_a: torch.Tensor, log_b: torch.Tensor) -> torch.Tensor:
    """``sum a log(a / b)`` over the last dimension (``0 log 0 = 0``)."""
    return (log_a.exp() * (log_a - log_b)).sum(-1)


def _mix(log_a: torch.Tensor, log_b: torch.Tensor, weight_a: float) -> torch.Tensor:
    """``log(weight_a a + (1 - weight_a) b)``."""
    if weight_a == 0.0:
        return log_b
    return torch.logaddexp(log_a + math.log(weight_a), log_b + math.log1p(-weight_a))


def forward_kl(teacher: torch.Tensor, student: torch.Tensor) -> torch.Tensor:
    """``KL(p || q)``: the student covers every token the teacher gives mass to."""
    return _kl(teacher, student)


def reverse_kl(teacher: torch.Tensor, student: torch.Tensor) -> torch.Tensor:
    """``KL(q || p)``: the student puts its mass where the teacher's is high."""
    return _kl(student, teacher)


def generalized_jsd(teacher: torch.Tensor, student: torch.Tensor, *, jsd_beta: float = 0.5) -> torch.Tensor:
    """``beta KL(p || m) + (1 - beta) KL(q || m)`` with ``m = beta p + (1 - beta) q``, ``beta = jsd_beta``."""
    mixture = _mix(teacher, student, jsd_beta)
    return jsd_beta * _kl(teacher, mixture) + (1.0 - jsd_beta) * _kl(student, mixture)


def skew_forward_kl(teacher: torch.Tensor, student: torch.Tensor, *, skew_lambda: float = 0.0) -> torch.Tensor:
    """``KL(p || lam p + (1 - lam) q)``, ``lam = skew_lambda``."""
    return _kl(teacher, _mix(teacher, student, skew_lambda))


def skew_reverse_kl(teacher: torch.Tensor, student: torch.Tensor, *, skew_lambda: float = 0.0) -> torch.Tensor:
    """``KL(q || lam q + (1 - lam) p)``, ``lam = skew_lambda``."""
    return _kl(student, _mix(student, teacher, skew_lambda))


#: ``divergence`` choices -> ``(teacher (..., K), student (..., K), **inputs) -> (...)``, both sides
#: log-probs over the same ``K`` outcomes; the keyword inputs of each row are
#: :data:`~mathgym.algos.choices.DIVERGENCE_INPUTS`'s (``jsd_beta``, ``skew_lambda``).
DIVERGENCES: dict[str, Callable[..., torch.Tensor]] = {
    "forward_kl": forward_kl,
    "reverse_kl": reverse_kl,
    "jsd": generalized_jsd,
    "skew_forward_kl": skew_forward_kl,
    "skew_reverse_kl": skew_reverse_kl,
}


def token_divergence(
    teacher: TeacherTopK,
    student_logits: torch.Tensor,
    divergence: Divergence = "forward_kl",
    student_temperature: float = 1.0,
    beta: float = 0.5,
    skew: float = 0.1,
) -> torch.Tensor:
    """``(...)`` divergence ``D(teacher || student)`` at each position, over the teacher's top-k and the rest bucket.

    Args:
        teacher: The teacher's top-k (:func:`teacher_top_k`, at the teacher's temperature).
        student_logits: ``(..., V)`` student logits at the same positions.
        divergence: Which one (:data:`DIVERGENCES`).
        student_temperature: The student's logits are divided by it.
        beta: ``jsd``'s mixture weight of the teacher, in ``(0, 1)``.
        skew: The skewed KLs' ``lam``, in ``[0, 1)``.
    """
    fn = pick(DIVERGENCES, "divergence", divergence)
    student = student_buckets(student_logits, teacher.indices, student_temperature).clamp(min=LOG_FLOOR)
    inputs = select(DIVERGENCE_INPUTS, divergence, {"jsd_beta": beta, "skew_lambda": skew})
    return fn(teacher.buckets().clamp(min=LOG_FLOOR), student, **inputs)


class DistillStats(NamedTuple):
    """Detached token means of :func:`distillation_loss`'s two terms."""

    cross_entropy: torch.Tensor
    divergence: torch.Tensor


def distillation_loss(
    token_logprobs: torch.Tensor, divergence: torch.Tensor, mask: torch.Tensor, weight: float
) -> tuple[torch.Tensor, DistillStats]:
    """``(1 - weight) CE + weight D``, each a mean over the masked tokens.

    Args:
        token_logprobs: ``(B, T)`` student log-prob of each target token (CE is their negative).
        divergence: ``(B, T)`` per-token ``D(teacher || student)`` (:func:`token_divergence`).
        mask: ``(B, T)`` 1 on the tokens to learn.
        weight: ``w`` in ``[0, 1]``: 0 is SFT on the targets, 1 is pure distillation.

    Example:
        >>> loss, stats = distillation_loss(torch.tensor([[-1.0, -3.0]]), torch.tensor([[0.5, 1.5]]), torch.ones(1, 2), 0.25)
        >>> float(loss), float(stats.cross_entropy), float(stats.divergence)  # 0.75 * 2 + 0.25 * 1
        (1.75, 2.0, 1.0)
    """
    tokens = mask.sum().clamp(min=1.0)
    cross_entropy = -(token_logprobs * mask).sum() / tokens
    mean_divergence = (divergence * mask).sum() / tokens
    loss = (1.0 - weight) * cross_entropy + weight * mean_divergence
    return loss, DistillStats(cross_entropy.detach(), mean_divergence.detach())
