"""GRPO on the tiny model: mathgym vs TRL's GRPOTrainer, side by side in one run.

Same warm-started tiny model, same MathReason-v0 level-0 train tasks (same seeds, same
order), same reward (mathgym's MathVerifier through the env), same batch (tasks x G),
same steps, learning rate, clipping and loss aggregation, both in fp32 (TRL's configs default
to bf16, which on a CPU means bf16 autocast: switched off here). Reports wall time per step and
greedy accuracy on held-out test tasks after N steps (both models evaluated with the
same code, after ``model.eval()``: TRL leaves its model in train mode).

    python benchmarks/grpo_vs_trl.py --steps 30 --threads 2 --seed 0 1 2

Needs the ``bench`` extra (``pip install ".[train,bench]"``).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import gymnasium as gym
import torch

import mathgym  # noqa: F401  (registers the envs)
from mathgym.agents.policy import LLMPolicy, load_tokenizer
from mathgym.algos.evaluate import evaluate_policy
from mathgym.algos.grpo import GRPOConfig, GRPOTrainer
from mathgym.algos.warm_start import tiny_warm_start
from mathgym.rewards.math import MathVerifier
from record import write_record  # benchmarks/record.py (the script's own directory is on sys.path)

ENV = "MathReason-v0"
ENV_KWARGS = {"difficulty": 0, "system_prompt": ""}


def task_rows(seeds: list[int]) -> list[dict]:
    """Prompt messages and gold answers of the train tasks mathgym's trainer draws."""
    env = gym.make(ENV, **ENV_KWARGS)
    rows = []
    for seed in seeds:
        _, info = env.reset(seed=seed)
        rows.append({"prompt": info["messages"], "answer": env.unwrapped.task.answer})
    env.close()
    return rows


def evaluate(model, tokenizer, eval_tasks: int, max_new_tokens: int) -> float:
    model.eval()
    policy = LLMPolicy(model=model, tokenizer=tokenizer, device=torch.device("cpu"))
    policy.set_backend("native")
    result = evaluate_policy(policy, ENV, {**ENV_KWARGS, "split": "test"}, num_tasks=eval_tasks, max_new_tokens=max_new_tokens)
    return result.pass_at_1


def run_mathgym(args, model_path: Path) -> dict:
    config = GRPOConfig(
        model=str(model_path), env_kwargs=ENV_KWARGS, steps=args.steps, num_tasks=args.num_tasks, group_size=args.group_size,
        learning_rate=args.lr, max_new_tokens=args.max_new_tokens, eps_low=0.2, eps_high=0.28, beta=0.0,
        loss_aggregation="token_mean", scale_rewards="group", dynamic_sampling=False, lr_schedule="constant", eval_tasks=0, save_every=0, progress=False,
        run_dir=tempfile.mkdtemp(prefix="mathgym-", dir=args.scratch), seed=args.seed,
    )
    trainer = GRPOTrainer(config)
    times, rewards = [], []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        metrics = trainer.train_step()
        times.append(time.perf_counter() - t0)
        rewards.append(metrics["rollout/reward"])
        trainer.step += 1
    accuracy = evaluate(trainer.policy.model, trainer.policy.tokenizer, args.eval_tasks, args.max_new_tokens)
    return {"times": times, "rewards": rewards, "accuracy": accuracy, "seeds": [trainer.source.task_seeds(s) for s in range(args.steps)]}


def trl_config(output_dir: str, *, batch: int, group_size: int, max_new_tokens: int, learning_rate: float, steps: int,
               seed: int = 0, loss_type: str = "dapo", scale_rewards: str = "group"):
    """TRL's ``GRPOConfig`` as this comparison runs it (mathgym's ``loss_aggregation="token_mean"`` is
    TRL's ``loss_type="dapo"``; tests/algos/test_grpo_matches_trl.py checks the two updates agree)."""
    from trl import GRPOConfig as TRLConfig

    return TRLConfig(
        output_dir=output_dir, per_device_train_batch_size=batch, num_generations=group_size, max_completion_length=max_new_tokens,
        learning_rate=learning_rate, max_steps=steps, beta=0.0, epsilon=0.2, epsilon_high=0.28, loss_type=loss_type,
        scale_rewards=scale_rewards, temperature=1.0, top_p=1.0, use_cpu=True, gradient_checkpointing=False, shuffle_dataset=False,
        lr_scheduler_type="constant", warmup_steps=0, weight_decay=0.0, max_grad_norm=1.0, logging_steps=1,
        report_to="none", save_strategy="no", seed=seed, disable_dropout=True,
        bf16=False, fp16=False,  # fp32 like mathgym on CPU: TRL's configs default to bf16 (CPU autocast)
    )


def run_trl(args, model_path: Path, seeds: list[list[int]]) -> dict:
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, TrainerCallback
    from trl import GRPOTrainer as TRLTrainer

    verifier = MathVerifier()

    def correctness(completions, answer, **_):
        return [verifier.score(c[-1]["content"] if isinstance(c, list) else c, a).score for c, a in zip(completions, answer)]

    class Timer(TrainerCallback):
        def __init__(self):
            self.times, self._t0 = [], 0.0

        def on_step_begin(self, *a, **k):
            self._t0 = time.perf_counter()

        def on_step_end(self, *a, **k):
            self.times.append(time.perf_counter() - self._t0)

    rows = task_rows([s for step in seeds for s in step])
    model = AutoModelForCausalLM.from_pretrained(model_path)
    tokenizer = load_tokenizer(str(model_path))
    config = trl_config(tempfile.mkdtemp(prefix="trl-", dir=args.scratch), batch=args.num_tasks * args.group_size,
                        group_size=args.group_size, max_new_tokens=args.max_new_tokens, learning_rate=args.lr, steps=args.steps, seed=args.seed)
    timer = Timer()
    trainer = TRLTrainer(
        model=model, reward_funcs=correctness, args=config, train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer, callbacks=[timer],
    )
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)
    trainer.train()
    rewards = [log["reward"] for log in trainer.state.log_history if "reward" in log]
    accuracy = evaluate(trainer.model, tokenizer, args.eval_tasks, args.max_new_tokens)
    return {"times": timer.times, "rewards": rewards, "accuracy": accuracy}


