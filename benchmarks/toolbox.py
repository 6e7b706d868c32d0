"""The training toolbox side by side: GRPO's variants on the tiny model, from one warm start and seeds.

Each row trains the embedded tiny model's SFT warm start (the one ``mathgym train`` starts
from) with the same tasks, seeds, steps and batch as the GRPO row of its env, changing only
the options it names, then measures greedy pass@1 on the env's held-out tasks. Ratios are
against the GRPO row of the same env:

- MathReason-v0: GRPO (plain: ``dynamic_sampling`` off, though ``mathgym train`` turns it on by
  default); GRPO + dynamic sampling (DAPO); GSPO (``policy_loss gspo`` with the paper's clip
  ranges and sequence-mean objective; with one update per batch its ratios are all 1, so it
  differs from GRPO by that aggregation only); RLOO; REINFORCE++; GRPO with the batch sampled
  ahead (``off_policy_steps 1``, with ``mismatch_correction tis``): its steps/s ratio is the
  overlap's speed-up;
- GuessNumber-v0 (multi-turn), secrets from 1 to 20 (``--guess-high``; 5 guesses, what a binary
  search needs): GRPO and GiGPO (``advantage gigpo``; "not available" where this mathgym's config
  does not offer it). At the env's default 1 to 100 the tiny model's warm start finds 2% of the
  secrets and neither row moved in 10 steps (the record of 2026-11-29 11:39 UTC); from 1 to 20 it
  finds about a quarter, so a step's groups hold both outcomes. There are only 20 secrets, so the
  "held-out" tasks of these rows repeat ones seen in training: they measure the policy, not
  generalisation.

Train time is the training loop's (the sum of ``perf/step_s``; evaluation excluded), without each
run's first step, and after an untimed short GRPO run per env (``--warm-up-steps``): one-time costs
(the scoring helpers starting, the allocator's and kernels' first calls at each shape) would
otherwise fall on whichever row runs first.

    python benchmarks/toolbox.py --seed 0 1 2 3 4 --record toolbox
    python benchmarks/toolbox.py --quick          # a smoke run: a few small steps, one seed

Needs the ``train`` extra.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from record import write_record  # noqa: E402

MATH, GUESS = "MathReason-v0", "GuessNumber-v0"


@dataclass
class Variant:
    """One row: a name, its env and the options it sets on top of the run's."""

    name: str
    env: str
    options: dict[str, Any] = field(default_factory=dict)


VARIANTS = [
    Variant("GRPO", MATH),
    Variant("GRPO + dynamic sampling", MATH, {"dynamic_sampling": True}),
    Variant("GSPO", MATH, {"policy_loss": "gspo", "eps_low": 3e-4, "eps_high": 4e-4, "loss_aggregation": "sequence_mean"}),
    Variant("RLOO", MATH, {"advantage": "rloo", "scale_rewards": "none"}),
    Variant("REINFORCE++", MATH, {"advantage": "reinforce++"}),
    Variant("GRPO, batch sampled ahead", MATH, {"off_policy_steps": 1, "mismatch_correction": "tis"}),
    Variant("GRPO", GUESS),
    Variant("GiGPO", GUESS, {"advantage": "gigpo"}),
]


@dataclass
class Outcome:
    """What one variant measured over the seeds (``None``: the config does not offer it)."""

    accuracy: list[float] = field(default_factory=list)
    train_s: list[float] = field(default_factory=list)
    steps: int = 0
    error: str = ""

    @property
    def steps_per_s(self) -> float:
        return self.steps * len(self.train_s) / sum(self.train_s)


def env_kwargs(env: str, args: argparse.Namespace) -> dict[str, Any]:
    """The env options of every run (warm start included) on ``env``."""
    return {"high": args.guess_high} if env == GUESS else {}


def budget(env: str, args: argparse.Namespace) -> tuple[int, int]:
    """``(steps, num_tasks)`` of a run on ``env``: the multi-turn env has its own (each of its steps
    plays several turns per episode, so the same budget would cost many times the single-turn one)."""
    return (args.multi_turn_steps, args.multi_turn_tasks) if env == GUESS else (args.steps, args.num_tasks)


def variant_options(variant: Variant, args: argparse.Namespace, seed: int) -> dict[str, Any]:
    """The GRPO options of one run of ``variant``: the run's budget, then the variant's own."""
    steps, num_tasks = budget(variant.env, args)
    options = dict(
        env=variant.env, env_kwargs=env_kwargs(variant.env, args), steps=steps, num_tasks=num_tasks, group_size=args.group_size,
        max_new_tokens=args.max_new_tokens, eval_tasks=args.multi_turn_eval_tasks if variant.env == GUESS else args.eval_tasks, seed=seed, threads=args.threads,
        warm_start_steps=args.warm_start_steps, save_every=0, log_samples=0, progress=False,
        lr_schedule="constant",  # as its records ran (GRPO's default decays since 2026-11-29)
        dynamic_sampling=False,  # the plain GRPO baseline (on by default since 2026-11-25); its own row turns it on
    )
    return {**options, **variant.options}


