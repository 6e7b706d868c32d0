"""Supervised fine-tuning: the loss, demonstrations (JSONL or an env's expert) and the
``--algo sft`` trainer (the tiny model's warm start runs it: :mod:`mathgym.algos.warm_start`).

Demonstrations become :class:`~mathgym.algos.batch.Episode` objects whose assistant
tokens are the action tokens, so SFT shares the batch type (and DPO can reuse it).

JSONL formats (one object per line; a JSON list too):

- plain: ``{"prompt": "...", "completion": "..."}`` (the prompt becomes a user message)
- chat: ``{"messages": [{"role": ..., "content": ...}, ...]}``: every assistant message is trained
- the layouts SFT data sets ship in: ShareGPT's ``conversations``, TRL's conversational
  prompt-completion, Alpaca's ``instruction``/``input``/``output``, a question and its answer
  (:func:`load_demonstrations`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch

from mathgym.agents.chat import REASONING_FIELDS, turn_suffix
from mathgym.agents.chat_format import ChatFormat
from mathgym.algos.batch import Episode, RolloutBatch
from mathgym.algos.configs import SFTConfig
from mathgym.algos.algorithm import Algorithm
from mathgym.algos.distributed import Distributed
from mathgym.algos.sources import BatchSource
from mathgym.algos.trainer import Trainer
from mathgym.algos.update import OptimizerStep, Plan
from mathgym.envs.math.data import SHAREGPT_ROLES, jsonl_rows, message_text
from mathgym.errors import ConfigError, DatasetError

__all__ = [
    "NoDemonstrations", "SFTConfig", "SFTTrainer", "demonstrations_batch", "encode_demonstration", "env_demonstrations", "keep_last_tokens",
    "load_demonstrations", "sft_loss",
]

Chat = list[dict[str, Any]]


def sft_loss(logprobs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Negative log-likelihood per masked token (token mean).

    Args:
        logprobs: ``(B, T)`` log-prob of each token (from :meth:`LLMPolicy.forward`).
        mask: ``(B, T)`` 1 on the tokens to learn.

    Example:
        >>> sft_loss(torch.log(torch.tensor([[0.5, 0.25]])), torch.tensor([[1.0, 1.0]]))  # (ln2 + ln4) / 2
        tensor(1.0397)
    """
    return -(logprobs * mask).sum() / mask.sum().clamp(min=1.0)


def encode_demonstration(chat: ChatFormat, messages: Chat, env_id: str = "", group_id: int = 0) -> Episode:
    """Tokens of a chat in the chat format ``chat`` (a policy's ``policy.chat``), built as a rollout
    builds an episode: the prompt up to the first assistant turn; each assistant content as the
    model writes it (with the head the template gives a closing turn, gpt-oss's channel header,
    Qwen3's think block; :meth:`ChatFormat.answer_ids <mathgym.agents.chat_format.ChatFormat.answer_ids>`)
    and the template's end-of-turn token as action tokens; between them the text the template
    inserts after a turn (:func:`~mathgym.agents.chat.turn_suffix`)."""
    ep = Episode(env_id, "", group_id)
    eot_id = chat.end_of_turn_id
    closes = bool(chat.tokenizer.eos_token)  # a tokenizer without EOS: turns end with no token of their own
    rendered: dict[tuple[str, bool], str] = {}

    def render(history: Sequence[dict[str, str]], add_generation_prompt: bool) -> str:
        """The template's rendering, once per chat: a turn's longer chat is the next turn's history."""
        key = (json.dumps(list(history), sort_keys=True), add_generation_prompt)
        if key not in rendered:
            rendered[key] = chat.render(history, add_generation_prompt)
        return rendered[key]

    turns = [j for j, message in enumerate(messages) if message["role"] == "assistant"]
    if not turns:
        raise DatasetError("A demonstration has no assistant message to learn.")
    ep.extend(chat.encode(chat.render(messages[: turns[0]], add_generation_prompt=True)))
    for n, j in enumerate(turns):
        if n:
            last = turns[n - 1]
            try:
                between = turn_suffix(render, messages[:last], "", chat.template_name, following=messages[last + 1 : j])
            except ConfigError as err:
                raise DatasetError(f"cannot build token-faithful demonstrations: {err}") from None
            ids = chat.encode(between)
            ep.extend(chat.after_action(ids, eot_id) if closes else ids)  # the action's last token closed the turn
        content = messages[j]["content"]
        action = chat.answer_ids(messages[:j], messages[j], render)
        if not closes:  # a tokenizer without EOS: turns end with no token of their own
            action = action[:-1]
        ep.extend(action, action_step=n, logprobs=[0.0] * len(action))
        ep.completions.append(content)
    return ep


