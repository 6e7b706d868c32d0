"""A discriminative reward model: ``AutoModelForSequenceClassification`` with one label scores (prompt, response).

:class:`RewardModel` is three things at once:

- a reward worker: :meth:`RewardModel.score_batch` ``(completions, references)`` where a reference
  is the prompt (a string, or a mapping with ``prompt``/``question``), so it composes with the other
  reward workers and :class:`~mathgym.envs.wrappers.RewardModelBonus` adds it to any env's reward;
- a TRL reward function: ``rm(prompts=..., completions=...)`` returns ``list[float]``, the signature
  ``GRPOTrainer(reward_funcs=[rm])`` calls (conversational prompts and completions accepted);
- the model ``mathgym train --algo rm`` trains (:mod:`mathgym.algos.reward_model`).

A pair is rendered with the model's chat template where it has one (user turn = prompt, assistant
turn = response), else as ``prompt + response``; the score is the single logit at the last real token.
Batches are right-padded on the model's device, ``batch_size`` rows at a time.

Example::

    rm = RewardModel.from_pretrained("Skywork/Skywork-Reward-V2-Llama-3.1-8B", device="cuda", dtype="bfloat16")
    rm.score_pairs(["What is 2 + 2?"], ["4"])          # [3.1...]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mathgym.agents.chat import apply_template
from mathgym.errors import ConfigError
from mathgym.rewards.base import RewardResult, Status


def _text(value: Any) -> str | list[dict[str, str]]:
    """A prompt or completion as TRL passes it: text, or a list of messages."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(m, Mapping) and "role" in m for m in value):
        return [{"role": str(m["role"]), "content": str(m.get("content") or "")} for m in value]
    raise ConfigError(f"RewardModel: a prompt or completion must be text or a list of messages, not {type(value).__name__}.")


def _prompt_of(reference: Any) -> str:
    if reference is None or isinstance(reference, str):
        return reference or ""
    if isinstance(reference, Mapping):
        return str(reference.get("prompt", reference.get("question", "")) or "")
    question = getattr(reference, "question", None)  # a JudgeInput
    if isinstance(question, str):
        return question
    raise ConfigError(f"RewardModel: a reference must be the prompt (text or a mapping), not {type(reference).__name__}.")


