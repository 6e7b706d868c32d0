"""Batch sources: where each step's batch comes from (:class:`BatchSource`).

A run draws its batches from one source: :class:`RolloutSource` plays the env with the policy
(dynamic sampling, a curriculum and sampling one step ahead included); the data-set sources of SFT,
DPO, reward models and PRMs live beside their algorithms and read a file. A source's
:meth:`~BatchSource.make_batch` is a pure function of the step (and of the source's checkpointed
state: the curriculum's pass rates, the batch sampled ahead), so a resumed run continues the data.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from mathgym.agents.policy import LLMPolicy, SamplingParams
from mathgym.algos.batch import Episode, RolloutBatch
from mathgym.algos.configs import TrainConfig
from mathgym.algos.curriculum import LevelCurriculum, build_curriculum, group_outcomes
from mathgym.algos.distributed import Distributed
from mathgym.algos.dynamic_sampling import extra_task_seeds, select_groups, split_groups
from mathgym.algos.executors import vector_env_factory
from mathgym.algos.metrics import rollout_metrics
from mathgym.algos.overlap import Rollouts, RolloutsAhead, split_threads
from mathgym.algos.rollout import RolloutCollector, RolloutSettings, VectorEnvFactory, check_run_room


class BatchSource:
    """Where a run's batches come from; subclasses implement :meth:`make_batch`."""

    #: The batch sampled during the previous step's update (``off_policy_steps=1``), or ``None``.
    ahead: RolloutsAhead | None = None

    def __init__(self) -> None:
        self.trained_task_ids: set[str] = set()  # every task drawn for training (the summary's held-out check)

    def make_batch(self, step: int) -> tuple[Any, dict[str, float]]:
        """The batch of ``step`` and what its sampling reported (dynamic sampling, the curriculum)."""
        raise NotImplementedError

    def sample(self, step: int) -> tuple[Any, dict[str, float]]:
        """:meth:`make_batch` of ``step``, the tasks it drew remembered, and the time it took
        (``perf/rollout_s``). Under ``off_policy_steps=1`` it runs in the sampling thread."""
        start = time.perf_counter()
        batch, stats = self.make_batch(step)
        self.trained_task_ids.update(task for task in getattr(batch, "task_ids", None) or () if task)
        return batch, {**stats, "perf/rollout_s": time.perf_counter() - start}

    def metrics(self, batch: Any) -> dict[str, float]:
        """What ``batch`` says of the policy: the rollouts' metrics (:func:`~mathgym.algos.metrics.rollout_metrics`)."""
        return rollout_metrics(batch) if isinstance(batch, RolloutBatch) else {}

    def state_dict(self) -> dict[str, Any]:
        """The source's state a checkpoint holds (its keys are the checkpoint's)."""
        return {"curriculum": None, "rollouts_ahead": None}

    def load_state_dict(self, state: dict[str, Any], ahead: dict[str, Any] | None = None) -> None:
        """Restore :meth:`state_dict`'s state (``ahead``: this rank's batch ahead)."""

    def close(self) -> None:
        """Release what the source holds (env workers, the sampling thread)."""


