"""An algorithm: its plan of a batch and its loss, built once per run (:class:`Algorithm`).

A run (:class:`~mathgym.algos.trainer.Trainer`) is composed of a batch source
(:mod:`mathgym.algos.sources`), an algorithm and the run's machinery (policy, the update loop of
:mod:`mathgym.algos.update`, logging, checkpoints). The algorithm says what a batch means:

- :meth:`Algorithm.plan`: what is computed once per batch before the first gradient (advantages,
  reference log-probs, pairs...) and the optimizer steps (a :class:`~mathgym.algos.update.Plan`);
- :meth:`Algorithm.loss`: the loss of one micro-batch of a step, as its share of the step's;

and, where it differs from the default, which rows the learner scores before the update
(:meth:`~Algorithm.learner_rows`, :meth:`~Algorithm.learner_pass_needed`), when the update stops
(:meth:`~Algorithm.stop_early`), what it trains (:meth:`~Algorithm.parameters_to_train`), what it
checkpoints besides the policy (:meth:`~Algorithm.extra_state`) and what it measures after a step
(:meth:`~Algorithm.evaluation`). It holds no state one step hands to the next.
"""

from __future__ import annotations

from typing import Any, ClassVar, NamedTuple

import torch

from mathgym.agents.forward import ForwardOutput, ReferencePolicy
from mathgym.agents.policy import LLMPolicy
from mathgym.agents.value_head import ValueModel
from mathgym.algos.batch import RolloutBatch
from mathgym.algos.configs import TrainConfig
from mathgym.algos.distributed import Distributed
from mathgym.algos.update import LossOutput, OptimizerStep, Plan, score_rows


class RunParts(NamedTuple):
    """What an algorithm is built from: the run's configuration and machinery it reads."""

    config: TrainConfig
    policy: LLMPolicy | None
    dist: Distributed
    device: torch.device
    generator: torch.Generator  # the update's randomness (PPO's minibatch order), checkpointed with the run
    model_path: str  # where config.model's weights are


class Algorithm:
    """The plan and the loss of an algorithm (see the module docstring); subclasses implement both."""

    name: ClassVar[str] = "base"
    #: Whether a step's items are rows of the batch (GRPO, PPO, SFT, distillation), which the loop then
    #: cuts into micro-batches by length (``micro_batch_tokens``); pair indices (DPO, reward models) are not.
    items_are_rows: ClassVar[bool] = True
    #: Whether the learner's pass before the update and the sampler/learner mismatch apply: a run
    #: that trains another model than the policy (reward models) or on fixed tensors (PRM) says no.
    scores_learner: ClassVar[bool] = True
    #: The frozen policy of a KL term or DPO's implicit reward (set when built), or ``None``.
    reference: ReferencePolicy | None = None
    #: A critic whose values the learner's pass reads with its log-probs (PPO), or ``None``.
    value_model: ValueModel | None = None

    def __init__(self, parts: RunParts):
        self.config, self.policy, self.dist = parts.config, parts.policy, parts.dist
        self.generator = parts.generator

    def plan(self, batch: Any) -> Plan:
        """The optimizer steps of ``batch`` and its own statistics (everything computed once per
        batch before the first gradient: advantages, reference log-probs, pairs...)."""
        raise NotImplementedError

    def loss(self, batch: Any, items: torch.Tensor, step: OptimizerStep) -> LossOutput | tuple[torch.Tensor, dict[str, float]]:
        """The loss of micro-batch ``items`` of optimizer step ``step`` and its ``loss/...`` statistics,
        both as the micro-batch's *share* of the step's (they add up over the micro-batches: normalise
        by the step's full counts); a :class:`~mathgym.algos.update.LossOutput` may add the loss pass's log-probs."""
        raise NotImplementedError

    def stop_early(self, stats: dict[str, float]) -> str | None:
        """Why the update stops after an optimizer step whose statistics are ``stats`` (``None``: go on)."""
        return None

    def learner_rows(self, batch: RolloutBatch) -> torch.Tensor:
        """The rows whose learner log-probs the update needs before its first step: by default the
        sampled ones with action tokens (the sampler/learner mismatch is measured on them)."""
        return torch.nonzero(batch.sampled.to(batch.action_mask.device) & (batch.action_mask.sum(-1) > 0)).flatten()

    def learner_pass_needed(self, batch: RolloutBatch) -> bool:
        """Whether ``batch`` needs the learner's separate pass before the update.

        Without it the loss's own forward pass gives the learner's log-probs (its
        :class:`~mathgym.algos.update.LossOutput`, on the rows it trains on) and the mismatch metric is
        measured on those, after the update: one forward pass less per step. An algorithm returns
        ``False`` only where nothing before its first gradient reads ``batch.learner_logprobs`` or
        ``batch.values``, its loss returns its log-probs, and the model has no active dropout (the
        loss's pass runs in train mode). Default: needed.
        """
        return True

    @property
    def temperature(self) -> float:
        """The temperature the learner scores with: the sampler's (1 for greedy sampling)."""
        return self.config.temperature or 1.0

    def score(self, batch: RolloutBatch, rows: torch.Tensor, forward: Any) -> ForwardOutput:
        """``forward`` on ``rows`` of ``batch`` in the update's micro-batches, no gradient (:func:`~mathgym.algos.update.score_rows`)."""
        return score_rows(self.config, batch, rows, forward, with_values=self.value_model is not None)

    def score_reference(self, batch: RolloutBatch, rows: torch.Tensor) -> RolloutBatch:
        """Fill ``batch.ref_logprobs`` on ``rows`` (the reference policy, no gradient)."""
        out = self.score(batch, rows, lambda mb: self.reference.forward(
            mb.input_ids, mb.attention_mask, self.temperature, positions=mb.action_mask, groups=mb.group_ids,
        ))
        batch.ref_logprobs = out.logprobs
        return batch

    def reference_logprobs(self, batch: RolloutBatch) -> torch.Tensor:
        """``(B, T)`` token log-probs of ``batch`` under the reference policy."""
        return self.reference.forward(batch.input_ids, batch.attention_mask, self.temperature).logprobs

    def parameters_to_train(self) -> list[Any]:
        """The parameters (or param groups) the optimizer steps: the policy's trainable ones."""
        return self.policy.trainable_parameters()

    def extra_state(self) -> dict[str, Any]:
        """What to checkpoint besides the policy (a value head, a reward model...)."""
        return {}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`extra_state` returned."""

    def evaluation(self, step: int) -> dict[str, float]:
        """Metrics measured after step ``step`` (counted from 1) has trained: held-out pairs at their interval."""
        return {}
