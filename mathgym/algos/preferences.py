"""Preference pairs for DPO: JSONL files, online best-vs-worst pairs, and tokenised batches.

A JSONL line is ``{"prompt": ..., "chosen": ..., "rejected": ...}`` where

* ``prompt`` is plain text (used as is) or a chat (a list of ``{"role", "content"}``
  messages, rendered with the model's chat template and its generation prompt);
* ``chosen`` / ``rejected`` are the completions: a string, or a list of messages whose
  assistant contents are joined (the common "conversation" layout);
* optional ``ref_chosen_logp`` / ``ref_rejected_logp`` hold precomputed reference
  log-probs, so training needs no reference model in memory
  (:func:`annotate_reference_logprobs` writes them).

Example:
    >>> pair = best_worst_pair("What is 1 + 1?", ["2", "3", "\\\\boxed{2}"], [0.0, 0.0, 1.0])
    >>> pair.chosen, pair.rejected
    ('\\\\boxed{2}', '2')
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Literal

import torch

from mathgym.errors import DatasetError

Message = dict[str, str]
LogprobReduction = Literal["sum", "mean"]


@dataclass(frozen=True)
class PreferencePair:
    """One preference: ``chosen`` is better than ``rejected`` as a reply to ``prompt``.

    Attributes:
        prompt: Plain text, or a chat as a tuple of messages.
        chosen: The preferred completion.
        rejected: The dispreferred completion.
        ref_chosen_logp: Precomputed reference log-prob of ``chosen`` (or ``None``).
        ref_rejected_logp: Precomputed reference log-prob of ``rejected`` (or ``None``).
        chosen_reward: Reward of ``chosen`` where the pair came from an env (for metrics).
        rejected_reward: Reward of ``rejected`` where the pair came from an env.
    """

    prompt: str | tuple[Message, ...]
    chosen: str
    rejected: str
    ref_chosen_logp: float | None = None
    ref_rejected_logp: float | None = None
    chosen_reward: float | None = None
    rejected_reward: float | None = None


def _completion_text(value: Any, field: str, line: int) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(m, dict) for m in value):
        replies = [str(m.get("content", "")) for m in value if m.get("role") == "assistant"]
        if replies:
            return "".join(replies)
    raise DatasetError(f"line {line}: {field!r} must be a string or a list of messages with an assistant reply.")


def _prompt_value(value: Any, line: int) -> str | tuple[Message, ...]:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(m, dict) and "role" in m and "content" in m for m in value):
        return tuple({"role": str(m["role"]), "content": str(m["content"])} for m in value)
    raise DatasetError(f"line {line}: 'prompt' must be a string or a non-empty list of {{role, content}} messages.")


def load_preference_jsonl(path: str | Path) -> list[PreferencePair]:
    """Read preference pairs from a JSONL file (see the module docstring for the layout)."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"preference file {str(path)!r} does not exist.")
    pairs = []
    with path.open(encoding="utf-8") as f:
        for number, text in enumerate(f, 1):
            if not text.strip():
                continue
            try:
                row = json.loads(text)
            except json.JSONDecodeError as err:
                raise DatasetError(f"{path}:{number}: not valid JSON ({err.msg}).") from None
            missing = [k for k in ("prompt", "chosen", "rejected") if k not in row]
            if missing:
                raise DatasetError(f"{path}:{number}: missing field(s) {', '.join(missing)}.")
            pairs.append(
                PreferencePair(
                    _prompt_value(row["prompt"], number),
                    _completion_text(row["chosen"], "chosen", number),
                    _completion_text(row["rejected"], "rejected", number),
                    row.get("ref_chosen_logp"),
                    row.get("ref_rejected_logp"),
                )
            )
    if not pairs:
        raise DatasetError(f"preference file {str(path)!r} has no pairs.")
    return pairs


def save_preference_jsonl(pairs: Iterable[PreferencePair], path: str | Path) -> None:
    """Write pairs as JSONL (chat prompts as message lists; unset fields omitted)."""
    with Path(path).open("w", encoding="utf-8") as f:
        for pair in pairs:
            row = {k: v for k, v in asdict(pair).items() if v is not None}
            if isinstance(pair.prompt, tuple):
                row["prompt"] = list(pair.prompt)
            f.write(json.dumps(row) + "\n")


def best_worst_pair(
    prompt: str | tuple[Message, ...], completions: Sequence[str], rewards: Sequence[float], min_gap: float = 0.0
) -> PreferencePair | None:
    """Pair the best-rewarded completion of a group with the worst one, if they differ by more than ``min_gap``.

    Ties go to the earliest completion. Returns ``None`` when the rewards do not separate
    (all equal, or a gap ``<= min_gap``), or when the two texts are identical.
    """
    if len(completions) != len(rewards) or len(completions) < 2:
        return None
    best = max(range(len(rewards)), key=lambda i: (rewards[i], -i))
    worst = min(range(len(rewards)), key=lambda i: (rewards[i], i))
    if rewards[best] - rewards[worst] <= min_gap or completions[best] == completions[worst]:
        return None
    return PreferencePair(
        prompt, completions[best], completions[worst], chosen_reward=float(rewards[best]),
        rejected_reward=float(rewards[worst]),
    )