def run_variant(variant: Variant, args: argparse.Namespace, seed: int, model_path: str, before: dict[str, Any]) -> tuple[float, float]:
    """Train ``variant`` once; ``(held-out pass@1 after, train seconds)``."""
    from mathgym.algos.grpo import GRPOConfig, GRPOTrainer
    from mathgym.algos.metrics import read_metrics

    with tempfile.TemporaryDirectory(prefix="mathgym-toolbox-") as tmp:
        config = GRPOConfig(**variant_options(variant, args, seed), run_dir=tmp)
        trainer = GRPOTrainer(config, model_path=model_path)
        if variant.env in before:  # the warm start's accuracy: measured once per env
            trainer.eval_before = before[variant.env]
        result = trainer.train()
        before.setdefault(variant.env, result.eval_before)
        step_s = [r["perf/step_s"] for r in read_metrics(tmp) if "perf/step_s" in r]
    return result.eval_after.pass_at_1, sum(step_s[1:])  # the first step's one-time costs left out (module docstring)


def warm_up(env: str, args: argparse.Namespace, model_path: str) -> None:
    """A short GRPO run on ``env``, neither evaluated nor recorded: the process's one-time costs
    (the scoring helpers, the allocator's and kernels' first calls at each shape) land here."""
    from mathgym.algos.grpo import GRPOConfig, GRPOTrainer

    with tempfile.TemporaryDirectory(prefix="mathgym-toolbox-") as tmp:
        config = GRPOConfig(env=env, env_kwargs=env_kwargs(env, args), steps=args.warm_up_steps, num_tasks=budget(env, args)[1], group_size=args.group_size,
                            max_new_tokens=args.max_new_tokens, eval_tasks=0, seed=10_000, threads=args.threads,
                            warm_start_steps=args.warm_start_steps, save_every=0, log_samples=0, progress=False,
                            dynamic_sampling=False, run_dir=tmp)
        GRPOTrainer(config, model_path=model_path).train()


def measure(args: argparse.Namespace) -> tuple[dict[int, Outcome], dict[str, float]]:
    from mathgym.algos.configs import TrainConfig
    from mathgym.algos.grpo import GRPOConfig
    from mathgym.algos.warm_start import prepare_model
    from mathgym.errors import ConfigError

    chosen = [v for v in VARIANTS if not args.only or v.env in args.only or v.name in args.only]
    envs = [env for env in (MATH, GUESS) if any(v.env == env for v in chosen)]
    chosen += [v for v in VARIANTS if v.name == "GRPO" and v.env in envs and v not in chosen]  # each env's baseline
    models = {env: prepare_model(TrainConfig(env=env, env_kwargs=env_kwargs(env, args), warm_start_steps=args.warm_start_steps, progress=False))
              for env in envs}
    before: dict[str, Any] = {}
    for env in envs if args.warm_up_steps else ():  # one untimed short run per env, so the first row pays no one-time cost
        warm_up(env, args, models[env])
    outcomes: dict[int, Outcome] = {}
    for i, variant in enumerate(VARIANTS):
        if variant not in chosen:
            continue
        outcome = outcomes[i] = Outcome(steps=budget(variant.env, args)[0] - 1)  # the timed steps: all but the first
        try:
            GRPOConfig(env=variant.env, **variant.options).validate()
        except (ConfigError, TypeError) as error:
            outcome.error = str(error)
            print(f"{variant.name} on {variant.env}: not available ({error})", flush=True)
            continue
        for seed in args.seed:
            accuracy, train_s = run_variant(variant, args, seed, models[variant.env], before)
            outcome.accuracy.append(accuracy)
            outcome.train_s.append(train_s)
            print(f"{variant.name} on {variant.env}, seed {seed}: pass@1 {accuracy:.1%}, train {train_s:.1f} s", flush=True)
    return outcomes, {env: result.pass_at_1 for env, result in before.items()}