#: Pairs of fields that hold a question and its demonstrated answer, as data sets name them
#: (MetaMathQA's ``query``/``response``, MATH's ``problem``/``solution``, GSM8K's ``question``/``answer``).
ANSWER_PAIRS = (("query", "response"), ("problem", "solution"), ("question", "answer"))


def load_demonstrations(path: str | Path) -> list[Chat]:
    """Read demonstrations from JSONL (or a JSON list), each row in one of the layouts SFT data
    sets ship: ``messages`` (``{"role", "content"}``), ShareGPT's ``conversations`` (``{"from",
    "value"}``), ``prompt`` + ``completion`` (texts, or TRL's conversational lists of messages),
    Alpaca's ``instruction`` (+ ``input``) + ``output``, or a question and its answer
    (``query``/``response``, ``problem``/``solution``, ``question``/``answer``). Every assistant
    message is trained.

    Raises:
        DatasetError: The file cannot be read, or a row fits no layout or has no assistant
            message (naming its line).
    """
    chats = read_chats(path, "demonstrations")
    for where, chat in chats:
        if not any(m["role"] == "assistant" for m in chat):
            raise DatasetError(f"{where}: the demonstration holds no assistant message to train on")
    return [chat for _, chat in chats]


def read_chats(path: str | Path, what: str, prompts: bool = False) -> list[tuple[str, Chat]]:
    """The rows of a JSONL (or JSON list) file as chats, with where each stands, in the layouts
    :func:`load_demonstrations` reads; with ``prompts``, a row may also be a prompt alone (a
    ``prompt``, ``instruction`` or question without its answer), a chat ending with the user.

    Raises:
        DatasetError: The file cannot be read, holds no row, or a row fits no layout.
    """
    chats = [(where, _chat_of(row, where, prompts)) for where, row in jsonl_rows(path, what, json_list=True)]
    if not chats:
        raise DatasetError(f"{path} holds no rows.")
    return chats


def _chat_of(row: Any, where: str, prompts: bool) -> Chat:
    """One row as a chat, its layout detected (see :func:`read_chats`)."""
    if not isinstance(row, dict):
        raise DatasetError(f"{where}: a row is a JSON object, not {type(row).__name__}")
    for key in ("messages", "conversations"):
        if isinstance(row.get(key), list) and row[key]:
            return _messages(row[key], where)
    if "prompt" in row and ("completion" in row or "response" in row or prompts):
        prompt, completion = row["prompt"], row.get("completion", row.get("response"))
        asked = _messages(prompt, where) if isinstance(prompt, list) else [{"role": "user", "content": prompt}] if isinstance(prompt, str) else None
        if asked is None:
            raise DatasetError(f"{where}: 'prompt' must be a text or a list of messages")
        if completion is None and prompts:
            return asked
        if isinstance(prompt, list) and isinstance(completion, list):  # TRL's conversational prompt-completion
            return asked + _messages(completion, where)
        if isinstance(prompt, str) and isinstance(completion, str):
            return asked + [{"role": "assistant", "content": completion}]
        raise DatasetError(f"{where}: 'prompt' and 'completion' must both be texts or both lists of messages")
    if isinstance(row.get("instruction"), str) and (isinstance(row.get("output"), str) or prompts):  # Alpaca
        extra = row.get("input")
        request = row["instruction"] + (f"\n\n{extra}" if isinstance(extra, str) and extra.strip() else "")
        system = [{"role": "system", "content": row["system"]}] if isinstance(row.get("system"), str) and row["system"].strip() else []
        answer = [{"role": "assistant", "content": row["output"]}] if isinstance(row.get("output"), str) else []
        return [*system, {"role": "user", "content": request}, *answer]
    for question, answer in ANSWER_PAIRS:
        if isinstance(row.get(question), str) and (isinstance(row.get(answer), str) or prompts):
            reply = [{"role": "assistant", "content": row[answer]}] if isinstance(row.get(answer), str) else []
            return [{"role": "user", "content": row[question]}, *reply]
    raise DatasetError(
        f"{where}: expected messages, conversations (ShareGPT), prompt + completion, instruction + output (Alpaca), "
        f"or query + response / problem + solution / question + answer{' (or a prompt alone)' if prompts else ''}; "
        f"the row has {sorted(map(str, row))[:8]}"
    )


