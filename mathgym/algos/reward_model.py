"""Reward-model training (``mathgym train --algo rm``): a Bradley-Terry loss on preference pairs.

The reward model (:class:`~mathgym.agents.reward_model.RewardModel`, a one-label sequence
classifier) learns ``r(prompt, chosen) > r(prompt, rejected)`` from

* a JSONL file of pairs (``--preference-file``; ``{"prompt", "chosen", "rejected", "margin"?}``, the
  layout of :mod:`mathgym.algos.preferences`), or
* online pairs of any env: the policy (``--model``, not trained) samples ``group_size`` responses
  per task, and each group's best-rewarded episode is preferred to its worst one, as online DPO
  pairs them (:func:`~mathgym.algos.preferences.best_worst_indices`); infrastructure failures are
  never paired.

On a preference file the policy is not loaded at all (``--model`` then only names the reward
model's starting point when ``--rm-init`` is empty), unless ``--eval-tasks``/``--eval-every`` ask
for its env evaluation.

The loss is :func:`bradley_terry_loss`; pairwise accuracy (the share of pairs the model ranks
right) is logged on the training pairs (``loss/accuracy``, measured in the update's own forward
pass) and on ``--eval-preference-file`` (``eval/pairwise_accuracy``). Checkpoints hold the reward
model, so ``--resume`` continues a run like any other; ``final/`` is the reward model, loadable with
:meth:`RewardModel.from_pretrained <mathgym.agents.reward_model.RewardModel.from_pretrained>`.

    mathgym train --algo rm --preference-file prefs.jsonl --model Qwen/Qwen2.5-0.5B-Instruct
    mathgym train --algo rm --env MathReason-v0 --model PATH --group-size 8     # online pairs
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F

from mathgym.agents.reward_model import RewardModel
from mathgym.algos.algorithm import Algorithm, RunParts
from mathgym.algos.batch import RolloutBatch
from mathgym.algos.checkpoint import trainable_state
from mathgym.algos.configs import RMConfig
from mathgym.algos.dpo import pair_indices
from mathgym.algos.preferences import PreferencePair, best_worst_indices, load_preference_jsonl
from mathgym.algos.sources import BatchSource, RolloutSource
from mathgym.algos.trainer import Trainer
from mathgym.algos.update import OptimizerStep, Plan

__all__ = [
    "BTStats", "EncodedPair", "EncodedPairs", "PreferenceFile", "RMConfig", "RMTrainer", "RewardModelling",
    "bradley_terry_loss", "online_pairs",
]


class BTStats(NamedTuple):
    """Batch statistics of :func:`bradley_terry_loss` (no gradient)."""

    accuracy: torch.Tensor
    reward_margin: torch.Tensor
    chosen_reward: torch.Tensor
    rejected_reward: torch.Tensor


def bradley_terry_loss(
    chosen: torch.Tensor, rejected: torch.Tensor, margin: torch.Tensor | None = None
) -> tuple[torch.Tensor, BTStats]:
    """``mean(-log sigmoid(r_chosen - r_rejected - margin))`` over pairs.

    Args:
        chosen: ``(P,)`` scores of the preferred responses.
        rejected: ``(P,)`` scores of the others.
        margin: ``(P,)`` how much higher ``chosen`` must score (``None``: 0).

    Example:
        >>> loss, stats = bradley_terry_loss(torch.tensor([1.0, 0.0]), torch.tensor([0.0, 0.0]), torch.tensor([0.0, 1.0]))
        >>> round(float(loss), 4), float(stats.accuracy)   # (-log s(1) - log s(-1)) / 2 = (0.3133 + 1.3133) / 2
        (0.8133, 0.5)
    """
    diff = chosen - rejected
    shifted = diff if margin is None else diff - margin
    loss = -F.logsigmoid(shifted).mean()
    with torch.no_grad():
        stats = BTStats((diff > 0).float().mean(), diff.mean(), chosen.mean(), rejected.mean())
    return loss, stats


class EncodedPair(NamedTuple):
    """A pair as the reward model reads it: token ids of (prompt + chosen) and (prompt + rejected)."""

    chosen: list[int]
    rejected: list[int]
    margin: float = 0.0


def encode_pair(rm: RewardModel, pair: PreferencePair) -> EncodedPair:
    prompt = list(pair.prompt) if isinstance(pair.prompt, tuple) else pair.prompt
    return EncodedPair(rm.encode(prompt, pair.chosen), rm.encode(prompt, pair.rejected), float(pair.margin or 0.0))


def _conversation(batch: RolloutBatch, row: int) -> tuple[Any, Any]:
    """(prompt, response) of an episode: its chat before the first assistant turn, and the rest
    (env replies included); the joined completions when the env keeps no chat."""
    messages = [{"role": str(m.get("role", "")), "content": str(m.get("content") or "")} for m in batch.messages[row]]
    first = next((i for i, m in enumerate(messages) if m["role"] == "assistant"), None)
    if first is None or first == 0:
        return "", "".join(batch.completions[row])
    return messages[:first], messages[first:]


def online_pairs(
    rm: RewardModel, batch: RolloutBatch, min_gap: float = 0.0, gap_margin: float = 0.0
) -> tuple[list[EncodedPair], dict[str, float]]:
    """Each group's best vs worst episode of ``batch`` (infrastructure failures left out), encoded
    for ``rm``; margin ``gap_margin × (reward gap)``. Returns the pairs and their statistics."""
    chosen, rejected = best_worst_indices(batch.rewards.cpu(), batch.group_ids.cpu(), ~batch.infra_failure.cpu(), min_gap)
    pairs = []
    for c, r in zip(chosen.tolist(), rejected.tolist()):
        prompt, good = _conversation(batch, c)
        prompt_r, bad = _conversation(batch, r)
        gap = float(batch.rewards[c] - batch.rewards[r])
        pairs.append(EncodedPair(rm.encode(prompt, good), rm.encode(prompt_r, bad), gap_margin * gap))
    groups = len(torch.unique(batch.group_ids))
    stats = {"loss/pairs": float(len(pairs)), "loss/groups_without_pair": (groups - len(pairs)) / max(groups, 1)}
    if pairs:
        stats["loss/chosen_env_reward"] = float(batch.rewards[chosen].mean())
        stats["loss/rejected_env_reward"] = float(batch.rewards[rejected].mean())
    return pairs, stats


class EncodedPairs(NamedTuple):
    """A step's pairs from a preference file, encoded for the reward model (a batch of :class:`PreferenceFile`)."""

    pairs: list[EncodedPair]

    def to(self, device: Any) -> EncodedPairs:
        """Itself: the pairs are token ids, put on the device by the reward model's forward pass."""
        return self


