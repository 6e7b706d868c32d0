"""OpenR's process-reward loop on the embedded tiny model, end to end, with the mathgym commands.

    python benchmarks/prm_loop.py                       # the full loop (tens of minutes on a CPU)
    python benchmarks/prm_loop.py --quick               # a smoke run: every stage, tiny sizes
    python benchmarks/prm_loop.py --record prm_loop     # also write benchmarks/results/prm_loop.json

Stages (each is the command a user runs; the script prints them):

1. labels: ``mathgym label-steps`` writes Monte-Carlo step labels (K rollouts per step) for
   training problems, and again for held-out problems;
2. PRM: ``mathgym train --algo prm`` on them;
3. step AUC on the held-out labels: the PRM against the rule-based ``arithmetic_consistency``;
4. test-time selection on MathReason-v0: greedy, maj@8, PRM best-of-8 (``--select prm-min``),
   PRM beam search (``--search beam``);
5. GRPO on MathStep-v0 from the same warm start: outcome reward only, and outcome + the PRM's
   process reward.

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
    # 2,000 labelled solutions and 600 PRM steps: with 200 and 200 the tiny PRM learned its training
    # problems, not the check (held-out step AUC 0.62); with these it reaches about 0.8.
    "full": {"label_tasks": 2000, "held_out_tasks": 50, "k": 8, "prm_steps": 600, "eval_tasks": 200, "samples": 8,
             "beam_tasks": 100, "grpo_steps": 30},
    "quick": {"label_tasks": 3, "held_out_tasks": 2, "k": 2, "prm_steps": 2, "eval_tasks": 3, "samples": 2,
              "beam_tasks": 2, "grpo_steps": 2},
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


def step_aucs(prm_dir: Path | None, held_out: Path) -> dict[str, Any]:
    """Step AUC of the PRM and of ``arithmetic_consistency`` on the held-out labels."""
    from mathgym.algos.prm_eval import step_auc
    from mathgym.algos.selection import ProcessRewardScorer
    from mathgym.algos.step_labels import read_step_labels
    from mathgym.envs.math_step import arithmetic_consistency

    rows = list(read_step_labels(held_out))
    scorers: dict[str, Any] = {"arithmetic_consistency": ProcessRewardScorer(arithmetic_consistency)}
    labels = [x for r in rows for x in r.labels]
    if len({x >= 0.5 for x in labels}) < 2:
        return {"n/a": "the held-out steps are all labelled right, or all wrong"}
    if prm_dir is not None:
        from mathgym.train_cli import _quiet_transformers, prm_loader

        _quiet_transformers()
        scorers["prm"] = prm_loader()(str(prm_dir))
    out = {}
    for name, scorer in scorers.items():
        scores = scorer.score_steps([r.problem for r in rows], [r.steps for r in rows])
        out[name] = round(step_auc([x for s in scores for x in s], labels), 3)
    return out


def evaluate(args: list[str], work: Path, name: str, env: dict[str, str]) -> dict[str, Any]:
    out = work / f"{name}.json"
    run(["mathgym", "eval", "--progress", "false", "--out", str(out), *args], env)
    return json.loads(out.read_text())


def evals(run_dir: Path) -> list[float]:
    """A run's held-out greedy pass@1, each evaluation in order (before training first, after it last)."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return [r["eval/pass@1"] for r in rows if "eval/pass@1" in r]


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
        common = ["--env", "MathReason-v0", *(f"-o{k}={v}" for k, v in options.items()), "--k", str(size["k"]), "--progress", "false"]
        run(["mathgym", "label-steps", *common, "--tasks", "1", "--out", str(work / "warm.jsonl")], env)  # warm start, untimed
        _, wall = run(["mathgym", "label-steps", *common, "--tasks", str(size["label_tasks"]), "--out", str(labels)], env)
        run(["mathgym", "label-steps", *common, "--tasks", str(size["held_out_tasks"]), "--seed", "50000", "--out", str(held_out)], env)
        rows = [json.loads(line) for line in labels.read_text().splitlines()]
        results["labels"] = {"solutions": len(rows), "steps": sum(len(r["steps"]) for r in rows), "k": size["k"],
                             "wall_s": round(wall, 1)}
        print(f"labels: {results['labels']['solutions']} solutions, {results['labels']['steps']} steps, "
              f"K = {size['k']}, {wall:.1f} s")
        # -- 2. PRM
        missing = prm_missing()
        prm_dir: Path | None = None
        if missing:
            print(f"PRM: skipped: {missing}; the stages that need it are skipped too")
            results["prm"] = f"skipped: {missing}"
        else:
            run_dir = work / "prm"
            _, wall = run(["mathgym", "train", "--algo", "prm", "--data", str(labels), "--eval-data", str(held_out),
                           "--steps", str(size["prm_steps"]), "--run-dir", str(run_dir), "--progress", "false"], env)
            prm_dir = run_dir / "final"
            results["prm"] = {"steps": size["prm_steps"], "wall_s": round(wall, 1)}
            print(f"PRM trained: {size['prm_steps']} steps, {wall:.1f} s")
        # -- 3. step AUC
        try:
            results["step_auc"] = step_aucs(prm_dir, held_out)
            print("step AUC on held-out labels: " + ", ".join(f"{k} {v}" for k, v in results["step_auc"].items()))
        except ImportError as err:  # step_auc comes with the PRM's evaluation (mathgym.algos.prm_eval)
            results["step_auc"] = f"skipped: {err}"
            print(f"step AUC: skipped: {err}")
        # -- 4. selection
        n, k = str(size["eval_tasks"]), str(size["samples"])
        base = ["--env", "MathReason-v0", "--env-kwargs", level, "--tasks", n]
        accuracy = {"greedy": evaluate([*base, "--k", "1"], work, "greedy", env)["pass@1"]}
        sampled = evaluate([*base, "--k", k, "--select", "majority"], work, "majority", env)
        accuracy[f"pass@{k}"], accuracy[f"maj@{k}"] = sampled[f"pass@{k}"], sampled[f"maj@{k}"]
        if prm_dir is not None:
            best = evaluate([*base, "--k", k, "--select", "prm-min", "--prm", str(prm_dir)], work, "prm_best", env)
            accuracy[f"prm-best-of-{k}"] = best[f"prm-min@{k}"]
            beam = ["--env", "MathReason-v0", "--env-kwargs", level, "--tasks", str(size["beam_tasks"]), "--search", "beam",
                    "--prm", str(prm_dir), "--beam-width", "4", "--expansions", "4"]
            accuracy["prm-beam-4x4"] = evaluate(beam, work, "beam", env)["beam@1"]
        results["accuracy"] = accuracy
        print("accuracy: " + ", ".join(f"{name} {value:.1%}" for name, value in accuracy.items()))
        # -- 5. GRPO, outcome only and outcome + PRM
        grpo: dict[str, Any] = {}
        # Both runs start from one warm start, made here (untimed): given as --model, so the PRM's option
        # in env_kwargs does not make the trainer build a second one under another cache key.
        from mathgym.algos.configs import GRPOConfig
        from mathgym.algos.warm_start import prepare_model

        warm = prepare_model(GRPOConfig(env="MathStep-v0", env_kwargs=options, warm_start_budget=MATHSTEP_WARM_START_BUDGET))
        for name, kwargs in (("outcome", level), ("outcome+prm", json.dumps({**options, "process_reward": str(prm_dir)}))):
            if name == "outcome+prm" and prm_dir is None:
                grpo[name] = f"skipped: {missing}"
                continue
            run_dir = work / f"grpo-{name}"
            _, wall = run(["mathgym", "train", "--env", "MathStep-v0", "--env-kwargs", kwargs, "--steps", str(size["grpo_steps"]),
                           "--model", str(warm), "--eval-tasks", str(size["eval_tasks"]),
                           "--run-dir", str(run_dir), "--progress", "false", "--seed", "0"], env)
            measured = evals(run_dir)
            grpo[name] = {"pass_at_1_before": measured[0] if measured else None,
                          "pass_at_1_after": measured[-1] if measured else None, "wall_s": round(wall, 1)}
        results["grpo_mathstep"] = grpo
        print("GRPO on MathStep-v0: " + ", ".join(
            f"{name} {v['pass_at_1_before']:.1%} -> {v['pass_at_1_after']:.1%} ({v['wall_s']} s)" if isinstance(v, dict) else f"{name} {v}" for name, v in grpo.items()))
    if args.record:
        print(f"recorded: {write_record(args.record, results)}")


if __name__ == "__main__":
    main()
