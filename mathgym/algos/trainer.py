"""The loop every trainer shares: rollout → reward → advantage → loss → log → checkpoint.

The loop owns the step mechanics; an algorithm supplies its batch and its loss. One step
(:meth:`Trainer.train_step`):

1. :meth:`~Trainer.make_batch`: the rollouts of the step (DPO and SFT read theirs from data); with
   ``off_policy_steps=1`` the batch sampled during the previous step's update, on a snapshot of
   the weights, while this step's update samples the next (:mod:`mathgym.algos.overlap`);
2. :meth:`~Trainer.score_learner`: the learner's log-probs (and a critic's values) before the
   update, with no gradient, on the rows the update needs (:meth:`~Trainer.learner_rows`); the
   sampler/learner mismatch is measured on them. Where nothing before the first gradient needs
   them (:meth:`~Trainer.learner_pass_needed`: GRPO with one pass over the batch, no KL penalty in
   the reward, no mismatch correction, no overlap, no dropout) the pass is skipped and the mismatch
   is measured after the update, on the rows trained on, from the loss's own forward pass;
3. :meth:`~Trainer.plan` (the algorithm): advantages, reference log-probs, pairs... and the
   optimizer steps of the batch (a :class:`~mathgym.algos.update.Plan`);
4. :meth:`~Trainer.optimize` (the loop): for each optimizer step, the algorithm's
   :meth:`~Trainer.loss` on each of ``grad_accum_steps`` micro-batches, backward, one
   optimizer step; the learning-rate schedule advances once per batch; statistics add up.

Other hooks: :meth:`needs_policy` (a trainer that learns from data alone loads no policy),
:meth:`setup` (reference model, value head...), :meth:`parameters_to_train`,
:meth:`stop_early` (PPO's target KL), and :meth:`extra_state` / :meth:`load_extra_state`
(anything else to checkpoint).

Data-parallel runs (``accelerate launch`` / ``torchrun``, see
:mod:`mathgym.algos.distributed`) go through ``self.dist``: a trainer that sets
``data_parallel = True`` normalises its loss with ``self.dist.normalizer`` (global counts)
so that the ranks' summed gradients equal the single-process gradient.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import time
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch

from mathgym.agents.policy import LLMPolicy, LoraSettings, SamplingParams, pick_device, pick_precision
from mathgym.agents.settings import write_model_settings
from mathgym.agents.tiny import TINY_MODEL, tiny_model_path
from mathgym.algos.answer_bounds import check_answer_bounds
from mathgym.algos.batch import Episode, RolloutBatch
from mathgym.algos.checkpoint import (
    OptionChange,
    check_resume,
    latest_checkpoint,
    load_checkpoint,
    resume_changes,
    rng_state,
    save_checkpoint,
    set_rng_state,
    trainable_state,
)
from mathgym.algos.configs import TrainConfig, resolved_env_kwargs
from mathgym.algos.curriculum import LevelCurriculum, build_curriculum, group_outcomes
from mathgym.algos.distributed import Distributed, NullLogger
from mathgym.algos.dynamic_sampling import extra_task_seeds, select_groups, split_groups
from mathgym.algos.evaluate import EvalResult, evaluate_policy
from mathgym.algos.executors import vector_env_factory
from mathgym.algos.metrics import MetricsLogger, episode_samples, plot_reward_curve, rollout_metrics
from mathgym.algos.overlap import Rollouts, RolloutsAhead, split_threads
from mathgym.algos.rollout import RolloutCollector, RolloutSettings, VectorEnvFactory, check_run_room
from mathgym.algos.run_dir import RunDirLock, check_new_run_dir, check_not_in_use, fresh_run_dir
from mathgym.algos.update import UpdateLoop, lr_factor
from mathgym.errors import ConfigError
from mathgym.options import save_config


@dataclass
class TrainResult:
    """What a finished run reports."""

    run_dir: Path
    steps: int
    wall_time_s: float
    eval_before: EvalResult | None
    eval_after: EvalResult | None
    final_model: Path | None
    first_step: int = 0
    """The step this process started from (> 0 when the run was resumed)."""
    eval_split: str | None = None
    """The ``split`` the evaluations ran on (``eval_env_kwargs``); ``None`` or ``"test"``: held-out tasks."""
    trained_task_ids: frozenset[str] = frozenset()
    """Every task the run drew for training (its summary says which evaluated tasks were among them)."""

    def _steps_text(self) -> str:
        ran = self.steps - self.first_step
        if self.first_step:
            return f"{ran} steps (resumed at step {self.first_step}, {self.steps} in all) in {self.wall_time_s:.0f}s"
        return f"{ran} steps in {self.wall_time_s:.0f}s"

    def summary(self, env_id: str) -> str:
        if self.eval_before is None or self.eval_after is None:
            return f"run {self.run_dir}: {self._steps_text()}"
        b, a = self.eval_before.pass_at_1 * 100, self.eval_after.pass_at_1 * 100
        return (
            f"accuracy before -> after: {b:.1f}% -> {a:.1f}% ({a - b:+.1f} points), greedy pass@1 on "
            f"{evaluated_tasks(self.eval_after, self.eval_split, env_id, self.trained_task_ids)}; {self._steps_text()}; "
            f"run dir {self.run_dir}"
        )


def tasks_word(split: str | None) -> str:
    """What evaluated tasks of ``split`` are called: held-out (the test split, or an env without splits), else their split's."""
    return "held-out" if split in (None, "test") else f"{split}-split"