class PreferenceFile(BatchSource):
    """The reward model's batches from a preference file: ``pairs_per_step`` pairs a step, drawn as DPO draws them."""

    def __init__(self, pairs: list[EncodedPair], config: RMConfig):
        super().__init__()
        self.pairs, self.config = pairs, config

    def make_batch(self, step: int) -> tuple[EncodedPairs, dict[str, float]]:
        picks = pair_indices(len(self.pairs), self.config.pairs_per_step, self.config.seed, step)
        return EncodedPairs([self.pairs[i] for i in picks]), {}


class RewardModelling(Algorithm):
    """Bradley-Terry training of a reward model: its plan (a batch's pairs) and its loss."""

    name = "rm"
    items_are_rows = False  # a step's items are pairs, not rows of the batch
    scores_learner = False  # the model trained is the reward model, not the policy (which only samples)
    config: RMConfig

    def __init__(self, parts: RunParts):
        super().__init__(parts)
        cfg = self.config
        if self.policy is not None:  # the policy only samples (online pairs); it is not trained
            for param in self.policy.model.parameters():
                param.requires_grad_(False)
        self.rm = RewardModel.from_pretrained(
            cfg.rm_init or parts.model_path, device=str(parts.device), dtype=cfg.dtype,
            max_length=cfg.max_length, batch_size=max(1, cfg.pairs_per_step),
        )
        self.eval_pairs = [encode_pair(self.rm, p) for p in load_preference_jsonl(cfg.eval_preference_file)] if cfg.eval_preference_file else []

    def parameters_to_train(self) -> list[torch.nn.Parameter]:
        return [p for p in self.rm.model.parameters() if p.requires_grad]

    def plan(self, batch: EncodedPairs | RolloutBatch) -> Plan:
        """The pairs of the batch (a file's, or each rollout group's best vs worst episode) and their statistics;
        ``epochs_per_batch`` optimizer steps over them (none without a pair)."""
        cfg = self.config
        if isinstance(batch, RolloutBatch):
            pairs, stats = online_pairs(self.rm, batch, cfg.min_reward_gap, cfg.reward_gap_margin)
        else:
            pairs, stats = batch.pairs, {"loss/pairs": float(cfg.pairs_per_step)}
        self.rm.model.train()
        return Plan([OptimizerStep(torch.arange(len(pairs)), pairs)] * cfg.epochs_per_batch if pairs else [], stats)

    def loss(self, batch: Any, items: torch.Tensor, step: OptimizerStep) -> tuple[torch.Tensor, dict[str, float]]:
        """The Bradley-Terry loss of pairs ``items`` (chosen and rejected in one pass), as their share of the pairs."""
        pairs: Sequence[EncodedPair] = step.context
        picked = [pairs[i] for i in items.tolist()]
        scores = self.rm.forward([p.chosen for p in picked] + [p.rejected for p in picked])  # (2P,)
        margin = torch.tensor([p.margin for p in picked], dtype=scores.dtype, device=scores.device)
        loss, stats = bradley_terry_loss(scores[: len(picked)], scores[len(picked) :], margin)
        weight = len(picked) / len(pairs)
        return loss * weight, {"loss/rm": float(loss.detach()) * weight, **{f"loss/{k}": float(v) * weight for k, v in stats._asdict().items()}}

    def evaluation(self, step: int) -> dict[str, float]:
        """The held-out pairs' accuracy and margin every ``eval_pairs_every`` steps and after the last."""
        cfg = self.config
        if self.eval_pairs and (step == cfg.steps or (cfg.eval_pairs_every and step % cfg.eval_pairs_every == 0)):
            return self.evaluate_pairs(self.eval_pairs)
        return {}

    @torch.no_grad()
    def evaluate_pairs(self, pairs: Sequence[EncodedPair]) -> dict[str, float]:
        """``eval/pairwise_accuracy`` (ties count as wrong) and ``eval/reward_margin`` of the current model on ``pairs``."""
        chosen = self.rm.score_rows([p.chosen for p in pairs])
        rejected = self.rm.score_rows([p.rejected for p in pairs])
        diff = torch.tensor(chosen) - torch.tensor(rejected)
        return {"eval/pairwise_accuracy": float((diff > 0).float().mean()), "eval/reward_margin": float(diff.mean())}

    def extra_state(self) -> dict[str, Any]:
        return {"reward_model": trainable_state(self.rm.model)}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        if "reward_model" in state:
            self.rm.model.load_state_dict(state["reward_model"], strict=False)


class RMTrainer(Trainer):
    """Bradley-Terry reward-model training in the shared step (see the module docstring and :class:`RMConfig`):
    a :class:`PreferenceFile` or the policy's rollouts, then :class:`RewardModelling`."""

    algo_name = "rm"
    algorithm_class = RewardModelling
    progress_metric = "loss/accuracy"
    config: RMConfig

    def needs_policy(self) -> bool:
        """The policy samples online pairs and plays the env evaluation; pairs from a file need neither."""
        cfg = self.config
        return not cfg.preference_file or bool(cfg.eval_tasks or cfg.eval_every)

    def build_source(self) -> BatchSource:
        """The pairs of ``preference_file``, encoded for the reward model, or the policy's rollouts."""
        cfg = self.config
        if cfg.preference_file:
            return PreferenceFile([encode_pair(self.algorithm.rm, p) for p in load_preference_jsonl(cfg.preference_file)], cfg)
        return RolloutSource(cfg, self.dist, self.policy, self.env_kwargs)

    def save_model(self, path: Any) -> Any:
        """Save the reward model (``RewardModel.from_pretrained(path)`` loads it)."""
        self.algorithm.rm.save_pretrained(path)
        return path
