"""A training run, composed: a batch source, an algorithm and the run's machinery (:class:`Trainer`).

- the batch source (:mod:`mathgym.algos.sources`): rollouts of the policy on the env (dynamic
  sampling, a curriculum, the next batch sampled during this step's update), or a data set (SFT's
  demonstrations, DPO's and the reward model's pairs, a PRM's labelled steps);
- the algorithm (:class:`~mathgym.algos.algorithm.Algorithm`): its plan of a batch and its loss,
  built once;
- the machinery: the policy, the update loop (:class:`~mathgym.algos.update.UpdateLoop`: optimizer,
  schedule, micro-batches), logging, checkpoints and the run directory.

Every algorithm goes through the same step, :meth:`Trainer.train_step`:

1. the batch (:meth:`~Trainer.rollouts`, from the source);
2. the learner's log-probs (and a critic's values) before the update, on the rows the algorithm
   names (:meth:`~Trainer.score_learner`), and the sampler/learner mismatch measured on them; where
   nothing before the first gradient needs them (the algorithm's ``learner_pass_needed``) the loss's
   own forward pass gives them, handed back in a :class:`~mathgym.algos.update.LearnerRecord`;
3. the algorithm's plan: advantages, reference log-probs, pairs... and its optimizer steps;
4. the loop's optimizer steps over the plan, each the algorithm's loss on ``grad_accum_steps``
   micro-batches; the learning-rate schedule advances once;
5. the step's metrics (with what the algorithm measures after it); :meth:`~Trainer.train` logs them
   and checkpoints every ``save_every`` steps.

A subclass per algorithm (``GRPOTrainer``...) names its algorithm and, where it reads a data set,
builds its batch source (:meth:`~Trainer.build_source`).

Data-parallel runs (``accelerate launch`` / ``torchrun``, see :mod:`mathgym.algos.distributed`) go
through ``self.dist``: an algorithm whose trainer sets ``data_parallel = True`` normalises its loss
with ``dist.normalizer`` (global counts) so that the ranks' summed gradients equal the
single-process gradient.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch

from mathgym.agents.policy import LLMPolicy, LoraSettings, pick_device, pick_precision
from mathgym.agents.settings import write_model_settings
from mathgym.agents.tiny import TINY_MODEL, tiny_model_path
from mathgym.algos.algorithm import Algorithm, RunParts
from mathgym.algos.answer_bounds import check_answer_bounds
from mathgym.algos.batch import RolloutBatch
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
from mathgym.algos.distributed import Distributed, NullLogger
from mathgym.algos.evaluate import EvalResult, evaluate_policy
from mathgym.algos.metrics import MetricsLogger, episode_samples, logprob_mismatch, plot_reward_curve
from mathgym.algos.overlap import Rollouts
from mathgym.algos.run_dir import RunDirLock, check_new_run_dir, check_not_in_use, fresh_run_dir
from mathgym.algos.sources import BatchSource, RolloutSource
from mathgym.algos.update import LearnerRecord, LearnResult, UpdateLoop, adamw, fusable, score_rows, set_fused
from mathgym.errors import ConfigError
from mathgym.options import save_config

__all__ = ["TrainResult", "Trainer", "adamw", "fusable", "pretrained_path", "set_fused"]


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


class Trainer:
    """A training run: a batch source, an algorithm and the machinery (see the module docstring).

    Args:
        config: The run's configuration (a :class:`TrainConfig` subclass).
        run_dir: Run directory (default ``runs/<algo>-<env>-<time>``, made new). It holds one run: the
            trainer holds its lock while it lives (another process that would train there is refused),
            and :meth:`train` refuses a directory that holds an earlier run unless :meth:`resume`
            loaded that run first.
        policy: An existing policy (default: built from ``model_path``, unless :meth:`needs_policy` says no).
        model_path: Where the policy's weights are (default: ``config.model``; the tiny model's
            warm start is made before the trainer: :func:`mathgym.algos.warm_start.prepare_model`).

    The parts are reached through their own attributes: ``trainer.algorithm`` (its reference, value
    head, teacher...), ``trainer.source`` (the collector, the curriculum, a data set's rows) and
    ``trainer.loop`` (the optimizer, its schedule and scaler).
    """

    algo_name: ClassVar[str] = "base"
    #: The algorithm of the run, built once from the run's parts (:class:`~mathgym.algos.algorithm.RunParts`).
    algorithm_class: ClassVar[type[Algorithm]] = Algorithm
    #: The update normalises its loss by global counts (``dist.normalizer``), so summing
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
        # The env options come from the model's own mathgym.json, then the config (see resolved_env_kwargs).
        self.env_kwargs = resolved_env_kwargs(config, model_dir=self.model_path)
        self.eval_env_kwargs = resolved_env_kwargs(config, evaluation=True, model_dir=self.model_path)
        # Randomness of the update (PPO's minibatch order), the same on every rank; the rollouts'
        # samples are keyed by task instead (sampling_seed).
        self.generator = torch.Generator().manual_seed(config.seed)
        self.algorithm = self.build_algorithm(RunParts(config, self.policy, self.dist, self.device, self.generator, str(self.model_path)))
        self.source = self.build_source()
        params = self.algorithm.parameters_to_train()
        self.dist.broadcast_parameters([p for g in params for p in (g["params"] if isinstance(g, dict) else [g])])
        self.loop = UpdateLoop(config, self.dist, self.policy, self.algorithm, self.autocast_dtype, self.device)
        self.step = 0
        self.eval_before: EvalResult | None = None
        self.resume_changes: list[OptionChange] = []
        self._config_saved = False
        self._run_dir_lock: RunDirLock | None = None
        self._run_dir_claimed = False  # resume() loaded the run there, or train() found no earlier run
        # only now: a run that cannot start leaves no directory
        self.run_dir = self._hold_run_dir(defaulted=not (run_dir or config.run_dir))
        self.logger: MetricsLogger | NullLogger = NullLogger(self.run_dir)
        if self.dist.is_main:  # config.yaml waits for train() or resume(): a directory that holds a run keeps its own
            self.logger = MetricsLogger(self.run_dir, config.log_tensorboard, config.log_wandb, config.to_dict())

    # -- the parts ----------------------------------------------------------------------------------

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

    def build_algorithm(self, parts: RunParts) -> Algorithm:
        """The run's algorithm (:attr:`algorithm_class`), built once, after the policy and before the optimizer."""
        return self.algorithm_class(parts)

    def build_source(self) -> BatchSource:
        """Where the batches come from: by default rollouts of the policy on ``config.env``; with
        ``config.agent``, runs of that agent program against the policy's endpoint (:mod:`mathgym.algos.agent_runs`); with
        ``config.self_play``, games of the policy against itself (:mod:`mathgym.algos.self_play`)."""
        if self.config.agent:
            from mathgym.algos.agent_runs import AgentBatchSource  # noqa: PLC0415 - the endpoint's server stack

            return AgentBatchSource(self.config, self.dist, self.policy, self.env_kwargs)
        if self.config.self_play:  # every seat of the game by the policy (docs/two-player.md)
            from mathgym.algos.self_play import SelfPlaySource  # noqa: PLC0415 - only a self-play run needs it

            return SelfPlaySource(self.config, self.dist, self.policy, self.env_kwargs, lambda: self.run_dir / "self_play_pool")
        ahead = bool(self.config.off_policy_steps) and self.policy is not None
        return RolloutSource(self.config, self.dist, self.policy, self.env_kwargs, ahead=ahead)

    def autocast(self) -> contextlib.AbstractContextManager:
        """A context computing forward passes in the run's compute dtype (a no-op when that is the weights' own)."""
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.autocast_dtype)

    # -- one step -----------------------------------------------------------------------------------

    def train_step(self) -> dict[str, float]:
        """One step, the same for every algorithm: the batch, the learner's pass, the plan and its optimizer
        steps (:meth:`learn`); returns the step's metrics (:meth:`train` logs them and checkpoints)."""
        t0 = time.perf_counter()
        with self.autocast():  # fp16: forward passes in fp16, losses and log-softmax in fp32
            ready = self.rollouts()
            t1 = time.perf_counter()
            inspect = self.log_samples if self.config.log_samples and self.algorithm.scores_learner else None
            batch, stats, mismatch, learner_pass_s = self.learn(ready.batch, inspect)
        t2 = time.perf_counter()
        evaluation = self.algorithm.evaluation(self.step + 1)  # held-out pairs at their interval
        tokens = float(batch.action_mask.sum()) if isinstance(batch, RolloutBatch) else 0.0
        return {
            **self.source.metrics(batch),
            **ready.stats,
            **mismatch,
            **stats,
            **evaluation,
            **({} if self.source.ahead is None else {"rollout/staleness": float(ready.staleness), "perf/rollout_wait_s": t1 - t0}),
            "perf/learner_pass_s": learner_pass_s,
            "perf/update_s": t2 - t1 - learner_pass_s,
            "perf/step_s": t2 - t0,
            "perf/tokens_per_s": tokens / max(ready.stats["perf/rollout_s"], 1e-9),
            "optim/lr": float(self.loop.scheduler.get_last_lr()[0]),
            **({"optim/grad_scale": float(self.loop.scaler.get_scale())} if self.loop.scaler.is_enabled() else {}),
        }

    def rollouts(self) -> Rollouts:
        """The batch of the current step; under ``off_policy_steps=1`` the one sampled during the
        previous step's update, and the next step's sampling is started."""
        if self.source.ahead is None:
            return Rollouts(self.step, *self.source.sample(self.step), weights_step=self.step)
        return self.source.next_rollouts(self.step, self.config.steps)

    def learn(self, batch: Any, inspect: Callable[[RolloutBatch], None] | None = None) -> LearnResult:
        """The update of ``batch`` on the run's device with the sampler/learner mismatch metric: the learner's
        pass and the metric before the update (or, where the algorithm's ``learner_pass_needed`` says no,
        both from the loss's own forward pass: a :class:`~mathgym.algos.update.LearnerRecord` handed to the
        loop), then the plan and its optimizer steps. ``inspect`` sees the batch between the two."""
        batch, start = batch.to(self.device), time.perf_counter()
        record, mismatch = None, {}
        if self.algorithm.scores_learner and self.algorithm.learner_pass_needed(batch):
            batch = self.score_learner(batch)
            mismatch = logprob_mismatch(batch)
        elif self.algorithm.scores_learner:
            record, batch.learner_logprobs = LearnerRecord(), None
        if inspect is not None:
            inspect(batch)
        learner_pass_s = time.perf_counter() - start
        plan = self.algorithm.plan(batch)
        if record is not None and not any(len(step.items) for step in plan.steps):
            # Nothing to train on (every group's rewards agree): no loss pass will run, so the
            # mismatch metric gets a pass of its own, before the (gradient-free) optimizer step.
            record, start = None, time.perf_counter()
            batch = self.score_learner(batch)
            mismatch = logprob_mismatch(batch)
            learner_pass_s += time.perf_counter() - start
        stats = self.loop.optimize(batch, plan, record, at_step=self.step)
        if record is not None and (rows := record.recorded()) is not None:  # measured on the rows trained on
            mismatch = logprob_mismatch(batch.select(rows))
        return LearnResult(batch, stats, mismatch, learner_pass_s)

    def score_learner(self, batch: RolloutBatch) -> RolloutBatch:
        """Fill ``batch.learner_logprobs`` (and ``batch.values`` with a critic) on the algorithm's
        ``learner_rows``: the learner before the update, in eval mode like the sampler (a measurement of
        numerics, not of dropout, which also leaves the RNG the update's dropout draws from untouched)."""
        algorithm = self.algorithm
        rows = algorithm.learner_rows(batch)
        if not len(rows):
            return batch
        was_training = self.policy.model.training
        self.policy.model.eval()
        try:
            out = score_rows(self.config, batch, rows, lambda mb: self.policy.forward(
                mb.input_ids, mb.attention_mask, algorithm.temperature,
                groups=mb.group_ids if algorithm.value_model is None else None, value_model=algorithm.value_model,
                positions=mb.action_mask,
            ), with_values=algorithm.value_model is not None)
        finally:
            self.policy.model.train(was_training)
        batch.learner_logprobs, batch.values = out.logprobs, out.values
        return batch

    def update(self, batch: Any) -> dict[str, float]:
        """Train on ``batch`` (:meth:`learn`); return its ``loss/...`` statistics."""
        return self.learn(batch).stats

    def log_samples(self, batch: RolloutBatch) -> None:
        """Log ``config.log_samples`` episodes of the step's ``batch``."""
        self.logger.log_samples(self.step + 1, episode_samples(batch, self.config.log_samples))

    # -- the run ------------------------------------------------------------------------------------

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

    def evaluate(self) -> EvalResult:
        """Greedy pass@1 (or pass@k) on the fixed held-out task set."""
        cfg = self.config
        with self.policy.autocast():
            return evaluate_policy(
                self.policy, cfg.env, self.eval_env_kwargs, num_tasks=cfg.eval_tasks,
                seed=cfg.eval_seed, k=cfg.eval_samples, temperature=cfg.temperature, max_new_tokens=cfg.max_new_tokens,
                max_episode_tokens=cfg.max_episode_tokens, max_turns=cfg.max_turns or None,
                make_envs=getattr(self.source, "make_envs", None), progress=cfg.progress,
            )

    def all_trained_task_ids(self) -> frozenset[str]:
        """Every task drawn for training so far, by every rank (a collective call under data parallelism)."""
        return frozenset().union(*self.dist.gather_objects(sorted(self.source.trained_task_ids)))

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

    def close(self) -> None:
        self.source.close()
        if self._run_dir_lock is not None:  # the run is over: the directory is free for a resume
            self._run_dir_lock.release()
        self.dist.close()

    # -- checkpoints --------------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """Everything a resumed run needs to continue exactly: weights (the adapter under LoRA),
        optimizer, LR scheduler, gradient scaler, the update's generator (PPO's minibatch order),
        the global RNGs, the step, the evaluation before training, the algorithm's ``extra_state``, the
        curriculum's pass rates or level, the batch sampled ahead, and the configuration and algorithm
        (to say what a resumed run changed). A collective under data-parallel training: every rank calls it."""
        source = self.source.state_dict()  # first: it waits for the batch sampled ahead, whose sampling moves the curriculum
        state = {
            "step": self.step,
            "algo": self.algo_name,
            "config": self.config.to_dict(),
            "model": {} if self.policy is None else trainable_state(self.policy.model),
            **self.loop.state_dict(),
            "generator": self.generator.get_state(),
            "rng": rng_state(),
            "eval_before": self.eval_before,
            "extra": self.algorithm.extra_state(),
            **source,
            "trained_task_ids": self.all_trained_task_ids(),
        }
        if self.dist.enabled:  # each rank's generator, global RNGs (dropout) and batch ahead: a resumed run continues them
            own = {"generator": self.generator.get_state(), "rng": rng_state(), "rollouts_ahead": source["rollouts_ahead"]}
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
        self.loop.load_state_dict(state)
        self.generator.set_state(own["generator"])
        set_rng_state(own["rng"])
        self.step = int(state["step"])
        self.eval_before = state.get("eval_before")
        self.source.trained_task_ids = set(state.get("trained_task_ids") or ())
        self.algorithm.load_extra_state(state.get("extra", {}))
        self.source.load_state_dict(state, own.get("rollouts_ahead"))

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

    # -- the run directory ----------------------------------------------------------------------------

    def _hold_run_dir(self, defaulted: bool) -> Path:
        """Create the run directory (the default one made new) and hold its lock (rank 0); the directory."""
        if self.dist.is_main:
            if defaulted:
                self.run_dir = fresh_run_dir(self.run_dir)
            self._run_dir_lock = RunDirLock(self.run_dir)
            weakref.finalize(self, self._run_dir_lock.release)  # a trainer dropped unclosed lets go of it too
        return Path(self.dist.broadcast_object(str(self.run_dir)))

    def claim_run_dir(self) -> None:
        """Make sure this run may write its directory, before a file is touched: refused
        (:class:`~mathgym.errors.ConfigError`) when the directory holds an earlier run that
        :meth:`resume` did not load, or when another live process holds it. :meth:`train` calls
        it; a subclass that writes there before ``super().train()`` calls it first."""
        refusal = None
        if self.dist.is_main:
            try:
                if self._run_dir_lock is None or not self._run_dir_lock.held:  # closed by a train() before this one
                    self._run_dir_lock = RunDirLock(self.run_dir)
                    weakref.finalize(self, self._run_dir_lock.release)
                if not self._run_dir_claimed:
                    check_new_run_dir(self.run_dir)
            except ConfigError as error:
                refusal = str(error)
        refusal = self.dist.broadcast_object(refusal)  # every rank stops, not rank 0 alone
        if refusal is not None:
            raise ConfigError(refusal)
        self._run_dir_claimed = True
