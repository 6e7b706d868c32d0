"""How the tiny model's warm start on MathReason-v0 ends, by its length, learning-rate schedule and data order.

A study of the warm start's recipe (``mathgym.algos.warm_start.warm_start_config``: its steps and
learning-rate schedule), on **train**-split tasks only: each row runs the warm start's SFT steps from the
same untrained tiny model with one data-order seed, then evaluates the result greedily on
``--eval-tasks`` train-split tasks (seeds 50000 on, none of them a demonstration's seed). The
held-out split is what ``mathgym train`` reports, and is not read here. Run it on an idle machine::

    python benchmarks/warm_start_tune.py --steps 400 600 800 --schedule linear constant --order-seed 0 1 --record warm_start_tune
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
    parser.add_argument("--record", default="", help="write benchmarks/results/NAME.json")
    args = parser.parse_args()

    import torch

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
    print("| SFT steps | schedule | order seed | last loss | SFT seconds | train-split pass@1 |\n|---|---|---|---|---|---|")
    for steps in args.steps:
        plan = WarmStartPlan(steps, WARM_START_BATCH, tiny_max_positions(), 28)  # MathReason-v0's level 0: 28 tokens
        for schedule in args.schedule:
            for seed in args.order_seed:
                with tempfile.TemporaryDirectory(prefix="mathgym-warm-start-tune-") as tmp:
                    sft = warm_start_config(ENV, env_kwargs, plan, demonstrations_to_make(plan, 1.0, 0.0), 0, tmp)
                    trainer = SFTTrainer(dataclasses.replace(sft, lr_schedule=schedule, seed=seed))
                    start = time.perf_counter()
                    for step in range(steps):
                        loss = trainer.update(trainer.make_batch(step))["loss/sft"]
                    seconds = time.perf_counter() - start
                    trainer.policy.model.eval()
                    with torch.no_grad():
                        result = evaluate_policy(trainer.policy, ENV, eval_kwargs, num_tasks=args.eval_tasks, seed=args.eval_seed,
                                                 max_new_tokens=config.max_new_tokens)
                row = {"steps": steps, "schedule": schedule, "order_seed": seed, "loss": round(loss, 4),
                       "sft_s": round(seconds, 1), "train_pass_at_1": round(result.pass_at_1, 4)}
                rows.append(row)
                print(f"| {steps} | {schedule} | {seed} | {loss:.4f} | {seconds:.1f} | {result.pass_at_1:.1%} |", flush=True)
    if args.record:
        write_record(args.record, {"env": ENV, "eval_tasks": args.eval_tasks, "eval_seed": args.eval_seed, "rows": rows})


if __name__ == "__main__":
    main()
