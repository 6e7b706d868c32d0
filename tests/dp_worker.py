"""Worker of ``tests/algos/test_accelerate.py``, started once per rank by ``torch.distributed.run``.

It registers ``tests.dp_worker:Vowels-v0`` (a reward that varies between random samples, so
that GRPO's first update is not zero) and trains :class:`WholeBatchGRPO`: every rank
collects the *whole* batch with the same sampling seed and keeps its share of the tasks,
so that one process and two train on exactly the same episodes; only the update differs.
With ``plain STEPS`` it trains the stock :class:`~mathgym.algos.grpo.GRPOTrainer` instead
(``tests/algos/test_dp_equivalence.py``: every rank collects only its own share of the tasks), and with
``toolbox STEPS`` the same with dynamic sampling and the pass-rate-band curriculum on (:data:`TOOLBOX`), with
``overlap STEPS`` with the next batch sampled during each update (``off_policy_steps=1``), and with
``overlap-stop STEPS`` / ``overlap-resume STEPS`` the same stopped after a checkpoint, then resumed.

    python -m torch.distributed.run --nproc_per_node 2 tests/dp_worker.py MODEL_DIR RUN_DIR [MODE STEPS]
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

import gymnasium as gym

from mathgym.core import Judgement, Task, TextEnv
from mathgym.rewards.base import Status

VOWELS_ID = "tests.dp_worker:Vowels-v0"


class VowelsEnv(TextEnv):
    """Single turn; reward: the fraction of the action's characters that are vowels."""

    def __init__(self, render_mode: str | None = None):
        super().__init__(max_turns=1, max_length=256, system_prompt="", render_mode=render_mode)

    def _sample_task(self, options: Mapping[str, Any]) -> Task:
        n = int(self.np_random.integers(0, 100))
        return Task(f"vowels-{n}", f"Say something with vowels ({n}).", "aeiou")

    def _judge(self, action: str) -> Judgement:
        score = sum(c in "aeiouAEIOU" for c in action) / max(len(action), 1)
        return Judgement(score, Status.CORRECT if score > 0 else Status.WRONG, True, correct=score > 0)


if "Vowels-v0" not in gym.registry:
    gym.register("Vowels-v0", entry_point=VowelsEnv)


#: Options with state that must not depend on the number of ranks: a group is kept when 1 to 3 of its 4
#: samples say a vowel (refills from further tasks), and tasks are replayed by their pass rate.
TOOLBOX = dict(
    dynamic_sampling=True, keep_pass_rate_min=0.25, keep_pass_rate_max=0.75, curriculum="pass_rate_band",
    curriculum_band_min=0.25, curriculum_band_max=0.75, curriculum_revisit=0.5,
)


def whole_batch_config(model: str, run_dir: str, steps: int = 1, save_every: int = 1, **options: Any) -> Any:
    """The run both sides of the equality test make (4 tasks × 4 samples, batch-std scaling)."""
    from mathgym.algos.grpo import GRPOConfig

    return GRPOConfig(
        env=VOWELS_ID, model=model, run_dir=run_dir, steps=steps, num_tasks=4, group_size=4, max_new_tokens=6,
        learning_rate=1e-3, scale_rewards="batch", loss_aggregation="token_mean", grad_accum_steps=2,
        eval_tasks=0, save_every=save_every, progress=False, threads=1, device="cpu", **options,
    )


def whole_batch_trainer_class() -> type:
    """A GRPO trainer whose ranks sample the whole batch identically and keep their share."""
    import torch

    from mathgym.agents.policy import SamplingParams
    from mathgym.algos.grpo import GRPOTrainer
    from mathgym.algos.rollout import RolloutCollector, RolloutSettings
    from mathgym.algos.configs import resolved_env_kwargs

    class WholeBatchGRPO(GRPOTrainer):
        def build_source(self):  # noqa: ANN202 - a RolloutSource whose batches are slices of the whole batch
            source = super().build_source()

            def make_batch(step: int):  # noqa: ANN202 - (RolloutBatch, stats)
                cfg = self.config
                sampling = SamplingParams(cfg.temperature, cfg.top_p, cfg.max_new_tokens)
                settings = RolloutSettings(cfg.group_size, sampling, cfg.max_episode_tokens)
                collector = RolloutCollector(cfg.env, resolved_env_kwargs(cfg), self.policy, cfg.num_tasks, settings)
                try:
                    full = collector.collect(source.task_seeds(step), torch.Generator().manual_seed(1000 + step))
                finally:
                    collector.close()
                mine = set(self.dist.shard(range(cfg.num_tasks)))  # the same split as RolloutSource.make_batch's
                return full.select([i for i, g in enumerate(full.group_ids.tolist()) if g in mine]), {}

            source.make_batch = make_batch
            return source

    return WholeBatchGRPO


def plain_run(model: str, run_dir: str, steps: int, **options: Any) -> None:
    """``steps`` of the stock GRPO trainer on the run of :func:`whole_batch_config` (one checkpoint, at the end)."""
    from mathgym.algos.grpo import GRPOTrainer

    GRPOTrainer(whole_batch_config(model, run_dir, steps=steps, save_every=0, **options)).train()


class Stopped(Exception):
    """Raised in place of a crash by :func:`stopped_or_resumed_run`."""


def stopped_or_resumed_run(model: str, run_dir: str, steps: int, stage: str, **options: Any) -> None:
    """``stage="stop"``: train with a checkpoint at ``steps // 2`` and stop (as a crash would) one step
    later; ``stage="resume"``: resume that run and train it to ``steps``."""
    from mathgym.algos.grpo import GRPOTrainer

    trainer = GRPOTrainer(whole_batch_config(model, run_dir, steps=steps, save_every=steps // 2, **options))
    if stage == "resume":
        assert trainer.resume() and trainer.step == steps // 2
        trainer.train()
        return
    original = trainer.train_step

    def train_step():  # noqa: ANN202 - the step's metrics
        if trainer.step == steps // 2 + 1:
            raise Stopped
        return original()

    trainer.train_step = train_step
    try:
        trainer.train()
    except Stopped:
        trainer.close()


if __name__ == "__main__":
    model_dir, run_dir = sys.argv[1], sys.argv[2]
    if sys.argv[3:4] == ["plain"]:
        plain_run(model_dir, run_dir, int(sys.argv[4]))
    elif sys.argv[3:4] == ["toolbox"]:
        plain_run(model_dir, run_dir, int(sys.argv[4]), **TOOLBOX)
    elif sys.argv[3:4] == ["overlap"]:
        plain_run(model_dir, run_dir, int(sys.argv[4]), off_policy_steps=1)
    elif sys.argv[3:4] in (["overlap-stop"], ["overlap-resume"]):
        stopped_or_resumed_run(model_dir, run_dir, int(sys.argv[4]), sys.argv[3].split("-")[1], off_policy_steps=1)
    else:
        whole_batch_trainer_class()(whole_batch_config(model_dir, run_dir)).train()
