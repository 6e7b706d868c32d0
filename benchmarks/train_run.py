"""Time one `mathgym train` run from an empty cache and record what it measured.

    python benchmarks/train_run.py --record train_default
    python benchmarks/train_run.py --record train_ppo -- --algo ppo --steps 60

Everything after ``--`` goes to ``mathgym train`` unchanged. The run gets a fresh
``MATHGYM_CACHE`` (so the tiny model's warm start is built and timed too) and its own run
directory; the script prints the run's summary line and, with ``--record``, writes
``benchmarks/results/NAME.json``: wall time, greedy pass@1 before and after (fractions and
points), the rollout reward over the first and last 10 steps, the median step time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from record import split_passthrough, write_record  # noqa: E402


def main() -> None:
    own, extra = split_passthrough(sys.argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", default="", help="write benchmarks/results/NAME.json")
    parser.add_argument("--keep", default="", help="keep the run directory here (default: a temporary dir)")
    args = parser.parse_args(own)
    with tempfile.TemporaryDirectory(prefix="mathgym-train-run-") as tmp:
        run_dir = Path(args.keep or Path(tmp) / "run")
        command = [sys.executable, "-m", "mathgym", "train", "--progress", "false", "--run-dir", str(run_dir), *extra]
        env = {**__import__("os").environ, "MATHGYM_CACHE": str(Path(tmp) / "cache")}
        start = time.perf_counter()
        done = subprocess.run(command, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - start
        sys.stdout.write(done.stdout[-4000:])
        if done.returncode != 0:
            sys.stderr.write(done.stderr[-4000:])
            raise SystemExit(f"mathgym train exited with {done.returncode}")
        rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    evals = [r for r in rows if "eval/pass@1" in r]
    steps = [r for r in rows if "rollout/reward" in r]
    before, after = evals[0]["eval/pass@1"], evals[-1]["eval/pass@1"]
    results = {
        "train_args": " ".join(extra) or "(defaults)",
        "wall_s": round(wall, 1),
        "wall_min": round(wall / 60, 2),
        "steps": len(steps),
        "pass_at_1_before": before,
        "pass_at_1_after": after,
        "points_gained": round(100 * (after - before), 1),
        "eval_tasks": evals[-1].get("eval/tasks"),
        "reward_first_10": round(statistics.fmean(r["rollout/reward"] for r in steps[:10]), 3),
        "reward_last_10": round(statistics.fmean(r["rollout/reward"] for r in steps[-10:]), 3),
        "median_step_s": round(statistics.median(r["perf/step_s"] for r in steps), 3) if steps and "perf/step_s" in steps[0] else None,
        "steps_s": round(sum(r.get("perf/step_s", 0.0) for r in steps), 1),
    }
    print(f"wall {wall:.1f} s; pass@1 {before:.1%} -> {after:.1%}; rollout reward {results['reward_first_10']} -> {results['reward_last_10']}")
    if args.record:
        write_record(args.record, results, ["benchmarks/train_run.py", *argv])


if __name__ == "__main__":
    main()