def evaluated_tasks(result: EvalResult, split: str | None, env_id: str = "", trained: frozenset[str] | set[str] = frozenset()) -> str:
    """``"200 held-out MathReason-v0 tasks"``; where the evaluation repeated tasks (a data set
    smaller than it), how many were distinct, and where some were also drawn for training
    (a data set with no held-out split), how many, and the word held-out is dropped."""
    distinct = len(result.task_ids)
    seen = len(trained.intersection(result.task_ids))
    env = f" {env_id}" if env_id else ""
    if not seen:
        repeats = f", {distinct} distinct" if 0 < distinct < result.num_tasks else ""
        return f"{result.num_tasks} {tasks_word(split)}{env} tasks{repeats}"
    where = "" if split in (None, "test") else f" of the {split} split"
    return (f"{result.num_tasks}{env} tasks{where}, {distinct} distinct, {seen} of them also drawn for training (not held out: "
            "--eval-env-kwargs naming a data set of other tasks measures on unseen ones)")


def default_run_dir(algo: str, env_id: str) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{algo}-{env_id}-{stamp}"


def pretrained_path(config: TrainConfig) -> str:
    """``config.model`` as a loadable path or hub id, where no training is needed to get it: the
    tiny model is the embedded one as built (``warm_start_steps=0``); its SFT warm start is a step
    before the trainer (:func:`mathgym.algos.warm_start.prepare_model`), which passes its path on."""
    if config.model != TINY_MODEL:
        return config.model
    if config.warm_start_steps == 0:
        return str(tiny_model_path())
    raise ConfigError(
        f"model={TINY_MODEL!r} starts from the tiny model's SFT warm start (warm_start_steps={config.warm_start_steps}), "
        "which runs before the trainer: pass model_path=prepare_model(config) (from mathgym.algos.warm_start) to the "
        "trainer, or set warm_start_steps=0 for the untrained tiny model."
    )


def readable_as_umask_allows(path: Path) -> None:
    """Give the files under ``path`` the modes the umask allows: writers that go through a
    private temporary file (safetensors) leave them 0600."""
    mask = os.umask(0)
    os.umask(mask)
    for item in [path, *path.rglob("*")]:
        os.chmod(item, (0o777 if item.is_dir() else 0o666) & ~mask)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


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


