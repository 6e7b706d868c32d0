"""Preference pairs for DPO: JSONL files, online best-vs-worst pairs, and tokenised batches.

A JSONL line is ``{"prompt": ..., "chosen": ..., "rejected": ...}`` where

* ``prompt`` is plain text (used as is) or a chat (a list of ``{"role", "content"}``
  messages, rendered with the model's chat template and its generation prompt);
* ``chosen`` / ``rejected`` are the completions: a string, or a list of messages whose
  assistant contents are joined (the common "conversation" layout);
* optional ``ref_chosen_logp`` / ``ref_rejected_logp`` hold precomputed reference
  log-probs, so training needs no reference model in memory
  (:func:`annotate_reference_logprobs` writes them);
* optional ``margin`` says how much better ``chosen`` is (reward-model training reads it).

Example:
    >>> pair = best_worst_pair("What is 1 + 1?", ["2", "3", "\\\\boxed{2}"], [0.0, 0.0, 1.0])
    >>> pair.chosen, pair.rejected
    ('\\\\boxed{2}', '2')
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import torch

from mathgym.agents.chat_format import ChatFormat
from mathgym.algos.batch import Episode, RolloutBatch
from mathgym.algos.choices import LogprobReduction
from mathgym.envs.math.data import jsonl_rows, message_text
from mathgym.errors import DatasetError
from mathgym.options import pick

Message = dict[str, str]


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
        margin: How much better ``chosen`` is (the ``margin`` of a reward model's loss; ``None``: 0).
    """

    prompt: str | tuple[Message, ...]
    chosen: str
    rejected: str
    ref_chosen_logp: float | None = None
    ref_rejected_logp: float | None = None
    chosen_reward: float | None = None
    rejected_reward: float | None = None
    margin: float | None = None


def _margin(value: Any, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise DatasetError(f"{where}: 'margin' must be a number.")
    return float(value)


def _completion_text(value: Any, field: str, where: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(m, dict) for m in value):
        replies = [message_text(m.get("content"), where) for m in value if m.get("role") == "assistant"]
        if replies:
            return "".join(replies)
    raise DatasetError(f"{where}: {field!r} must be a string or a list of messages with an assistant reply.")


def _prompt_value(value: Any, where: str) -> str | tuple[Message, ...]:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(m, dict) and "role" in m and "content" in m for m in value):
        return tuple({"role": str(m["role"]), "content": message_text(m["content"], where)} for m in value)
    raise DatasetError(f"{where}: 'prompt' must be a string or a non-empty list of {{role, content}} messages.")


def load_preference_jsonl(path: str | Path) -> list[PreferencePair]:
    """Read preference pairs from a JSONL file, or a JSON list (see the module docstring for the
    layout). The prompt may also be ``instruction`` or ``question``, or be left implicit, as
    Anthropic's HH-RLHF and TRL's implicit-prompt sets leave it: ``chosen`` and ``rejected``
    then both hold the whole exchange, and what they share is the prompt (:func:`split_implicit_prompt`)."""
    pairs = []
    for where, row in jsonl_rows(path, "preference file", json_list=True):
        if not isinstance(row, dict):
            raise DatasetError(f"{where}: a pair is a JSON object, not {type(row).__name__}.")
        key = next((k for k in ("prompt", "instruction", "question") if k in row), None)
        missing = [k for k in ("chosen", "rejected") if k not in row]
        if missing:
            raise DatasetError(f"{where}: missing field(s) {', '.join(missing)}.")
        if key is None:
            prompt, chosen, rejected = split_implicit_prompt(row["chosen"], row["rejected"], where)
        else:
            prompt = _prompt_value(row[key], where)
            chosen, rejected = _completion_text(row["chosen"], "chosen", where), _completion_text(row["rejected"], "rejected", where)
        pairs.append(PreferencePair(prompt, chosen, rejected, row.get("ref_chosen_logp"), row.get("ref_rejected_logp"),
                                    margin=_margin(row.get("margin"), where)))
    if not pairs:
        raise DatasetError(f"preference file {str(path)!r} has no pairs.")
    return pairs


