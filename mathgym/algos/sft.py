"""Supervised fine-tuning: the loss, demonstrations (JSONL or an env's expert), the
``--algo sft`` trainer, and the cached warm start of the embedded tiny model.

Demonstrations become :class:`~mathgym.algos.batch.Episode` objects whose assistant
tokens are the action tokens, so SFT shares the batch type (and DPO can reuse it).

JSONL formats (one object per line):

- plain: ``{"prompt": "...", "completion": "..."}`` (the prompt becomes a user message)
- chat: ``{"messages": [{"role": ..., "content": ...}, ...]}``: every assistant message is trained
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch

from mathgym.agents.policy import LLMPolicy
from mathgym.algos.batch import Episode, RolloutBatch
from mathgym.algos.trainer import Trainer
from mathgym.config import TrainConfig, option, resolved_env_kwargs
from mathgym.errors import ConfigError, DatasetError

Chat = list[dict[str, str]]


def sft_loss(logprobs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Negative log-likelihood per masked token (token mean).

    Args:
        logprobs: ``(B, T)`` log-prob of each token (from :meth:`LLMPolicy.token_logprobs`).
        mask: ``(B, T)`` 1 on the tokens to learn.

    Example:
        >>> sft_loss(torch.log(torch.tensor([[0.5, 0.25]])), torch.tensor([[1.0, 1.0]]))  # (ln2 + ln4) / 2
        tensor(1.0397)
    """
    return -(logprobs * mask).sum() / mask.sum().clamp(min=1.0)


def encode_demonstration(policy: LLMPolicy, messages: Chat, env_id: str = "", group_id: int = 0) -> Episode:
    """Tokens of a chat; assistant contents (and their end-of-turn token) are action tokens."""
    ep = Episode(env_id, "", group_id)
    rendered = ""
    eos = policy.tokenizer.eos_token or ""
    for j, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        prefix = policy.render_chat(messages[:j], add_generation_prompt=True)
        if not prefix.startswith(rendered):
            raise DatasetError("The chat template rewrites earlier turns; cannot build token-faithful demonstrations.")
        ep.extend(policy.encode_text(prefix[len(rendered) :]))
        action = policy.encode_text(message["content"]) + ([policy.eos_token_id] if eos else [])
        ep.extend(action, action_step=len(ep.completions), logprobs=[0.0] * len(action))
        ep.completions.append(message["content"])
        rendered = prefix + message["content"] + eos
    if not ep.completions:
        raise DatasetError("A demonstration has no assistant message to learn.")
    return ep


def load_demonstrations(path: str | Path) -> list[Chat]:
    """Read plain or chat JSONL demonstrations (see the module docstring)."""
    chats = []
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as err:
        raise DatasetError(f"Cannot read demonstrations {path}: {err}") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise DatasetError(f"{path}:{n}: not JSON ({err})") from None
        if isinstance(row, dict) and isinstance(row.get("messages"), list):
            chats.append([{"role": str(m["role"]), "content": str(m["content"])} for m in row["messages"]])
        elif isinstance(row, dict) and "prompt" in row and "completion" in row:
            chats.append([{"role": "user", "content": str(row["prompt"])}, {"role": "assistant", "content": str(row["completion"])}])
        else:
            raise DatasetError(f"{path}:{n}: expected {{'prompt', 'completion'}} or {{'messages': [...]}}")
    if not chats:
        raise DatasetError(f"{path} holds no demonstrations.")
    return chats


def env_demonstrations(env_id: str, env_kwargs: Mapping[str, Any], num: int, seed: int = 0) -> list[Chat]:
    """Chats of the env's expert (``env.unwrapped.expert_action()``) on tasks ``seed .. seed + num - 1``."""
    env = gym.make(env_id, **dict(env_kwargs))
    expert = getattr(env.unwrapped, "expert_action", None)
    if expert is None:
        raise ConfigError(f"{env_id} has no expert_action(); give SFT a JSONL file with --data.")
    chats = []
    try:
        for i in range(num):
            _, info = env.reset(seed=seed + i)
            done = False
            if env.unwrapped.max_turns == 1:  # single turn: the transcript is prompt + action, no need to score it
                action = expert()
                if action is None:
                    raise ConfigError(f"{env_id}'s expert has no action for this task; use --data.")
                chats.append([dict(m) for m in info["messages"]] + [{"role": "assistant", "content": action}])
                continue
            while not done:
                action = expert()
                if action is None:
                    raise ConfigError(f"{env_id}'s expert has no action for this task; use --data.")
                _, _, terminated, truncated, info = env.step(action)
                done = terminated or truncated
            chats.append([dict(m) for m in info["messages"]])
    finally:
        env.close()
    return chats


