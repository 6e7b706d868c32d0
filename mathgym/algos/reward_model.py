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

import time
from collections.abc import Sequence
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F

from mathgym.agents.reward_model import RewardModel
from mathgym.algos.batch import RolloutBatch
from mathgym.algos.checkpoint import trainable_state
from mathgym.algos.configs import RMConfig
from mathgym.algos.dpo import DPOTrainer
from mathgym.algos.metrics import rollout_metrics
from mathgym.algos.preferences import PreferencePair, best_worst_indices, load_preference_jsonl
from mathgym.algos.trainer import Trainer
from mathgym.algos.update import OptimizerStep, Plan

__all__ = ["BTStats", "EncodedPair", "RMConfig", "RMTrainer", "bradley_terry_loss", "online_pairs"]


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


class RMTrainer(Trainer):
    """Bradley-Terry reward-model training in the shared loop (see the module docstring and :class:`RMConfig`)."""

    algo_name = "rm"
    items_are_rows = False  # a step's items are pairs, not rows of the batch
    progress_metric = "loss/accuracy"
    config: RMConfig

    #: Pairs of ``step`` offline: consecutive slices of a per-epoch shuffle, as DPO draws them.
    pair_indices = DPOTrainer.pair_indices

    def needs_policy(self) -> bool:
        """The policy samples online pairs and plays the env evaluation; pairs from a file need neither."""
        cfg = self.config
        return not cfg.preference_file or bool(cfg.eval_tasks or cfg.eval_every)

    def setup(self) -> None:
        cfg = self.config
        if self.policy is not None:  # the policy only samples (online pairs); it is not trained
            for param in self.policy.model.parameters():
                param.requires_grad_(False)
        self.rm = RewardModel.from_pretrained(
            cfg.rm_init or self.model_path, device=str(self.device), dtype=cfg.dtype,
            max_length=cfg.max_length, batch_size=max(1, cfg.pairs_per_step),
        )
        self.pairs = [encode_pair(self.rm, p) for p in load_preference_jsonl(cfg.preference_file)] if cfg.preference_file else []
        self.eval_pairs = [encode_pair(self.rm, p) for p in load_preference_jsonl(cfg.eval_preference_file)] if cfg.eval_preference_file else []

    def parameters_to_train(self) -> list[torch.nn.Parameter]:
        return [p for p in self.rm.model.parameters() if p.requires_grad]

    @property
    def offline(self) -> bool:
        return bool(self.pairs)

    # -- one step ---------------------------------------------------------------------------------

    def step_pairs(self, step: int) -> tuple[list[EncodedPair], dict[str, float]]:
        """The pairs of ``step`` and their statistics: a slice of the file, or the policy's rollouts paired."""
        if self.offline:
            return [self.pairs[i] for i in self.pair_indices(step)], {"loss/pairs": float(self.config.pairs_per_step)}
        self.sampling_stats = {}
        batch = self.make_batch(step)
        pairs, stats = online_pairs(self.rm, batch, self.config.min_reward_gap, self.config.reward_gap_margin)
        return pairs, {**rollout_metrics(batch), **self.sampling_stats, **stats}

    def loss(self, batch: Any, items: torch.Tensor, step: OptimizerStep) -> tuple[torch.Tensor, dict[str, float]]:
        """The Bradley-Terry loss of pairs ``items`` (chosen and rejected in one pass), as their share of the pairs."""
        pairs: Sequence[EncodedPair] = step.context
        picked = [pairs[i] for i in items.tolist()]
        scores = self.rm.forward([p.chosen for p in picked] + [p.rejected for p in picked])  # (2P,)
        margin = torch.tensor([p.margin for p in picked], dtype=scores.dtype, device=scores.device)
        loss, stats = bradley_terry_loss(scores[: len(picked)], scores[len(picked) :], margin)
        weight = len(picked) / len(pairs)
        return loss * weight, {"loss/rm": float(loss.detach()) * weight, **{f"loss/{k}": float(v) * weight for k, v in stats._asdict().items()}}

    def train_step(self) -> dict[str, float]:
        cfg = self.config
        t0 = time.perf_counter()
        with self.autocast():
            pairs, stats = self.step_pairs(self.step)
            t1 = time.perf_counter()
            steps = [OptimizerStep(torch.arange(len(pairs)), pairs)] * cfg.epochs_per_batch if pairs else []
            self.rm.model.train()
            metrics = self.optimize(None, Plan(steps, stats))
        last = self.step + 1 == cfg.steps
        if self.eval_pairs and (last or (cfg.eval_pairs_every and (self.step + 1) % cfg.eval_pairs_every == 0)):
            metrics.update(self.evaluate_pairs(self.eval_pairs))
        t2 = time.perf_counter()
        return {**metrics, "perf/rollout_s": t1 - t0, "perf/update_s": t2 - t1, "perf/step_s": t2 - t0,
                "optim/lr": float(self.scheduler.get_last_lr()[0])}

    @torch.no_grad()
    def evaluate_pairs(self, pairs: Sequence[EncodedPair]) -> dict[str, float]:
        """``eval/pairwise_accuracy`` (ties count as wrong) and ``eval/reward_margin`` of the current model on ``pairs``."""
        chosen = self.rm.score_rows([p.chosen for p in pairs])
        rejected = self.rm.score_rows([p.rejected for p in pairs])
        diff = torch.tensor(chosen) - torch.tensor(rejected)
        return {"eval/pairwise_accuracy": float((diff > 0).float().mean()), "eval/reward_margin": float(diff.mean())}

    # -- checkpoints and the final model ---------------------------------------------------------------

    def extra_state(self) -> dict[str, Any]:
        return {"reward_model": trainable_state(self.rm.model)}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        if "reward_model" in state:
            self.rm.model.load_state_dict(state["reward_model"], strict=False)

    def save_model(self, path: Any) -> Any:
        """Save the reward model (``RewardModel.from_pretrained(path)`` loads it)."""
        self.rm.save_pretrained(path)
        return path
