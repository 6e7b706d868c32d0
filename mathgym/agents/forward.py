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
import weakref
from collections.abc import Callable
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F

from mathgym.agents.choices import ReferenceKind
from mathgym.agents.dropout import draws_dropout
from mathgym.agents.fast.prefix import shared_prefix_outputs
from mathgym.agents.fast.prefix_tree import tree_forward
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


#: Per model: its ``(decoder, output head)`` when ``head(decoder(x).last_hidden_state)`` is its logits,
#: else ``None`` (a model whose forward does more to them: soft-capping, scaling). Checked once.
_HEAD_SPLITS: weakref.WeakKeyDictionary[torch.nn.Module, tuple[Any, Any] | None] = weakref.WeakKeyDictionary()


def head_split(model: torch.nn.Module) -> tuple[Any, Any] | None:
    """``(decoder, head)`` of a causal LM whose logits are ``head(decoder(...).last_hidden_state)``,
    or ``None`` where they are not (found by comparing the two on three tokens, once per model)."""
    if model in _HEAD_SPLITS:
        return _HEAD_SPLITS[model]
    split = None
    decoder = model.get_decoder() if hasattr(model, "get_decoder") else None
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if decoder is not None and head is not None:
        device = next(model.parameters()).device
        ids = torch.tensor([[1, 2, 3]], device=device)
        was_training = model.training
        model.eval()  # no dropout: the two passes must see the same function
        try:
            with torch.no_grad():
                whole = model(input_ids=ids, use_cache=False).logits.float()
                parts = head(decoder(input_ids=ids, use_cache=False).last_hidden_state).float()
        finally:
            model.train(was_training)
        scale = float(whole.abs().max()) + 1e-6
        if parts.shape == whole.shape and float((parts - whole).abs().max()) <= 1e-3 * scale:
            split = (decoder, head)
    _HEAD_SPLITS[model] = split
    return split


