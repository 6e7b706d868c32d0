"""Data-parallel distillation is the single-process run: off-policy (the teacher's samples) and
on-policy (the student's, graded by the teacher) give the same parameters on one process or two ranks."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from safetensors.torch import load_file  # noqa: E402

from tests import dp_distill_worker  # noqa: E402
from tests.algos.test_accelerate import _free_port, _launch, _state  # noqa: E402
from tests.trainkit import build_small_model  # noqa: E402

STEPS = 2


@pytest.mark.heavy  # two launches of two ranks: about a minute on a CPU
@pytest.mark.parametrize("algo", dp_distill_worker.ALGOS)
def test_two_ranks_distil_the_single_process_parameters(tmp_path, algo):
    student = str(build_small_model(tmp_path / "student", seed=0))
    teacher = str(build_small_model(tmp_path / "teacher", seed=1))
    one, two = tmp_path / "one", tmp_path / "two"
    threads = torch.get_num_threads()
    try:  # the configs ask for 1 thread, as in the launched ranks; leave the session's setting as it was
        dp_distill_worker.run(algo, student, teacher, str(one), STEPS)
    finally:
        torch.set_num_threads(threads)
    _launch([
        "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(_free_port()),
        "tests/dp_distill_worker.py", algo, student, teacher, str(two), str(STEPS),
    ])
    single, double = _state(one, STEPS), _state(two, STEPS)
    start = load_file(tmp_path / "student" / "model.safetensors")
    assert max(float((w - start[k]).abs().max()) for k, w in single["model"].items()) > 1e-3  # the run trained
    worst = max(float((double["model"][k] - w).abs().max()) for k, w in single["model"].items())
    print(f"{algo}: largest parameter difference after {STEPS} steps, 1 process vs 2 ranks: {worst:.3g}")
    assert worst <= 1e-5
