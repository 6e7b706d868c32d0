"""How a batch becomes optimizer steps, the same for every algorithm (:class:`UpdateLoop`).

An algorithm (:class:`~mathgym.algos.algorithm.Algorithm`) plans a batch (:class:`Plan`: its
optimizer steps and its own statistics) and gives the loss of a micro-batch; the loop, one object
of the run's machinery, owns the mechanics: the optimizer, the learning-rate schedule
(:data:`LR_SCHEDULES`, advanced once per batch) and the gradient scaler; splitting each step into
micro-batches (:func:`micro_batches`: ``grad_accum_steps`` parts, each cut into rows of like length
of at most ``micro_batch_tokens`` padded tokens), train mode, backward passes, gradient clipping and
the optimizer step, statistics that add up (:class:`StepStats`). Gradient-free passes over a batch
in the same micro-batches are :func:`score_rows`.

Where the update runs without the learner's separate pass, the loss's own forward pass stands for
it: a loss returns its log-probs (:class:`LossOutput`) and :meth:`UpdateLoop.optimize` keeps those of
the first optimizer step in the :class:`LearnerRecord` it is handed, a value the caller reads after.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import torch

from mathgym.agents.forward import ForwardOutput
from mathgym.agents.policy import LLMPolicy
from mathgym.algos.batch import RolloutBatch
from mathgym.algos.choices import LRSchedule
from mathgym.algos.configs import TrainConfig
from mathgym.algos.distributed import Distributed
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
    """What :meth:`~mathgym.algos.trainer.Trainer.learn` did with a batch.

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


class LossOutput(NamedTuple):
    """What an algorithm's loss gives for one micro-batch.

    Attributes:
        loss: The micro-batch's share of the step's loss (with gradient).
        stats: Its ``loss/...`` statistics, as shares too (they add up over the micro-batches).
        logprobs: ``(len(items), T)`` the policy's log-probs of the micro-batch's rows from the loss's
            own forward pass, where the loss has them (GRPO): what stands for the learner's pass.
    """

    loss: torch.Tensor
    stats: dict[str, float]
    logprobs: torch.Tensor | None = None


class LearnerRecord:
    """The learner's log-probs before the update, taken from the loss passes of the first optimizer
    step (:meth:`UpdateLoop.optimize`) where the separate learner pass was skipped: created by the
    caller, handed to the loop, read after it (:attr:`rows`: the rows recorded)."""

    def __init__(self) -> None:
        self.rows: list[torch.Tensor] = []

    def keep(self, batch: RolloutBatch, items: torch.Tensor, logprobs: torch.Tensor) -> None:
        """Write the ``(len(items), T)`` ``logprobs`` of rows ``items`` into ``batch.learner_logprobs``."""
        if batch.learner_logprobs is None:
            batch.learner_logprobs = torch.zeros(batch.input_ids.shape, device=logprobs.device)
        batch.learner_logprobs[items.to(logprobs.device)] = logprobs.detach().to(batch.learner_logprobs.dtype)
        self.rows.append(items.to("cpu"))

    def recorded(self) -> torch.Tensor | None:
        """The distinct rows recorded, or ``None`` when none was."""
        return torch.unique(torch.cat(self.rows)) if self.rows else None


def split_items(config: TrainConfig, batch: Any, items: torch.Tensor, rows: bool) -> list[torch.Tensor]:
    """``items`` in ``grad_accum_steps`` parts, each cut by length to ``micro_batch_tokens`` padded
    tokens where the items are ``rows`` of ``batch`` (:func:`micro_batches`)."""
    limit = config.micro_batch_tokens
    lengths = batch.attention_mask.sum(-1) if rows and limit > 0 else None
    return micro_batches(items, config.grad_accum_steps, lengths, limit)


@torch.no_grad()
def score_rows(
    config: TrainConfig, batch: RolloutBatch, rows: torch.Tensor, forward: Callable[[RolloutBatch], ForwardOutput],
    with_values: bool = False,
) -> ForwardOutput:
    """``forward`` on ``rows`` of ``batch`` in the update's micro-batches, no gradient: ``(B, T)``
    outputs, 0 on the other rows (``with_values``: a zero ``values`` when no row is scored)."""
    out: ForwardOutput | None = None
    for idx in split_items(config, batch, rows, True):
        part = forward(batch.select(idx))
        if out is None:
            out = ForwardOutput(*(None if p is None else p.new_zeros((len(batch), p.shape[1])) for p in part))
        for whole, value in zip(out, part):
            if value is not None:
                whole[idx] = value
    if out is None:
        empty = torch.zeros(batch.input_ids.shape, device=batch.input_ids.device)
        return ForwardOutput(empty, empty.clone(), empty.clone() if with_values else None)
    return out


def fusable(tensors: Iterable[torch.Tensor]) -> bool:
    """Whether torch fuses AdamW over ``tensors``: floating-point tensors all on one CPU or CUDA device."""
    tensors = list(tensors)
    devices = {t.device for t in tensors}
    return len(devices) == 1 and next(iter(devices)).type in ("cpu", "cuda") and all(t.is_floating_point() for t in tensors)


def adamw(params: Iterable[Any], learning_rate: float, weight_decay: float, fused: bool = True) -> torch.optim.AdamW:
    """AdamW over ``params`` (tensors or param groups), with ``fused`` one kernel for every tensor's
    update where torch fuses it (:func:`fusable`). On the tiny model the fused step takes a few times
    less than the per-tensor loop (the same arithmetic, differently rounded); anywhere else, or
    without ``fused``, it is torch's default."""
    params = list(params)
    tensors = [t for group in params for t in (group["params"] if isinstance(group, dict) else [group])]
    fused = fused and fusable(tensors)
    return torch.optim.AdamW(params, lr=learning_rate, weight_decay=weight_decay, **({"fused": True} if fused else {}))


