"""How a batch becomes optimizer steps, the same for every algorithm (:class:`UpdateLoop`).

An algorithm plans a batch (:class:`Plan`: its optimizer steps and its own statistics) and gives
the loss of a micro-batch; the loop owns the mechanics: the learner's pass before the update (eval
mode, no gradient; folded into the loss's own forward pass where nothing before the first gradient
needs it, :meth:`UpdateLoop.learner_pass_needed`), splitting each step into micro-batches
(:func:`micro_batches`: ``grad_accum_steps`` parts, each cut into rows of like length of at most
``micro_batch_tokens`` padded tokens), train mode, backward passes, gradient clipping and the optimizer step,
statistics that add up (:class:`StepStats`), and the learning-rate schedule (:data:`LR_SCHEDULES`),
which advances once per batch.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple

import numpy as np
import torch

from mathgym.agents.forward import ForwardOutput, ReferencePolicy
from mathgym.agents.policy import LLMPolicy
from mathgym.agents.value_head import ValueModel
from mathgym.algos.batch import RolloutBatch
from mathgym.algos.choices import LRSchedule
from mathgym.algos.configs import TrainConfig
from mathgym.algos.distributed import Distributed
from mathgym.algos.metrics import logprob_mismatch
from mathgym.options import pick


@dataclass
class OptimizerStep:
    """One optimizer step of an update.

    Attributes:
        items: What the step trains on: episode rows of the batch (GRPO, PPO, SFT) or pair
            indices (DPO). The loop splits them into ``grad_accum_steps`` micro-batches; a step
            with no items still steps the optimizer, with zero gradients.
        context: Whatever the algorithm's loss needs for this step (a minibatch's normalisers,
            the pairs and their reference log-probs...).
    """

    items: torch.Tensor
    context: Any = None


class LearnResult(NamedTuple):
    """What :meth:`UpdateLoop.learn` did with a batch.

    Attributes:
        batch: The batch on the policy's device, with the learner's log-probs it measured.
        stats: The update's ``loss/...`` statistics (:meth:`UpdateLoop.optimize`).
        mismatch: ``rollout/logprob_diff_*`` (:func:`~mathgym.algos.metrics.logprob_mismatch`).
        learner_pass_s: Seconds of the separate learner pass (about 0 without one).
    """

    batch: RolloutBatch
    stats: dict[str, float]
    mismatch: dict[str, float]
    learner_pass_s: float


@dataclass
class Plan:
    """What an algorithm does with one batch.

    Attributes:
        steps: The optimizer steps, in order; a generator is fine (PPO draws each epoch's shuffle
            when it gets there, and an early stop leaves the rest undrawn).
        stats: The batch's own statistics (``loss/advantage_abs``, ``loss/pairs``...), logged as they are,
            and the values a step statistic takes when no step reports it.
    """

    steps: Iterable[OptimizerStep]
    stats: dict[str, float] = field(default_factory=dict)


def micro_batches(
    items: Sequence[int] | torch.Tensor, parts: int, lengths: torch.Tensor | None = None, max_tokens: int = 0
) -> list[torch.Tensor]:
    """``items`` in at most ``parts`` near-equal consecutive chunks (none empty).

    With ``lengths`` (the tokens of each row, indexed by item) and ``max_tokens``, each chunk over
    the limit is then sorted by length and cut further, so that no micro-batch holds more than ``max_tokens``
    padded tokens (its rows times its longest row; a longer row goes alone). The rows of one
    micro-batch then have like lengths: little compute is spent on padding.

    Example:
        >>> [c.tolist() for c in micro_batches(torch.arange(5), 2)]
        [[0, 1, 2], [3, 4]]
        >>> [c.tolist() for c in micro_batches(torch.arange(4), 1, torch.tensor([9, 2, 8, 3]), max_tokens=16)]
        [[1, 3], [2], [0]]
    """
    items = torch.as_tensor(items, dtype=torch.long)
    chunks = [chunk for chunk in torch.tensor_split(items, max(1, parts)) if len(chunk)]
    if lengths is None or max_tokens <= 0:
        return chunks
    lengths = lengths.to("cpu")  # the cut is decided on the CPU; the chunks stay on the items' device
    cut: list[torch.Tensor] = []
    for chunk in chunks:
        sizes = lengths[chunk.to("cpu")]
        if len(chunk) * int(sizes.max()) <= max_tokens:  # within the limit as it is: kept whole, in its order
            cut.append(chunk)
            continue
        order = torch.argsort(sizes, stable=True).to(chunk.device)
        start = 0
        for end, size in enumerate(sizes[order].tolist(), start=1):  # ascending: the newest row is the longest
            if end - 1 > start and (end - start) * size > max_tokens:
                cut.append(chunk[order[start : end - 1]])
                start = end - 1
        cut.append(chunk[order[start:]])
    return cut


class StepStats:
    """Statistics of an update: within an optimizer step the micro-batches' shares add up; the
    update reports the mean over its optimizer steps (a key a step lacks counts 0 there)."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = {}
        self.steps = 0

    @staticmethod
    def add(into: dict[str, float], shares: Mapping[str, float]) -> None:
        """Add a micro-batch's ``shares`` of a step's statistics into ``into``."""
        for key, value in shares.items():
            into[key] = into.get(key, 0.0) + float(value)

    def step_done(self, stats: Mapping[str, float]) -> None:
        """Record one optimizer step's statistics."""
        self.add(self.totals, stats)
        self.steps += 1

    def mean(self) -> dict[str, float]:
        return {key: value / max(self.steps, 1) for key, value in self.totals.items()}


