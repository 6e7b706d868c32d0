"""One-step off-policy overlap (``off_policy_steps=1``): sample the next batch while the learner updates.

Without it a step samples its rollouts and then updates on them: the sampler waits for the
learner and the learner for the sampler. With it, as soon as step ``t``'s batch is in hand,
step ``t + 1``'s rollouts start in a background thread on a *snapshot* of the weights (a copy
of the policy's model, refreshed from the learner's weights before each batch), and step
``t``'s update runs meanwhile on the learner. Timeline::

    step 0:  sample batch 0 (weights w0)  | update w0 -> w1 on batch 0, while batch 1 is sampled with w0
    step 1:  take batch 1                 | update w1 -> w2 on batch 1, while batch 2 is sampled with w1
    ...

Every batch after the first is therefore exactly one update stale (``rollout/staleness`` is 1;
0 for a batch sampled by the current weights): its ``sampler_logprobs`` are those of the
weights before the previous update, so the sampler/learner mismatch the trainer measures
(``rollout/logprob_*``) includes the staleness, and ``mismatch_correction`` (``tis``,
``seq_mask``...) reweights the stale batch like any other sampler/learner mismatch.

Threads: torch kernels release the GIL, so sampling and the update run in parallel. On CPU
each side gets half of the ``threads`` (or of torch's default), at least one.

Determinism: a batch's samples are keyed by its step (:meth:`~mathgym.algos.trainer.Trainer.sampling_seed`),
its tasks by the step (and the curriculum's state), and the sampler never draws from the
global RNGs the update uses (dropout): the same seed gives the same run. A checkpoint holds
the pending batch (sampled, waited for), so a resumed run trains on the batch the uninterrupted
run would have, sampled by the weights it would have used.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, NamedTuple

import torch

from mathgym.agents.policy import LLMPolicy
from mathgym.algos.batch import RolloutBatch


class Rollouts(NamedTuple):
    """A step's batch with what its sampling reported."""

    step: int
    batch: RolloutBatch
    stats: dict[str, float]  # dynamic sampling's and the curriculum's metrics of the step
    weights_step: int  # the step whose weights (before its update) sampled it

    @property
    def staleness(self) -> int:
        """Updates between the weights that sampled the batch and those that train on it."""
        return self.step - self.weights_step


def snapshot_policy(policy: LLMPolicy) -> LLMPolicy:
    """A copy of ``policy`` with its own model (same tokenizer, backend, precision), frozen, in eval mode."""
    model = copy.deepcopy(policy.model)
    model.requires_grad_(False)
    model.eval()
    sampler = dataclasses.replace(policy, model=model, _backend_impl=None)
    sampler.set_backend(policy.backend)
    return sampler


@torch.no_grad()
def copy_weights(source: LLMPolicy, target: LLMPolicy) -> None:
    """Copy ``source``'s trainable parameters (the adapter under LoRA) into ``target``'s model."""
    params = dict(target.model.named_parameters())
    for name, p in source.model.named_parameters():
        if p.requires_grad:
            params[name].copy_(p.detach())
    target.mark_weights_updated()


def split_threads(total: int) -> int:
    """The torch CPU threads of each side (sampler, learner) out of ``total``: half, at least one."""
    return max(1, total // 2)


class RolloutsAhead:
    """Samples a step's batch in a background thread on a snapshot of the learner's weights.

    Args:
        policy: The learner (trained in the main thread).
        make: ``step -> (batch, stats)``: the trainer's rollouts of a step, run on :attr:`sampler`.
        threads: torch CPU threads of the sampling thread (0: leave torch's setting).
    """

    def __init__(
        self, policy: LLMPolicy, make: Callable[[int], tuple[RolloutBatch, dict[str, float]]], threads: int = 0
    ):
        self.policy = policy
        self.sampler = snapshot_policy(policy)
        self.make = make
        self.threads = threads
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mathgym-rollouts")
        self._pending: Future[Rollouts] | None = None
        self._pending_step: int | None = None

    def start(self, step: int, weights_step: int) -> None:
        """Sample ``step``'s batch in the background with the learner's weights as they are now
        (those of ``weights_step``, before its update)."""
        self.wait()  # at most one batch ahead
        copy_weights(self.policy, self.sampler)
        self._pending_step = step
        self._pending = self._pool.submit(self._sample, step, weights_step)

    def _sample(self, step: int, weights_step: int) -> Rollouts:
        if self.threads:
            torch.set_num_threads(self.threads)
        batch, stats = self.make(step)
        return Rollouts(step, batch, stats, weights_step)

    def take(self, step: int) -> Rollouts:
        """``step``'s batch: the one sampled ahead, else sampled now (with the current weights)."""
        if self._pending_step != step:
            self.start(step, step)
        future, self._pending, self._pending_step = self._pending, None, None
        return future.result()

    def wait(self) -> Rollouts | None:
        """Wait for the batch in progress (a checkpoint holds it); ``None`` when there is none."""
        return None if self._pending is None else self._pending.result()

    def state_dict(self) -> dict[str, Any] | None:
        """The pending batch, sampled (waited for); ``None`` when nothing is pending."""
        ready = self.wait()
        return None if ready is None else ready._replace(batch=ready.batch.to("cpu"))._asdict()

    def load_state_dict(self, state: dict[str, Any] | None) -> None:
        """Make what :meth:`state_dict` returned the pending batch."""
        self.wait()
        self._pending = self._pending_step = None
        if state is None:
            return
        future: Future[Rollouts] = Future()
        future.set_result(Rollouts(**state))
        self._pending, self._pending_step = future, int(state["step"])

    def close(self) -> None:
        """Wait for the batch in progress (its errors are not raised again) and stop the thread."""
        if self._pending is not None:
            self._pending.exception()
        self._pending = self._pending_step = None
        self._pool.shutdown(wait=True)
