"""The loop every trainer shares: rollout → reward → advantage → loss → log → checkpoint.

A trainer subclasses :class:`Trainer` and implements :meth:`Trainer.update` (turn a
batch into one or more optimizer steps, return loss statistics). Hooks a subclass may
override: :meth:`setup` (reference model, value head...), :meth:`parameters_to_train`,
:meth:`make_batch` (DPO/SFT build batches without the policy sampling), and
:meth:`extra_state` / :meth:`load_extra_state` (anything else to checkpoint).
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch

from mathgym.agents.policy import LLMPolicy, LoraSettings, SamplingParams
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
from mathgym.algos.evaluate import EvalResult, evaluate_policy
from mathgym.algos.metrics import MetricsLogger, plot_reward_curve, rollout_metrics
from mathgym.algos.rollout import RolloutCollector, RolloutSettings
from mathgym.config import TINY_MODEL, TrainConfig, resolved_env_kwargs, save_config


@dataclass
class TrainResult:
    """What a finished run reports."""

    run_dir: Path
    steps: int
    wall_time_s: float
    eval_before: EvalResult | None
    eval_after: EvalResult | None
    final_model: Path | None

    def summary(self, env_id: str) -> str:
        if self.eval_before is None or self.eval_after is None:
            return f"run {self.run_dir}: {self.steps} steps in {self.wall_time_s:.0f}s"
        b, a = self.eval_before.pass_at_1 * 100, self.eval_after.pass_at_1 * 100
        return (
            f"accuracy before -> after: {b:.1f}% -> {a:.1f}% ({a - b:+.1f} points), greedy pass@1 on "
            f"{self.eval_after.num_tasks} held-out {env_id} tasks; {self.steps} steps in {self.wall_time_s:.0f}s; "
            f"run dir {self.run_dir}"
        )


def default_run_dir(algo: str, env_id: str) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{algo}-{env_id}-{stamp}"


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


class Trainer:
    """Base trainer: owns the policy, optimizer, scheduler, collector, logging and checkpoints.

    Args:
        config: The run's configuration (a :class:`TrainConfig` subclass).
        run_dir: Run directory (default ``runs/<algo>-<env>-<time>``).
        policy: An existing policy (default: built from ``config.model``).
    """

    algo_name: ClassVar[str] = "base"

    def __init__(self, config: TrainConfig, run_dir: str | Path | None = None, policy: LLMPolicy | None = None):
        config.validate()
        self.config = config
        self.run_dir = Path(run_dir or config.run_dir or default_run_dir(self.algo_name, config.env))
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if config.threads:
            torch.set_num_threads(config.threads)
        seed_everything(config.seed)
        self.policy = policy or self.build_policy()
        self.setup()
        self.optimizer = torch.optim.AdamW(
            self.parameters_to_train(), lr=config.learning_rate, weight_decay=config.weight_decay
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, self._lr_factor)
        # fp16 autocast needs its gradients scaled; otherwise the scaler passes everything through.
        fp16 = self.policy.autocast_dtype == torch.float16
        self.scaler = torch.amp.GradScaler(self.policy.device.type, enabled=fp16)
        self.generator = torch.Generator().manual_seed(config.seed)
        self.step = 0
        self.eval_before: EvalResult | None = None
        self.resume_changes: list[OptionChange] = []
        self._collector: RolloutCollector | None = None
        self._config_saved = False
        if latest_checkpoint(self.run_dir) is None:  # a run to resume keeps its config.yaml until resume() accepts
            self.save_config()
        self.logger = MetricsLogger(self.run_dir, config.log_tensorboard, config.log_wandb, config.to_dict())

    # -- construction hooks -----------------------------------------------------------

    def build_policy(self) -> LLMPolicy:
        """Load ``config.model`` ('tiny' → the embedded model after its cached SFT warm start)."""
        cfg = self.config
        path = cfg.model
        if cfg.model == TINY_MODEL:
            from mathgym.algos.sft import tiny_warm_start

            path = str(tiny_warm_start(cfg.env, resolved_env_kwargs(cfg), steps=cfg.warm_start_steps, seed=0))
        targets = cfg.lora_target_modules
        lora = LoraSettings(
            r=cfg.lora_r, alpha=cfg.lora_alpha, target_modules=targets if targets == "all-linear" else tuple(targets.split(","))
        )
        return LLMPolicy.from_pretrained(
            path, lora=lora, device=cfg.device, dtype=cfg.dtype, backend=cfg.backend,
            gradient_checkpointing=cfg.gradient_checkpointing,
        )

    def setup(self) -> None:
        """Called after the policy exists and before the optimizer is built."""

    def parameters_to_train(self) -> list[torch.nn.Parameter]:
        return self.policy.trainable_parameters()

    def _lr_factor(self, step: int) -> float:
        cfg = self.config
        if cfg.warmup_steps and step < cfg.warmup_steps:
            return (step + 1) / cfg.warmup_steps
        progress = (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps)
        if cfg.lr_schedule == "linear":
            return max(0.0, 1.0 - progress)
        if cfg.lr_schedule == "cosine":
            return 0.5 * (1.0 + float(np.cos(np.pi * min(progress, 1.0))))
        return 1.0

    # -- data -----------------------------------------------------------------------------

    @property
    def sampling(self) -> SamplingParams:
        cfg = self.config
        return SamplingParams(cfg.temperature, cfg.top_p, cfg.max_new_tokens)

    @property
    def collector(self) -> RolloutCollector:
        if self._collector is None:
            cfg = self.config
            settings = RolloutSettings(
                cfg.group_size, self.sampling, cfg.max_episode_tokens, cfg.max_turns or None, cfg.vectorization_mode
            )
            self._collector = RolloutCollector(cfg.env, resolved_env_kwargs(cfg), self.policy, cfg.num_tasks, settings)
        return self._collector

    def task_seeds(self, step: int) -> list[int]:
        """Seeds of the tasks of ``step``: a pure function of (seed, step), so resuming continues the data."""
        n = self.config.num_tasks
        base = self.config.seed * 1_000_003 + step * n
        return [base + i for i in range(n)]

    def make_batch(self, step: int) -> RolloutBatch:
        """The batch of ``step`` (default: rollouts of the policy on fresh tasks)."""
        return self.collector.collect(self.task_seeds(step), self.generator)

    # -- the update ---------------------------------------------------------------------------

    def update(self, batch: RolloutBatch) -> dict[str, float]:
        """Train on ``batch``; return ``loss/...`` statistics. Subclasses implement it."""
        raise NotImplementedError

    def backward(self, loss: torch.Tensor) -> None:
        """Accumulate the gradients of ``loss`` (scaled under fp16 autocast)."""
        self.scaler.scale(loss).backward()

    def optimizer_step(self, step_scheduler: bool = True) -> float:
        """Clip gradients, step optimizer (and scheduler unless ``step_scheduler=False``), zero grads; return grad norm.

        Under fp16 the gradients are unscaled first, and a step whose gradients overflowed is
        skipped (the scaler lowers its scale; the returned norm is then inf).
        """
        params = [p for g in self.optimizer.param_groups for p in g["params"]]
        max_norm = self.config.max_grad_norm if self.config.max_grad_norm > 0 else float("inf")
        self.scaler.unscale_(self.optimizer)
        norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        if step_scheduler:
            self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.policy.mark_weights_updated()
        return float(norm)

    def micro_batches(self, batch: RolloutBatch, rows: Sequence[int] | None = None) -> list[list[int]]:
        """Episode indices of each micro-batch: ``rows`` (default: every episode) in
        ``grad_accum_steps`` equal slices."""
        rows = list(range(len(batch))) if rows is None else list(rows)
        size = max(1, -(-len(rows) // self.config.grad_accum_steps))
        return [rows[i : i + size] for i in range(0, len(rows), size)]

    # -- evaluation ----------------------------------------------------------------------------

    def evaluate(self) -> EvalResult:
        """Greedy pass@1 (or pass@k) on the fixed held-out task set."""
        cfg = self.config
        with self.policy.autocast():
            return evaluate_policy(
                self.policy, cfg.env, resolved_env_kwargs(cfg, evaluation=True), num_tasks=cfg.eval_tasks,
                seed=cfg.eval_seed, k=cfg.eval_samples, temperature=cfg.temperature, max_new_tokens=cfg.max_new_tokens,
                max_episode_tokens=cfg.max_episode_tokens, max_turns=cfg.max_turns or None,
            )

    # -- checkpoints -------------------------------------------------------------------------------

    def extra_state(self) -> dict[str, Any]:
        """Subclass state to checkpoint (value head, ...)."""
        return {}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`extra_state` returned."""

    def state_dict(self) -> dict[str, Any]:
        """Everything a resumed run needs to continue exactly: weights (the adapter under LoRA),
        optimizer, LR scheduler, gradient scaler, the sampling generator, the global RNGs, the
        step, the evaluation before training, the subclass's :meth:`extra_state`, and the
        configuration and algorithm (to say what a resumed run changed)."""
        return {
            "step": self.step,
            "algo": self.algo_name,
            "config": self.config.to_dict(),
            "model": trainable_state(self.policy.model),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "scaler": self.scaler.state_dict(),
            "generator": self.generator.get_state(),
            "rng": rng_state(),
            "eval_before": self.eval_before,
            "extra": self.extra_state(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned (the configuration is not touched)."""
        missing = self.policy.model.load_state_dict(state["model"], strict=False)
        if missing.unexpected_keys:
            raise RuntimeError(f"checkpoint holds unexpected weights: {missing.unexpected_keys[:5]}")
        self.policy.mark_weights_updated()
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        if self.scaler.is_enabled() and state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])
        self.generator.set_state(state["generator"])
        set_rng_state(state["rng"])
        self.step = int(state["step"])
        self.eval_before = state.get("eval_before")
        self.load_extra_state(state.get("extra", {}))

    def save(self) -> Path:
        return save_checkpoint(self.run_dir, self.step, self.state_dict())

    def save_config(self) -> None:
        save_config(self.config, self.run_dir / "config.yaml", {"algo": self.algo_name})
        self._config_saved = True

    def resume(self) -> bool:
        """Load the run directory's latest checkpoint; ``False`` when there is none.

        Options that differ from the checkpoint's configuration are printed (``old -> new``);
        one that shapes the training itself raises :class:`~mathgym.errors.ConfigError`
        before anything is loaded (see :data:`~mathgym.algos.checkpoint.FREE_ON_RESUME` and
        :data:`~mathgym.algos.checkpoint.WARN_ON_RESUME` for those that may change).
        """
        path = latest_checkpoint(self.run_dir)
        if path is None:
            return False
        state = load_checkpoint(path)
        self.resume_changes = resume_changes(state.get("config", {}), self.config.to_dict(), int(state["step"]))
        check_resume(self.run_dir, state.get("algo"), self.algo_name, self.resume_changes)
        self.load_state_dict(state)
        self.save_config()
        self.logger.truncate_after(self.step)
        return True

    # -- the loop ---------------------------------------------------------------------------------

    def train(self) -> TrainResult:
        """Run to ``config.steps``: evaluate before, train, checkpoint, evaluate after."""
        from tqdm.auto import tqdm

        cfg = self.config
        start = time.perf_counter()
        if not self._config_saved:
            self.save_config()
        if cfg.eval_tasks and self.eval_before is None:
            self.eval_before = self.evaluate()
            self.logger.log(self.step, self.eval_before.as_metrics())
            print(f"accuracy before training: {self.eval_before.pass_at_1:.1%} (greedy, {cfg.eval_tasks} held-out tasks)")
        bar = tqdm(total=cfg.steps, initial=self.step, disable=not cfg.progress, desc=f"{self.algo_name} {cfg.env}")
        while self.step < cfg.steps:
            metrics = self.train_step()
            self.step += 1
            if cfg.eval_every and self.step % cfg.eval_every == 0 and self.step < cfg.steps:
                metrics.update(self.evaluate().as_metrics())
            self.logger.log(self.step, metrics)
            bar.update(1)
            bar.set_postfix(reward=f"{metrics.get('rollout/reward', float('nan')):.3f}")
            if cfg.save_every and self.step % cfg.save_every == 0:
                self.save()
        bar.close()
        self.save()
        eval_after = None
        if cfg.eval_tasks:
            eval_after = self.evaluate()
            self.logger.log(self.step, {**eval_after.as_metrics(), "eval/final": 1.0})
            (self.run_dir / "eval.json").write_text(
                json.dumps({"before": vars(self.eval_before), "after": vars(eval_after)}, indent=2, default=str)
            )
        final = self.run_dir / "final"
        self.policy.save_pretrained(final)
        plot_reward_curve(self.run_dir)
        self.logger.close()
        self.close()
        return TrainResult(self.run_dir, self.step, time.perf_counter() - start, self.eval_before, eval_after, final)

    def train_step(self) -> dict[str, float]:
        """One step: batch, update; returns the step's metrics."""
        t0 = time.perf_counter()
        with self.policy.autocast():  # fp16: forward passes in fp16, losses and log-softmax in fp32
            batch = self.make_batch(self.step)
            t1 = time.perf_counter()
            stats = self.update(batch)
        t2 = time.perf_counter()
        tokens = float(batch.action_mask.sum())
        return {
            **rollout_metrics(batch),
            **stats,
            "perf/rollout_s": t1 - t0,
            "perf/update_s": t2 - t1,
            "perf/step_s": t2 - t0,
            "perf/tokens_per_s": tokens / max(t1 - t0, 1e-9),
            "optim/lr": float(self.scheduler.get_last_lr()[0]),
            **({"optim/grad_scale": float(self.scaler.get_scale())} if self.scaler.is_enabled() else {}),
        }

    def close(self) -> None:
        if self._collector is not None:
            self._collector.close()
            self._collector = None
