"""Every option of the RL toolbox runs from ``mathgym train`` on a multi-turn env (GuessNumber-v0,
Sokoban-v0), one step each, and logs what it says it logs."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")

from mathgym import train_cli  # noqa: E402
from tests.trainkit import build_small_model  # noqa: E402

#: (name, extra CLI arguments, a metric the step must log)
OPTIONS = [
    ("rloo", ["--advantage", "rloo"], "loss/advantage_abs"),
    ("reinforce++", ["--advantage", "reinforce++"], "loss/advantage_abs"),
    ("reinforce++-baseline", ["--advantage", "reinforce++-baseline"], "loss/advantage_abs"),
    ("gigpo", ["--advantage", "gigpo"], "loss/shared_state_turns"),
    ("step_reinforce", ["--advantage", "step_reinforce", "--gamma", "0.9"], "loss/shared_state_turns"),
    ("dual_clip", ["--policy-loss", "dual_clip"], "loss/clip_fraction"),
    ("gspo", ["--policy-loss", "gspo", "--eps-low", "3e-4", "--eps-high", "4e-4"], "loss/clip_fraction"),
    ("cispo", ["--policy-loss", "cispo"], "loss/clip_fraction"),
    ("tis", ["--mismatch-correction", "tis", "--mismatch-cap", "2"], "rollout/logprob_diff_max"),
    ("seq_mask", ["--mismatch-correction", "seq_mask"], "rollout/logprob_diff_max"),
    ("dynamic sampling", ["--dynamic-sampling", "true", "--max-extra-rounds", "1"], "rollout/filtered_groups"),
    ("overlong", ["--overlong-buffer", "2"], "loss/overlong_penalty"),
    ("kl as reward", ["--beta", "0.01", "--kl-mode", "reward", "--kl-estimator", "k3"], "loss/kl_ref"),
    ("entropy bonus", ["--entropy-coef", "0.01"], "loss/entropy"),
    ("curriculum", ["--curriculum", "pass_rate_band"], "rollout/reward"),
    ("overlap", ["--off-policy-steps", "1", "--steps", "2"], "rollout/staleness"),
]


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    return build_small_model(tmp_path_factory.mktemp("model"))


@pytest.mark.parametrize(("name", "extra", "metric"), OPTIONS, ids=[o[0] for o in OPTIONS])
def test_option_trains_a_multi_turn_env_from_the_cli(model_path, tmp_path, name, extra, metric):
    env = ("GuessNumber-v0", "Sokoban-v0")[OPTIONS.index((name, extra, metric)) % 2]
    run = tmp_path / "run"
    args = [
        "--algo", "grpo", "--env", env, "--model", str(model_path), "--steps", "1", "--num-tasks", "2",
        "--group-size", "2", "--max-new-tokens", "4", "--max-turns", "2", "--eval-tasks", "0",
        "--progress", "false", "--run-dir", str(run), *extra,
    ]
    assert train_cli.main("train", args) == 0
    steps = [r for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if "rollout/reward" in r]
    assert steps, f"{name} on {env} logged no step"
    assert metric in steps[-1], f"{name} on {env}: {metric} missing from {sorted(steps[-1])}"
