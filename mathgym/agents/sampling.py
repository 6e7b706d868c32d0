"""What sampling takes and gives, below the policy and its generation backends.

:class:`SamplingParams` (how to sample) and :class:`Generation` (one sampled completion) are the
words of :meth:`LLMPolicy.generate <mathgym.agents.policy.LLMPolicy.generate>` and of every
backend (:mod:`mathgym.agents.backends`); :class:`SamplingPolicy` is what a backend reads of the
policy it samples for; :func:`left_pad` lays prompts out as a batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import torch


@dataclass(frozen=True)
class SamplingParams:
    """How to sample completions.

    Attributes:
        temperature: Softmax temperature; ``0`` means greedy.
        top_p: Nucleus sampling mass (``1.0`` keeps every token).
        max_new_tokens: Longest completion in tokens.
        stop: Strings that end a completion (the stop string is kept in the text).
    """

    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 64
    stop: tuple[str, ...] = ()


@dataclass
class Generation:
    """One sampled completion.

    Attributes:
        token_ids: Completion tokens (EOS included when the model emitted it).
        logprobs: Log-prob of each token under the sampling distribution (temperature applied).
        text: Decoded completion without special tokens.
        finish_reason: ``"stop"`` (EOS or a stop string) or ``"length"`` (hit ``max_new_tokens``).
    """

    token_ids: list[int]
    logprobs: list[float]
    text: str
    finish_reason: Literal["stop", "length"] = "stop"


class SamplingChat(Protocol):
    """What a generation backend reads of the policy's chat format
    (:class:`~mathgym.agents.chat_format.ChatFormat` is one): where a completion stops, how it reads."""

    @property
    def stop_token_ids(self) -> tuple[int, ...]: ...

    def decode(self, token_ids: Sequence[int]) -> str: ...


class SamplingPolicy(Protocol):
    """What a generation backend reads of the policy it samples for
    (:class:`~mathgym.agents.policy.LLMPolicy` is one)."""

    @property
    def model(self) -> Any: ...

    @property
    def device(self) -> torch.device: ...

    @property
    def name_or_path(self) -> str: ...

    @property
    def autocast_dtype(self) -> torch.dtype | None: ...

    @property
    def weights_version(self) -> int: ...

    @property
    def pad_token_id(self) -> int: ...

    @property
    def chat(self) -> SamplingChat: ...


def left_pad(prompts: Sequence[Sequence[int]], pad_id: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """``(input_ids, attention_mask)``, both ``(B, T)``, left-padded."""
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for i, p in enumerate(prompts):
        if p:
            ids[i, width - len(p) :] = torch.tensor(list(p), dtype=torch.long)
            mask[i, width - len(p) :] = 1
    return ids.to(device), mask.to(device)