@dataclass
class PreferenceBatch:
    """Tokenised pairs, chosen rows first: rows ``0..N-1`` chosen, ``N..2N-1`` rejected.

    Attributes:
        input_ids: ``(2N, T)`` right-padded prompt + completion tokens.
        attention_mask: ``(2N, T)`` 1 on real tokens.
        completion_mask: ``(2N, T)`` 1 on completion tokens (the ones that are scored).
        ref_logps: ``(2N,)`` precomputed reference log-probs, or ``None`` when any pair lacks them.
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    completion_mask: torch.Tensor
    ref_logps: torch.Tensor | None

    @property
    def num_pairs(self) -> int:
        return self.input_ids.shape[0] // 2


def encode_prompt(policy: Any, prompt: str | tuple[Message, ...]) -> list[int]:
    """Prompt tokens: chat prompts through the chat template, plain text as is."""
    return policy.encode_chat(list(prompt)) if isinstance(prompt, tuple) else policy.encode_text(prompt)


def encode_completion(policy: Any, completion: str) -> list[int]:
    """Completion tokens followed by EOS (the model learns to stop)."""
    return policy.encode_text(completion) + [policy.eos_token_id]


def collate_pairs(policy: Any, pairs: Sequence[PreferencePair], max_length: int = 512) -> PreferenceBatch:
    """Tokenise ``pairs`` into a :class:`PreferenceBatch` on the policy's device.

    Sequences longer than ``max_length`` lose prompt tokens from the left first, then
    completion tokens from the right.
    """
    rows: list[tuple[list[int], list[int]]] = []
    for field in ("chosen", "rejected"):
        for pair in pairs:
            prompt, completion = encode_prompt(policy, pair.prompt), encode_completion(policy, getattr(pair, field))
            completion = completion[:max_length - 1]
            prompt = prompt[max(0, len(prompt) + len(completion) - max_length):]
            rows.append((prompt, completion))
    width = max(len(p) + len(c) for p, c in rows)
    ids = torch.full((len(rows), width), policy.pad_token_id, dtype=torch.long)
    attention = torch.zeros((len(rows), width), dtype=torch.long)
    completion_mask = torch.zeros((len(rows), width))
    for i, (p, c) in enumerate(rows):
        ids[i, : len(p) + len(c)] = torch.tensor(p + c, dtype=torch.long)
        attention[i, : len(p) + len(c)] = 1
        completion_mask[i, len(p) : len(p) + len(c)] = 1.0
    refs = [pair.ref_chosen_logp for pair in pairs] + [pair.ref_rejected_logp for pair in pairs]
    ref_logps = None if any(r is None for r in refs) else torch.tensor(refs, dtype=torch.float32)
    device = policy.device
    return PreferenceBatch(
        ids.to(device), attention.to(device), completion_mask.to(device), None if ref_logps is None else ref_logps.to(device)
    )


def sequence_logprobs(
    policy: Any, batch: PreferenceBatch, reduction: LogprobReduction = "sum"
) -> torch.Tensor:
    """``(2N,)`` log-prob of each row's completion under ``policy.model`` (sum or per-token mean)."""
    logprobs, _ = policy.token_logprobs(batch.input_ids, batch.attention_mask)  # (2N, T)
    total = (logprobs * batch.completion_mask).sum(-1)
    if reduction == "mean":
        return total / batch.completion_mask.sum(-1).clamp(min=1.0)
    return total


@torch.no_grad()
def annotate_reference_logprobs(
    policy: Any, pairs: Sequence[PreferencePair], batch_size: int = 16, max_length: int = 512,
    reduction: LogprobReduction = "sum",
) -> list[PreferencePair]:
    """Copies of ``pairs`` with ``ref_chosen_logp`` / ``ref_rejected_logp`` computed by ``policy``.

    Save them with :func:`save_preference_jsonl` and train later without a reference model.
    The ``reduction`` must match the one used in training.
    """
    was_training = policy.model.training
    policy.model.eval()
    out: list[PreferencePair] = []
    try:
        for start in range(0, len(pairs), batch_size):
            chunk = pairs[start : start + batch_size]
            logps = sequence_logprobs(policy, collate_pairs(policy, chunk, max_length), reduction).tolist()
            n = len(chunk)
            out += [replace(p, ref_chosen_logp=logps[i], ref_rejected_logp=logps[n + i]) for i, p in enumerate(chunk)]
    finally:
        policy.model.train(was_training)
    return out
