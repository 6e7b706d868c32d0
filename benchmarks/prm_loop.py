"""OpenR's process-reward loop on the embedded tiny model, end to end, with the mathgym commands.

    python benchmarks/prm_loop.py                       # the full loop (tens of minutes on a CPU)
    python benchmarks/prm_loop.py --quick               # a smoke run: every stage, tiny sizes
    python benchmarks/prm_loop.py --record prm_loop     # also write benchmarks/results/prm_loop.json

Stages (each is the command a user runs; the script prints them):

1. labels: ``mathgym label-steps`` writes Monte-Carlo step labels (K rollouts per step) for
   training problems, and again for held-out problems (the training labels then lose every
   solution of a problem that is also held out);
2. PRM: ``mathgym train --algo prm`` on them;
3. on the held-out labels, the PRM against the rule-based ``arithmetic_consistency``: step AUC, and
   how often a right solution's lowest step score beats a wrong one's on the same problem (what
   best-of-N asks);
4. test-time selection on MathReason-v0: greedy; pass@8, maj@8, PRM best-of-8 (``--select prm-min``)
   and PRM-weighted vote (``--select prm-vote``), each rule on the same samples as the maj@8 beside
   it; PRM beam search (``--search beam``);
5. GRPO on MathStep-v0 from the same warm start: outcome reward only, and outcome + the PRM's
   process reward, after the same steps and within the same training time; and outcome + PRM
   again with dynamic sampling keeping only groups that hold a right and a wrong sample.

The tiny model is warm-started on MathReason-v0 at the env's default level unless
``--difficulty`` says otherwise (its greedy pass@1 there is about 50%: see
benchmarks/results/train_default.json), and on MathStep-v0 for the GRPO stage. Stages that
need the PRM say what is missing when ``mathgym train --algo prm`` is not available, and the
others still run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from record import write_record  # noqa: E402

SIZES = {
    # 24,000 problems x 4 sampled solutions (about 36,000 distinct ones once the held-out problems are left out)
    # and 3,000 PRM steps of 64 solutions at lr 3e-4 (100 warm-up steps): held-out step AUC 0.972, a right
    # solution ranked over a wrong one of the same problem 0.947 of the time (seeds 100000.., one trial run).
    # The data was what mattered. With 4,000 problems (about 6,200 solutions) and 1,500 steps of 32 no form
    # or learning rate got past 0.66 (held-out AUC / right-over-wrong): step_tag from the untrained tiny
    # model, lr 1e-4, 2,000 x 16: 0.66 / 0.65; lr 3e-4: 0.63-0.64 / 0.66-0.67; lr 3e-3: 0.54 / 0.56;
    # step_head: 0.64 / 0.67; either form from the SFT warm start: 0.57-0.65 / 0.57-0.64. With one solution per
    # problem (2,000 problems) a PRM learned which problems are hard rather than which solutions are right
    # (right-over-wrong 33 in 60): several solutions per problem give it both to tell apart.
    "full": {"label_tasks": 24000, "held_out_tasks": 300, "label_samples": 4, "k": 8, "prm_steps": 3000, "prm_batch": 64,
             "prm_lr": 3e-4, "prm_warmup": 100, "eval_tasks": 200, "samples": 8, "beam_tasks": 100, "grpo_steps": 30,
             "grpo_eval_every": 10},
    "quick": {"label_tasks": 3, "held_out_tasks": 2, "label_samples": 2, "k": 2, "prm_steps": 2, "prm_batch": 2,
              "prm_lr": 3e-4, "prm_warmup": 0, "eval_tasks": 3, "samples": 2, "beam_tasks": 2, "grpo_steps": 2, "grpo_eval_every": 1},
}

#: MathStep-v0's demonstrations are long (a turn per step): within the default 110 s budget its warm start
#: gets 100 SFT steps and the tiny model solves about 1% of the tasks, too few for GRPO to compare rewards on.
MATHSTEP_WARM_START_BUDGET = 400


def run(command: list[str], env: dict[str, str]) -> tuple[str, float]:
    """Run a mathgym command; its stdout and wall time (exit on failure, showing its stderr)."""
    print("$ " + " ".join(command), flush=True)
    start = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        sys.stderr.write(done.stdout[-2000:] + done.stderr[-4000:])
        raise SystemExit(f"{command[0]} {command[1]} exited with {done.returncode}")
    return done.stdout, wall


def prm_missing() -> str | None:
    """Why the PRM stages cannot run here (``None``: they can)."""
    from mathgym.algos.registry import ALGORITHMS
    from mathgym.train_cli import prm_loader

    if prm_loader() is None:
        return "process reward models are not in this mathgym (no load_prm)"
    if "prm" not in ALGORITHMS:
        return "`mathgym train --algo prm` is not in this mathgym"
    return None


def unseen_problems(labels: Path, held_out: Path) -> tuple[list[dict[str, Any]], int]:
    """Keep in ``labels`` only the solutions of problems the held-out file does not hold (the small
    levels repeat problems across seeds: a PRM that saw a held-out problem's solutions would be
    measured on what it memorised). Rewrites ``labels``; returns its rows and how many were dropped."""
    held = {json.loads(line)["problem"] for line in held_out.read_text().splitlines() if line.strip()}
    rows = [json.loads(line) for line in labels.read_text().splitlines() if line.strip()]
    kept = [row for row in rows if row["problem"] not in held]
    labels.write_text("".join(json.dumps(row) + "\n" for row in kept))
    return kept, len(rows) - len(kept)


def step_measures(prm_dir: Path | None, held_out: Path) -> dict[str, Any]:
    """Step AUC and right-over-wrong pairwise accuracy (one problem's solutions) on the held-out labels,
    of the PRM and of the rule-based ``arithmetic_consistency``."""
    from mathgym.algos.prm_eval import evaluate_prm, load_labelled_steps
    from mathgym.algos.selection import ProcessRewardScorer
    from mathgym.envs.math.math_step import arithmetic_consistency

    rows = load_labelled_steps(held_out)
    scorers: dict[str, Any] = {"arithmetic_consistency": ProcessRewardScorer(arithmetic_consistency)}
    if len({x >= 0.5 for r in rows for x in r.labels}) < 2:
        return {"n/a": "the held-out steps are all labelled right, or all wrong"}
    if prm_dir is not None:
        from mathgym.train_cli import _quiet_transformers, prm_loader

        _quiet_transformers()
        scorers["prm"] = prm_loader()(str(prm_dir))
    out = {}
    for name, scorer in scorers.items():
        measured = evaluate_prm(scorer, rows)
        out[name] = {"step_auc": round(measured.step_auc, 3), "pairwise_accuracy": round(measured.pairwise_accuracy, 3),
                     "pairs": measured.num_pairs, "first_error_f1": round(measured.processbench_f1, 3)}
    return out


def evaluate(args: list[str], work: Path, name: str, env: dict[str, str]) -> dict[str, Any]:
    out = work / f"{name}.json"
    run(["mathgym", "eval", "--progress", "false", "--out", str(out), *args], env)
    return json.loads(out.read_text())


def evals(run_dir: Path) -> list[tuple[int, float, float]]:
    """A run's held-out greedy evaluations in order: (step, pass@1, training seconds before it)."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    out, spent = [], 0.0
    for r in rows:
        spent += float(r.get("perf/step_s", 0.0))
        if "eval/pass@1" in r:
            out.append((int(r.get("step", 0)), r["eval/pass@1"], round(spent, 1)))
    return out


def at_time(curve: list[tuple[int, float, float]], seconds: float) -> tuple[int, float] | None:
    """The last evaluation of ``curve`` made within ``seconds`` of training."""
    done = [(step, value) for step, value, spent in curve if spent <= seconds + 1e-9]
    return done[-1] if done else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: every stage at tiny sizes")
    parser.add_argument("--difficulty", type=int, default=None, help="MathReason-v0 / MathStep-v0 level [default: the env's]")
    parser.add_argument("--record", default="", help="write benchmarks/results/NAME.json")
    parser.add_argument("--keep", default="", help="keep the work directory (labels, PRM, runs) here")
    args = parser.parse_args()
    size = SIZES["quick" if args.quick else "full"]
    options = {} if args.difficulty is None else {"difficulty": args.difficulty}
    level = json.dumps(options)  # --env-kwargs: JSON is YAML
    results: dict[str, Any] = {"difficulty": args.difficulty, **size}
    with tempfile.TemporaryDirectory(prefix="mathgym-prm-loop-") as tmp:
        work = Path(args.keep or tmp)
        work.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)  # the tiny model's warm start is made once (first command, untimed) and cached
        # -- 1. labels
        labels, held_out = work / "labels.jsonl", work / "held_out.jsonl"
        common = ["--env", "MathReason-v0", *(f"-o{k}={v}" for k, v in options.items()), "--k", str(size["k"]), "--progress", "false",
                  "--samples", str(size["label_samples"])]
        run(["mathgym", "label-steps", *common, "--tasks", "1", "--out", str(work / "warm.jsonl")], env)  # warm start, untimed
        _, wall = run(["mathgym", "label-steps", *common, "--tasks", str(size["label_tasks"]), "--out", str(labels)], env)
        run(["mathgym", "label-steps", *common, "--tasks", str(size["held_out_tasks"]), "--seed", "50000", "--out", str(held_out)], env)
        rows, dropped = unseen_problems(labels, held_out)
        results["labels"] = {"problems": size["label_tasks"], "solutions": len(rows), "steps": sum(len(r["steps"]) for r in rows),
                             "right_solutions": sum(r["labels"][-1] >= 0.5 for r in rows), "k": size["k"], "wall_s": round(wall, 1),
                             "dropped_held_out_problems": dropped}
        print(f"labels: {size['label_tasks']} problems, {results['labels']['solutions']} distinct solutions "
              f"({results['labels']['right_solutions']} right), {results['labels']['steps']} steps, K = {size['k']}, {wall:.1f} s; "
              f"{dropped} solutions of problems that are also held out left out")
        # -- 2. PRM
        missing = prm_missing()
        prm_dir: Path | None = None
        if missing:
            print(f"PRM: skipped: {missing}; the stages that need it are skipped too")
            results["prm"] = f"skipped: {missing}"
        else:
            run_dir = work / "prm"
            _, wall = run(["mathgym", "train", "--algo", "prm", "--data", str(labels), "--eval-data", str(held_out),
                           "--steps", str(size["prm_steps"]), "--batch-size", str(size["prm_batch"]),
                           "--learning-rate", str(size["prm_lr"]), "--warmup-steps", str(size["prm_warmup"]), "--run-dir", str(run_dir), "--progress", "false"], env)
            prm_dir = run_dir / "final"
            results["prm"] = {"steps": size["prm_steps"], "batch_size": size["prm_batch"], "learning_rate": size["prm_lr"],
                              "warmup_steps": size["prm_warmup"],
                              "wall_s": round(wall, 1)}
            print(f"PRM trained: {size['prm_steps']} steps, {wall:.1f} s")
        # -- 3. step AUC and right-over-wrong on one problem
        try:
            results["step_measures"] = step_measures(prm_dir, held_out)
            print("held-out labels: " + "; ".join(
                f"{k} " + (", ".join(f"{m} {x}" for m, x in v.items()) if isinstance(v, dict) else str(v))
                for k, v in results["step_measures"].items()))
        except ImportError as err:  # the measures come with the PRM's evaluation (mathgym.algos.prm_eval)
            results["step_measures"] = f"skipped: {err}"
            print(f"step measures: skipped: {err}")
        # -- 4. selection: every rule of one run picks among the same 8 samples per problem (maj@k is always reported)
        n, k = str(size["eval_tasks"]), str(size["samples"])
        base = ["--env", "MathReason-v0", "--env-kwargs", level, "--tasks", n]
        accuracy = {"greedy": evaluate([*base, "--k", "1"], work, "greedy", env)["pass@1"]}
        if prm_dir is None:
            sampled = evaluate([*base, "--k", k, "--select", "majority"], work, "majority", env)
            accuracy[f"pass@{k}"], accuracy[f"maj@{k}"] = sampled[f"pass@{k}"], sampled[f"maj@{k}"]
        else:
            for rule in ("prm-min", "prm-vote"):
                picked = evaluate([*base, "--k", k, "--select", rule, "--prm", str(prm_dir)], work, rule, env)
                accuracy[f"pass@{k}"], accuracy[f"maj@{k}"] = picked[f"pass@{k}"], picked[f"maj@{k}"]
                accuracy[f"{rule}@{k}"] = picked[f"{rule}@{k}"]
                accuracy[f"{rule}@{k} vs maj@{k} on its samples"] = round(picked[f"{rule}@{k}"] - picked[f"maj@{k}"], 3)
            beam = ["--env", "MathReason-v0", "--env-kwargs", level, "--tasks", str(size["beam_tasks"]), "--search", "beam",
                    "--prm", str(prm_dir), "--beam-width", "4", "--expansions", "4"]
            accuracy["prm-beam-4x4"] = evaluate(beam, work, "beam", env)["beam@1"]
        results["accuracy"] = accuracy
        print("accuracy: " + ", ".join(f"{name} {value:+.1%}" if " vs " in name else f"{name} {value:.1%}"
                                       for name, value in accuracy.items()))
        # -- 5. GRPO, outcome only and outcome + PRM
        grpo: dict[str, Any] = {}
        # Both runs start from one warm start, made here (untimed) and given as --model.
        from mathgym.algos.configs import GRPOConfig
        from mathgym.algos.warm_start import prepare_model

        warm = prepare_model(GRPOConfig(env="MathStep-v0", env_kwargs=options, warm_start_budget=MATHSTEP_WARM_START_BUDGET))
        # The PRM is paid at MathStep-v0's default process_weight (see MathStepEnv); the record names it.
        from mathgym.envs.math.math_step import MathStepEnv

        with_prm = json.dumps({**options, "process_reward": str(prm_dir)})
        results["process_weight"] = MathStepEnv(**options).process_weight
        # GRPO's dynamic sampling drops groups whose rewards all agree; the PRM's scores make every group's
        # rewards differ, so the third run keeps only groups with a right and a wrong sample (the outcome's spread).
        band = ["--keep-pass-rate-min", "0.1", "--keep-pass-rate-max", "0.9"]
        for name, folder, kwargs, extra in (("outcome", "grpo-outcome", level, []), ("outcome+prm", "grpo-outcome+prm", with_prm, []),
                                            ("outcome+prm, outcome-spread groups", "grpo-outcome+prm-band", with_prm, band)):
            if kwargs is with_prm and prm_dir is None:
                grpo[name] = f"skipped: {missing}"
                continue
            run_dir = work / folder
            _, wall = run(["mathgym", "train", "--env", "MathStep-v0", "--env-kwargs", kwargs, "--steps", str(size["grpo_steps"]),
                           "--model", str(warm), "--eval-tasks", str(size["eval_tasks"]), "--eval-every", str(size["grpo_eval_every"]),
                           "--run-dir", str(run_dir), "--progress", "false", "--seed", "0", "--lr-schedule", "constant", *extra], env)
            curve = evals(run_dir)
            grpo[name] = {"pass_at_1_before": curve[0][1] if curve else None, "pass_at_1_after": curve[-1][1] if curve else None,
                          "train_s": curve[-1][2] if curve else None, "wall_s": round(wall, 1),
                          "curve": [{"step": s, "pass@1": v, "train_s": t} for s, v, t in curve]}
        if all(isinstance(grpo.get(n), dict) for n in ("outcome", "outcome+prm")):
            # the same wall time: each run's last evaluation within the faster run's training time
            budget = min(grpo["outcome"]["train_s"], grpo["outcome+prm"]["train_s"])
            grpo["same_train_time"] = {"train_s": budget, **{
                name: dict(zip(("step", "pass@1"), at_time([(c["step"], c["pass@1"], c["train_s"]) for c in grpo[name]["curve"]], budget) or (0, None)))
                for name in ("outcome", "outcome+prm")}}
        results["grpo_mathstep"] = grpo
        print("GRPO on MathStep-v0: " + ", ".join(
            f"{name} {v['pass_at_1_before']:.1%} -> {v['pass_at_1_after']:.1%} ({v['train_s']} s training, {v['wall_s']} s wall)"
            for name, v in grpo.items() if isinstance(v, dict) and "curve" in v))
        if "same_train_time" in grpo:
            same = grpo["same_train_time"]
            print(f"within {same['train_s']} s of training: " + ", ".join(
                f"{n} step {same[n]['step']} {same[n]['pass@1']:.1%}" for n in ("outcome", "outcome+prm") if same[n]["pass@1"] is not None))
    if args.record:
        print(f"recorded: {write_record(args.record, results)}")


if __name__ == "__main__":
    main()