def table(args: argparse.Namespace, outcomes: dict[int, Outcome], start: dict[str, float]) -> dict[str, Any]:
    """Print the table; return the figures to record."""
    baseline = {v.env: outcomes[i] for i, v in enumerate(VARIANTS) if v.name == "GRPO" and i in outcomes}
    seeds = ", ".join(map(str, args.seed))
    print(f"\n{MATH}: {args.steps} steps x {args.num_tasks} tasks; {GUESS} (1 to {args.guess_high}): {args.multi_turn_steps} steps x "
          f"{args.multi_turn_tasks} tasks; G={args.group_size}, {args.threads} threads, seeds {seeds}; "
          f"greedy pass@1 on {args.eval_tasks} ({MATH}) / {args.multi_turn_eval_tasks} ({GUESS}) held-out tasks (warm start: "
          + ", ".join(f"{env} {acc:.1%}" for env, acc in start.items()) + ")\n")
    print("| env | variant | pass@1 after | vs GRPO (points) | train s | train s / GRPO's | steps/s | steps/s / GRPO's |")
    print("|---|---|---|---|---|---|---|---|")
    recorded: dict[str, Any] = {
        "steps": args.steps, "num_tasks": args.num_tasks, "multi_turn_steps": args.multi_turn_steps,
        "multi_turn_tasks": args.multi_turn_tasks, "guess_high": args.guess_high, "group_size": args.group_size, "threads": args.threads,
        "seeds": list(args.seed), "eval_tasks": args.eval_tasks, "multi_turn_eval_tasks": args.multi_turn_eval_tasks, "warm_start_accuracy": {k: round(v, 4) for k, v in start.items()},
        "rows": {},
    }
    for i, variant in enumerate(VARIANTS):
        if i not in outcomes:
            continue
        outcome, base = outcomes[i], baseline[variant.env]
        key = f"{variant.env} {variant.name}"
        if outcome.error:
            print(f"| {variant.env} | {variant.name} | not available | | | | | |")
            recorded["rows"][key] = "not available"
            continue
        accuracy, train_s = statistics.mean(outcome.accuracy), statistics.mean(outcome.train_s)
        gain = 100 * (accuracy - statistics.mean(base.accuracy))
        time_ratio = train_s / statistics.mean(base.train_s)
        speed_ratio = outcome.steps_per_s / base.steps_per_s
        print(f"| {variant.env} | {variant.name} | {accuracy:.1%} | {gain:+.1f} | {train_s:.1f} | {time_ratio:.2f}x | "
              f"{outcome.steps_per_s:.2f} | {speed_ratio:.2f}x |")
        recorded["rows"][key] = {
            "pass_at_1": round(accuracy, 4), "points_vs_grpo": round(gain, 1), "train_s": round(train_s, 1),
            "train_s_over_grpo": round(time_ratio, 2), "steps_per_s": round(outcome.steps_per_s, 2),
            "steps_per_s_over_grpo": round(speed_ratio, 2),
        }
    return recorded


def build_parser() -> argparse.ArgumentParser:
    """The command line (``build_parser().parse_args([])``: the recorded defaults)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--num-tasks", type=int, default=16)
    parser.add_argument("--multi-turn-steps", type=int, default=30, help="steps of the GuessNumber-v0 rows")
    parser.add_argument("--multi-turn-tasks", type=int, default=8, help="tasks per step of the GuessNumber-v0 rows")
    parser.add_argument("--guess-high", type=int, default=20, help="largest secret of the GuessNumber-v0 rows (the env's default: 100)")
    parser.add_argument("--multi-turn-eval-tasks", type=int, default=50, help="held-out tasks of the GuessNumber-v0 rows")
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--eval-tasks", type=int, default=200)
    parser.add_argument("--warm-start-steps", type=int, default=400)
    parser.add_argument("--warm-up-steps", type=int, default=3, help="steps of an untimed GRPO run per env before the rows (0: none)")
    parser.add_argument("--seed", type=int, nargs="+", default=[0], help="one run of each variant per seed")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads of a run (halved per side with the batch ahead)")
    parser.add_argument("--only", action="append", default=[], metavar="ENV", help="run only this env's rows, or this variant (repeatable); each env's GRPO row always runs")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 3 steps of 2 tasks x 2, 10 eval tasks, 20 warm-start steps")
    parser.add_argument("--record", default="", help="write the figures to benchmarks/results/NAME.json (see benchmarks/record.py)")
    return parser


def main() -> None:
    args = build_parser().parse_args()
    if args.quick:
        args.steps, args.num_tasks, args.group_size, args.eval_tasks, args.warm_start_steps = 3, 2, 2, 10, 20
        args.multi_turn_steps, args.multi_turn_tasks, args.multi_turn_eval_tasks = 2, 2, 10
        args.max_new_tokens = min(args.max_new_tokens, 8)
        args.warm_up_steps = min(args.warm_up_steps, 1)
    torch.set_num_threads(args.threads)
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    outcomes, start = measure(args)
    recorded = table(args, outcomes, start)
    if args.record:
        write_record(args.record, recorded)


if __name__ == "__main__":
    main()