def main() -> None:
    defaults = GRPOConfig()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--num-tasks", type=int, default=defaults.num_tasks)
    parser.add_argument("--group-size", type=int, default=defaults.group_size)
    parser.add_argument("--lr", type=float, default=1e-4, help="both trainers' learning rate (the recorded comparison's)")
    parser.add_argument("--max-new-tokens", type=int, default=defaults.max_new_tokens)
    parser.add_argument("--eval-tasks", type=int, default=200)
    parser.add_argument("--warm-start-steps", type=int, default=400, help="SFT steps of the shared warm start (the recorded comparison's)")
    parser.add_argument("--seed", type=int, nargs="+", default=[0], help="one run of each trainer per seed")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--only", choices=("both", "mathgym", "trl"), default="both")
    parser.add_argument("--record", default="", help="write the figures to benchmarks/results/NAME.json (see benchmarks/record.py)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    model_path = tiny_warm_start(ENV, ENV_KWARGS, args.warm_start_steps)
    start_acc = evaluate(LLMPolicy.from_pretrained(str(model_path), device="cpu").model, load_tokenizer(str(model_path)), args.eval_tasks, args.max_new_tokens)
    # The reward's math-verify helpers are shared by both trainers (one pool per process): started here,
    # untimed, so that neither trainer's first steps pay for starting them (mathgym's ran first and did).
    MathVerifier().warm_up()
    runs = []
    with tempfile.TemporaryDirectory(prefix="grpo-vs-trl-") as scratch:  # the runs' directories, removed at the end
        for seed in args.seed:
            run_args = argparse.Namespace(**{**vars(args), "seed": seed, "scratch": scratch})
            ours = run_mathgym(run_args, model_path)
            theirs = run_trl(run_args, model_path, ours["seeds"]) if args.only != "mathgym" else None
            runs.append((seed, ours, theirs))
            print(f"seed {seed}: held-out accuracy mathgym {ours['accuracy']:.1%}"
                  + (f", TRL {theirs['accuracy']:.1%}" if theirs else ""), flush=True)

    def pooled(result_of, fn):
        values = [fn(result_of(run)) for run in runs if result_of(run)]
        return statistics.mean(values) if values else float("nan")

    recorded = {"steps": args.steps, "num_tasks": args.num_tasks, "group_size": args.group_size, "seeds": list(args.seed),
                "eval_tasks": args.eval_tasks, "warm_start_accuracy": round(start_acc, 4), "rows": {}, "per_seed": []}

    def row(name, fn, fmt):
        a = pooled(lambda r: r[1], fn)
        b = pooled(lambda r: r[2], fn)
        ratio = b / a if a else float("nan")
        print(f"| {name} | {fmt.format(a)} | {fmt.format(b)} | {ratio:.2f}x |")
        recorded["rows"][name] = {"mathgym": float(fmt.format(a)), "trl": float(fmt.format(b)), "trl_over_mathgym": round(ratio, 2)}

    tail = max(1, args.steps // 4)
    seeds = ", ".join(str(s) for s in args.seed)
    print(f"\nGRPO, {args.steps} steps x {args.num_tasks} tasks x G={args.group_size}, lr {args.lr}, {args.threads} threads, "
          f"seeds {seeds}; warm start greedy accuracy {start_acc:.1%} on {args.eval_tasks} held-out tasks\n")
    print("| mean over seeds | mathgym | TRL | TRL / mathgym |")
    print("|---|---|---|---|")
    row("median s/step", lambda r: statistics.median(r["times"][1:] or r["times"]), "{:.3f}")
    row("mean s/step", lambda r: statistics.mean(r["times"]), "{:.3f}")
    row(f"rollout reward, last {tail} steps", lambda r: statistics.mean(r["rewards"][-tail:]), "{:.3f}")
    row(f"held-out greedy accuracy after {args.steps} steps", lambda r: r["accuracy"], "{:.3f}")
    if args.only == "both":
        print("\n| seed | mathgym accuracy | TRL accuracy | mathgym - TRL |")
        print("|---|---|---|---|")
        gaps = []
        for seed, ours, theirs in runs:
            gaps.append(ours["accuracy"] - theirs["accuracy"])
            print(f"| {seed} | {ours['accuracy']:.1%} | {theirs['accuracy']:.1%} | {gaps[-1] * 100:+.1f} points |")
            recorded["per_seed"].append({"seed": seed, "mathgym": round(ours["accuracy"], 4), "trl": round(theirs["accuracy"], 4),
                                         "gap_points": round(gaps[-1] * 100, 1)})
        if len(gaps) > 1:
            spread = statistics.stdev(gaps) / len(gaps) ** 0.5
            print(f"| mean | | | {statistics.mean(gaps) * 100:+.1f} +/- {spread * 100:.1f} points (standard error over seeds) |")
            recorded["mean_gap_points"] = round(statistics.mean(gaps) * 100, 1)
            recorded["gap_standard_error_points"] = round(spread * 100, 1)
    if args.record:
        write_record(args.record, recorded)


if __name__ == "__main__":
    main()