@dataclass
class SFTConfig(TrainConfig):
    """SFT options (on top of :class:`~mathgym.config.TrainConfig`)."""

    data: str = option("", "JSONL demonstrations (plain or chat); empty: the env's expert on train tasks")
    num_demonstrations: int = option(20_000, "demonstrations drawn from the env's expert when data is empty")
    batch_size: int = option(64, "demonstrations per optimizer step")

    def validate(self) -> None:
        super().validate()
        if self.batch_size < 1 or self.num_demonstrations < 1:
            raise ConfigError("batch_size and num_demonstrations must be at least 1.")


class SFTTrainer(Trainer):
    """Supervised fine-tuning in the shared loop (``mathgym train --algo sft``)."""

    algo_name = "sft"
    config: SFTConfig

    def setup(self) -> None:
        cfg = self.config
        chats = load_demonstrations(cfg.data) if cfg.data else env_demonstrations(cfg.env, resolved_env_kwargs(cfg), cfg.num_demonstrations, cfg.seed)
        self.demos = [encode_demonstration(self.policy, c, cfg.env, i) for i, c in enumerate(chats)]
        self.order = torch.randperm(len(self.demos), generator=torch.Generator().manual_seed(cfg.seed)).tolist()

    def make_batch(self, step: int) -> RolloutBatch:
        n = self.config.batch_size
        picks = [self.order[(step * n + i) % len(self.order)] for i in range(n)]
        return RolloutBatch.from_episodes([self.demos[i] for i in picks], self.policy.pad_token_id)

    def update(self, batch: RolloutBatch) -> dict[str, float]:
        return {"loss/sft": sft_update(self, batch)}


def sft_update(trainer: Trainer, batch: RolloutBatch) -> float:
    """One optimizer step of SFT on ``batch`` (micro-batched, globally token-normalised)."""
    batch = batch.to(trainer.policy.device)
    trainer.policy.model.train()
    mask = batch.action_mask
    total_tokens = float(mask.sum().clamp(min=1.0))
    loss_sum = 0.0
    for idx in trainer.micro_batches(batch):
        mb = batch.select(idx)
        logprobs, _ = trainer.policy.token_logprobs(mb.input_ids, mb.attention_mask)
        loss = sft_loss(logprobs, mb.action_mask) * float(mb.action_mask.sum()) / total_tokens
        trainer.backward(loss)
        loss_sum += float(loss.detach())
    trainer.optimizer_step()
    return loss_sum


def tiny_warm_start(env_id: str, env_kwargs: Mapping[str, Any], steps: int, seed: int = 0) -> Path:
    """The embedded tiny model after ``steps`` SFT steps on ``env_id``'s expert demonstrations.

    Cached under ``cache_dir()/warm_start/<hash of the settings>``: a second run reuses it.
    ``steps == 0`` returns the untrained model.
    """
    from mathgym.agents.tiny import TINY_MODEL_VERSION, cache_dir, tiny_model_path

    base = tiny_model_path(seed)
    if steps == 0:
        return base
    probe = gym.make(env_id, **dict(env_kwargs))
    has_expert = hasattr(probe.unwrapped, "expert_action")
    probe.close()
    if not has_expert:
        print(f"mathgym: {env_id} has no expert_action(); the tiny model starts untrained (no warm start)")
        return base
    settings = {"v": TINY_MODEL_VERSION, "env": env_id, "kwargs": dict(env_kwargs), "steps": steps, "seed": seed, "recipe": 2}
    key = hashlib.sha1(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:12]
    target = cache_dir() / "warm_start" / f"{env_id}-sft{steps}-{key}"
    if (target / "config.json").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".tmp-"))
    print(f"mathgym: warm start of the tiny model ({steps} SFT steps on {env_id}), cached in {target}")
    config = SFTConfig(
        env=env_id, env_kwargs=dict(env_kwargs), model=str(base), steps=steps, learning_rate=3e-3, warmup_steps=20,
        seed=seed, batch_size=64, num_demonstrations=4096, eval_tasks=0, save_every=0, progress=False,
        run_dir=str(tmp / "run"), lr_schedule="constant",
    )
    trainer = SFTTrainer(config)
    for step in range(steps):
        sft_update(trainer, trainer.make_batch(step))
    trainer.policy.save_pretrained(tmp)
    shutil.rmtree(tmp / "run", ignore_errors=True)
    try:
        os.replace(tmp, target)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def demonstrations_batch(policy: LLMPolicy, chats: Sequence[Chat]) -> RolloutBatch:
    """Collate chats into a batch whose action mask covers the assistant tokens."""
    return RolloutBatch.from_episodes([encode_demonstration(policy, c, group_id=i) for i, c in enumerate(chats)], policy.pad_token_id)