def set_fused(optimizer: torch.optim.Optimizer, fused: bool) -> None:
    """Make a loaded AdamW step as ``fused`` asks (where :func:`fusable`), not as the run that saved it did
    (``load_state_dict`` brings back the saved flag): its step counts move where that kind of step keeps them."""
    tensors = [p for group in optimizer.param_groups for p in group["params"]]
    fused = fused and fusable(tensors)
    for group in optimizer.param_groups:
        group["fused"] = True if fused else None
        for param in group["params"]:
            step = optimizer.state.get(param, {}).get("step")
            if isinstance(step, torch.Tensor):
                optimizer.state[param]["step"] = step.to(dtype=torch.float32, device=param.device if fused else "cpu")


class UpdateLoop:
    """The update of a batch: the optimizer, its schedule and scaler, and the mechanics of an update;
    the algorithm whose loss it minimises plans the steps (:class:`Plan`).

    Args:
        config: The run's configuration.
        dist: The data-parallel group (one process: a no-op).
        policy: The policy, set to train mode for the update (``None``: a run that loads none).
        algorithm: What gives the loss of a micro-batch (``loss``), whether a step's items are rows
            (``items_are_rows``), when to stop (``stop_early``) and what to train (``parameters_to_train``).
        autocast_dtype: The forward passes' compute dtype: fp16 scales the gradients.
        device: Where the update runs.
    """

    def __init__(
        self, config: TrainConfig, dist: Distributed, policy: LLMPolicy | None, algorithm: Any,
        autocast_dtype: torch.dtype | None, device: torch.device,
    ):
        self.config, self.dist, self.policy, self.algorithm = config, dist, policy, algorithm
        self.optimizer = adamw(algorithm.parameters_to_train(), config.learning_rate, config.weight_decay, config.fused_optimizer)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda step: lr_factor(step, config.steps, config.warmup_steps, config.lr_schedule)
        )
        # fp16 autocast needs its gradients scaled; otherwise the scaler passes everything through.
        self.scaler = torch.amp.GradScaler(device.type, enabled=autocast_dtype == torch.float16)

    def params(self) -> list[torch.nn.Parameter]:
        """Every parameter the optimizer steps."""
        return [p for group in self.optimizer.param_groups for p in group["params"]]

    def optimize(self, batch: Any, plan: Plan, record: LearnerRecord | None = None, at_step: int = 0) -> dict[str, float]:
        """Run ``plan``'s optimizer steps on ``batch``; the learning-rate schedule advances once.
        ``record``: keep the first optimizer step's loss log-probs there (later steps see updated weights).

        Returns the plan's statistics, the mean over optimizer steps of each step's (its
        micro-batches' shares added up, and ``loss/grad_norm``), ``loss/updates`` (optimizer
        steps taken) and ``loss/early_stopped``.
        """
        if self.policy is not None:  # None: a run that loads no policy (Trainer.needs_policy)
            self.policy.model.train()
        stats, stopped = StepStats(), False
        for step in plan.steps:
            shares: dict[str, float] = {}
            chunks = split_items(self.config, batch, step.items, self.algorithm.items_are_rows)
            for items in chunks:
                out = LossOutput(*self.algorithm.loss(batch, items, step))
                if record is not None and out.logprobs is not None:
                    record.keep(batch, items, out.logprobs)
                self.backward(out.loss)
                StepStats.add(shares, out.stats)
            if not chunks:  # nothing carried a gradient: a zero one, so that the optimizer steps as it would have
                self.zero_gradients()
            record = None  # the loss passes of later steps see updated weights
            shares["loss/grad_norm"] = self.optimizer_step()
            stats.step_done(shares)
            reason = self.algorithm.stop_early(shares)
            if reason:
                stopped = True
                print(f"{self.algorithm.name}: step {at_step}: early stop after {stats.steps} optimizer step(s): {reason}")
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
        for param in self.params():
            param.grad = torch.zeros_like(param)

    def optimizer_step(self) -> float:
        """Clip gradients, step the optimizer, zero the gradients; return the gradient norm.

        Under fp16 the gradients are unscaled first, and a step whose gradients overflowed is
        skipped (the scaler lowers its scale; the returned norm is then inf). The learning-rate
        schedule is the loop's (:meth:`optimize`): once per batch.
        """
        params = self.params()
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

    def state_dict(self) -> dict[str, Any]:
        """The optimizer's, the schedule's and the scaler's states (a checkpoint's keys of those names)."""
        return {"optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict(), "scaler": self.scaler.state_dict()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`'s states; the learning rates are then this run's schedule's at
        the step resumed: the saved optimizer holds the saved run's, which differ where ``steps``
        changed under a decaying schedule (a 1-step linear run saved its rate at the end of its
        schedule, zero, and resumed to 2 steps its next step would have taken no step at all)."""
        cfg = self.config
        self.optimizer.load_state_dict(state["optimizer"])
        set_fused(self.optimizer, cfg.fused_optimizer)
        self.scheduler.load_state_dict(state["scheduler"])
        factor = lr_factor(self.scheduler.last_epoch, cfg.steps, cfg.warmup_steps, cfg.lr_schedule)
        for group, base in zip(self.optimizer.param_groups, self.scheduler.base_lrs):
            group["lr"] = base * factor
        self.scheduler._last_lr = [group["lr"] for group in self.optimizer.param_groups]  # what get_last_lr() reports
        if self.scaler.is_enabled() and state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])