#: Fields of a message kept as they are, for the chat template to render (a tool call's id and
#: name on a tool result).
KEPT_KEYS = ("tool_calls", "tool_call_id", "name")


def _messages(turns: list, where: str) -> Chat:
    """``{"role", "content"}`` messages, or ShareGPT's ``{"from", "value"}`` turns, as a chat.

    Content given as OpenAI's list of parts is joined into text; an assistant turn's reasoning
    (any of :data:`~mathgym.agents.chat.REASONING_FIELDS`, kept as ``reasoning_content``) and tool calls, and a tool result's id and name, are kept for
    :func:`encode_demonstration` (the chat template renders them; nothing is dropped)."""
    chat = []
    for turn in turns:
        if not isinstance(turn, dict):
            raise DatasetError(f"{where}: a message is a JSON object, not {type(turn).__name__}")
        if "role" in turn:
            role, content = turn.get("role"), turn.get("content")
        elif "from" in turn:
            role, content = SHAREGPT_ROLES.get(str(turn.get("from")).lower()), turn.get("value")
            if role is None:
                raise DatasetError(f"{where}: a turn from {turn.get('from')!r}; known speakers: {', '.join(SHAREGPT_ROLES)}")
        else:
            raise DatasetError(f"{where}: a message has neither 'role' nor 'from'")
        if not isinstance(role, str):
            raise DatasetError(f"{where}: a message's role must be text")
        message: dict[str, Any] = {"role": role, "content": message_text(content, where)}
        for key in REASONING_FIELDS:
            if isinstance(turn.get(key), str) and turn[key].strip():
                message["reasoning_content"] = turn[key]
                break
        for key in KEPT_KEYS:
            if turn.get(key) not in (None, "", []):
                message[key] = turn[key]
        if "tool_calls" in message and not isinstance(message["tool_calls"], list):
            raise DatasetError(f"{where}: a message's tool_calls must be a list")
        chat.append(message)
    return chat


class NoDemonstrations(ConfigError):
    """The env's expert has no action for any task tried (no reference solutions in its data)."""


def env_demonstrations(env_id: str, env_kwargs: Mapping[str, Any], num: int, seed: int = 0) -> list[Chat]:
    """Chats of the env's expert (``env.unwrapped.expert_action()``) on tasks from seed ``seed`` on.

    A task the expert has no action for (a data set record without a reference solution) is
    left out and the next seed taken, up to ``4 * num + 16`` tasks in all.

    Raises:
        ConfigError: The env has no expert.
        NoDemonstrations: Its expert had an action for none of the tasks tried.
    """
    env = gym.make(env_id, **dict(env_kwargs))
    expert = getattr(env.unwrapped, "expert_action", None)
    if expert is None:
        raise ConfigError(f"{env_id} has no expert_action(); give SFT a JSONL file with --data.")
    chats: list[Chat] = []
    tried = 0
    try:
        while len(chats) < num and tried < 4 * num + 16:
            _, info = env.reset(seed=seed + tried)
            tried += 1
            if env.unwrapped.max_turns == 1:  # single turn: the transcript is prompt + action, no need to score it
                action = expert()
                if action is not None:
                    chats.append([dict(m) for m in info["messages"]] + [{"role": "assistant", "content": action}])
                continue
            done = False
            while not done and (action := expert()) is not None:
                _, _, terminated, truncated, info = env.step(action)
                done = terminated or truncated
            if done:
                chats.append([dict(m) for m in info["messages"]])
    finally:
        env.close()
    if not chats:
        raise NoDemonstrations(
            f"{env_id}'s expert has no action for any of the {tried} tasks tried (its data holds no reference "
            "solutions?): give demonstrations in a JSONL file with --data."
        )
    return chats


class Demonstrations(BatchSource):
    """SFT's batches: ``batch_size`` demonstrations a step (this rank's share), in the order the seed draws."""

    def __init__(self, demos: Sequence[Episode], config: SFTConfig, dist: Distributed, pad_token_id: int):
        super().__init__()
        self.config, self.dist, self.pad_token_id = config, dist, pad_token_id
        self.use_demonstrations(demos)

    def use_demonstrations(self, demos: Sequence[Episode]) -> None:
        """Train on ``demos`` (in the order the seed draws): the warm start calls it again with the
        demonstrations it keeps (:func:`mathgym.algos.warm_start.leave_out_long_demonstrations`)."""
        self.demos = list(demos)
        self.order = torch.randperm(len(self.demos), generator=torch.Generator().manual_seed(self.config.seed)).tolist()

    def make_batch(self, step: int) -> tuple[RolloutBatch, dict[str, float]]:
        n = self.config.batch_size
        picks = self.dist.shard([self.order[(step * n + i) % len(self.order)] for i in range(n)])
        return RolloutBatch.from_episodes([self.demos[i] for i in picks], self.pad_token_id), {}