def split_implicit_prompt(chosen: Any, rejected: Any, where: str = "") -> tuple[str | tuple[Message, ...], str, str]:
    """A pair whose prompt is left implicit, as ``(prompt, chosen, rejected)``.

    Two chats: the prompt is the messages both begin with, up to the first assistant message
    where they part (at least one user message); each completion is the assistant text after
    it. Two texts (HH-RLHF's ``"\\n\\nHuman: ...\\n\\nAssistant: ..."``): the prompt is the text
    both begin with, cut back to the last whitespace, so that no word is split. (What both
    share adds the same log-probability to each side, so where exactly it is cut does not
    change a DPO or reward-model loss.)

    Example:
        >>> split_implicit_prompt("Human: hi Assistant: hello there", "Human: hi Assistant: go away")
        ('Human: hi Assistant: ', 'hello there', 'go away')

    Raises:
        DatasetError: The two are not both chats or both texts, or share no prompt.
    """
    at = f"{where}: " if where else ""
    if isinstance(chosen, str) and isinstance(rejected, str):
        shared = 0
        for a, b in zip(chosen, rejected):
            if a != b:
                break
            shared += 1
        if shared == len(chosen) == len(rejected):
            raise DatasetError(f"{at}'chosen' and 'rejected' are the same text.")
        cut = max(chosen.rfind(" ", 0, shared), chosen.rfind("\n", 0, shared)) + 1
        if cut <= 0:
            raise DatasetError(f"{at}no 'prompt' field, and 'chosen' and 'rejected' begin with no shared prompt.")
        return chosen[:cut], chosen[cut:], rejected[cut:]
    if not all(isinstance(v, list) and v and all(isinstance(m, dict) and "role" in m for m in v) for v in (chosen, rejected)):
        raise DatasetError(f"{at}no 'prompt' field: 'chosen' and 'rejected' must then both be whole chats or both texts.")
    shared = 0
    while shared < min(len(chosen), len(rejected)) and chosen[shared] == rejected[shared]:
        shared += 1
    while shared and chosen[shared - 1].get("role") == "assistant":  # a shared reply that both continue stays with them
        shared -= 1
    prompt = tuple({"role": str(m["role"]), "content": message_text(m.get("content"), where or "a pair")} for m in chosen[:shared])
    if not any(m["role"] == "user" for m in prompt):
        raise DatasetError(f"{at}no 'prompt' field, and 'chosen' and 'rejected' share no user message to be it.")
    completions = ["".join(message_text(m.get("content"), where or "a pair") for m in side[shared:] if m.get("role") == "assistant") for side in (chosen, rejected)]
    if not all(completions):
        raise DatasetError(f"{at}'chosen' and 'rejected' must each end with an assistant reply after what they share.")
    return prompt, completions[0], completions[1]


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


def encode_prompt(chat: ChatFormat, prompt: str | tuple[Message, ...]) -> list[int]:
    """Prompt tokens in the chat format ``chat``: chat prompts through the chat template, plain text as is."""
    return chat.prompt_ids(list(prompt)) if isinstance(prompt, tuple) else chat.encode(prompt)


def pair_episodes(chat: ChatFormat, pair: PreferencePair, index: int, max_length: int = 512) -> tuple[Episode, Episode]:
    """The pair, in the chat format ``chat`` (a policy's ``policy.chat``), as two one-step episodes of
    group ``index``: chosen (reward 1) and rejected (reward 0).

    Completions of chat prompts are written as the model writes an answer (the head the template
    gives it, gpt-oss's channel header; :meth:`ChatFormat.answer_ids <mathgym.agents.chat_format.ChatFormat.answer_ids>`);
    all end with the chat template's end-of-turn token (EOS without a template). Sequences longer
    than ``max_length`` lose prompt tokens from the left first, then completion tokens from the right.
    """
    prompt = encode_prompt(chat, pair.prompt)
    out = []
    for text, reward in ((pair.chosen, 1.0), (pair.rejected, 0.0)):
        answer = chat.answer_ids(list(pair.prompt), text) if isinstance(pair.prompt, tuple) else chat.encode(text) + [chat.end_of_turn_id]
        completion = answer[: max_length - 1]
        kept = prompt[max(0, len(prompt) + len(completion) - max_length) :]
        episode = Episode("preferences", f"pair-{index}", group_id=index, step_rewards=[reward], status="done")
        episode.extend(kept)
        episode.extend(completion, action_step=0, logprobs=[0.0] * len(completion))
        episode.completions.append(text)
        out.append(episode)
    return out[0], out[1]


