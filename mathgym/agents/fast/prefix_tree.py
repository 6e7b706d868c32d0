"""A training forward pass over the prefix tree of a batch: every shared prefix runs once.

The rows of a GRPO batch are G samples of each prompt, and samples agree on more than the prompt:
many share their first tokens, some whole stretches. A position's hidden state depends only on the
tokens up to it, so two rows that agree up to position ``t`` have the same states there. Here each
distinct prefix (a node of the batch's prefix tree, :func:`prefix_tree`) runs through the model's
projections and MLPs once; only the attention, cheap for short rows, is laid out per row: each
row's keys and values are gathered from its nodes, and each node takes its attention output from
one row that holds it. Autograd flows through the gathers, so a shared node's gradient is the sum
over the rows that read it: the plain pass's log-probs and gradients, up to float rounding, for the
compute of the tree's nodes instead of the batch's padded rows (on the tiny model's GRPO batches,
about 500 nodes where the group-prefix pass ran about 700 positions).

It serves a decoder only after the checks of :func:`tree_forward`: the Llama layout (as for
decoding, :mod:`mathgym.agents.fast.lean_decode`), no dropout drawn, no gradient checkpointing, no hook
on a module it does not call, and the same hidden states as the decoder's own forward on probe rows.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch
import torch.nn.functional as F

from mathgym.agents.dropout import draws_dropout
from mathgym.agents.fast.lean_decode import CheckedPerModule, hooked, llama_layout, logits_close, rotate_half


class PrefixTree(NamedTuple):
    """The distinct prefixes of a right-padded batch.

    Attributes:
        node_of: ``(B, T)`` the node of each real position (0 on padding: read ``real``).
        real: ``(B, T)`` where the rows hold real tokens.
        rows: ``(U,)`` one batch row of each distinct row, sorted by their tokens.
        tokens: ``(N,)`` each node's last token.
        positions: ``(N,)`` each node's position in its rows.
        owner: ``(N,)`` where one distinct row holds each node, as ``u * T + t`` of the ``(U, T)``
            layout of ``rows``.
    """

    node_of: torch.Tensor
    real: torch.Tensor
    rows: torch.Tensor
    tokens: torch.Tensor
    positions: torch.Tensor
    owner: torch.Tensor


def prefix_tree(input_ids: torch.Tensor, attention_mask: torch.Tensor) -> PrefixTree | None:
    """The prefix tree of a batch whose rows hold their real tokens first; ``None`` for another layout.

    Two positions are one node when their rows agree on every token up to them. Sorted, each row
    shares with the row before it its longest common prefix; the positions past it are new nodes,
    and a position within it is the node of the last row above that made it new.

    Example:
        >>> ids = torch.tensor([[5, 6, 7], [5, 6, 8], [5, 6, 0]])
        >>> tree = prefix_tree(ids, torch.tensor([[1, 1, 1], [1, 1, 1], [1, 1, 0]]))
        >>> tree.tokens.tolist(), tree.node_of.tolist()
        ([5, 6, 7, 8], [[0, 1, 2], [0, 1, 3], [0, 1, 0]])
    """
    batch, width = input_ids.shape
    real = attention_mask.bool()
    column = torch.arange(width, device=input_ids.device)
    if batch == 0 or not torch.equal(real, column < real.sum(1, keepdim=True)):
        return None
    keyed = torch.where(real, input_ids, torch.full_like(input_ids, -1))  # padding matches no token
    distinct, inverse = torch.unique(keyed, dim=0, return_inverse=True)  # (U, T), sorted row by row
    count = distinct.shape[0]
    common = torch.zeros(count, dtype=torch.long, device=input_ids.device)
    common[1:] = (distinct[1:] == distinct[:-1]).long().cumprod(1).sum(1)  # prefix shared with the row above
    held = distinct >= 0
    new = (column >= common[:, None]) & held  # (U, T) positions whose node starts at this row
    maker = torch.where(new, torch.arange(count, device=input_ids.device)[:, None], -1).cummax(dim=0).values
    number = new.flatten().long().cumsum(0).view(count, width) - 1  # nodes numbered in row-major order
    node_of_distinct = number.gather(0, maker.clamp(min=0)).masked_fill(~held, 0)
    rows = torch.full((count,), batch, dtype=torch.long, device=input_ids.device)
    rows = rows.scatter_reduce(0, inverse, torch.arange(batch, device=input_ids.device), "amin")
    owner = new.flatten().nonzero().squeeze(1)
    return PrefixTree(
        node_of=node_of_distinct[inverse].masked_fill(~real, 0), real=real, rows=rows,
        tokens=distinct.flatten()[owner], positions=owner % width, owner=owner,
    )


class TreeForward:
    """The forward pass of a decoder with the Llama layout over a :class:`PrefixTree` (module doc)."""

    def __init__(self, decoder: Any):
        self.decoder = decoder
        self.layers = list(decoder.layers)
        first = self.layers[0].self_attn
        self.head_dim = int(first.head_dim)
        self.heads = int(first.q_proj.out_features) // self.head_dim
        self.scaling = float(first.scaling)
        self.groups = int(getattr(first, "num_key_value_groups", 1))

    def __call__(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor | None:
        """``(B, T, H)`` last hidden states (0 on padding), or ``None`` for rows not right-padded, a batch
        without a real token, or one whose tree would save less than :data:`TREE_SAVING` of the
        positions the plain pass runs."""
        tree = prefix_tree(input_ids, attention_mask)
        if tree is None or not len(tree.tokens) or len(tree.tokens) > (1.0 - TREE_SAVING) * input_ids.numel():
            return None  # not right-padded, no real token at all, or too little to save
        hidden = self.nodes(tree)  # (N, H)
        rows = hidden.index_select(0, tree.node_of.flatten()).view(*tree.node_of.shape, -1)
        return rows * tree.real[..., None].to(hidden.dtype)

    def nodes(self, tree: PrefixTree) -> torch.Tensor:
        """``(N, H)`` the last hidden state of every node of ``tree``."""
        decoder, dim = self.decoder, self.head_dim
        x = decoder.embed_tokens(tree.tokens)  # (N, H)
        cos, sin = decoder.rotary_emb(x[None], tree.positions[None])
        cos, sin = cos[0, :, None], sin[0, :, None]  # (N, 1, D): broadcast over heads
        layout = tree.node_of[tree.rows]  # (U, T): the nodes of each distinct row
        count, width = layout.shape
        flat = layout.flatten()
        causal = torch.ones(width, width, dtype=torch.bool, device=layout.device).tril()
        itself = torch.eye(width, dtype=torch.bool, device=layout.device)  # a padding query attends to something
        allowed = (causal[None, None] & tree.real[tree.rows][:, None, None, :]) | itself  # (U, 1, T, T)
        bias = None  # short rows on a CPU: the attention as matrix products, with this additive mask
        if layout.device.type == "cpu" and count * self.heads * width * width <= SMALL_ATTENTION:
            bias = torch.zeros(allowed.shape, device=layout.device).masked_fill_(~allowed, float("-inf"))
        for layer in self.layers:
            attn = layer.self_attn
            h = layer.input_layernorm(x)
            q = attn.q_proj(h).view(len(h), -1, dim)  # (N, Hq, D)
            k = attn.k_proj(h).view(len(h), -1, dim)
            v = attn.v_proj(h).view(len(h), -1, dim)
            q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
            # per distinct row: (U, H, T, D), gathered from the nodes (index_select: its backward adds
            # in a fixed order, where advanced indexing's accumulates in whatever order the threads take)
            q, k, v = (t.index_select(0, flat).view(count, width, -1, dim).transpose(1, 2) for t in (q, k, v))
            if self.groups > 1:
                k, v = k.repeat_interleave(self.groups, dim=1), v.repeat_interleave(self.groups, dim=1)
            if bias is None:
                out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, scale=self.scaling)
            else:
                scores = torch.matmul(q, k.transpose(-1, -2)) * self.scaling + bias  # (U, H, T, T), in fp32 at least
                out = torch.matmul(scores.softmax(-1).to(v.dtype), v)
            out = out.transpose(1, 2).reshape(count * width, -1).index_select(0, tree.owner)  # (N, Hq * D)
            x = x + attn.o_proj(out)
            x = x + layer.mlp(layer.post_attention_layernorm(x))
        return decoder.norm(x)


#: The share of a batch's positions (rows x longest row) the tree must save for its pass to run: below it
#: (long distinct rows of like length, such as a multi-turn env's demonstrations cut to the same length)
#: the gathers and the attention's explicit mask cost more than the few positions saved, and the
#: decoder's own pass runs.
TREE_SAVING = 0.1


#: Attention scores (distinct rows x heads x positions x positions) up to which a pass on a CPU computes
#: the attention with matrix products. For short rows they are faster than the fused kernel, forward and
#: backward (rows of 28 tokens: 0.9-1.4 ms where it took 2.0-3.2 ms, 36 rows of 4 heads); for long ones
#: the kernel, which never holds the scores, wins.
SMALL_ATTENTION = 1 << 22


#: Per decoder: its :class:`TreeForward`, or ``None`` where its own forward must run.
_TREES = CheckedPerModule()


def tree_forward(decoder: Any) -> TreeForward | None:
    """The :class:`TreeForward` of ``decoder`` (a causal LM's decoder, its ``last_hidden_state`` the
    head's input), or ``None`` where its own forward must run: a layout other than Llama's, dropout
    drawn, gradient checkpointing (its memory saving would be lost), a hook on the decoder, a layer or
    an attention (modules this pass does not call) or a global one, or hidden states that differ from
    the decoder's own on probe rows (checked once per decoder, again when a forward is set on it)."""
    if not isinstance(decoder, torch.nn.Module) or draws_dropout(decoder):
        return None
    layers = getattr(decoder, "layers", None) or ()
    if any(getattr(m, "gradient_checkpointing", False) for m in (decoder, *layers)):
        return None
    if layers and hooked([decoder, *layers, *(getattr(layer, "self_attn", layer) for layer in layers)]):
        return None
    return _TREES.get(decoder, lambda: _checked_tree(decoder))


def _checked_tree(decoder: torch.nn.Module) -> TreeForward | None:
    """A :class:`TreeForward` for ``decoder`` if its layout is Llama's and the probe agrees, else ``None``."""
    if not llama_layout(decoder):
        return None
    candidate = TreeForward(decoder)
    try:
        return candidate if _agrees(candidate, decoder) else None
    except (RuntimeError, TypeError, ValueError, AttributeError, IndexError):  # the probe failed: the own forward
        return None


def _agrees(tree: TreeForward, decoder: torch.nn.Module) -> bool:
    """Whether the tree pass gives the decoder's own last hidden states on probe rows that share
    prefixes, repeat and are padded."""
    device = next(decoder.parameters()).device
    ids = torch.tensor([[4, 5, 6, 7, 8], [4, 5, 6, 9, 0], [4, 5, 3, 0, 0], [4, 5, 6, 7, 8], [2, 3, 0, 0, 0]], device=device)
    mask = (torch.arange(5, device=device) < torch.tensor([5, 4, 3, 5, 2], device=device)[:, None]).long()
    with torch.no_grad():
        theirs = decoder(input_ids=ids, attention_mask=mask, use_cache=False).last_hidden_state
        ours = tree(ids, mask)
    real = mask.bool()
    return ours is not None and logits_close(ours[real], theirs[real])