class SFT(Algorithm):
    """SFT's plan (one optimizer step over the batch) and its loss (the demonstrations' NLL)."""

    name = "sft"
    config: SFTConfig

    def plan(self, batch: RolloutBatch) -> Plan:
        """One optimizer step over every demonstration, normalised by the tokens of every rank's share."""
        total_tokens = max(self.dist.sum(float(batch.action_mask.sum())), 1.0)
        return Plan([OptimizerStep(torch.arange(len(batch)), total_tokens)])

    def loss(self, batch: RolloutBatch, items: torch.Tensor, step: OptimizerStep) -> tuple[torch.Tensor, dict[str, float]]:
        """The mean NLL of the micro-batch's tokens, as their share of the step's tokens."""
        mb = batch.select(items)
        logprobs = self.policy.forward(mb.input_ids, mb.attention_mask, positions=mb.action_mask).logprobs
        loss = sft_loss(logprobs, mb.action_mask) * float(mb.action_mask.sum()) / step.context
        return loss, {"loss/sft": float(loss.detach())}


class SFTTrainer(Trainer):
    """Supervised fine-tuning in the shared step (``mathgym train --algo sft``): :class:`Demonstrations`, :class:`SFT`."""

    algo_name = "sft"
    algorithm_class = SFT
    progress_metric = "loss/sft"
    config: SFTConfig
    data_parallel = True  # each rank trains on its share of the demonstrations, normalised by the global token count
    summed_stats = ("loss/sft",)

    def build_source(self) -> Demonstrations:
        """The demonstrations of ``data``, or of the env's expert, in the policy's chat format."""
        cfg = self.config
        chats = load_demonstrations(cfg.data) if cfg.data else env_demonstrations(cfg.env, self.env_kwargs, cfg.num_demonstrations, cfg.seed)
        demos = [encode_demonstration(self.policy.chat, c, cfg.env, i) for i, c in enumerate(chats)]
        return Demonstrations(keep_last_tokens(demos, cfg.max_length) if cfg.max_length else demos, cfg, self.dist, self.policy.pad_token_id)


def keep_last_tokens(demos: Sequence[Episode], max_length: int) -> list[Episode]:
    """``demos`` with each longer than ``max_length`` tokens cut to its last ``max_length`` (the last
    assistant turns); one left with no assistant token is dropped. Says once what it cut.

    Example:
        >>> ep = Episode("", "", 0, token_ids=[1, 2, 3, 4], action_mask=[0, 1, 0, 1], logprobs=[0.0] * 4, step_index=[-1, 0, -1, 1])
        >>> keep_last_tokens([ep], 3)[0].token_ids
        mathgym: 1 of 1 demonstrations are longer than max_length=3 tokens (up to 4): they keep their last 3
        [2, 3, 4]
    """
    kept, cut, dropped = [], 0, 0
    for ep in demos:
        if len(ep.token_ids) > max_length:
            cut += 1
            ep = dataclasses.replace(
                ep, token_ids=ep.token_ids[-max_length:], action_mask=ep.action_mask[-max_length:],
                logprobs=ep.logprobs[-max_length:], step_index=ep.step_index[-max_length:],
            )
            if not any(ep.action_mask):
                dropped += 1
                continue
        kept.append(ep)
    if cut:
        longest = max(len(ep.token_ids) for ep in demos)
        print(f"mathgym: {cut} of {len(demos)} demonstrations are longer than max_length={max_length} tokens (up to {longest}): "
              f"they keep their last {max_length}" + (f"; {dropped} left with no assistant token are skipped" if dropped else ""))
    if not kept:
        raise DatasetError(f"No demonstration keeps an assistant token within max_length={max_length}; raise max_length.")
    return kept


def demonstrations_batch(chat: ChatFormat, chats: Sequence[Chat]) -> RolloutBatch:
    """Collate chats, in the chat format ``chat``, into a batch whose action mask covers the assistant tokens."""
    return RolloutBatch.from_episodes([encode_demonstration(chat, c, group_id=i) for i, c in enumerate(chats)], chat.pad_token_id)
