"""Shared-prefix forward passes: the samples of a group share their prompt, so compute it once.

GRPO draws G samples of one prompt; DPO scores a chosen and a rejected reply to one prompt.
A plain forward pass runs the prompt through the model G times. Here the longest prefix that
every group's rows share (the prompt, and often the first tokens of the replies) runs once
per group; its key/value cache is then gathered to every row of the group and the rest of
each row runs on top of it. Autograd flows through the gather, so the gradient of the shared
prefix is the sum over the group's rows: the same log-probs and the same gradients as the
plain pass, up to float rounding, for less compute (about ``(G - 1) / G`` of the prefix).

Rows must be right-padded (real tokens first), as :class:`~mathgym.algos.batch.RolloutBatch`
builds them.
"""

from __future__ import annotations

from typing import Any

import torch

from mathgym.agents.kv_cache import gather_cache, returned_cache, with_cache

#: Below this many shared tokens the second pass costs more than it saves.
MIN_SHARED_TOKENS = 4


def group_leaders(groups: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(inverse, leader)``: each row's group as 0..n_groups-1, and each group's first row."""
    _, inverse = torch.unique(groups, return_inverse=True)
    rows = torch.arange(len(groups), device=groups.device)
    leader = torch.zeros(int(inverse.max()) + 1, dtype=torch.long, device=groups.device)
    return inverse, leader.scatter_reduce(0, inverse, rows, "amin", include_self=False)


def shared_prefix_length(input_ids: torch.Tensor, attention_mask: torch.Tensor, groups: torch.Tensor) -> int:
    """The longest ``L`` such that within every group all rows hold the same real tokens ``[:L]``.

    At most ``T - 1`` (each row keeps at least one token for the second pass).

    Example:
        >>> ids = torch.tensor([[1, 2, 3, 4], [1, 2, 5, 0], [7, 8, 9, 9], [7, 8, 9, 6]])
        >>> shared_prefix_length(ids, (ids > 0).long(), torch.tensor([0, 0, 1, 1]))
        2
    """
    inverse, leader = group_leaders(groups)
    same = (input_ids == input_ids[leader[inverse]]) & attention_mask.bool()  # (B, T)
    common = same.long().cumprod(dim=1).sum(dim=1)  # leading positions equal to the group's first row
    return int(min(int(common.min()), input_ids.shape[1] - 1))


def shared_prefix_outputs(
    model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor, groups: torch.Tensor
) -> torch.Tensor | None:
    """The outputs of ``model`` on the batch, computing each group's shared prefix once: ``(B, T, V)`` logits
    (``(B, T, H)`` last hidden states where ``model`` is a decoder without an output head).

    Returns ``None`` when there is nothing to share (every row its own group, a shared prefix
    shorter than :data:`MIN_SHARED_TOKENS`) or the model's cache is not one this code can
    gather; the caller then runs the plain pass.
    """
    inverse, leader = group_leaders(groups)
    if len(leader) == len(groups):
        return None
    length = shared_prefix_length(input_ids, attention_mask, groups)
    if length < MIN_SHARED_TOKENS:
        return None
    prefix_ids = input_ids[leader, :length]
    prefix = model(input_ids=prefix_ids, attention_mask=torch.ones_like(prefix_ids), use_cache=True)
    cache = returned_cache(prefix)
    if not gather_cache(cache, inverse):
        return None
    rest = model(input_ids=input_ids[:, length:], attention_mask=attention_mask, **with_cache(model, cache), use_cache=True)
    return torch.cat([_output(prefix).index_select(0, inverse), _output(rest)], dim=1)


def _output(out: Any) -> torch.Tensor:
    """A forward's logits, or a decoder's last hidden states."""
    logits = out.get("logits") if hasattr(out, "get") else None
    return logits if logits is not None else out.last_hidden_state
