"""DPO-family preference optimisation, offline (a JSONL of pairs) or online (pairs sampled from any env).

Offline pairs are turned into a :class:`~mathgym.algos.batch.RolloutBatch` in which the
chosen and rejected completion of a pair form a group of two (rewards 1 and 0); online
batches are ordinary rollouts with ``group_size`` samples per task. Either way the update
pairs each group's best-rewarded episode with its worst one, so both sources share one
code path. The loss is :func:`~mathgym.algos.dpo_losses.preference_loss`.

    mathgym train --algo dpo --preference-file prefs.jsonl       # offline
    mathgym train --algo dpo --env MathReason-v0                  # online: best vs worst of G samples
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from mathgym.agents.forward import ReferencePolicy
from mathgym.agents.policy import LLMPolicy
from mathgym.algos.algorithm import Algorithm, RunParts
from mathgym.algos.batch import RolloutBatch
from mathgym.algos.configs import DPOConfig
from mathgym.algos.dpo_losses import preference_loss
from mathgym.algos.preferences import (
    PreferencePair,
    best_worst_indices,
    load_preference_jsonl,
    pairs_batch,
    sequence_logprobs,
)
from mathgym.algos.sources import BatchSource
from mathgym.algos.trainer import Trainer
from mathgym.algos.update import OptimizerStep, Plan
from mathgym.errors import ConfigError

__all__ = ["DPO", "DPOConfig", "DPOTrainer", "PreferencePairs", "pair_indices"]


class Pairs(NamedTuple):
    """The preference pairs of a batch: ``(P,)`` row indices of each pair's chosen and rejected
    episode, and their reference sequence log-probs."""

    chosen: torch.Tensor
    rejected: torch.Tensor
    ref_chosen: torch.Tensor
    ref_rejected: torch.Tensor


def _check_precomputed(pairs: list[PreferencePair], path: str) -> None:
    if any(p.ref_chosen_logp is None or p.ref_rejected_logp is None for p in pairs):
        raise ConfigError(
            f"reference='precomputed' but some pairs of {path} lack ref_chosen_logp/ref_rejected_logp; "
            "write them with mathgym.algos.preferences.annotate_reference_logprobs."
        )


def pair_indices(num_pairs: int, per_step: int, seed: int, step: int) -> list[int]:
    """The pairs of ``step``: consecutive slices of a per-epoch shuffle (a pure function of seed and step).

    Example:
        >>> pair_indices(4, 3, 0, 0) + pair_indices(4, 3, 0, 1)  # every pair once per epoch, then a new shuffle
        [0, 1, 3, 2, 1, 3]
    """
    out = []
    for position in range(step * per_step, step * per_step + per_step):
        epoch, offset = divmod(position, num_pairs)
        order = torch.randperm(num_pairs, generator=torch.Generator().manual_seed(seed * 7919 + epoch))
        out.append(int(order[offset]))
    return out


class PreferencePairs(BatchSource):
    """Offline DPO's batches: ``pairs_per_step`` pairs of the file a step, each pair a group of two rows
    (chosen, rejected) in the policy's chat format."""

    def __init__(self, policy: LLMPolicy, pairs: list[PreferencePair], config: DPOConfig):
        super().__init__()
        self.policy, self.pairs, self.config = policy, pairs, config

    def make_batch(self, step: int) -> tuple[RolloutBatch, dict[str, float]]:
        picks = pair_indices(len(self.pairs), self.config.pairs_per_step, self.config.seed, step)
        return pairs_batch(self.policy.chat, self.pairs, picks, self.config.max_length), {}

    def metrics(self, batch: RolloutBatch) -> dict[str, float]:
        """No ``rollout/`` metrics: those of fixed pairs say nothing about the policy."""
        return {k: v for k, v in super().metrics(batch).items() if not k.startswith("rollout/")}


