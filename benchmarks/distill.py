"""Distillation side by side: a half-depth student learns from the tiny model `mathgym train` trains.

    python benchmarks/distill.py                       # the full comparison (a CPU run of tens of minutes)
    python benchmarks/distill.py --quick               # a smoke run of every method (minutes)
    python benchmarks/distill.py --record distill      # also write benchmarks/results/distill.json

The teacher is the run of ``mathgym train`` with its defaults: GRPO on MathReason-v0 from the tiny
model's SFT warm start. The student is that same warm start cut to its first half of layers (same
tokenizer, same embeddings). From there each method trains the student for the same budget
(``--steps`` optimizer steps of ``num_tasks x group_size`` episodes each) and is scored by greedy
pass@1 on the same held-out tasks:

- ``sft``: SFT on the teacher's samples (off-policy distillation with ``distill_weight=0``);
- ``kd-DIVERGENCE``: off-policy distillation, ``(1 - w) CE + w D(teacher || student)`` for each divergence;
- ``onpolicy``: on-policy distillation, the reverse KL to the teacher on the student's own samples;
- ``grpo``: GRPO on the env reward, no teacher;
- ``onpolicy+env``: on-policy distillation plus the env reward's advantage.

``train_s`` is the time of the training steps (rollouts, teacher passes and updates; the
evaluations are not counted).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from record import write_record  # noqa: E402

DIVERGENCES = ("forward_kl", "reverse_kl", "jsd", "skew_forward_kl", "skew_reverse_kl")


def half_depth_student(warm_start: str, out: Path) -> str:
    """The warm start with its first half of transformer layers, saved at ``out`` with its ``mathgym.json``."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(warm_start)
    keep = max(1, model.config.num_hidden_layers // 2)
    model.model.layers = model.model.layers[:keep]
    model.config.num_hidden_layers = keep
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(warm_start).save_pretrained(out)
    settings = Path(warm_start) / "mathgym.json"
    if settings.is_file():
        shutil.copy(settings, out / "mathgym.json")
    return str(out)


def train_s(run_dir: Path) -> float:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return sum(r.get("perf/step_s", 0.0) for r in rows)


def run_method(name: str, algo: str, common: dict[str, Any], options: dict[str, Any], root: Path) -> dict[str, Any]:
    """Train the student with ``algo`` and ``options``; its held-out pass@1 before and after, and times."""
    from mathgym.algos.registry import get_algorithm

    trainer_class, config_class = get_algorithm(algo)
    run_dir = root / name
    start = time.perf_counter()
    result = trainer_class(config_class(**common, **options, run_dir=str(run_dir))).train()
    wall = time.perf_counter() - start
    row = {
        "method": name, "pass_at_1": result.eval_after.pass_at_1, "before": result.eval_before.pass_at_1,
        "train_s": round(train_s(run_dir), 1), "wall_s": round(wall, 1),
    }
    print(f"{name:>20}: pass@1 {row['before']:.1%} -> {row['pass_at_1']:.1%}, train {row['train_s']:.0f} s", flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: 2 steps each, small batches, 20 eval tasks")
    parser.add_argument("--steps", type=int, default=0, help="optimizer steps of each student method (default 60; quick 2)")
    parser.add_argument("--device", default="auto", help="device of every run")
    parser.add_argument("--record", default="", help="write benchmarks/results/NAME.json")
    args = parser.parse_args()

    from mathgym.algos.configs import GRPOConfig
    from mathgym.algos.grpo import GRPOTrainer
    from mathgym.algos.warm_start import prepare_model

    steps = args.steps or (2 if args.quick else 60)
    size = dict(num_tasks=4, group_size=2, eval_tasks=20) if args.quick else dict(num_tasks=16, group_size=8, eval_tasks=200)
    shared = dict(**size, device=args.device, progress=False, save_every=0, log_samples=0)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="mathgym-distill-bench-") as tmp:
        root = Path(tmp)
        teacher_config = GRPOConfig(**shared, warm_start_steps=20 if args.quick else 400, steps=2 if args.quick else 60,
                                    lr_schedule="constant", run_dir=str(root / "teacher"))  # as its record ran
        warm_start = prepare_model(teacher_config)
        teacher_result = GRPOTrainer(teacher_config, model_path=warm_start).train()
        teacher = str(teacher_result.final_model)
        student = half_depth_student(warm_start, root / "student")
        print(f"teacher (GRPO from the warm start): pass@1 {teacher_result.eval_after.pass_at_1:.1%}", flush=True)

        common = dict(**shared, model=student, steps=steps)
        methods: list[tuple[str, str, dict[str, Any]]] = [("sft", "distill", dict(teacher=teacher, distill_weight=0.0))]
        methods += [(f"kd-{d}", "distill", dict(teacher=teacher, divergence=d)) for d in DIVERGENCES]
        methods += [
            ("onpolicy", "onpolicy-distill", dict(teacher=teacher)),
            ("grpo", "grpo", {}),
            ("onpolicy+env", "onpolicy-distill", dict(teacher=teacher, env_reward_coef=1.0)),
        ]
        rows = [run_method(name, algo, common, options, root) for name, algo, options in methods]

    print(f"\nteacher {teacher_result.eval_after.pass_at_1:.1%}; student at the start {rows[0]['before']:.1%}; "
          f"{steps} steps x {size['num_tasks']} tasks x {size['group_size']} samples each; "
          f"greedy pass@1 on {size['eval_tasks']} held-out MathReason-v0 tasks")
    print(f"| {'method':<20} | pass@1 | train_s |\n|{'-' * 22}|--------|---------|")
    for row in rows:
        print(f"| {row['method']:<20} | {row['pass_at_1']:6.1%} | {row['train_s']:7.0f} |")
    if args.record:
        results = {
            "quick": args.quick, "steps": steps, **size, "teacher_pass_at_1": teacher_result.eval_after.pass_at_1,
            "student_start_pass_at_1": rows[0]["before"], "total_wall_s": round(time.perf_counter() - started, 1),
            "methods": {row["method"]: {k: v for k, v in row.items() if k != "method"} for row in rows},
        }
        write_record(args.record, results, ["benchmarks/distill.py", *sys.argv[1:]])


if __name__ == "__main__":
    main()