class RewardModel:
    """One-label sequence classifier as a reward (see the module docstring).

    Args:
        model: An ``AutoModelForSequenceClassification`` with ``num_labels=1``.
        tokenizer: Its tokenizer.
        batch_size: Rows scored together.
        max_length: Tokens kept per (prompt, response); longer ones lose prompt tokens from the left.
        name: The component name in reward breakdowns.
    """

    def __init__(self, model: Any, tokenizer: Any, *, batch_size: int = 8, max_length: int = 2048, name: str = "rm"):
        if getattr(model.config, "num_labels", 1) != 1:
            raise ConfigError(f"a reward model has one output; this model has num_labels={model.config.num_labels}.")
        if batch_size < 1 or max_length < 2:
            raise ConfigError("RewardModel needs batch_size >= 1 and max_length >= 2.")
        self.model, self.tokenizer = model, tokenizer
        self.batch_size, self.max_length, self.name = int(batch_size), int(max_length), name
        self.__name__ = name  # TRL names a reward function's metrics after it
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        if pad is None:
            raise ConfigError("RewardModel: the tokenizer has neither a pad nor an EOS token.")
        self.pad_token_id = int(pad)
        if getattr(model.config, "pad_token_id", None) is None:
            model.config.pad_token_id = self.pad_token_id

    @classmethod
    def from_pretrained(
        cls, name_or_path: str, *, device: str = "auto", dtype: str = "auto", **kwargs: Any
    ) -> RewardModel:
        """Load a reward model dir or hub id; a causal-LM checkpoint gets a fresh one-label head (to train)."""
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        from mathgym.agents.policy import pick_device, pick_precision

        dev = pick_device(device)
        model = AutoModelForSequenceClassification.from_pretrained(
            name_or_path, num_labels=1, dtype=pick_precision(dtype, dev).weights
        ).to(dev)
        model.eval()
        tokenizer = AutoTokenizer.from_pretrained(name_or_path)
        return cls(model, tokenizer, **kwargs)

    @property
    def device(self) -> Any:
        return next(self.model.parameters()).device

    # -- encoding --------------------------------------------------------------------------------

    def encode(self, prompt: str | list[dict[str, str]], response: str | list[dict[str, str]]) -> list[int]:
        """Token ids of one (prompt, response): the chat template's user and assistant turns where the
        tokenizer has one, else the two texts joined; cut to ``max_length`` from the left."""
        prompt_messages = prompt if isinstance(prompt, list) else [{"role": "user", "content": prompt}]
        response_messages = response if isinstance(response, list) else [{"role": "assistant", "content": response}]
        if getattr(self.tokenizer, "chat_template", None):
            ids = apply_template(self.tokenizer, prompt_messages + response_messages, tokenize=True)
            if isinstance(ids, Mapping) or hasattr(ids, "input_ids"):
                ids = ids["input_ids"]
            ids = list(ids)
        else:
            text = "\n".join(m["content"] for m in prompt_messages) + "\n" + "".join(m["content"] for m in response_messages)
            ids = self.tokenizer.encode(text)
        return ids[-self.max_length :]

    def batch_tensors(self, rows: Sequence[Sequence[int]]) -> tuple[Any, Any]:
        """``(input_ids, attention_mask)``, both ``(B, T)``, right-padded on the model's device."""
        import torch

        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), self.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, r in enumerate(rows):
            ids[i, : len(r)] = torch.tensor(list(r), dtype=torch.long)
            mask[i, : len(r)] = 1
        return ids.to(self.device), mask.to(self.device)

    def forward(self, rows: Sequence[Sequence[int]]) -> Any:
        """``(B,)`` scores of token-id ``rows`` (with grad when the caller allows it)."""
        input_ids, attention_mask = self.batch_tensors(rows)
        logits = self.model(input_ids=input_ids, attention_mask=attention_mask).logits  # (B, 1)
        return logits[:, 0].float()

    # -- scoring ---------------------------------------------------------------------------------

    def score_pairs(self, prompts: Sequence[Any], responses: Sequence[Any]) -> list[float]:
        """The score of each (prompt, response), ``batch_size`` rows at a time, without gradient."""
        if len(prompts) != len(responses):
            raise ConfigError(f"got {len(prompts)} prompts but {len(responses)} responses.")
        return self.score_rows([self.encode(_text(p), _text(r)) for p, r in zip(prompts, responses)])

    def score_rows(self, rows: Sequence[Sequence[int]]) -> list[float]:
        """The scores of token-id ``rows`` (from :meth:`encode`), ``batch_size`` at a time, in eval mode, without gradient."""
        import torch

        scores: list[float] = []
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad():
                for start in range(0, len(rows), self.batch_size):
                    scores.extend(self.forward(rows[start : start + self.batch_size]).tolist())
        finally:
            self.model.train(was_training)
        return scores

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float]:
        """TRL's reward-function signature: ``(prompts, completions, **dataset columns) -> list[float]``."""
        return self.score_pairs(prompts, completions)

    def score_batch(self, completions: Sequence[Any], references: Sequence[Any] | None = None) -> list[RewardResult]:
        """Reward-worker interface: each completion scored against its prompt (``references``).
        The score is the raw model output (not bounded to ``[0, 1]``); a non-text completion is ``unparseable``."""
        references = [None] * len(completions) if references is None else list(references)
        if len(references) != len(completions):
            raise ConfigError(f"got {len(completions)} completions but {len(references)} references.")
        texts = [i for i, c in enumerate(completions) if isinstance(c, str)]
        scores = dict(zip(texts, self.score_pairs([_prompt_of(references[i]) for i in texts], [completions[i] for i in texts])))
        return [
            RewardResult(scores[i], Status.PARTIAL, {"rm_score": scores[i]}) if i in scores
            else RewardResult(0.0, Status.UNPARSEABLE, {"reason": f"the response is a {type(c).__name__}, not text"})
            for i, c in enumerate(completions)
        ]

    def score(self, completion: str, reference: Any = None) -> RewardResult:
        """Score one completion against its prompt."""
        return self.score_batch([completion], [reference])[0]

    def save_pretrained(self, path: Any) -> None:
        """Save the model and tokenizer (loadable with :meth:`from_pretrained`)."""
        self.model.save_pretrained(path)
        self.tokenizer.save_pretrained(path)
