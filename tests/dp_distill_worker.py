"""Worker of ``tests/algos/test_dp_distill.py``, started once per rank by ``torch.distributed.run``: a few
steps of off-policy (``distill``) or on-policy (``onpolicy-distill``) distillation on ``tests.dp_worker:Vowels-v0``.
One run per launch: a finished run leaves the process group.

    python -m torch.distributed.run --nproc_per_node 2 tests/dp_distill_worker.py ALGO STUDENT TEACHER RUN_DIR STEPS
"""

from __future__ import annotations

import sys
from typing import Any

from tests.dp_worker import VOWELS_ID

ALGOS = ("distill", "onpolicy-distill")


def config(algo: str, student: str, teacher: str, run_dir: str, steps: int) -> Any:
    """The run both sides of the equality test make (4 tasks × 2 samples in 2 micro-batches)."""
    from mathgym.algos.registry import get_config_class

    common = dict(
        env=VOWELS_ID, model=student, teacher=teacher, run_dir=run_dir, steps=steps, num_tasks=4, group_size=2,
        max_new_tokens=6, learning_rate=1e-3, grad_accum_steps=2, eval_tasks=0, save_every=0, progress=False, threads=1,
        device="cpu", log_samples=0,
    )
    extra = {"top_k": 8} if algo == "distill" else {"env_reward_coef": 1.0, "teacher_kl_estimator": "k3"}
    return get_config_class(algo)(**common, **extra)


def run(algo: str, student: str, teacher: str, run_dir: str, steps: int) -> None:
    """``algo``'s run in ``run_dir`` (one checkpoint, at the end)."""
    from mathgym.algos.registry import get_algorithm

    trainer_class, _ = get_algorithm(algo)
    trainer_class(config(algo, student, teacher, run_dir, steps)).train()


if __name__ == "__main__":
    run(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
