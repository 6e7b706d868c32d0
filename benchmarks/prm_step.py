"""A GRPO step with a PRM's process reward against the outcome-only step, in one run.

The embedded tiny model (untrained unless ``--warm-start-steps``: every episode then runs to
MathStep-v0's step budget, so every turn's steps are scored) trains with GRPO on MathStep-v0 twice over, on the same
tasks and seeds: once with the outcome reward only, once with a process reward model's score of
each step added (``process_reward=`` a PRM directory). The PRM is a token classifier as large as the
policy (4 layers, 128 wide, the tiny model's character tokenizer plus a separator token: the
``step_head`` form of Qwen2.5-Math-PRM), built in-process with random weights. Both trainers step
in turns (outcome, PRM, outcome, ...), so a change of the machine's load falls on both; the table
gives the median step time of each and their ratio (target: at most 1.3), and where the PRM side's
extra time goes: the rollout (the PRM's scoring included, also shown alone) and the update, whose
cost follows the rows that carry a gradient (GRPO leaves out a group whose samples all scored the
same: with the outcome alone, an untrained policy's every group)::

    python benchmarks/prm_step.py                        # ~3 min on 2 cores
    python benchmarks/prm_step.py --record prm_step      # also write benchmarks/results/prm_step.json
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from record import write_record

ENV_ID = "MathStep-v0"


def build_prm(path: Path, seed: int = 0) -> Path:
    """A random ``step_head`` PRM the size of the tiny policy, saved to ``path`` as a PRM directory."""
    import torch
    from transformers import LlamaConfig, LlamaForTokenClassification

    from mathgym.agents.tiny import build_tokenizer
    from mathgym.rewards.prm import PRMSettings, write_prm_settings

    tokenizer = build_tokenizer()
    tokenizer.add_special_tokens({"additional_special_tokens": ["<extra_0>"]})
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=128, intermediate_size=512, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=4, max_position_embeddings=2048, num_labels=2, pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    model = LlamaForTokenClassification(config)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    write_prm_settings(path, PRMSettings(form="step_head", max_length=2048))
    return path


def trainer(args: argparse.Namespace, run_dir: Path, prm: Path | None, prm_batch_size: int = 0) -> Any:
    """A GRPO trainer on MathStep-v0, with ``prm`` as its process reward (``prm_batch_size`` rows a
    forward pass; 0: what an env loading a PRM directory uses)."""
    from mathgym.algos.configs import GRPOConfig
    from mathgym.algos.grpo import GRPOTrainer

    env_kwargs: dict[str, Any] = {"max_steps": args.max_steps}
    if prm is not None and prm_batch_size:
        from mathgym.rewards.prm import process_reward_from_path

        env_kwargs["process_reward"] = process_reward_from_path(prm, batch_size=prm_batch_size)
    elif prm is not None:
        env_kwargs["process_reward"] = str(prm)
    config = GRPOConfig(
        env=ENV_ID, env_kwargs=env_kwargs, model="tiny", warm_start_steps=args.warm_start_steps, steps=args.steps + args.warmup,
        num_tasks=args.tasks, group_size=args.group, max_new_tokens=args.max_new_tokens, max_episode_tokens=1024,
        dynamic_sampling=False, eval_tasks=0, save_every=0, log_samples=0, progress=False, threads=args.threads,
        device="cpu", seed=args.seed, run_dir=str(run_dir),
    )
    return GRPOTrainer(config)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=6, help="timed GRPO steps of each trainer")
    parser.add_argument("--warmup", type=int, default=1, help="untimed first steps of each trainer")
    parser.add_argument("--tasks", type=int, default=8, help="tasks per step")
    parser.add_argument("--group", type=int, default=8, help="samples per task (G)")
    parser.add_argument("--max-steps", type=int, default=4, help="MathStep-v0's step budget (turns per episode)")
    parser.add_argument("--max-new-tokens", type=int, default=32, help="tokens per step")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--warm-start-steps", type=int, default=0,
                        help="SFT steps of the tiny model's warm start on MathStep-v0 (0: untrained; built once, then cached)")
    parser.add_argument("--prm-batch-size", type=int, default=0,
                        help="rows per PRM forward pass (0: what an env loading a PRM directory uses, load_prm's default)")
    parser.add_argument("--compare-batch-size", type=int, default=0,
                        help="also train a third side whose PRM passes this many rows at a time (64: a default step's "
                             "episodes in one pass; an env's PRM directory is loaded with load_prm's default of 8)")
    parser.add_argument("--profile", default="", help="write a cProfile of the PRM trainer's timed steps here")
    parser.add_argument("--record", default="")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}", flush=True)
    from mathgym.agents.prm_model import PRM

    scoring: list[float] = []
    score_steps = PRM.score_steps

    def timed_scoring(self: Any, problems: Any, steps: Any) -> Any:
        start = time.perf_counter()
        try:
            return score_steps(self, problems, steps)
        finally:
            scoring.append(time.perf_counter() - start)

    PRM.score_steps = timed_scoring  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory(prefix="mathgym-bench-prm-step-") as tmp:
        prm = build_prm(Path(tmp) / "prm")
        sides = {"outcome": trainer(args, Path(tmp) / "outcome", None), "prm": trainer(args, Path(tmp) / "prm-run", prm, args.prm_batch_size)}
        if args.compare_batch_size:  # the same PRM, fewer rows a forward pass
            sides["prm_compared"] = trainer(args, Path(tmp) / "prm-compared", prm, args.compare_batch_size)
        times: dict[str, list[float]] = {name: [] for name in sides}
        parts: dict[str, dict[str, list[float]]] = {name: {"rollout": [], "update": [], "scoring": [], "trained": []} for name in sides}
        profiler = None
        if args.profile:
            import cProfile

            profiler = cProfile.Profile()
        for step in range(args.warmup + args.steps):
            for name, run in sides.items():
                timed = step >= args.warmup
                if profiler is not None and timed and name == "prm":
                    profiler.enable()
                scoring.clear()
                start = time.perf_counter()
                metrics = run.train_step()
                run.step += 1
                seconds = time.perf_counter() - start
                if profiler is not None and timed and name == "prm":
                    profiler.disable()
                if timed:
                    times[name].append(seconds)
                    parts[name]["rollout"].append(metrics["perf/rollout_s"])
                    parts[name]["update"].append(seconds - metrics["perf/rollout_s"])
                    parts[name]["scoring"].append(sum(scoring))
                    parts[name]["trained"].append(metrics.get("loss/trained_sequences", 0.0))
                print(f"  step {step + 1} {name}: {seconds:.2f} s", flush=True)
        if profiler is not None:
            profiler.dump_stats(args.profile)
    PRM.score_steps = score_steps  # type: ignore[method-assign]
    median = {name: statistics.median(t) for name, t in times.items()}
    result: dict[str, Any] = {
        "tasks": args.tasks, "group": args.group, "max_steps": args.max_steps, "max_new_tokens": args.max_new_tokens,
        "timed_steps": args.steps, "threads": args.threads, "prm_batch_size": args.prm_batch_size or "env default",
        "compare_batch_size": args.compare_batch_size,
        "ratio": round(median["prm"] / median["outcome"], 2),
    }
    for name in sides:
        result[name] = {
            "median_step_s": round(median[name], 2), "steps_s": [round(t, 2) for t in times[name]],
            **{f"median_{part}_s": round(statistics.median(v), 2) for part, v in parts[name].items() if part != "trained"},
            "trained_sequences": round(statistics.fmean(parts[name]["trained"]), 2),
        }
    result["rollout_ratio"] = round(result["prm"]["median_rollout_s"] / result["outcome"]["median_rollout_s"], 2)
    if "prm_compared" in result:  # the PRM's scoring a step with fewer rows a pass, over that of one pass
        result["compared_scoring_ratio"] = round(result["prm_compared"]["median_scoring_s"] / result["prm"]["median_scoring_s"], 2)
    result["load_average_after"] = round(os.getloadavg()[0], 2)
    print("| reward | median step (s) | rollout (s) | PRM scoring (s) | update (s) | sequences trained |")
    print("|---|---|---|---|---|---|")
    labels = {"outcome": "outcome only", "prm": "outcome + PRM", "prm_compared": f"outcome + PRM, {args.compare_batch_size} rows a pass"}
    for name, label in labels.items():
        if name not in result:
            continue
        r = result[name]
        print(f"| {label} | {r['median_step_s']} | {r['median_rollout_s']} | {r['median_scoring_s']} | {r['median_update_s']} | "
              f"{r['trained_sequences']:.0%} |")
    print(f"{ENV_ID}, {args.tasks * args.group} episodes a step, up to {args.max_steps} turns: PRM / outcome "
          f"{result['ratio']}x a step, {result['rollout_ratio']}x the rollout")
    if "compared_scoring_ratio" in result:
        print(f"the PRM's scoring a step, {args.compare_batch_size} rows a pass / one pass: {result['compared_scoring_ratio']}x")
    print(f"load average after: {result['load_average_after']:.2f}")
    if args.record:
        write_record(args.record, result)


if __name__ == "__main__":
    main()
