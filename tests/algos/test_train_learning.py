"""It learns (runs in CI, a few minutes): the CI-sized version of the default `mathgym train` (warm start + GRPO on the tiny model).

Honest by construction: a fresh cache (the warm start is really trained here), held-out
test-split problems with fixed seeds, and the same greedy evaluation before and after.

The warm start is 400 SFT steps, half the default's: it is nine tenths of the test's time (the
25 GRPO steps and both evaluations take under half a minute), and it leaves GRPO more room.
Measured idle on 2 cores: warm start 119 s, then 45.5% -> 57.0% greedy pass@1 on 200 held-out tasks;
with one thread (as here) and the other core busy: 254 s in all, the same 45.5% -> 57.0%.
On 2026-11-29's machine (Python more than twice as fast, other kernels): 67 s in all, 49.0% -> 67.5%.
Where the warm start lands depends on the machine's sums; the test asks for GRPO's gain over it.
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from mathgym.algos.grpo import GRPOConfig, GRPOTrainer  # noqa: E402
from mathgym.algos.warm_start import prepare_model  # noqa: E402


@pytest.mark.learning
@pytest.mark.timeout(1200)
def test_grpo_raises_held_out_accuracy_over_the_warm_start(tmp_path, monkeypatch):
    monkeypatch.setenv("MATHGYM_CACHE", str(tmp_path / "cache"))
    # threads=1: the suite's other xdist worker has the other core (two threads here made three on two
    # cores, and the test took 291 s instead of 254 s); one thread gives the same 45.5% -> 57.0% as two
    config = GRPOConfig(steps=25, eval_tasks=200, warm_start_steps=400, save_every=0, progress=False, threads=1,
                        run_dir=str(tmp_path / "run"))
    result = GRPOTrainer(config, model_path=prepare_model(config)).train()  # the warm start, then GRPO
    before, after = result.eval_before.pass_at_1, result.eval_after.pass_at_1
    print(result.summary(config.env))
    assert before > 0.05, "the warm start should already solve some problems"
    assert after >= before + 0.05, f"{before:.3f} -> {after:.3f}"
