"""How the tiny model's warm start on MathReason-v0 ends, by its length, learning-rate schedule and data order.

A study of the warm start's recipe (``mathgym.algos.warm_start.warm_start_config``: its steps and
learning-rate schedule), on **train**-split tasks only: each row runs the warm start's SFT steps from the
same untrained tiny model with one data-order seed, then evaluates the result greedily on
``--eval-tasks`` train-split tasks (seeds 50000 on, none of them a demonstration's seed). The
held-out split is what ``mathgym train`` reports, and is not read here. Run it on an idle machine::

    python benchmarks/warm_start_tune.py --steps 400 600 800 --schedule linear constant --order-seed 0 1 --record warm_start_tune

With ``--grpo-steps N`` each warm start is then trained by ``mathgym train``'s GRPO defaults for N
steps (``--grpo-lr`` and ``--grpo-lr-schedule`` override the rate and its schedule), evaluated on the same train-split tasks every
``--grpo-eval-every`` steps: how many GRPO steps the default needs from wherever the warm start lands::

    python benchmarks/warm_start_tune.py --steps 800 --schedule constant --order-seed 0 1 2 --grpo-steps 240 --grpo-eval-every 40 --record grpo_steps_tune
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from record import write_record  # noqa: E402

ENV = "MathReason-v0"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, nargs="+", default=[400, 600, 800])
    parser.add_argument("--schedule", nargs="+", default=["linear", "constant"], choices=["linear", "constant", "cosine"])
    parser.add_argument("--order-seed", type=int, nargs="+", default=[0, 1], help="seeds of the demonstrations' order (the model's start is seed 0's)")
    parser.add_argument("--eval-tasks", type=int, default=400)
    parser.add_argument("--eval-seed", type=int, default=50_000)
    parser.add_argument("--grpo-steps", type=int, default=0, help="GRPO steps after each warm start (0: none)")
    parser.add_argument("--grpo-eval-every", type=int, default=40, help="train-split evaluation every N GRPO steps")
    parser.add_argument("--grpo-lr", type=float, default=None, help="GRPO's learning rate (default: GRPOConfig's)")
    parser.add_argument("--grpo-lr-schedule", default=None, choices=["constant", "linear", "cosine"],
                        help="GRPO's learning-rate schedule (default: GRPOConfig's)")
    parser.add_argument("--record", default="", help="write benchmarks/results/NAME.json")
    args = parser.parse_args()

    import torch

    from mathgym.agents.settings import write_model_settings
    from mathgym.agents.tiny import tiny_model_path
    from mathgym.algos.configs import TrainConfig, resolved_env_kwargs
    from mathgym.algos.evaluate import evaluate_policy
    from mathgym.algos.sft import SFTTrainer
    from mathgym.algos.warm_start import (
        WARM_START_BATCH,
        WarmStartPlan,
        demonstration_kwargs,
        demonstrations_to_make,
        tiny_max_positions,
        warm_start_config,
    )

    config = TrainConfig()
    env_kwargs = demonstration_kwargs(ENV, resolved_env_kwargs(config, model_dir=tiny_model_path()))
    eval_kwargs = {**env_kwargs, "split": "train"}
    rows = []
    print(f"load average {__import__('os').getloadavg()[0]:.2f}; greedy pass@1 on {args.eval_tasks} train-split tasks from seed {args.eval_seed}")
    grpo_head = f" GRPO pass@1 at steps {', '.join(map(str, grpo_marks(args)))} |" if args.grpo_steps else ""
    print(f"| SFT steps | schedule | order seed | last loss | SFT seconds | train-split pass@1 |{grpo_head}\n|---|---|---|---|---|---|"
          + ("---|" if args.grpo_steps else ""))
    for steps in args.steps:
        plan = WarmStartPlan(steps, WARM_START_BATCH, tiny_max_positions(), 28)  # MathReason-v0's level 0: 28 tokens
        for schedule in args.schedule:
            for seed in args.order_seed:
                with tempfile.TemporaryDirectory(prefix="mathgym-warm-start-tune-") as tmp:
                    sft = warm_start_config(ENV, env_kwargs, plan, demonstrations_to_make(plan, 1.0, 0.0), 0, tmp)
                    trainer = SFTTrainer(dataclasses.replace(sft, lr_schedule=schedule, seed=seed))
                    start = time.perf_counter()
                    for step in range(steps):
                        loss = trainer.update(trainer.source.make_batch(step)[0])["loss/sft"]
                    seconds = time.perf_counter() - start
                    trainer.policy.model.eval()
                    with torch.no_grad():
                        result = evaluate_policy(trainer.policy, ENV, eval_kwargs, num_tasks=args.eval_tasks, seed=args.eval_seed,
                                                 max_new_tokens=config.max_new_tokens)
                    row = {"steps": steps, "schedule": schedule, "order_seed": seed, "loss": round(loss, 4),
                           "sft_s": round(seconds, 1), "train_pass_at_1": round(result.pass_at_1, 4)}
                    grpo_cell = ""
                    if args.grpo_steps:
                        model_dir = Path(tmp) / "warm-start"
                        trainer.policy.save_pretrained(model_dir)
                        write_model_settings(model_dir, {"env": ENV, "env_kwargs": env_kwargs})
                        del trainer
                        curve = grpo_curve(args, model_dir, Path(tmp) / "grpo")
                        row["grpo_pass_at_1"] = curve
                        grpo_cell = " " + ", ".join(f"{curve[str(mark)]:.1%}" for mark in grpo_marks(args)) + " |"
                rows.append(row)
                print(f"| {steps} | {schedule} | {seed} | {loss:.4f} | {seconds:.1f} | {result.pass_at_1:.1%} |{grpo_cell}", flush=True)
    if args.record:
        write_record(args.record, {"env": ENV, "eval_tasks": args.eval_tasks, "eval_seed": args.eval_seed,
                                   "grpo_steps": args.grpo_steps, "grpo_lr": args.grpo_lr,
                                   "grpo_lr_schedule": args.grpo_lr_schedule, "rows": rows})


def grpo_marks(args: argparse.Namespace) -> list[int]:
    """The GRPO steps at which the train-split accuracy is read: every ``--grpo-eval-every`` and the last."""
    every = max(1, args.grpo_eval_every)
    return sorted({*range(every, args.grpo_steps, every), args.grpo_steps})


def grpo_curve(args: argparse.Namespace, model_dir: Path, run_dir: Path) -> dict[str, float]:
    """Train-split greedy pass@1 of GRPO from ``model_dir`` (``mathgym train``'s defaults), by step, step 0 included."""
    import json

    from mathgym.algos.grpo import GRPOConfig, GRPOTrainer

    overrides = {} if args.grpo_lr is None else {"learning_rate": args.grpo_lr}
    if args.grpo_lr_schedule is not None:
        overrides["lr_schedule"] = args.grpo_lr_schedule
    config = GRPOConfig(model=str(model_dir), steps=args.grpo_steps, eval_every=args.grpo_eval_every, eval_tasks=args.eval_tasks,
                        eval_seed=args.eval_seed, eval_env_kwargs={"split": "train"}, save_every=0, progress=False,
                        run_dir=str(run_dir), **overrides)
    GRPOTrainer(config, model_path=str(model_dir)).train()
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return {str(r["step"]): round(r["eval/pass@1"], 4) for r in rows if "eval/pass@1" in r}


if __name__ == "__main__":
    main()