def logprobs_at(
    head: Any, hidden: torch.Tensor, input_ids: torch.Tensor, positions: torch.Tensor, temperature: float, entropy_grad: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """Like :func:`logprobs_from_logits`, with the output head run only where a log-prob is wanted:
    ``hidden`` ``(B, T, H)`` last hidden states, ``positions`` ``(B, T)`` the tokens wanted (others hold 0)."""
    rows, cols = torch.nonzero(positions[:, 1:].bool(), as_tuple=True)  # token t + 1, predicted at t
    logits = head(hidden[rows, cols])  # (N, V)
    logp_all = F.log_softmax(logits.float() / max(temperature, 1e-6), dim=-1)
    chosen = logp_all.gather(-1, input_ids[rows, cols + 1][:, None]).squeeze(-1)
    with contextlib.nullcontext() if entropy_grad else torch.no_grad():
        entropy = -(logp_all.exp() * logp_all).sum(-1)
    shape = (input_ids.shape[0], input_ids.shape[1] - 1)
    place = lambda values: torch.zeros(shape, dtype=values.dtype, device=values.device).index_put((rows, cols), values)  # noqa: E731
    return shift_right(place(chosen)), shift_right(place(entropy))


def repeated_rows(*tensors: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor] | None:
    """``(kept, inverse)`` when some rows of ``tensors`` (each ``(B, ...)``, read together) repeat:
    ``kept`` the first row of each distinct one, in batch order, and ``inverse`` each row's place
    in ``kept``; ``None`` when every row is distinct.

    Example:
        >>> ids = torch.tensor([[5, 6], [7, 8], [5, 6], [5, 9]])
        >>> [t.tolist() for t in repeated_rows(ids, torch.ones_like(ids))]
        [[0, 1, 3], [0, 1, 0, 2]]
    """
    parts = [t.reshape(t.shape[0], -1).to(torch.long) for t in tensors if t is not None]
    key = torch.cat(parts, dim=1)
    distinct, inverse = torch.unique(key, dim=0, return_inverse=True)
    if len(distinct) == len(key):
        return None
    rows = torch.arange(len(key), device=key.device)
    first = torch.full((len(distinct),), len(key), device=key.device).scatter_reduce(0, inverse, rows, "amin")
    order = torch.argsort(first)
    place = torch.empty_like(order)
    place[order] = torch.arange(len(order), device=key.device)
    return first[order], place[inverse]


def forward_pass(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    *,
    temperature: float = 1.0,
    groups: torch.Tensor | None = None,
    value_model: ValueFunction | None = None,
    entropy_grad: bool = False,
    positions: torch.Tensor | None = None,
) -> ForwardOutput:
    """Log-probs, entropy and (with ``value_model``) values of a right-padded batch, in one pass.

    Args:
        model: A causal LM.
        input_ids: ``(B, T)`` token ids, right-padded.
        attention_mask: ``(B, T)`` 1 on real tokens.
        temperature: Logits are divided by it (match the sampling temperature).
        groups: ``(B,)`` group of each row (the samples of one task): for a model the prefix tree
            does not serve (below), the prefix the rows of a group share runs once per group
            (:mod:`mathgym.agents.fast.prefix`), and rows that repeat whole run once (below), same
            result for less compute. Nothing is shared with a ``value_model``, which reads the
            whole pass's hidden states.
        value_model: A value function (:class:`~mathgym.agents.value_head.ValueModel`); its
            shared head reads this pass's last hidden states.
        entropy_grad: Keep the entropy in the graph (an entropy bonus); otherwise it is a statistic.
        positions: ``(B, T)`` the tokens whose log-prob and entropy are wanted (e.g. the action
            tokens; the others then hold 0): the output head and the softmax run there only, where
            the model's logits are its head applied to its decoder's last hidden states
            (:func:`head_split`). Ignored with a ``value_model``.

    Returns:
        :class:`ForwardOutput`; ``values`` is ``None`` without a ``value_model``.

    With ``positions``, a decoder with Llama's layout runs every distinct prefix of the batch once
    and no padding (:mod:`mathgym.agents.fast.prefix_tree`), groups or not.

    Columns after the last real token of every row (a micro-batch of short rows cut from a batch
    padded to its longest) are not run: they hold 0, like position 0. With ``groups``, rows that
    repeat (the same tokens, mask and ``positions``: samples that agree to the last token) run
    once and their outputs are copied, so that the gradient of a copy adds to the one pass,
    unless the pass draws dropout (:func:`~mathgym.agents.dropout.draws_dropout`), which would give each copy its own
    draw. The sums then run in another order: the last bits differ from the plain pass.
    """
    width, used = input_ids.shape[1], real_width(attention_mask)
    if 0 < used < width:
        out = forward_pass(model, input_ids[:, :used], attention_mask[:, :used], temperature=temperature, groups=groups,
                           value_model=value_model, entropy_grad=entropy_grad,
                           positions=None if positions is None else positions[:, :used])
        return ForwardOutput(*(None if part is None else F.pad(part, (0, width - used)) for part in out))
    repeats = None
    if groups is not None and not draws_dropout(model, value_model):
        repeats = repeated_rows(input_ids, attention_mask, positions)
    if repeats is not None:  # identical rows give identical outputs: each runs once, its gradient summed over its copies
        kept, inverse = repeats
        pick_rows = lambda t: None if t is None else t.index_select(0, kept.to(t.device))  # noqa: E731
        out = forward_pass(model, pick_rows(input_ids), pick_rows(attention_mask), temperature=temperature,
                           groups=pick_rows(groups), value_model=value_model, entropy_grad=entropy_grad,
                           positions=pick_rows(positions))
        return ForwardOutput(*(None if part is None else part.index_select(0, inverse.to(part.device)) for part in out))
    if value_model is not None:
        logits, hidden = logits_and_hidden(model, input_ids, attention_mask)
        values = shift_right(value_model(input_ids, attention_mask, hidden)[:, :-1])
        return ForwardOutput(*logprobs_from_logits(logits, input_ids, temperature, entropy_grad), values)
    split = None if positions is None else head_split(model)
    if split is not None:
        decoder, head = split
        hidden = tree_hidden(decoder, input_ids, attention_mask)
        if hidden is None and groups is not None:
            hidden = shared_prefix_outputs(decoder, input_ids, attention_mask, groups.to(input_ids.device))
        if hidden is None:
            hidden = decoder(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).last_hidden_state
        return ForwardOutput(*logprobs_at(head, hidden, input_ids, positions, temperature, entropy_grad))
    logits = None
    if groups is not None:
        logits = shared_prefix_outputs(model, input_ids, attention_mask, groups.to(input_ids.device))
    if logits is None:
        logits = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits
    return ForwardOutput(*logprobs_from_logits(logits, input_ids, temperature, entropy_grad))


def tree_hidden(decoder: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor | None:
    """``decoder``'s last hidden states with every distinct prefix of the batch run once
    (:mod:`mathgym.agents.fast.prefix_tree`), or ``None`` where the decoder's own forward must run."""
    tree = tree_forward(decoder)
    return None if tree is None else tree(input_ids, attention_mask)


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
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, temperature: float = 1.0,
        positions: torch.Tensor | None = None, groups: torch.Tensor | None = None,
    ) -> ForwardOutput:
        """The reference's :func:`forward_pass` (eval mode, no gradient, the policy's precision);
        ``positions`` and ``groups`` as there."""
        with self.policy.autocast():
            if self.model is not None:
                return forward_pass(self.model, input_ids, attention_mask, temperature=temperature, positions=positions, groups=groups)
            model = self.policy.model
            was_training = model.training
            model.eval()
            try:
                with self.policy.adapter_disabled():
                    return forward_pass(model, input_ids, attention_mask, temperature=temperature, positions=positions, groups=groups)
            finally:
                model.train(was_training)

    def logprobs(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
        """``(B, T)`` token log-probs under the reference."""
        return self.forward(input_ids, attention_mask, temperature).logprobs