class Trainer(UpdateLoop):
    """Base trainer: owns the policy, optimizer, scheduler, collector, logging and checkpoints; the update
    of each batch is :class:`~mathgym.algos.update.UpdateLoop`'s.

    Args:
        config: The run's configuration (a :class:`TrainConfig` subclass).
        run_dir: Run directory (default ``runs/<algo>-<env>-<time>``, made new). It holds one run: the
            trainer holds its lock while it lives (another process that would train there is refused),
            and :meth:`train` refuses a directory that holds an earlier run unless :meth:`resume`
            loaded that run first.
        policy: An existing policy (default: built from ``model_path``, unless :meth:`needs_policy` says no).
        model_path: Where the policy's weights are (default: ``config.model``; the tiny model's
            warm start is made before the trainer: :func:`mathgym.algos.warm_start.prepare_model`).
    """

    algo_name: ClassVar[str] = "base"
    #: The update normalises its loss by global counts (``self.dist.normalizer``), so summing
    #: the ranks' gradients gives the full-batch gradient; False: single-process only.
    data_parallel: ClassVar[bool] = False
    #: Loss statistics that are each rank's share of a global sum (added across ranks, not averaged).
    summed_stats: ClassVar[tuple[str, ...]] = ()
    progress_metric: ClassVar[str] = "rollout/reward"
    """The metric the progress bar shows after each step."""

    def __init__(
        self, config: TrainConfig, run_dir: str | Path | None = None, policy: LLMPolicy | None = None,
        model_path: str | Path | None = None,
    ):
        config.validate()
        self.config = config
        if Distributed.launched_world_size() > 1 and not self.data_parallel:
            raise ConfigError(f"--algo {self.algo_name} does not support data-parallel training yet; run it in one process.")
        exchanges_groups = config.dynamic_sampling or config.curriculum != "none"
        if Distributed.launched_world_size() > 1 and config.off_policy_steps and exchanges_groups:
            raise ConfigError(
                "off_policy_steps=1 with dynamic_sampling or a curriculum runs in one process only: their rounds "
                "exchange groups between ranks while the update exchanges gradients. Set off_policy_steps=0 or run "
                "one process."
            )
        self.dist = Distributed.from_environment(config.device)
        # Ranks must agree on the run directory (the default holds a time stamp): rank 0's wins.
        self.run_dir = Path(self.dist.broadcast_object(str(run_dir or config.run_dir or default_run_dir(self.algo_name, config.env))))
        if self.dist.is_main:
            check_not_in_use(self.run_dir)  # before the model loads: a live run's directory is refused at once
        if config.threads:
            torch.set_num_threads(config.threads)
        seed_everything(config.seed)
        self.policy: LLMPolicy | None = policy or (self.build_policy(model_path) if self.needs_policy() else None)
        #: Where ``config.model``'s weights are (what the policy was loaded from, or would be).
        self.model_path = self.policy.name_or_path if self.policy is not None else self.resolved_model_path(model_path)
        # Where the update runs and its forward passes' compute dtype: the policy's, or without one
        # config.device and config.dtype resolved as a policy resolves them.
        if self.policy is not None:
            self.device, self.autocast_dtype = self.policy.device, self.policy.autocast_dtype
        else:
            self.device = pick_device(self.dist.device(config.device))
            self.autocast_dtype = pick_precision(config.dtype, self.device).autocast
        # off_policy_steps=1: the next batch is sampled in a thread on a copy of the weights (mathgym.algos.overlap);
        # on CPU the sampler and the learner each get half the threads.
        self.ahead: RolloutsAhead | None = None
        if config.off_policy_steps and self.policy is not None:
            threads = 0 if self.policy.device.type != "cpu" else split_threads(config.threads or torch.get_num_threads())
            if threads:
                torch.set_num_threads(threads)
            self.ahead = RolloutsAhead(self.policy, self.sample_rollouts, threads)
        # The env options come from the model's own mathgym.json, then the config (see resolved_env_kwargs).
        self.env_kwargs = resolved_env_kwargs(config, model_dir=self.model_path)
        self.eval_env_kwargs = resolved_env_kwargs(config, evaluation=True, model_dir=self.model_path)
        self.setup()
        self.dist.broadcast_parameters(self._params())
        self.optimizer = adamw(self.parameters_to_train(), config.learning_rate, config.weight_decay, config.fused_optimizer)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda step: lr_factor(step, config.steps, config.warmup_steps, config.lr_schedule)
        )
        # fp16 autocast needs its gradients scaled; otherwise the scaler passes everything through.
        fp16 = self.autocast_dtype == torch.float16
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=fp16)
        # Randomness of the update (PPO's minibatch order), the same on every rank; the rollouts'
        # samples are keyed by task instead (sampling_seed).
        self.generator = torch.Generator().manual_seed(config.seed)
        self.step = 0
        self.eval_before: EvalResult | None = None
        self.trained_task_ids: set[str] = set()  # every task drawn for training (the summary's held-out check)
        self.resume_changes: list[OptionChange] = []
        self._collectors: dict[int | None, RolloutCollector] = {}  # by curriculum level (None: the env options as given)
        self.curriculum = build_curriculum(config, self.env_kwargs)
        self._executor: Any = None  # config.executor's vector-env factory, made on first use
        self._config_saved = False
        self.sampling_stats: dict[str, float] = {}  # what make_batch reports of its step (dynamic sampling)
        self._run_dir_lock: RunDirLock | None = None
        self._run_dir_claimed = False  # resume() loaded the run there, or train() found no earlier run
        # only now: a run that cannot start leaves no directory
        self.run_dir = self._hold_run_dir(defaulted=not (run_dir or config.run_dir))
        self.logger: MetricsLogger | NullLogger = NullLogger(self.run_dir)
        if self.dist.is_main:  # config.yaml waits for train() or resume(): a directory that holds a run keeps its own
            self.logger = MetricsLogger(self.run_dir, config.log_tensorboard, config.log_wandb, config.to_dict())

    # -- construction hooks -----------------------------------------------------------

    def needs_policy(self) -> bool:
        """Whether the run loads the policy (``config.model``); default yes. A trainer that learns
        from data alone (``--algo rm`` on a preference file) says no and spends no memory on it:
        ``self.policy`` is then ``None``, nothing samples or plays the env evaluation, and
        checkpoints hold no policy weights."""
        return True

    def resolved_model_path(self, model_path: str | Path | None = None) -> str:
        """``model_path``, or ``config.model`` as a loadable path or hub id (:func:`pretrained_path`)."""
        with self.dist.main_first():  # rank 0 builds the tiny model's files alone; the others read them
            return str(model_path) if model_path is not None else pretrained_path(self.config)

    def autocast(self) -> contextlib.AbstractContextManager:
        """A context computing forward passes in the run's compute dtype (a no-op when that is the weights' own)."""
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.autocast_dtype)

    def build_policy(self, model_path: str | Path | None = None) -> LLMPolicy:
        """Load ``model_path`` (default: ``config.model``, see :func:`pretrained_path`)."""
        cfg = self.config
        path = self.resolved_model_path(model_path)
        targets = cfg.lora_target_modules
        lora = LoraSettings(
            r=cfg.lora_r, alpha=cfg.lora_alpha, target_modules=targets if targets == "all-linear" else tuple(targets.split(","))
        )
        return LLMPolicy.from_pretrained(
            path, lora=lora, device=self.dist.device(cfg.device), dtype=cfg.dtype, backend=cfg.backend,
            gradient_checkpointing=cfg.gradient_checkpointing, chat_template_kwargs=cfg.chat_template_kwargs,
        )

    def setup(self) -> None:
        """Called after the policy exists and before the optimizer is built."""

    def parameters_to_train(self) -> list[torch.nn.Parameter]:
        return self.policy.trainable_parameters()

    # -- data -----------------------------------------------------------------------------

    @property
    def sampling(self) -> SamplingParams:
        cfg = self.config
        return SamplingParams(cfg.temperature, cfg.top_p, cfg.max_new_tokens)

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
            settings = RolloutSettings(
                cfg.group_size, self.sampling, cfg.max_episode_tokens, cfg.max_turns or None, cfg.vectorization_mode
            )
            num_tasks = cfg.num_tasks // self.dist.world_size  # this rank's share (see make_batch)
            env_kwargs = self.env_kwargs if level is None else {**self.env_kwargs, cfg.curriculum_level_option: level}
            if not self._collectors:  # the run's first rollout envs: a served env's server is asked for the whole run's
                check_run_room(cfg, env_kwargs, num_tasks)
            self._collectors[level] = RolloutCollector(cfg.env, env_kwargs, self.rollout_policy, num_tasks, settings, self.make_envs)
        return self._collectors[level]

    @property
    def rollout_policy(self) -> LLMPolicy:
        """The policy that samples rollouts: the learner, or under ``off_policy_steps=1`` its snapshot."""
        return self.policy if self.ahead is None else self.ahead.sampler

    def sample_rollouts(self, step: int) -> tuple[RolloutBatch, dict[str, float]]:
        """:meth:`make_batch` of ``step`` and what its sampling reported (dynamic sampling, the
        curriculum, the time it took). Under ``off_policy_steps=1`` it runs in the sampling thread."""
        start = time.perf_counter()
        self.sampling_stats = {}
        batch = self.make_batch(step)
        self.trained_task_ids.update(task for task in getattr(batch, "task_ids", None) or () if task)
        return batch, {**self.sampling_stats, "perf/rollout_s": time.perf_counter() - start}

    def rollouts(self) -> Rollouts:
        """The batch of the current step; under ``off_policy_steps=1`` the one sampled during the
        previous step's update, and the next step's sampling is started."""
        if self.ahead is None:
            return Rollouts(self.step, *self.sample_rollouts(self.step), weights_step=self.step)
        ready = self.ahead.take(self.step)
        if self.step + 1 < self.config.steps:
            self.ahead.start(self.step + 1, weights_step=self.step)
        return ready

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

    def make_batch(self, step: int) -> RolloutBatch:
        """The batch of ``step`` (default: rollouts of the policy on fresh tasks; this rank's
        contiguous share of ``task_seeds(step)`` under data-parallel training). A task's samples
        are drawn from its own streams (:meth:`sampling_seed`), so that ``W`` ranks collect the
        episodes one process would. With ``dynamic_sampling``, groups without a learning signal
        are replaced by those of further tasks (:mod:`mathgym.algos.dynamic_sampling`)."""
        cfg = self.config
        if not cfg.dynamic_sampling and self.curriculum is None:
            return self.collector.collect(self.dist.shard(self.task_seeds(step)), sampling_seed=self.sampling_seed(step))

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

        if cfg.dynamic_sampling:
            band = (cfg.keep_pass_rate_min, cfg.keep_pass_rate_max)
            groups, self.sampling_stats = select_groups(rounds, cfg.num_tasks, cfg.max_extra_rounds, band)
        else:
            groups = rounds(0)
        if self.curriculum is not None:
            self.sampling_stats.update(self.curriculum.metrics())
        episodes = [e for group in self.dist.shard(groups) for e in group]
        return RolloutBatch.from_episodes(episodes, self.policy.pad_token_id)

    def _params(self) -> list[torch.nn.Parameter]:
        """Every parameter the optimizer steps."""
        groups = self.parameters_to_train()
        if groups and isinstance(groups[0], dict):
            return [p for g in groups for p in g["params"]]
        return list(groups)

    # -- evaluation ----------------------------------------------------------------------------

    def evaluate(self) -> EvalResult:
        """Greedy pass@1 (or pass@k) on the fixed held-out task set."""
        cfg = self.config
        with self.policy.autocast():
            return evaluate_policy(
                self.policy, cfg.env, self.eval_env_kwargs, num_tasks=cfg.eval_tasks,
                seed=cfg.eval_seed, k=cfg.eval_samples, temperature=cfg.temperature, max_new_tokens=cfg.max_new_tokens,
                max_episode_tokens=cfg.max_episode_tokens, max_turns=cfg.max_turns or None, make_envs=self.make_envs,
                progress=cfg.progress,
            )

    # -- checkpoints -------------------------------------------------------------------------------

    def extra_state(self) -> dict[str, Any]:
        """Subclass state to checkpoint (value head, ...)."""
        return {}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`extra_state` returned."""

    def state_dict(self) -> dict[str, Any]:
        """Everything a resumed run needs to continue exactly: weights (the adapter under LoRA),
        optimizer, LR scheduler, gradient scaler, the update's generator (PPO's minibatch order),
        the global RNGs, the step, the evaluation before training, the subclass's :meth:`extra_state`, the
        curriculum's pass rates or level, and the
        configuration and algorithm (to say what a resumed run changed). A collective under
        data-parallel training: every rank calls it."""
        # first wait for the batch sampled ahead: its sampling moves the curriculum's state
        ahead = None if self.ahead is None else self.ahead.state_dict()
        state = {
            "step": self.step,
            "algo": self.algo_name,
            "config": self.config.to_dict(),
            "model": {} if self.policy is None else trainable_state(self.policy.model),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "scaler": self.scaler.state_dict(),
            "generator": self.generator.get_state(),
            "rng": rng_state(),
            "eval_before": self.eval_before,
            "extra": self.extra_state(),
            "curriculum": None if self.curriculum is None else self.curriculum.state_dict(),
            "rollouts_ahead": ahead,
            "trained_task_ids": self.all_trained_task_ids(),
        }
        if self.dist.enabled:  # each rank's generator, global RNGs (dropout) and batch ahead: a resumed run continues them
            own = {"generator": self.generator.get_state(), "rng": rng_state(), "rollouts_ahead": ahead}
            state["ranks"] = self.dist.gather_objects(own)
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned (the configuration is not touched)."""
        own = state  # this rank's generator and RNG states (a single-process checkpoint holds rank 0's only)
        if self.dist.enabled:
            ranks = state.get("ranks") or []
            if len(ranks) != self.dist.world_size:
                raise ConfigError(
                    f"this checkpoint was written by {len(ranks) or 1} process(es); resume it with as many, "
                    f"not {self.dist.world_size}."
                )
            own = ranks[self.dist.rank]
        if self.policy is not None:
            missing = self.policy.model.load_state_dict(state["model"], strict=False)
            if missing.unexpected_keys:
                raise RuntimeError(f"checkpoint holds unexpected weights: {missing.unexpected_keys[:5]}")
            self.policy.mark_weights_updated()
        elif state["model"]:
            raise RuntimeError(f"checkpoint holds policy weights, but this run loads no policy: {list(state['model'])[:5]}")
        self.optimizer.load_state_dict(state["optimizer"])
        set_fused(self.optimizer, self.config.fused_optimizer)
        self.scheduler.load_state_dict(state["scheduler"])
        self._resumed_learning_rates()
        if self.scaler.is_enabled() and state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])
        self.generator.set_state(own["generator"])
        set_rng_state(own["rng"])
        self.step = int(state["step"])
        self.eval_before = state.get("eval_before")
        self.trained_task_ids = set(state.get("trained_task_ids") or ())
        self.load_extra_state(state.get("extra", {}))
        if self.curriculum is not None and state.get("curriculum") is not None:  # absent: a checkpoint without one
            self.curriculum.load_state_dict(state["curriculum"])
        if self.ahead is not None:
            self.ahead.load_state_dict(own.get("rollouts_ahead"))

    def save(self) -> Path:
        """Checkpoint the run (rank 0 writes it; every rank gets its path)."""
        state = self.state_dict()
        path = save_checkpoint(self.run_dir, self.step, state) if self.dist.is_main else None
        return Path(self.dist.broadcast_object(str(path)))

    def save_config(self) -> None:
        """Write ``config.yaml`` (rank 0)."""
        if self.dist.is_main:
            save_config(self.config, self.run_dir / "config.yaml", {"algo": self.algo_name})
        self._config_saved = True

    def _hold_run_dir(self, defaulted: bool) -> Path:
        """Create the run directory (the default one made new) and hold its lock (rank 0); the directory."""
        if self.dist.is_main:
            if defaulted:
                self.run_dir = fresh_run_dir(self.run_dir)
            self._lock_run_dir()
        return Path(self.dist.broadcast_object(str(self.run_dir)))

    def _lock_run_dir(self) -> None:
        self._run_dir_lock = RunDirLock(self.run_dir)
        weakref.finalize(self, self._run_dir_lock.release)  # a trainer dropped unclosed lets go of it too

    def claim_run_dir(self) -> None:
        """Make sure this run may write its directory, before a file is touched: refused
        (:class:`~mathgym.errors.ConfigError`) when the directory holds an earlier run that
        :meth:`resume` did not load, or when another live process holds it. :meth:`train` calls
        it; a subclass that writes there before ``super().train()`` calls it first."""
        refusal = None
        if self.dist.is_main:
            try:
                if self._run_dir_lock is None or not self._run_dir_lock.held:  # closed by a train() before this one
                    self._lock_run_dir()
                if not self._run_dir_claimed:
                    check_new_run_dir(self.run_dir)
            except ConfigError as error:
                refusal = str(error)
        refusal = self.dist.broadcast_object(refusal)  # every rank stops, not rank 0 alone
        if refusal is not None:
            raise ConfigError(refusal)
        self._run_dir_claimed = True

    def resume(self) -> bool:
        """Load the run directory's latest checkpoint; ``False`` when there is none (the run then
        starts over: what a run killed before its first checkpoint logged is dropped).

        Options that differ from the checkpoint's configuration are printed (``old -> new``);
        one that shapes the training itself raises :class:`~mathgym.errors.ConfigError`
        before anything is loaded (see :data:`~mathgym.algos.checkpoint.FREE_ON_RESUME` and
        :data:`~mathgym.algos.checkpoint.WARN_ON_RESUME` for those that may change).
        """
        path = latest_checkpoint(self.run_dir)
        if path is None:
            self.logger.truncate_after(-1)
            self._run_dir_claimed = True
            return False
        state = load_checkpoint(path)
        self.resume_changes = resume_changes(state.get("config", {}), self.config.to_dict(), int(state["step"]))
        check_resume(self.run_dir, state.get("algo"), self.algo_name, self.resume_changes, quiet=not self.dist.is_main)
        self.load_state_dict(state)
        self.save_config()
        self.logger.truncate_after(self.step)
        self._run_dir_claimed = True
        return True

    def _resumed_learning_rates(self) -> None:
        """Set the optimizer's rates for the step the run resumes at, by this run's schedule. The loaded
        optimizer holds the saved run's, which differ where ``steps`` changed under a decaying schedule:
        a 1-step linear run saved its rate at the end of its schedule (zero), and resumed to 2 steps its
        next step would have taken no step at all."""
        cfg = self.config
        factor = lr_factor(self.scheduler.last_epoch, cfg.steps, cfg.warmup_steps, cfg.lr_schedule)
        for group, base in zip(self.optimizer.param_groups, self.scheduler.base_lrs):
            group["lr"] = base * factor
        self.scheduler._last_lr = [group["lr"] for group in self.optimizer.param_groups]  # what get_last_lr() reports

    # -- the loop ---------------------------------------------------------------------------------

    def train(self) -> TrainResult:
        """Run to ``config.steps``: evaluate before, train, checkpoint, evaluate after."""
        from tqdm.auto import tqdm

        cfg = self.config
        self.claim_run_dir()
        start, first_step = time.perf_counter(), self.step
        main = self.dist.is_main  # rank 0 alone evaluates, logs and writes files
        if not self._config_saved:
            self.save_config()
        if main and self.policy is not None:  # the env refuses a completion past its bound: say so now
            check_answer_bounds(cfg.env, self.env_kwargs, cfg.max_new_tokens)
        if cfg.eval_tasks and self.eval_before is None and main:
            self.eval_before = self.evaluate()
            self.logger.log(self.step, self.eval_before.as_metrics())
            print(f"accuracy before training: {self.eval_before.pass_at_1:.1%} (greedy, {evaluated_tasks(self.eval_before, self.eval_split())})")
        bar = tqdm(total=cfg.steps, initial=self.step, disable=not (cfg.progress and main), desc=f"{self.algo_name} {cfg.env}")
        while self.step < cfg.steps:
            metrics = self.dist.reduce_metrics(self.train_step(), self.summed_stats)
            self.step += 1
            if cfg.eval_every and self.step % cfg.eval_every == 0 and self.step < cfg.steps and main:
                metrics.update(self.evaluate().as_metrics())
            self.logger.log(self.step, metrics)
            bar.update(1)
            bar.set_postfix({self.progress_metric: f"{metrics.get(self.progress_metric, float('nan')):.3f}"})
            if cfg.save_every and self.step % cfg.save_every == 0:
                self.save()
        bar.close()
        self.save()
        trained = self.all_trained_task_ids()
        eval_after = None
        if cfg.eval_tasks and main:
            eval_after = self.evaluate()
            self.logger.log(self.step, {**eval_after.as_metrics(), "eval/final": 1.0})
            (self.run_dir / "eval.json").write_text(
                json.dumps({"before": vars(self.eval_before), "after": vars(eval_after)}, indent=2, default=str)
            )
        final = self.run_dir / "final"
        if main:
            self.save_model(final)
            readable_as_umask_allows(final)
            plot_reward_curve(self.run_dir)
        self.logger.close()
        self.close()
        return TrainResult(self.run_dir, self.step, time.perf_counter() - start, self.eval_before, eval_after, final, first_step,
                           self.eval_split(), trained)

    def all_trained_task_ids(self) -> frozenset[str]:
        """Every task drawn for training so far, by every rank (a collective call under data parallelism)."""
        return frozenset().union(*self.dist.gather_objects(sorted(self.trained_task_ids)))

    def eval_split(self) -> str | None:
        """The ``split`` the evaluations run on (``eval_env_kwargs``), or ``None`` where they name none."""
        split = self.eval_env_kwargs.get("split")
        return None if split is None else str(split)

    def save_model(self, path: str | Path) -> Path:
        """Save the policy with its ``mathgym.json`` (the env and generation settings it was
        trained and evaluated with), so ``eval/train --model PATH`` prompt it the same way."""
        cfg = self.config
        self.policy.save_pretrained(path)
        eval_only = {k: v for k, v in self.eval_env_kwargs.items() if self.env_kwargs.get(k, object()) != v}
        write_model_settings(path, {
            "env": cfg.env, "env_kwargs": self.env_kwargs, "eval_env_kwargs": eval_only, "chat_template_kwargs": self.policy.chat.template_kwargs,
            "generation": {"max_new_tokens": cfg.max_new_tokens, "max_episode_tokens": cfg.max_episode_tokens, "max_turns": cfg.max_turns},
        })
        return Path(path)

    def train_step(self) -> dict[str, float]:
        """One step: batch, learner pass (and the mismatch metric), plan, optimize (:meth:`learn`); returns the step's metrics."""
        t0 = time.perf_counter()
        with self.policy.autocast():  # fp16: forward passes in fp16, losses and log-softmax in fp32
            ready = self.rollouts()
            batch, sampling_stats = ready.batch, ready.stats
            t1 = time.perf_counter()
            batch, stats, mismatch, learner_pass_s = self.learn(batch, self.log_episode_samples if self.config.log_samples else None)
        t2 = time.perf_counter()
        tokens = float(batch.action_mask.sum())
        return {
            **rollout_metrics(batch),
            **sampling_stats,
            **mismatch,
            **stats,
            **({} if self.ahead is None else {"rollout/staleness": float(ready.staleness), "perf/rollout_wait_s": t1 - t0}),
            "perf/learner_pass_s": learner_pass_s,
            "perf/update_s": t2 - t1 - learner_pass_s,
            "perf/step_s": t2 - t0,
            "perf/tokens_per_s": tokens / max(sampling_stats["perf/rollout_s"], 1e-9),
            "optim/lr": float(self.scheduler.get_last_lr()[0]),
            **(self._executor.metrics() if hasattr(self._executor, "metrics") else {}),
            **({"optim/grad_scale": float(self.scaler.get_scale())} if self.scaler.is_enabled() else {}),
        }

    def log_episode_samples(self, batch: RolloutBatch) -> None:
        """Log ``config.log_samples`` episodes of the step's ``batch``."""
        self.logger.log_samples(self.step + 1, episode_samples(batch, self.config.log_samples))

    def close(self) -> None:
        if self.ahead is not None:  # first: its sampling uses the collectors
            self.ahead.close()
        for collector in self._collectors.values():
            collector.close()
        self._collectors = {}
        if self._executor is not None:
            self._executor.close()
            self._executor = None
        if self._run_dir_lock is not None:  # the run is over: the directory is free for a resume
            self._run_dir_lock.release()
        self.dist.close()