class DPO(Algorithm):
    """DPO's plan (each group's best and worst episode as a pair) and its preference loss."""

    name = "dpo"
    items_are_rows = False  # a step's items are pairs, not rows of the batch
    config: DPOConfig

    def __init__(self, parts: RunParts):
        super().__init__(parts)
        cfg = self.config
        self.pairs = load_preference_jsonl(cfg.preference_file) if cfg.preference_file else []
        self.eval_pairs = load_preference_jsonl(cfg.eval_preference_file) if cfg.eval_preference_file else []
        if cfg.reference == "precomputed":
            _check_precomputed(self.pairs, cfg.preference_file)
            if self.eval_pairs:
                _check_precomputed(self.eval_pairs, cfg.eval_preference_file)
            self.reference = None
        else:
            self.reference = ReferencePolicy(self.policy, cfg.reference)

    @property
    def offline(self) -> bool:
        return bool(self.pairs)

    # -- the update -------------------------------------------------------------------------------

    def sequence_logps(self, batch: RolloutBatch, rows: torch.Tensor) -> torch.Tensor:
        """``(R,)`` policy log-probs of the action tokens of ``rows`` (with grad)."""
        out = self.policy.forward(
            batch.input_ids[rows], batch.attention_mask[rows], groups=batch.group_ids[rows], positions=batch.action_mask[rows],
        )
        return sequence_logprobs(out.logprobs, batch.action_mask[rows], self.config.logprob_reduction)

    @torch.no_grad()
    def reference_logps(self, batch: RolloutBatch, rows: torch.Tensor, pairs: list[PreferencePair] | None = None) -> torch.Tensor:
        """``(R,)`` reference log-probs of ``rows``: precomputed (looked up by pair) or from the reference model."""
        if self.reference is None:
            pairs = self.pairs if pairs is None else pairs
            values = []
            for row in rows.tolist():
                pair = pairs[int(batch.task_ids[row].removeprefix("pair-"))]
                chosen = float(batch.rewards[row]) > 0.5
                values.append(pair.ref_chosen_logp if chosen else pair.ref_rejected_logp)
            return torch.tensor(values, dtype=torch.float32, device=batch.input_ids.device)
        logprobs = self.score(batch, rows, lambda mb: self.reference.forward(
            mb.input_ids, mb.attention_mask, positions=mb.action_mask, groups=mb.group_ids,
        )).logprobs
        return sequence_logprobs(logprobs[rows], batch.action_mask[rows], self.config.logprob_reduction)

    def plan(self, batch: RolloutBatch) -> Plan:
        """Each group's best and worst episode as a pair, their reference log-probs; ``epochs_per_batch``
        optimizer steps over the pairs (none when the batch has no pair)."""
        cfg = self.config
        chosen, rejected = best_worst_indices(batch.rewards.cpu(), batch.group_ids.cpu(), ~batch.infra_failure.cpu(), cfg.min_reward_gap)
        groups = len(torch.unique(batch.group_ids))
        stats = {"loss/pairs": float(len(chosen)), "loss/groups_without_pair": (groups - len(chosen)) / max(groups, 1)}
        if not len(chosen):
            return Plan([], stats)  # nothing to prefer in this batch: no optimizer step (counted above)
        chosen, rejected = chosen.to(batch.input_ids.device), rejected.to(batch.input_ids.device)
        if not self.offline:
            stats["loss/chosen_env_reward"] = float(batch.rewards[chosen].mean())
            stats["loss/rejected_env_reward"] = float(batch.rewards[rejected].mean())
        pairs = Pairs(chosen, rejected, self.reference_logps(batch, chosen), self.reference_logps(batch, rejected))
        return Plan([OptimizerStep(torch.arange(len(chosen)), pairs)] * cfg.epochs_per_batch, stats)

    def loss(self, batch: RolloutBatch, items: torch.Tensor, step: OptimizerStep) -> tuple[torch.Tensor, dict[str, float]]:
        """The preference loss of pairs ``items`` (chosen and rejected in one pass), as their share of the pairs."""
        cfg, p = self.config, step.context
        logps = self.sequence_logps(batch, torch.cat([p.chosen[items], p.rejected[items]]))
        loss, stats = preference_loss(
            logps[: len(items)], logps[len(items) :], p.ref_chosen[items], p.ref_rejected[items],
            cfg.beta, cfg.loss_type, cfg.label_smoothing,
        )
        weight = len(items) / len(p.chosen)
        return loss * weight, {
            "loss/dpo": loss.item() * weight, **{f"loss/{k}": float(v) * weight for k, v in stats._asdict().items()}
        }

    @torch.no_grad()
    def evaluate_preferences(self, pairs: list[PreferencePair], batch_size: int = 32) -> dict[str, float]:
        """Implicit-reward accuracy and mean margin of the current policy on ``pairs`` (no update)."""
        cfg = self.config
        was_training = self.policy.model.training
        self.policy.model.eval()
        accuracy = margin = 0.0
        try:
            for start in range(0, len(pairs), batch_size):
                indices = list(range(start, min(start + batch_size, len(pairs))))
                batch = pairs_batch(self.policy.chat, pairs, indices, cfg.max_length).to(self.policy.device)
                chosen, rejected = torch.arange(0, len(batch), 2), torch.arange(1, len(batch), 2)
                logps = self.sequence_logps(batch, torch.cat([chosen, rejected]))
                ref = self.reference_logps(batch, torch.cat([chosen, rejected]), pairs)
                n = len(indices)
                _, stats = preference_loss(logps[:n], logps[n:], ref[:n], ref[n:], cfg.beta, cfg.loss_type, cfg.label_smoothing)
                accuracy += float(stats.accuracy) * n
                margin += float(stats.margin) * n
        finally:
            self.policy.model.train(was_training)
        return {"eval/preference_accuracy": accuracy / len(pairs), "eval/preference_margin": margin / len(pairs)}

    def evaluation(self, step: int) -> dict[str, float]:
        """The held-out pairs' accuracy and margin every ``eval_every`` steps and after the last."""
        cfg = self.config
        if self.eval_pairs and (step == cfg.steps or (cfg.eval_every and step % cfg.eval_every == 0)):
            return self.evaluate_preferences(self.eval_pairs)
        return {}


class DPOTrainer(Trainer):
    """Offline (:class:`PreferencePairs`) or online (rollouts) DPO in the shared step (see :class:`DPOConfig`)."""

    algo_name = "dpo"
    algorithm_class = DPO
    config: DPOConfig

    def build_source(self) -> BatchSource:
        if self.algorithm.offline:
            return PreferencePairs(self.policy, self.algorithm.pairs, self.config)
        return super().build_source()