def pairs_batch(chat: ChatFormat, pairs: Sequence[PreferencePair], indices: Sequence[int], max_length: int = 512) -> RolloutBatch:
    """A :class:`RolloutBatch` of ``pairs[i]`` for ``i`` in ``indices``, in the chat format ``chat``: chosen and
    rejected of each pair share a group, so the best-vs-worst pairing of online DPO recovers exactly these pairs."""
    episodes = [e for i in indices for e in pair_episodes(chat, pairs[i], int(i), max_length)]
    return RolloutBatch.from_episodes(episodes, chat.pad_token_id)


def best_worst_indices(
    rewards: torch.Tensor, group_ids: torch.Tensor, valid: torch.Tensor | None = None, min_gap: float = 0.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per group, the index of the best- and of the worst-rewarded episode, where they differ by more than ``min_gap``.

    Args:
        rewards: ``(B,)`` episode rewards.
        group_ids: ``(B,)`` group of each episode.
        valid: ``(B,)`` bool; invalid episodes (infrastructure failures) are never paired.
        min_gap: Smallest reward difference that makes a pair.

    Returns:
        ``(chosen, rejected)``: ``(P,)`` long tensors of episode indices, one entry per pair,
        in group order. Ties go to the earliest episode.
    """
    valid = torch.ones_like(rewards, dtype=torch.bool) if valid is None else valid
    chosen, rejected = [], []
    for group in torch.unique(group_ids).tolist():
        members = [i for i in torch.nonzero(group_ids == group).flatten().tolist() if bool(valid[i])]
        if len(members) < 2:
            continue
        best = max(members, key=lambda i: (float(rewards[i]), -i))
        worst = min(members, key=lambda i: (float(rewards[i]), i))
        if float(rewards[best]) - float(rewards[worst]) > min_gap:
            chosen.append(best)
            rejected.append(worst)
    return torch.tensor(chosen, dtype=torch.long), torch.tensor(rejected, dtype=torch.long)


#: ``logprob_reduction`` choices -> ``(summed log-probs (B,), mask (B, T)) -> (B,)``.
SEQUENCE_REDUCTIONS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "sum": lambda total, mask: total,
    "mean": lambda total, mask: total / mask.sum(-1).clamp(min=1.0),
}


def sequence_logprobs(token_logprobs: torch.Tensor, mask: torch.Tensor, reduction: LogprobReduction = "sum") -> torch.Tensor:
    """``(B, T)`` token log-probs -> ``(B,)`` log-prob of each row's masked tokens (sum or per-token mean)."""
    return pick(SEQUENCE_REDUCTIONS, "logprob_reduction", reduction)((token_logprobs * mask).sum(-1), mask)


@torch.no_grad()
def annotate_reference_logprobs(
    policy: Any, pairs: Sequence[PreferencePair], batch_size: int = 16, max_length: int = 512,
    reduction: LogprobReduction = "sum",
) -> list[PreferencePair]:
    """Copies of ``pairs`` with ``ref_chosen_logp`` / ``ref_rejected_logp`` computed by ``policy``.

    Save them with :func:`save_preference_jsonl` and train later with ``reference=precomputed``
    (no reference model in memory). ``reduction`` must match the training run's.
    """
    was_training = policy.model.training
    policy.model.eval()
    out: list[PreferencePair] = []
    try:
        for start in range(0, len(pairs), batch_size):
            indices = range(start, min(start + batch_size, len(pairs)))
            batch = pairs_batch(policy.chat, pairs, indices, max_length).to(policy.device)
            token_logps = policy.forward(batch.input_ids, batch.attention_mask, positions=batch.action_mask).logprobs  # as training reads them
            logps = sequence_logprobs(token_logps, batch.action_mask, reduction)
            logps = logps.tolist()
            out += [replace(pairs[i], ref_chosen_logp=logps[2 * k], ref_rejected_logp=logps[2 * k + 1]) for k, i in enumerate(indices)]
    finally:
        policy.model.train(was_training)
    return out


def _corrupt_answer(text: str, answer: str, rng: Any) -> str | None:
    """``text`` with every standalone occurrence of the numeric ``answer`` replaced by a near miss."""
    try:
        value = int(answer)
    except ValueError:
        return None
    wrong = value
    while wrong == value:  # a wrong number of the same order of magnitude
        wrong = int(rng.integers(0, 2 * max(abs(value), 10) + 1)) * (1 if value >= 0 else -1)
    pattern = re.compile(rf"(?<![\d.]){re.escape(answer)}(?!\.?\d)")
    return pattern.sub(str(wrong), text) if pattern.search(text) else None


def expert_vs_corrupted_pairs(env_id: str, env_kwargs: dict[str, Any], num_pairs: int, seed: int = 0) -> list[PreferencePair]:
    """Pairs of (the env's worked solution, the same solution with a wrong final number), both scored by the env.

    Works with envs whose tasks have an integer answer and an ``expert_action()`` (e.g.
    MathReason-v0's generator). A pair is kept only when the env rewards the chosen
    completion strictly more than the rejected one. Use different ``split`` values in
    ``env_kwargs`` for training and held-out pairs: the generator's splits share no problem.
    """
    import gymnasium as gym
    import numpy as np

    env = gym.make(env_id, **env_kwargs)
    rng = np.random.default_rng(seed)
    pairs: list[PreferencePair] = []
    try:
        for i in range(num_pairs * 4):
            if len(pairs) == num_pairs:
                break
            _, info = env.reset(seed=seed * 1_000_003 + i)
            base = env.unwrapped
            chosen = base.expert_action() if hasattr(base, "expert_action") else None
            rejected = _corrupt_answer(chosen, str(base.task.answer), rng) if chosen else None
            if rejected is None:
                continue
            rewards = []
            for text in (chosen, rejected):
                env.reset(seed=seed * 1_000_003 + i)
                rewards.append(float(env.step(text)[1]))
            if rewards[0] > rewards[1]:
                messages = tuple({"role": m["role"], "content": m["content"]} for m in info["messages"])
                pairs.append(PreferencePair(messages, chosen, rejected, chosen_reward=rewards[0], rejected_reward=rewards[1]))
    finally:
        env.close()
    return pairs


def expert_vs_sampled_pairs(
    policy: Any, env_id: str, env_kwargs: dict[str, Any], num_pairs: int, seed: int = 0, max_new_tokens: int = 32,
    temperature: float = 1.0, batch_size: int = 64,
) -> list[PreferencePair]:
    """Pairs of (the env's worked solution, a completion sampled from ``policy`` that the env scores lower).

    The negatives are the model's own mistakes, as in on-policy preference data. Tasks whose
    sample is as good as the expert's are skipped.
    """
    import gymnasium as gym

    from mathgym.agents.policy import SamplingParams

    env = gym.make(env_id, **env_kwargs)
    generator = torch.Generator().manual_seed(seed)
    params = SamplingParams(temperature=temperature, max_new_tokens=max_new_tokens)
    pairs: list[PreferencePair] = []
    task = 0
    try:
        while len(pairs) < num_pairs and task < num_pairs * 20:
            tasks = []
            for _ in range(batch_size):
                _, info = env.reset(seed=seed * 1_000_003 + task)
                expert = env.unwrapped.expert_action() if hasattr(env.unwrapped, "expert_action") else None
                if expert:
                    tasks.append((seed * 1_000_003 + task, tuple(dict(m) for m in info["messages"]), expert))
                task += 1
            samples = policy.generate([policy.chat.prompt_ids(list(t[1])) for t in tasks], params, generator)
            for (task_seed, messages, expert), sample in zip(tasks, samples):
                rewards = []
                for text in (expert, sample.text):
                    env.reset(seed=task_seed)
                    rewards.append(float(env.step(text)[1]))
                if rewards[0] > rewards[1] and len(pairs) < num_pairs:
                    pairs.append(PreferencePair(messages, expert, sample.text, chosen_reward=rewards[0], rejected_reward=rewards[1]))
    finally:
        env.close()
    return pairs
