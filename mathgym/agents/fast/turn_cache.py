"""Keep a multi-turn episode's key/value cache from one turn to the next.

Turn ``k + 1``'s prompt of an episode is its turn-``k`` prompt, the action sampled there and the
env's reply. Without this module every turn runs its whole prompt through the model again:
the prefill grows with the episode, and a game of 25 turns pays for its first turn 25 times.
:class:`TurnCache` keeps, for each sequence the sampler ran (a prompt and the tokens fed after
it), the key/value rows the model computed for it; the next call looks each prompt up, takes
the longest cached prefix, and runs only what follows.

Cached rows are valid for the weights that computed them only: a :class:`TurnCache` lives inside
one :meth:`~mathgym.agents.policy.LLMPolicy.reusing_turns` scope (one batch of episodes, where
the weights do not change) and each call keeps the sequences of the latest call alone.

An entry holds ``(rows, heads, T, head_dim)`` key/value tensors that the sampler copied out of its
cache when the sequence ended (several entries share them), its ``row`` there and ``start``, its
first real column (the sampler pads on the left, so a row's real tokens are columns ``start:``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from mathgym.agents.sampling import left_pad

#: Below this many cached tokens per prompt (on average), running the prompts whole costs less
#: than assembling the cache.
MIN_REUSED_TOKENS = 8


@dataclass
class CachedRow:
    """One sequence's key/value rows: ``tensors[j][row, :, start:]`` for each key/value tensor
    ``j`` of the model's cache (see the module doc)."""

    tensors: list[torch.Tensor]
    row: int
    start: int


@dataclass
class Plan:
    """How a batch of prompts runs on top of cached rows.

    Attributes:
        input_ids: ``(B, S)`` the tokens each prompt still has to run, left-padded.
        attention_mask: ``(B, P + S)`` over the cached columns and the input.
        position_ids: ``(B, S)`` the inputs' positions in their sequences.
        past: One ``(B, heads, P, head_dim)`` tensor per key/value tensor of the cache (right-aligned rows).
        reused: Cached tokens used, summed over the prompts.
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    position_ids: torch.Tensor
    past: list[torch.Tensor]
    reused: int


@dataclass
class TurnCache:
    """Key/value rows of the sequences the latest :meth:`~mathgym.agents.backends.NativeBackend.generate` call ran.

    Attributes:
        entries: Each cached sequence (its token tuple) -> its rows.
        reused_tokens: Prompt tokens served from the cache since the scope began (a figure to report).
        run_tokens: Prompt tokens run through the model since the scope began.
    """

    entries: dict[tuple[int, ...], CachedRow] = field(default_factory=dict)
    reused_tokens: int = 0
    run_tokens: int = 0
    _lengths: set[int] = field(default_factory=set)
    _incoming: dict[tuple[int, ...], CachedRow] = field(default_factory=dict)

    def longest_prefix(self, prompt: Sequence[int]) -> tuple[int, CachedRow | None]:
        """The longest cached sequence that is a prefix of ``prompt`` (shorter than it: the last
        prompt token must run to give the next token's logits); ``(0, None)`` when none is."""
        best: tuple[int, CachedRow | None] = (0, None)
        for length in self._lengths:
            if best[0] < length < len(prompt):
                row = self.entries.get(tuple(prompt[:length]))
                if row is not None:
                    best = (length, row)
        return best

    def plan(self, prompts: Sequence[Sequence[int]], pad_id: int, device: torch.device) -> Plan | None:
        """Inputs and past for ``prompts``, or ``None`` when too little of them is cached.

        Every row runs the same number ``S`` of tokens (the most any prompt has beyond its cached
        prefix), so that padding stays on the left: a prompt with a longer cached prefix reruns
        a few of its cached tokens rather than padding in the middle.
        """
        found = [self.longest_prefix(p) for p in prompts]
        width = max(len(p) - length for p, (length, _) in zip(prompts, found))  # S
        used = [max(0, len(p) - width) for p in prompts]  # cached tokens each row takes: <= its cached prefix
        if sum(used) < MIN_REUSED_TOKENS * len(prompts):
            return None
        past_width = max(used)  # P
        template = next(row for (_, row), n in zip(found, used) if n > 0)
        past = [t.new_zeros((len(prompts), t.shape[1], past_width, t.shape[3])) for t in template.tensors]
        ids, input_mask = left_pad([list(p[n:]) for p, n in zip(prompts, used)], pad_id, device)
        past_mask = torch.zeros((len(prompts), past_width), dtype=torch.long)
        for i, ((_, row), n) in enumerate(zip(found, used)):
            if n:
                past_mask[i, past_width - n:] = 1
                for target, source in zip(past, row.tensors):
                    target[i, :, past_width - n:] = source[row.row, :, row.start: row.start + n]
        mask = torch.cat([past_mask.to(device), input_mask], dim=1)
        position = (mask.cumsum(-1) - 1).clamp(min=0)[:, past_width:]
        self.entries, self._lengths = {}, set()  # copied into ``past``: free them before this call keeps its own
        return Plan(ids, mask, position, past, sum(used))

    def keep(self, sequence: tuple[int, ...], tensors: list[torch.Tensor], row: int, start: int) -> None:
        """Hold the rows of ``sequence`` (``tensors[j][row, :, start:]``) for the next call."""
        self._incoming[sequence] = CachedRow(tensors, row, start)

    def turn_over(self) -> None:
        """End a call: what it kept replaces what the calls before kept."""
        self.entries, self._incoming = self._incoming, {}
        self._lengths = {len(s) for s in self.entries}


def cache_from_tensors(tensors: Sequence[torch.Tensor]) -> Any:
    """A transformers ``DynamicCache`` holding ``tensors`` (keys and values, layer by layer)."""
    from transformers import DynamicCache

    cache = DynamicCache()
    for layer in range(len(tensors) // 2):
        cache.update(tensors[2 * layer], tensors[2 * layer + 1], layer)
    return cache