class RolloutSource(BatchSource):
    """Rollouts of ``sampler`` on ``config.env``: this rank's share of the step's tasks, with dynamic
    sampling, a curriculum and, under ``off_policy_steps=1``, the next batch sampled in a thread on a
    snapshot of the weights (:mod:`mathgym.algos.overlap`; on CPU the sampler and the learner each get
    half the threads).

    Args:
        config: The run's configuration.
        dist: The data-parallel group: each rank collects its contiguous share of the tasks.
        sampler: The policy that plays (the learner; a distillation's teacher).
        env_kwargs: The env options (the model's own ``mathgym.json``, then the config's).
        ahead: Sample one step ahead (the learner's weights are snapshotted before each update).
    """

    def __init__(self, config: TrainConfig, dist: Distributed, sampler: LLMPolicy, env_kwargs: dict[str, Any], ahead: bool = False):
        super().__init__()
        self.config, self.dist, self.sampler, self.env_kwargs = config, dist, sampler, env_kwargs
        if ahead:
            threads = 0 if sampler.device.type != "cpu" else split_threads(config.threads or torch.get_num_threads())
            if threads:
                torch.set_num_threads(threads)
            self.ahead = RolloutsAhead(sampler, self.sample, threads)
        self.curriculum = build_curriculum(config, env_kwargs)
        self._collectors: dict[int | None, RolloutCollector] = {}  # by curriculum level (None: the env options as given)
        self._executor: Any = None  # config.executor's vector-env factory, made on first use

    @property
    def make_envs(self) -> VectorEnvFactory | None:
        """The vector-env factory of ``config.executor`` (``None``: ``gym.make_vec``)."""
        if self._executor is None and self.config.executor != "local":
            self._executor = vector_env_factory(self.config)
        return self._executor

    @property
    def collector(self) -> RolloutCollector:
        """The collector of the current env options (under ``curriculum="level"``, one per level played)."""
        cfg = self.config
        level = self.curriculum.level if isinstance(self.curriculum, LevelCurriculum) else None
        if level not in self._collectors:
            sampling = SamplingParams(cfg.temperature, cfg.top_p, cfg.max_new_tokens)
            settings = RolloutSettings(cfg.group_size, sampling, cfg.max_episode_tokens, cfg.max_turns or None, cfg.vectorization_mode)
            num_tasks = cfg.num_tasks // self.dist.world_size  # this rank's share (see make_batch)
            env_kwargs = self.env_kwargs if level is None else {**self.env_kwargs, cfg.curriculum_level_option: level}
            if not self._collectors:  # the run's first rollout envs: a served env's server is asked for the whole run's
                check_run_room(cfg, env_kwargs, num_tasks)
            policy = self.sampler if self.ahead is None else self.ahead.sampler  # under off_policy_steps=1 its snapshot
            self._collectors[level] = RolloutCollector(cfg.env, env_kwargs, policy, num_tasks, settings, self.make_envs)
        return self._collectors[level]

    def task_seeds(self, step: int) -> list[int]:
        """Seeds of the tasks of ``step``: a pure function of (seed, step), so resuming continues the data."""
        n = self.config.num_tasks
        base = self.config.seed * 1_000_003 + step * n
        return [base + i for i in range(n)]

    def sampling_seed(self, step: int) -> int:
        """The key of ``step``'s samples: with a task's seed, its sample's index in the group and the
        turn it keys that sample's stream (:func:`~mathgym.algos.rollout.sample_stream_seed`). A pure
        function of (seed, step): every rank, and a resumed run, draws the same samples of a task."""
        return self.config.seed * 1_000_003 + step

    def make_batch(self, step: int) -> tuple[RolloutBatch, dict[str, float]]:
        """The rollouts of ``step`` (this rank's contiguous share of ``task_seeds(step)`` under
        data-parallel training). A task's samples are drawn from its own streams (:meth:`sampling_seed`),
        so that ``W`` ranks collect the episodes one process would. With ``dynamic_sampling``, groups
        without a learning signal are replaced by those of further tasks (:mod:`mathgym.algos.dynamic_sampling`)."""
        cfg = self.config
        if not cfg.dynamic_sampling and self.curriculum is None:
            return self.collector.collect(self.dist.shard(self.task_seeds(step)), sampling_seed=self.sampling_seed(step)), {}

        def rounds(round_: int) -> list[list[Episode]]:
            """Round ``round_``'s groups, every rank's, in task order; the curriculum observes them all."""
            if round_ == 0:
                seeds = self.task_seeds(step) if self.curriculum is None else self.curriculum.draw(step, self.task_seeds(step))
            else:
                seeds = extra_task_seeds(cfg.seed, step, round_, cfg.num_tasks)
            episodes = self.collector.collect_episodes(self.dist.shard(seeds), sampling_seed=self.sampling_seed(step))
            groups = [g for part in self.dist.gather_objects(split_groups(episodes, cfg.group_size)) for g in part]
            if self.curriculum is not None:
                self.curriculum.observe(step, group_outcomes(seeds, groups))
            return groups

        stats: dict[str, float] = {}
        if cfg.dynamic_sampling:
            band = (cfg.keep_pass_rate_min, cfg.keep_pass_rate_max)
            groups, stats = select_groups(rounds, cfg.num_tasks, cfg.max_extra_rounds, band)
        else:
            groups = rounds(0)
        if self.curriculum is not None:
            stats.update(self.curriculum.metrics())
        episodes = [e for group in self.dist.shard(groups) for e in group]
        return RolloutBatch.from_episodes(episodes, self.sampler.pad_token_id), stats

    def metrics(self, batch: Any) -> dict[str, float]:
        """The rollouts' metrics, and the executor's own counters (Ray's ``infra/actor_failures``)."""
        counters = self._executor.metrics() if hasattr(self._executor, "metrics") else {}
        return {**super().metrics(batch), **counters}

    def next_rollouts(self, step: int, steps: int) -> Rollouts:
        """Under ``off_policy_steps=1``: the batch of ``step`` sampled during the previous step's update,
        and the sampling of the next one started (``steps``: the run's last)."""
        ready = self.ahead.take(step)
        if step + 1 < steps:
            self.ahead.start(step + 1, weights_step=step)
        return ready

    def state_dict(self) -> dict[str, Any]:
        # first wait for the batch sampled ahead: its sampling moves the curriculum's state
        ahead = None if self.ahead is None else self.ahead.state_dict()
        return {"curriculum": None if self.curriculum is None else self.curriculum.state_dict(), "rollouts_ahead": ahead}

    def load_state_dict(self, state: dict[str, Any], ahead: dict[str, Any] | None = None) -> None:
        if self.curriculum is not None and state.get("curriculum") is not None:  # absent: a checkpoint without one
            self.curriculum.load_state_dict(state["curriculum"])
        if self.ahead is not None:
            self.ahead.load_state_dict(ahead)

    def close(self) -> None:
        if self.ahead is not None:  # first: its sampling uses the collectors
            self.ahead.close()
        for collector in self._collectors.values():
            collector.close()
        self._collectors = {}
        if self._executor is not None:
            self._executor.close()
            self._executor = None
