"""Forward passes the preference and actor-critic trainers share: token log-probs (with
values from a head on the same pass) and a frozen reference policy.

Alignment follows :meth:`LLMPolicy.token_logprobs`: ``logprobs[:, t]`` is the log-prob of
``input_ids[:, t]`` given the tokens before it and ``values[:, t]`` the value of that same
state (read at position ``t - 1``); position 0 has neither and holds 0.
"""

from __future__ import annotations

import copy
from typing import Any, Literal, NamedTuple

import torch

from mathgym.agents.policy import logprobs_from_logits, shift_right
from mathgym.agents.value_head import ValueModel, logits_and_hidden
from mathgym.errors import ConfigError

ReferenceKind = Literal["auto", "copy", "adapter"]


class ForwardOutput(NamedTuple):
    """Token-aligned ``(B, T)`` outputs of :func:`policy_forward`."""

    logprobs: torch.Tensor
    entropy: torch.Tensor
    values: torch.Tensor | None


def policy_forward(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    temperature: float = 1.0,
    value_model: ValueModel | None = None,
) -> ForwardOutput:
    """Log-probs, entropy and (optionally) values of a batch, in one policy forward pass."""
    logits, hidden = logits_and_hidden(model, input_ids, attention_mask)
    logprobs, entropy = logprobs_from_logits(logits, input_ids, temperature)
    values = None
    if value_model is not None:
        values = shift_right(value_model(input_ids, attention_mask, hidden)[:, :-1])
    return ForwardOutput(logprobs, entropy, values)


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
    def logprobs(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
        """``(B, T)`` token log-probs under the reference."""
        if self.model is not None:
            logits = self.model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits
            return logprobs_from_logits(logits, input_ids, temperature)[0]
        model = self.policy.model
        was_training = model.training
        model.eval()
        try:
            with self.policy.adapter_disabled():
                logits = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits
        finally:
            model.train(was_training)
        return logprobs_from_logits(logits, input_ids, temperature)[0]