def constant(progress: float) -> float:
    return 1.0


def linear(progress: float) -> float:
    return max(0.0, 1.0 - progress)


def cosine(progress: float) -> float:
    return 0.5 * (1.0 + float(np.cos(np.pi * min(progress, 1.0))))


#: ``lr_schedule`` choices -> the learning-rate factor at ``progress`` (0 -> 1 after warmup).
LR_SCHEDULES: dict[str, Callable[[float], float]] = {"constant": constant, "linear": linear, "cosine": cosine}


def lr_factor(step: int, steps: int, warmup_steps: int, schedule: LRSchedule) -> float:
    """The learning-rate multiplier of optimizer step ``step``: linear warmup, then ``schedule``."""
    if warmup_steps and step < warmup_steps:
        return (step + 1) / warmup_steps
    return pick(LR_SCHEDULES, "lr_schedule", schedule)((step - warmup_steps) / max(1, steps - warmup_steps))


class UpdateLoop:
    """The update of a batch: the loop owns the step mechanics, an algorithm plans its steps and gives its loss.

    :class:`~mathgym.algos.trainer.Trainer` builds what the loop uses (``config``, ``policy``,
    ``optimizer``, ``scheduler``, ``scaler``, ``dist``, ``step``); an algorithm implements
    :meth:`plan` and :meth:`loss`, and may set :attr:`reference` and :attr:`value_model` in its setup.
    """

    config: TrainConfig
    policy: LLMPolicy | None  # None: a trainer that loads no policy (Trainer.needs_policy)
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    scaler: torch.amp.GradScaler
    dist: Distributed
    step: int
    algo_name: ClassVar[str] = "base"
    #: The frozen policy of a KL term or DPO's implicit reward (set in ``setup``), or ``None``.
    reference: ReferencePolicy | None = None
    #: A critic whose values :meth:`score_learner` reads with the learner's log-probs (PPO), or ``None``.
    value_model: ValueModel | None = None
    #: The rows whose log-probs :meth:`record_learner_logprobs` kept in an update without the learner pass
    #: (``None``: not recording); ``_recording_done`` once the first optimizer step is taken.
    _recorded_rows: list[torch.Tensor] | None = None
    _recording_done: bool = False

    #: Whether a step's items are rows of the batch (GRPO, PPO, SFT, distillation), which the loop then
    #: cuts into micro-batches by length (``micro_batch_tokens``); pair indices (DPO, reward models) are not.
    items_are_rows: ClassVar[bool] = True

    def micro_batches(self, batch: Any, items: torch.Tensor, rows: bool) -> list[torch.Tensor]:
        """``items`` in ``grad_accum_steps`` parts, each cut by length to ``micro_batch_tokens`` padded
        tokens where the items are ``rows`` of ``batch`` (:func:`micro_batches`)."""
        limit = self.config.micro_batch_tokens
        lengths = batch.attention_mask.sum(-1) if rows and limit > 0 else None
        return micro_batches(items, self.config.grad_accum_steps, lengths, limit)

    def plan(self, batch: RolloutBatch) -> Plan:
        """The optimizer steps of ``batch`` and its own statistics (everything computed once per
        batch before the first gradient: advantages, reference log-probs, pairs...). Subclasses implement it."""
        raise NotImplementedError

    def loss(self, batch: RolloutBatch, items: torch.Tensor, step: Any) -> tuple[torch.Tensor, dict[str, float]]:
        """The loss of micro-batch ``items`` of optimizer step ``step`` (an :class:`~mathgym.algos.update.OptimizerStep`)
        and its ``loss/...`` statistics, both as the micro-batch's *share* of the step's (they add up over the
        micro-batches: normalise by the step's full counts). Subclasses implement it."""
        raise NotImplementedError

    def stop_early(self, stats: dict[str, float]) -> str | None:
        """Why the update stops after an optimizer step whose statistics are ``stats`` (``None``: go on)."""
        return None

    def learner_rows(self, batch: RolloutBatch) -> torch.Tensor:
        """The rows whose learner log-probs the update needs before its first step: by default the
        sampled ones with action tokens (the sampler/learner mismatch is measured on them)."""
        return torch.nonzero(batch.sampled.to(batch.action_mask.device) & (batch.action_mask.sum(-1) > 0)).flatten()

    @property
    def temperature(self) -> float:
        """The temperature the learner scores with: the sampler's (1 for greedy sampling)."""
        return self.config.temperature or 1.0

    @torch.no_grad()
    def score(self, batch: RolloutBatch, rows: torch.Tensor, forward: Callable[[RolloutBatch], ForwardOutput]) -> ForwardOutput:
        """``forward`` on ``rows`` of ``batch`` in ``grad_accum_steps`` micro-batches, no gradient:
        ``(B, T)`` outputs, 0 on the other rows."""
        out: ForwardOutput | None = None
        for idx in self.micro_batches(batch, rows, True):
            part = forward(batch.select(idx))
            if out is None:
                out = ForwardOutput(*(None if p is None else p.new_zeros((len(batch), p.shape[1])) for p in part))
            for whole, value in zip(out, part):
                if value is not None:
                    whole[idx] = value
        if out is None:
            empty = torch.zeros(batch.input_ids.shape, device=batch.input_ids.device)
            return ForwardOutput(empty, empty.clone(), None if self.value_model is None else empty.clone())
        return out

    def score_learner(self, batch: RolloutBatch) -> RolloutBatch:
        """Fill ``batch.learner_logprobs`` (and ``batch.values`` with a critic) on :meth:`learner_rows`:
        the learner before the update, in eval mode like the sampler (a measurement of numerics, not of
        dropout, which also leaves the RNG the update's dropout draws from untouched)."""
        rows = self.learner_rows(batch)
        if not len(rows):
            return batch
        was_training = self.policy.model.training
        self.policy.model.eval()
        try:
            out = self.score(batch, rows, lambda mb: self.policy.forward(
                mb.input_ids, mb.attention_mask, self.temperature,
                groups=mb.group_ids if self.value_model is None else None, value_model=self.value_model,
                positions=mb.action_mask,
            ))
        finally:
            self.policy.model.train(was_training)
        batch.learner_logprobs, batch.values = out.logprobs, out.values
        return batch

    def learner_pass_needed(self, batch: RolloutBatch) -> bool:
        """Whether ``batch`` needs the separate learner pass (:meth:`score_learner`) before the update.

        Without it the update records the learner's log-probs from its loss's own forward pass
        (:meth:`record_learner_logprobs`, on the rows it trains on) and the mismatch metric is measured
        on those, after the update: one forward pass less per step. An algorithm returns ``False`` only
        where nothing before its first gradient reads ``batch.learner_logprobs`` or ``batch.values``,
        the loss's forward pass precedes any optimizer step, and the model has no active dropout (the
        loss's pass runs in train mode). Default: needed.
        """
        return True

    def record_learner_logprobs(self, batch: RolloutBatch, items: torch.Tensor, logprobs: torch.Tensor) -> None:
        """Keep the loss pass's ``(len(items), T)`` log-probs of rows ``items`` as ``batch.learner_logprobs``
        when the update runs without the separate learner pass (a no-op otherwise, and after the first
        optimizer step: later log-probs are no longer those before the update)."""
        if self._recorded_rows is None or self._recording_done:
            return
        if batch.learner_logprobs is None:
            batch.learner_logprobs = torch.zeros(batch.input_ids.shape, device=logprobs.device)
        batch.learner_logprobs[items.to(logprobs.device)] = logprobs.detach().to(batch.learner_logprobs.dtype)
        self._recorded_rows.append(items.to("cpu"))

    def learn(self, batch: RolloutBatch, inspect: Callable[[RolloutBatch], None] | None = None) -> LearnResult:
        """The update of ``batch`` on the policy's device with the sampler/learner mismatch metric: the
        learner pass and the metric before the update (or, where :meth:`learner_pass_needed` says no, both
        from the loss's own forward pass), then the plan and its optimizer steps. ``inspect`` sees the batch
        between the two (the samples the trainer logs)."""
        batch, start = batch.to(self.policy.device), time.perf_counter()
        fused = not self.learner_pass_needed(batch)
        mismatch: dict[str, float] = {}
        if fused:
            self._recorded_rows, self._recording_done = [], False
            batch.learner_logprobs = None
        else:
            batch = self.score_learner(batch)
            mismatch = logprob_mismatch(batch)
        if inspect is not None:
            inspect(batch)
        learner_pass_s = time.perf_counter() - start
        try:
            plan = self.plan(batch)
            if fused and not any(len(step.items) for step in plan.steps):
                # Nothing to train on (every group's rewards agree): no loss pass will run, so the
                # mismatch metric gets a pass of its own, before the (gradient-free) optimizer step.
                self._recorded_rows = None
                start = time.perf_counter()
                batch = self.score_learner(batch)
                mismatch = logprob_mismatch(batch)
                learner_pass_s += time.perf_counter() - start
            stats = self.optimize(batch, plan)
            if fused and self._recorded_rows:  # measured on the rows trained on, by the loss's pass
                mismatch = logprob_mismatch(batch.select(torch.unique(torch.cat(self._recorded_rows))))
        finally:
            self._recorded_rows = None
        return LearnResult(batch, stats, mismatch, learner_pass_s)

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

    def update(self, batch: RolloutBatch) -> dict[str, float]:
        """Train on ``batch`` (:meth:`learn`); return its ``loss/...`` statistics."""
        return self.learn(batch).stats

    def optimize(self, batch: RolloutBatch, plan: Plan) -> dict[str, float]:
        """Run ``plan``'s optimizer steps on ``batch``; the learning-rate schedule advances once.

        Returns the plan's statistics, the mean over optimizer steps of each step's (its
        micro-batches' shares added up, and ``loss/grad_norm``), ``loss/updates`` (optimizer
        steps taken) and ``loss/early_stopped``.
        """
        if self.policy is not None:  # None: a trainer that loads no policy (Trainer.needs_policy)
            self.policy.model.train()
        stats, stopped = StepStats(), False
        for step in plan.steps:
            shares: dict[str, float] = {}
            chunks = self.micro_batches(batch, step.items, self.items_are_rows)
            for items in chunks:
                loss, share = self.loss(batch, items, step)
                self.backward(loss)
                StepStats.add(shares, share)
            if not chunks:  # nothing carried a gradient: a zero one, so that the optimizer steps as it would have
                self.zero_gradients()
            self._recording_done = True  # the loss passes of later steps see updated weights
            shares["loss/grad_norm"] = self.optimizer_step()
            stats.step_done(shares)
            reason = self.stop_early(shares)
            if reason:
                stopped = True
                print(f"{self.algo_name}: step {self.step}: early stop after {stats.steps} optimizer step(s): {reason}")
                break
        with warnings.catch_warnings():  # a batch without an optimizer step (DPO without a pair) still advances it
            warnings.filterwarnings("ignore", message=r"Detected call of `lr_scheduler\.step\(\)` before")
            self.scheduler.step()
        return {**plan.stats, **stats.mean(), "loss/updates": float(stats.steps), "loss/early_stopped": float(stopped)}

    def backward(self, loss: torch.Tensor) -> None:
        """Accumulate the gradients of ``loss`` (scaled under fp16 autocast)."""
        self.scaler.scale(loss).backward()

    def zero_gradients(self) -> None:
        """Give every optimised parameter a zero gradient."""
        for param in (p for group in self.optimizer.param_groups for p in group["params"]):
            param.grad = torch.zeros_like(param)

    def optimizer_step(self) -> float:
        """Clip gradients, step the optimizer, zero the gradients; return the gradient norm.

        Under fp16 the gradients are unscaled first, and a step whose gradients overflowed is
        skipped (the scaler lowers its scale; the returned norm is then inf). The learning-rate
        schedule is the loop's (:meth:`optimize`): once per batch.
        """
        params = [p for g in self.optimizer.param_groups for p in g["params"]]
        self.dist.all_reduce_gradients(params)  # sum of the ranks' shares (no-op in one process)
        max_norm = self.config.max_grad_norm if self.config.max_grad_norm > 0 else float("inf")
        self.scaler.unscale_(self.optimizer)
        norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        if self.policy is not None:
            self.policy.mark_weights_updated()
        return float(norm)

