"""The one forward path: token log-probs, entropy and (optionally) values of a batch of sequences.

Every score mathgym computes goes through :func:`forward_pass`: the policy's log-probs in a loss
(:meth:`LLMPolicy.forward <mathgym.agents.policy.LLMPolicy.forward>`), the learner's log-probs
before an update (the ratio's denominator and the sampler/learner mismatch metric), the values
of a critic, and the reference's log-probs (:class:`ReferencePolicy`).

Alignment: ``logprobs[:, t]`` is the log-prob of ``input_ids[:, t]`` given the tokens before it,
``entropy[:, t]`` the entropy of that same distribution, and ``values[:, t]`` the value of that
same state (read at position ``t - 1``); position 0 has none of them and holds 0.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F

from mathgym.agents.choices import ReferenceKind
from mathgym.agents.prefix import shared_prefix_logits
from mathgym.errors import ConfigError

#: A value function read on a policy's pass: ``(input_ids, attention_mask, last hidden states) -> (B, T)``
#: values aligned like the logits (:class:`mathgym.agents.value_head.ValueModel`).
ValueFunction = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


class ForwardOutput(NamedTuple):
    """Token-aligned ``(B, T)`` outputs of :func:`forward_pass`."""

    logprobs: torch.Tensor
    entropy: torch.Tensor
    values: torch.Tensor | None = None


def shift_right(x: torch.Tensor) -> torch.Tensor:
    """``(B, T-1)`` per-position values -> ``(B, T)`` aligned with the tokens they predict (0 first)."""
    return torch.cat([torch.zeros_like(x[:, :1]), x], dim=1)


def logprobs_from_logits(
    logits: torch.Tensor, input_ids: torch.Tensor, temperature: float = 1.0, entropy_grad: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(B, T, V)`` logits -> ``(logprobs, entropy)``, both ``(B, T)`` and token-aligned: position
    ``t`` holds the log-prob of ``input_ids[:, t]`` given the tokens before it (position 0: 0).

    The softmax runs in fp32. ``entropy_grad=False`` computes the entropy without a graph
    (it is then only a statistic, and keeps no ``(B, T, V)`` tensor alive for the backward pass).
    """
    logp_all = F.log_softmax(logits[:, :-1].float() / max(temperature, 1e-6), dim=-1)  # (B, T-1, V)
    chosen = logp_all.gather(-1, input_ids[:, 1:, None]).squeeze(-1)  # (B, T-1)
    with contextlib.nullcontext() if entropy_grad else torch.no_grad():
        entropy = -(logp_all.exp() * logp_all).sum(-1)
    return shift_right(chosen), shift_right(entropy)


def real_width(attention_mask: torch.Tensor) -> int:
    """One past the last column where any row has a real token (0 for an empty mask).

    Example:
        >>> real_width(torch.tensor([[1, 1, 0, 0], [1, 1, 1, 0]]))
        3
    """
    columns = torch.nonzero(attention_mask.any(dim=0))
    return int(columns.max()) + 1 if len(columns) else 0


def logits_and_hidden(
    model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """One causal-LM forward pass: ``(logits (B, T, V), last hidden states (B, T, H))``."""
    out = model(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True, use_cache=False)
    return out.logits, out.hidden_states[-1]


def forward_pass(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    *,
    temperature: float = 1.0,
    groups: torch.Tensor | None = None,
    value_model: ValueFunction | None = None,
    entropy_grad: bool = False,
) -> ForwardOutput:
    """Log-probs, entropy and (with ``value_model``) values of a right-padded batch, in one pass.

    Args:
        model: A causal LM.
        input_ids: ``(B, T)`` token ids, right-padded.
        attention_mask: ``(B, T)`` 1 on real tokens.
        temperature: Logits are divided by it (match the sampling temperature).
        groups: ``(B,)`` group of each row (the samples of one task): the prefix the rows of a
            group share runs once per group (:mod:`mathgym.agents.prefix`), same result for less
            compute. Ignored with a ``value_model``, which reads the whole pass's hidden states.
        value_model: A value function (:class:`~mathgym.agents.value_head.ValueModel`); its
            shared head reads this pass's last hidden states.
        entropy_grad: Keep the entropy in the graph (an entropy bonus); otherwise it is a statistic.

    Returns:
        :class:`ForwardOutput`; ``values`` is ``None`` without a ``value_model``.

    Columns after the last real token of every row (a micro-batch of short rows cut from a batch
    padded to its longest) are not run: they hold 0, like position 0.
    """
    width, used = input_ids.shape[1], real_width(attention_mask)
    if 0 < used < width:
        out = forward_pass(model, input_ids[:, :used], attention_mask[:, :used], temperature=temperature, groups=groups,
                           value_model=value_model, entropy_grad=entropy_grad)
        return ForwardOutput(*(None if part is None else F.pad(part, (0, width - used)) for part in out))
    if value_model is not None:
        logits, hidden = logits_and_hidden(model, input_ids, attention_mask)
        values = shift_right(value_model(input_ids, attention_mask, hidden)[:, :-1])
        return ForwardOutput(*logprobs_from_logits(logits, input_ids, temperature, entropy_grad), values)
    logits = None
    if groups is not None:
        logits = shared_prefix_logits(model, input_ids, attention_mask, groups.to(input_ids.device))
    if logits is None:
        logits = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits
    return ForwardOutput(*logprobs_from_logits(logits, input_ids, temperature, entropy_grad))


class ReferencePolicy:
    """The frozen policy a KL term or DPO's implicit reward is measured against.

    Args:
        policy: The trained :class:`~mathgym.agents.policy.LLMPolicy`, at its starting weights.
        kind: ``copy`` (a frozen deep copy), ``adapter`` (the same model with its LoRA adapter
            disabled: no second copy in memory), or ``auto`` (``adapter`` under LoRA, else ``copy``).
    """

    def __init__(self, policy: Any, kind: ReferenceKind = "auto"):
        if kind not in ("auto", "copy", "adapter"):
            raise ConfigError(f"reference={kind!r} is not allowed; choose 'auto', 'copy' or 'adapter'.")
        if kind == "auto":
            kind = "adapter" if policy.has_lora else "copy"
        if kind == "adapter" and not policy.has_lora:
            raise ConfigError("reference='adapter' needs a LoRA policy (lora_r > 0); use 'copy'.")
        self.policy, self.kind = policy, kind
        self.model = copy.deepcopy(policy.model).eval().requires_grad_(False) if kind == "copy" else None

    @torch.no_grad()
    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, temperature: float = 1.0
    ) -> ForwardOutput:
        """The reference's :func:`forward_pass` (eval mode, no gradient, the policy's precision)."""
        with self.policy.autocast():
            if self.model is not None:
                return forward_pass(self.model, input_ids, attention_mask, temperature=temperature)
            model = self.policy.model
            was_training = model.training
            model.eval()
            try:
                with self.policy.adapter_disabled():
                    return forward_pass(model, input_ids, attention_mask, temperature=temperature)
            finally:
                model.train(was_training)

    def logprobs(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
        """``(B, T)`` token log-probs under the reference."""
        return self.forward(input_ids, attention_mask, temperature).logprobs
