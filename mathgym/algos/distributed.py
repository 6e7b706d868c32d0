"""Data-parallel training over ``torch.distributed``, started by ``accelerate launch`` or ``torchrun``.

Each rank (process) holds a full copy of the model, collects its own contiguous share of
the step's tasks (with the samples one process would draw: each sample's random stream is
keyed by its task, not by the rank; see :mod:`mathgym.algos.rollout`), computes its loss with
*global* normalisers (token and sequence counts summed over every rank), and the ranks'
gradients are summed before the optimizer step (each is already its share of the full-batch
mean, so the sum is the full-batch gradient): two ranks with half a batch each make the
update of one process with the whole batch, up to float rounding
(``tests/algos/test_dp_equivalence.py``; what differs: docs/scaling.md). Metrics are reduced across ranks and logged by rank 0, which alone writes
checkpoints; every rank loads them to resume.

Launch (the launcher sets ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``)::

    accelerate launch --multi_gpu --num_processes 2 -m mathgym train --num-tasks 16
    torchrun --nproc_per_node 2 -m mathgym train --num-tasks 16

Without those variables :class:`Distributed` is the single-process no-op: every method
returns its input, so the trainer's code path is the same either way.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import torch
import torch.distributed as dist

from mathgym.algos.losses import Normalizer
from mathgym.errors import ConfigError

T = TypeVar("T")

# Set while rank 0 builds something alone (e.g. the tiny model's cached warm start): a trainer
# created meanwhile is single-process.
_LOCAL_ONLY: contextvars.ContextVar[bool] = contextvars.ContextVar("mathgym_local_only", default=False)


@dataclass(frozen=True)
class Distributed:
    """This process's place among the data-parallel ranks.

    Attributes:
        rank: Global rank (0 logs and saves).
        world_size: Number of ranks (1: a plain single-process run).
        local_rank: Rank on this machine (picks the GPU).
    """

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @staticmethod
    def launched_world_size() -> int:
        """The number of processes the launcher started (``WORLD_SIZE``; 1 without a launcher)."""
        return 1 if _LOCAL_ONLY.get() else int(os.environ.get("WORLD_SIZE", "1"))

    @classmethod
    def from_environment(cls, device: str = "auto") -> Distributed:
        """Join the process group described by the launcher's environment variables.

        Args:
            device: The config's device; CUDA ranks use NCCL, CPU ranks gloo.

        Returns:
            The single-process :class:`Distributed` when ``WORLD_SIZE`` is unset or 1.
        """
        world = cls.launched_world_size()
        if world <= 1:
            return cls()
        if "RANK" not in os.environ:
            raise ConfigError("WORLD_SIZE is set but RANK is not: start data-parallel runs with accelerate launch or torchrun.")
        ranks = cls(int(os.environ["RANK"]), world, int(os.environ.get("LOCAL_RANK", "0")))
        if not dist.is_initialized():
            cuda = ranks.device(device).startswith("cuda")
            if cuda:
                torch.cuda.set_device(ranks.local_rank)
            dist.init_process_group("nccl" if cuda else "gloo", timeout=timedelta(minutes=30))
        return ranks

    @property
    def enabled(self) -> bool:
        """``True`` with more than one rank."""
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """``True`` on rank 0 (the one that logs, evaluates and saves)."""
        return self.rank == 0

    def device(self, requested: str) -> str:
        """The device of this rank: ``cuda:<local_rank>`` for 'auto'/'cuda' on a GPU machine.

        ``accelerate launch --cpu`` (``ACCELERATE_USE_CPU=True``) forces the CPU.
        """
        if os.environ.get("ACCELERATE_USE_CPU", "").lower() == "true":
            return "cpu"
        if self.enabled and requested in ("auto", "cuda") and torch.cuda.is_available():
            return f"cuda:{self.local_rank}"
        return requested

    # -- splitting the data ---------------------------------------------------------------------

    def shard(self, items: Sequence[T]) -> list[T]:
        """This rank's contiguous share of ``items``: rank ``r`` of ``W`` gets
        ``items[r * n/W : (r + 1) * n/W]``, so the ranks' shares concatenated in rank order
        are ``items``.

        Raises:
            ConfigError: ``len(items)`` is not a multiple of the world size.
        """
        n = len(items)
        if n % self.world_size:
            raise ConfigError(
                f"{n} tasks (or demonstrations) per step cannot be split evenly over {self.world_size} processes: "
                f"make num_tasks (batch_size for sft) a multiple of {self.world_size}."
            )
        per = n // self.world_size
        return list(items[self.rank * per : (self.rank + 1) * per])

    # -- collectives ---------------------------------------------------------------------------------

    def gather_objects(self, obj: T) -> list[T]:
        """Every rank's ``obj`` (picklable), in rank order, on every rank."""
        if not self.enabled:
            return [obj]
        out: list[Any] = [None] * self.world_size
        dist.all_gather_object(out, obj)
        return out

    def broadcast_object(self, obj: T) -> T:
        """Rank 0's ``obj`` on every rank."""
        if not self.enabled:
            return obj
        box = [obj]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def sum(self, value: float) -> float:
        """Sum of ``value`` over the ranks."""
        return float(sum(self.gather_objects(float(value))))

    def barrier(self) -> None:
        if self.enabled:
            dist.barrier()

    def normalizer(self, mask: torch.Tensor, max_tokens: float) -> Normalizer:
        """The loss :class:`~mathgym.algos.losses.Normalizer` of the *global* batch.

        Masked tokens and sequences are summed over the ranks and ``max_tokens`` is their
        maximum, so each rank's loss is its exact share of the full batch's loss.
        With one rank it equals :func:`~mathgym.algos.losses.batch_normalizer`.
        """
        counts = torch.tensor([float(mask.sum()), float(mask.shape[0]), float(max_tokens)], dtype=torch.float64)
        if self.enabled:
            counts = torch.tensor(self.gather_objects(counts.tolist()), dtype=torch.float64)
            counts = torch.cat([counts[:, :2].sum(0), counts[:, 2].max(0, keepdim=True).values])
        return Normalizer(max(float(counts[0]), 1.0), max(float(counts[1]), 1.0), float(counts[2]))

    def gather_groups(self, rewards: torch.Tensor, group_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, slice]:
        """Every rank's episode rewards and group ids (renumbered to stay distinct), and the
        slice of them that is this rank's: statistics over the whole batch (e.g. GRPO's
        ``scale_rewards="batch"`` std) then match a single process's."""
        if not self.enabled:
            return rewards, group_ids, slice(None)
        parts = self.gather_objects((rewards.detach().cpu().tolist(), group_ids.detach().cpu().tolist()))
        all_rewards: list[float] = []
        all_groups: list[int] = []
        start = 0
        for rank, (r, g) in enumerate(parts):
            if rank == self.rank:
                start = len(all_rewards)
            offset = (max(all_groups) + 1) if all_groups else 0
            all_rewards += r
            all_groups += [gid + offset for gid in g]
        as_tensor = torch.tensor(all_rewards, dtype=rewards.dtype, device=rewards.device)
        return as_tensor, torch.tensor(all_groups, device=group_ids.device), slice(start, start + len(rewards))

    def all_reduce_gradients(self, params: Iterable[torch.nn.Parameter]) -> None:
        """Sum the gradients of ``params`` over the ranks (one flat all-reduce).

        A parameter that has no gradient on any rank keeps ``grad=None`` (as in a single
        process); one that has a gradient on some rank gets the sum (``None`` counts as 0).
        """
        if not self.enabled:
            return
        params = [p for p in params if p.requires_grad]
        if not params:
            return
        device = params[0].device
        present = torch.tensor([float(p.grad is not None) for p in params], device=device)
        dist.all_reduce(present)
        flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1).float() for p in params])
        dist.all_reduce(flat)
        offset = 0
        for p, has_grad in zip(params, present.tolist()):
            n = p.numel()
            if has_grad:
                p.grad = flat[offset : offset + n].view_as(p).to(p.dtype).clone()
            offset += n

    def broadcast_parameters(self, params: Iterable[torch.nn.Parameter]) -> None:
        """Copy rank 0's values of ``params`` to every rank (they must start equal)."""
        if not self.enabled:
            return
        with torch.no_grad():
            for p in params:
                dist.broadcast(p.data, src=0)

    def reduce_metrics(self, metrics: Mapping[str, float], summed: Iterable[str] = ()) -> dict[str, float]:
        """One step's metrics over every rank (each rank had an equal share of the batch).

        Means are averaged (a status absent on a rank counts as 0 there); ``*_max`` and
        ``perf/*_s`` timings take the maximum, ``*_min`` the minimum; counts (``infra/*``,
        ``rollout/infra_failures``), throughputs (``*_per_s``) and the keys in ``summed``
        (loss values that are each rank's share of a global sum) are added.
        """
        if not self.enabled:
            return dict(metrics)
        summed = set(summed)
        every = self.gather_objects(dict(metrics))
        out: dict[str, float] = {}
        for key in sorted({k for m in every for k in m}):
            values = [float(m[key]) for m in every if key in m]
            if key.startswith("rollout/status/"):
                values += [0.0] * (self.world_size - len(values))
            if key in summed or key.startswith("infra/") or key == "rollout/infra_failures" or key.endswith("_per_s"):
                out[key] = sum(values)
            elif key.endswith("_max") or (key.startswith("perf/") and key.endswith("_s")):
                out[key] = max(values)
            elif key.endswith("_min"):
                out[key] = min(values)
            else:
                out[key] = sum(values) / len(values)
        return out

    @contextlib.contextmanager
    def main_first(self) -> Iterator[None]:
        """Rank 0 runs the block alone (single-process), then the other ranks run it: for
        work whose result is cached on disk (the tiny model's warm start)."""
        if not self.is_main:
            self.barrier()
        token = _LOCAL_ONLY.set(True)
        try:
            yield
        finally:
            _LOCAL_ONLY.reset(token)
            if self.is_main:
                self.barrier()

    def close(self) -> None:
        """Leave the process group (at the end of a run)."""
        if self.enabled and dist.is_initialized():
            dist.barrier()
            dist.destroy_process_group()


class NullLogger:
    """Stands in for :class:`~mathgym.algos.metrics.MetricsLogger` on ranks other than 0."""

    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)

    def log(self, step: int, metrics: Mapping[str, Any]) -> None:
        """Rank 0 logs the reduced metrics; nothing to do here."""

    def log_samples(self, step: int, samples: Any) -> None:
        """Rank 0 writes ``samples.jsonl`` (its own share of the batch's episodes)."""

    def truncate_after(self, step: int) -> None:
        """Rank 0 owns ``metrics.jsonl``."""

    def close(self) -> None:
        """Nothing open."""
