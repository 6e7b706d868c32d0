"""The tiny model's warm start on each env: its plan within ``--warm-start-budget``, and what it takes.

For each env: the longest of 16 expert demonstrations in the tiny model's tokens, the plan that
``mathgym train --env ID`` chooses for it (``mathgym.algos.warm_start.warm_start_plan``: SFT steps,
batch, the tokens a demonstration keeps, the demonstrations made) and its estimated seconds on a
2-core CPU. Unless ``--plan-only``, it then runs the warm start in a fresh cache and prints its wall
time; ``--first-step`` also runs ``mathgym train --env ID --steps 1 --eval-tasks 0`` in another
fresh cache and times when its first RL step starts (the tiny model's build, the warm start and the
trainer's setup done) and when it is done (``--first-step-only``: that run alone, without the
separate warm start); ``--eval-tasks N`` adds the warm-started model's greedy pass@1. Run the
timings on an idle machine::

    python benchmarks/warm_start_envs.py --all --plan-only            # every env's plan: no training
    python benchmarks/warm_start_envs.py --all --first-step --record warm_start_envs   # the whole measurement
    python benchmarks/warm_start_envs.py --envs Hanoi-v0 --warm-start-budget 10 --first-step   # a quick look

Envs are used with the options ``mathgym train --env ID`` gives them (``--difficulty N`` sets a
level); an env that cannot be built so (it needs a judge, or options) or has no expert is listed
with the reason it is left out. Prints one Markdown table row per env.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from record import write_record  # noqa: E402

DEFAULT_ENVS = (
    "MathReason-v0",
    "Hanoi-v0",
    "Mastermind-v0",
    "Minesweeper-v0",
    "Wordle-v0",
    "Hangman-v0",
    "Game2048-v0",
    "InstructionFollow-v0",
    "ReasoningGym/basic_arithmetic-v0",
)
#: Of the ReasoningGym/<task>-v0 ids, ``--all`` takes this one: they share one env class.
REASONING_GYM_REPRESENTATIVE = "ReasoningGym/basic_arithmetic-v0"


def all_env_ids() -> list[str]:
    """Every registered env, one ReasoningGym/<task>-v0 id standing for all."""
    import mathgym

    return [e for e in mathgym.list_envs() if not e.startswith("ReasoningGym/") or e == REASONING_GYM_REPRESENTATIVE]


def left_out_reason(env_id: str, kwargs: dict[str, Any]) -> str:
    """Why ``env_id`` has no warm start with ``kwargs`` (empty when it has one)."""
    import gymnasium as gym

    try:
        env = gym.make(env_id, **kwargs)
    except Exception as err:  # noqa: BLE001 - an env that needs a service or options to be built
        return f"not built with its default options: {type(err).__name__}: {str(err).splitlines()[0][:120]}"
    has_expert = hasattr(env.unwrapped, "expert_action")
    env.close()
    return "" if has_expert else "no expert_action(): the tiny model starts untrained"


def time_first_step(env_id: str, extra: list[str]) -> tuple[float, float]:
    """Run ``mathgym train --env ENV_ID --steps 1 --eval-tasks 0`` in a fresh cache: wall seconds until
    its trainer starts the RL loop (it writes the run's ``config.yaml`` then: the tiny model is built,
    warm-started and loaded), and until the run is done (one RL step on top). NaN where it failed."""
    root = tempfile.mkdtemp(prefix="mathgym-first-step-")
    try:
        return _run_first_step(env_id, extra, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)  # its cache holds a warm-started model (tens of MB)


def _run_first_step(env_id: str, extra: list[str], root: str) -> tuple[float, float]:
    run_dir = os.path.join(root, "run")
    command = [sys.executable, "-m", "mathgym", "train", "--env", env_id, "--steps", "1", "--eval-tasks", "0",
               "--run-dir", run_dir, "--progress", "false", *extra]
    start, reached = time.perf_counter(), float("nan")
    with tempfile.TemporaryFile("w+") as log:
        process = subprocess.Popen(command, env={**os.environ, "MATHGYM_CACHE": os.path.join(root, "cache")}, stdout=log, stderr=log, text=True)
        while process.poll() is None:
            if reached != reached and os.path.exists(os.path.join(run_dir, "config.yaml")):
                reached = time.perf_counter() - start
            time.sleep(0.2)
        done = time.perf_counter() - start
        if process.returncode:
            log.seek(0)
            print(f"  {env_id}: {' '.join(command[2:])} failed:\n{log.read()[-1500:]}", file=sys.stderr)
            return float("nan"), float("nan")
    return reached, done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="+", default=list(DEFAULT_ENVS))
    parser.add_argument("--all", action="store_true", help="every registered env (one ReasoningGym/<task>-v0 id)")
    parser.add_argument("--steps", type=int, default=None, help="--warm-start-steps, the upper bound (default: mathgym train's)")
    parser.add_argument("--warm-start-budget", type=float, default=None, help="seconds (default: mathgym train's)")
    parser.add_argument("--difficulty", type=int, default=None, help="the envs' level (default: each env's own)")
    parser.add_argument("--plan-only", action="store_true", help="print the plans and estimates; train nothing")
    parser.add_argument("--first-step", action="store_true", help="also time mathgym train's first RL step in a fresh cache")
    parser.add_argument("--first-step-only", action="store_true",
                        help="time mathgym train's first RL step in a fresh cache (its own warm start included), without "
                             "the separate warm start before it (half the time)")
    parser.add_argument("--eval-tasks", type=int, default=0, help="greedy pass@1 of the warm-started model on N held-out tasks")
    parser.add_argument("--record", default="", help="write benchmarks/results/NAME.json")
    args = parser.parse_args()
    if args.first_step_only and (args.plan_only or args.first_step or args.eval_tasks):
        parser.error("--first-step-only runs no separate warm start: it does not go with --plan-only, --first-step or --eval-tasks")
    cache = tempfile.mkdtemp(prefix="mathgym-warm-")
    os.environ["MATHGYM_CACHE"] = cache  # a fresh cache: the warm start really runs
    try:
        run(args)
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def run(args: argparse.Namespace) -> None:
    """Print (and record) the plans, the warm starts and the first steps ``args`` asks for."""
    from mathgym.agents.settings import run_env_kwargs
    from mathgym.agents.tiny import tiny_model_path
    from mathgym.algos.configs import TrainConfig
    from mathgym.algos.warm_start import (
        WARM_START_MAX_TOKENS, chat_token_counter, demonstrations_to_make, measure_demonstrations, tiny_warm_start, warm_start_plan,
    )
    from mathgym.registry import env_accepts

    budget = TrainConfig.warm_start_budget if args.warm_start_budget is None else args.warm_start_budget
    if args.steps is None:
        args.steps = TrainConfig.warm_start_steps
    counter, positions = chat_token_counter(tiny_model_path(0)), WARM_START_MAX_TOKENS  # the warm start's longest row
    envs = all_env_ids() if args.all else args.envs
    print(f"warm-start budget {budget:g} s, at most {args.steps} steps, {positions} positions")
    print("| env | longest demo (tokens) | steps | batch | tokens kept | demos | estimate (s) | warm start (s) | first RL step reached (s) | first RL step done (s) | greedy pass@1 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    results: dict[str, Any] = {"budget_s": budget, "max_steps": args.steps, "positions": positions, "envs": {}, "left_out": {}}
    for env_id in envs:
        given = {"difficulty": args.difficulty} if args.difficulty is not None and env_accepts(env_id, "difficulty") else {}
        kwargs = run_env_kwargs(env_id, tiny_model_path(0), given)
        reason = left_out_reason(env_id, kwargs)
        if reason:
            print(f"| {env_id} | left out: {reason} ||||||||||", flush=True)
            results["left_out"][env_id] = reason
            continue
        longest, seconds_each = measure_demonstrations(env_id, kwargs, counter)
        plan = warm_start_plan(longest, budget, args.steps, positions)
        demos = demonstrations_to_make(plan, budget, seconds_each)
        row: dict[str, Any] = {"longest_tokens": longest, "steps": plan.steps, "batch": plan.batch_size, "tokens_kept": plan.row_tokens,
                               "demos": demos, "estimate_s": round(plan.estimated_s + demos * seconds_each, 1)}
        if not args.plan_only and not args.first_step_only:
            start = time.perf_counter()
            path = tiny_warm_start(env_id, kwargs, args.steps, progress=False, budget_s=budget)
            row["warm_start_s"] = round(time.perf_counter() - start, 1)
            if args.eval_tasks:
                row["pass_at_1"] = round(greedy_pass_at_1(str(path), env_id, kwargs, args.eval_tasks), 4)
        if not args.plan_only and (args.first_step or args.first_step_only):
            extra = ["--warm-start-steps", str(args.steps), "--warm-start-budget", str(budget)]
            if given:
                extra += ["--env-kwargs", f"{{difficulty: {args.difficulty}}}"]
            reached, done = time_first_step(env_id, extra)
            row["first_step_reached_s"], row["first_step_done_s"] = round(reached, 1), round(done, 1)
        results["envs"][env_id] = row
        cells = [row.get(k, "—") for k in ("warm_start_s", "first_step_reached_s", "first_step_done_s")]
        accuracy = f"{row['pass_at_1']:.1%}" if "pass_at_1" in row else "—"
        print(f"| {env_id} | {longest} | {plan.steps} | {plan.batch_size} | {plan.row_tokens} | {demos} | {row['estimate_s']:.0f} | "
              f"{cells[0]} | {cells[1]} | {cells[2]} | {accuracy} |", flush=True)
    if args.record:
        write_record(args.record, results, ["benchmarks/warm_start_envs.py", *sys.argv[1:]])


def greedy_pass_at_1(path: str, env_id: str, kwargs: dict[str, Any], tasks: int) -> float:
    """The greedy pass@1 of the model at ``path`` on ``tasks`` held-out tasks (``mathgym eval``'s)."""
    from mathgym.agents.policy import LLMPolicy
    from mathgym.algos.evaluate import evaluate_policy

    policy = LLMPolicy.from_pretrained(path, device="cpu")
    result = evaluate_policy(policy, env_id, kwargs, num_tasks=tasks, k=1, seed=10_000, max_new_tokens=48, max_episode_tokens=2048)
    return result.pass_at_1


if __name__ == "__main__":
    main()
