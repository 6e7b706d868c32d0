"""``mathgym train`` / ``mathgym eval`` end to end on a very small model (a few steps)."""

from __future__ import annotations

import json

import pytest
import yaml

torch = pytest.importorskip("torch")

from mathgym import train_cli  # noqa: E402
from mathgym.algos.registry import ALGORITHMS, get_algorithm  # noqa: E402
from mathgym.errors import ConfigError  # noqa: E402
from tests.trainkit import build_small_model, register_guess_env  # noqa: E402


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    return build_small_model(tmp_path_factory.mktemp("model"))


def test_train_writes_a_complete_run_dir_and_prints_before_after(model_path, tmp_path, capsys):
    cfg = tmp_path / "run.yaml"
    cfg.write_text(yaml.safe_dump({"steps": 2, "num_tasks": 2, "group_size": 2, "max_new_tokens": 6}))
    run = tmp_path / "run"
    code = train_cli.main("train", [
        "--config", str(cfg), "--model", str(model_path), "--eval-tasks", "3", "--run-dir", str(run),
        "--progress", "false", "--save-every", "1", "--loss-aggregation", "dr_grpo",
        "--weight-decay", "0.1",  # changes the weights even when every reward (so every advantage) is 0
    ])
    assert code == 0
    out = capsys.readouterr().out
    assert "accuracy before -> after:" in out and "3 held-out MathReason-v0 tasks" in out and "; 2 steps in " in out
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert saved["algo"] == "grpo" and saved["steps"] == 2 and saved["loss_aggregation"] == "dr_grpo"
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    step1 = next(r for r in records if r["step"] == 1 and "rollout/reward" in r)
    for key in ("rollout/reward", "rollout/accuracy", "loss/kl", "loss/clip_fraction", "loss/trained_sequences",
                "rollout/completion_tokens", "perf/tokens_per_s", "perf/step_s"):
        assert key in step1, key
    assert ("loss/entropy" in step1) == (step1["loss/trained_sequences"] > 0)  # measured on the sequences trained on
    assert any(k.startswith("rollout/status/") for k in step1)
    assert (run / "reward_curve.png").stat().st_size > 1000
    assert (run / "checkpoints" / "latest").read_text() == "step-000002"

    assert oct((run / "final" / "model.safetensors").stat().st_mode & 0o777) == oct(0o666 & ~_umask())  # not 0600
    assert oct((run / "checkpoints" / "step-000002").stat().st_mode & 0o777) == oct(0o777 & ~_umask())  # not 0700

    # resume of a finished run: it says so and touches nothing
    from safetensors.torch import load_file

    trained = load_file(run / "final" / "model.safetensors")
    initial = load_file(model_path / "model.safetensors")
    assert initial.keys() == trained.keys() and any(not torch.equal(initial[k], trained[k]) for k in trained)
    files = {p: p.stat().st_mtime_ns for p in run.rglob("*")}
    assert train_cli.main("train", ["--resume", str(run), "--progress", "false"]) == 0
    again = capsys.readouterr().out
    assert f"{run} is finished: it trained its 2 steps" in again and "--steps" in again and "accuracy" not in again
    assert {p: p.stat().st_mtime_ns for p in run.rglob("*")} == files

    # with --steps raised it goes on from its last step, and says from which step to which
    assert train_cli.main("train", ["--resume", str(run), "--steps", "3", "--progress", "false"]) == 0
    again = capsys.readouterr().out
    assert f"resumed {run} at step 2; it stops at step 3" in again and "1 steps (resumed at step 2, 3 in all)" in again
    assert [r["step"] for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if "rollout/reward" in r] == [1, 2, 3]
    assert (run / "checkpoints" / "latest").read_text() == "step-000003"


def _umask() -> int:
    import os

    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_train_multi_turn_env_and_sft_algo(model_path, tmp_path, capsys):
    env_id = register_guess_env()
    args = ["--env", env_id, "--model", str(model_path), "--env-kwargs", "{high: 5, max_turns: 2}", "--steps", "1",
            "--num-tasks", "2", "--group-size", "2", "--max-new-tokens", "4", "--eval-tasks", "2", "--progress", "false"]
    assert train_cli.main("train", [*args, "--run-dir", str(tmp_path / "grpo")]) == 0
    sft = [*args, "--algo", "sft", "--run-dir", str(tmp_path / "sft"), "--batch-size", "4", "--num-demonstrations", "8"]
    assert train_cli.main("train", sft) == 0
    assert yaml.safe_load((tmp_path / "sft" / "config.yaml").read_text())["algo"] == "sft"


@pytest.mark.parametrize(("env_id", "env_kwargs", "multi_turn"), [
    ("CodeSandbox-v0", "{level: 0, cpu_seconds: 2, wall_seconds: 4}", False),
    ("CodeRepair-v0", "{level: 0, max_turns: 2, cpu_seconds: 2, wall_seconds: 4}", True),
    ("GuessNumber-v0", "{}", True),
    ("MathTool-v0", "{}", True),
    ("Sokoban-v0", "{}", True),
])
def test_train_runs_end_to_end_on_built_in_envs(model_path, tmp_path, env_id, env_kwargs, multi_turn):
    # The small untrained model will not solve these: the point is that rollouts, rewards and updates run.
    run = tmp_path / "run"
    code = train_cli.main("train", [
        "--env", env_id, "--env-kwargs", env_kwargs, "--model", str(model_path), "--steps", "2", "--num-tasks", "2",
        "--group-size", "2", "--max-new-tokens", "8", "--max-turns", "3", "--eval-tasks", "2", "--progress", "false",
        "--run-dir", str(run),
    ])
    assert code == 0
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in records if "rollout/reward" in r]
    assert [r["step"] for r in steps] == [1, 2]
    assert all(r["rollout/infra_failures"] == 0 for r in steps)
    if multi_turn:  # episodes went on past their first turn (in which step depends on the samples)
        assert any(r["rollout/turns"] > 1 for r in steps), [r["rollout/turns"] for r in steps]
    assert json.loads((run / "eval.json").read_text())


def test_eval_reports_pass_at_k(model_path, capsys):
    assert train_cli.main("eval", ["--model", str(model_path), "--tasks", "3", "--k", "2"]) == 0
    out = capsys.readouterr().out
    assert "pass@1 = " in out and "pass@2 = " in out


def test_eval_follows_the_env_the_model_was_trained_on(model_path, tmp_path, capsys):
    import shutil

    from mathgym.agents.settings import write_model_settings

    guess = register_guess_env()
    trained = tmp_path / "final"  # a run's final/: the weights and the mathgym.json naming their env
    shutil.copytree(model_path, trained)
    write_model_settings(trained, {"env": guess, "env_kwargs": {"high": 2, "max_turns": 2}, "generation": {"max_new_tokens": 3}})
    assert train_cli.main("eval", ["--model", str(trained), "--tasks", "2", "--progress", "false"]) == 0
    out = capsys.readouterr().out
    assert f"{trained} was trained on {guess}; evaluating on it" in out
    assert f"{guess} (2 tasks from seed" in out and "MathReason" not in out

    assert train_cli.main("eval", ["--model", str(trained), "--env", "MathReason-v0", "--tasks", "2", "--progress", "false"]) == 0
    out = capsys.readouterr().out
    assert f"note: {trained} was trained on {guess}, not MathReason-v0" in out and "MathReason-v0 (2 tasks" in out

    assert train_cli.main("eval", ["--model", str(model_path), "--tasks", "2", "--progress", "false"]) == 0
    out = capsys.readouterr().out  # a model directory without mathgym.json: the default env, said once
    assert "evaluating on MathReason-v0, the default (no mathgym.json" in out and "MathReason-v0 (2 tasks" in out
    assert train_cli.main("eval", ["--model", str(model_path), "--env", "MathReason-v0", "--tasks", "2", "--progress", "false"]) == 0
    assert capsys.readouterr().out.startswith("MathReason-v0 (2 tasks")  # asked for: nothing to say


def test_eval_help_gives_each_default_once(capsys):
    with pytest.raises(SystemExit):
        train_cli.main("eval", ["--help"])
    out = capsys.readouterr().out
    options = out.split("\n  --")[1:]
    assert len(options) == 21 and all(o.count("default") <= 1 for o in options), out
    assert "[default: the env the model" in out


def test_bad_options_are_reported_with_the_field(capsys, model_path):
    assert train_cli.main("train", ["--model", str(model_path), "--scale-rewards", "std"]) == 2
    assert "scale_rewards='std' is not allowed; choose one of 'group', 'batch', 'none'" in capsys.readouterr().err
    assert train_cli.main("train", ["--algo", "a2c"]) == 2
    assert "--algo 'a2c' is not an algorithm; choose one of distill, dpo, grpo, onpolicy-distill, ppo, prm, rm, sft" in capsys.readouterr().err
    # a number outside the bounds declared on its field: one line naming the field, the value and the range
    assert train_cli.main("train", ["--model", str(model_path), "--top-p", "0"]) == 2
    assert capsys.readouterr().err == "mathgym train: error: top_p=0.0 is not allowed; choose a value in (0, 1].\n"
    assert train_cli.main("train", ["--algo", "ppo", "--model", str(model_path), "--ppo-epochs", "0"]) == 2
    assert capsys.readouterr().err == "mathgym train: error: ppo_epochs=0 is not allowed; it must be at least 1.\n"


def test_a_bare_option_switches_a_boolean_on_and_other_options_need_a_value(capsys):
    from mathgym.algos.grpo import GRPOConfig
    from mathgym.options import build_config, split_overrides

    config = build_config(GRPOConfig, None, split_overrides(["--log-wandb", "--steps", "2", "--mask-truncated"]))
    assert config.log_wandb is True and config.mask_truncated is True and config.steps == 2
    for argv in (["--steps"], ["--model", "--steps", "2"]):
        with pytest.raises(ConfigError, match=f"Option {argv[0]} needs a value"):
            build_config(GRPOConfig, None, split_overrides(argv))


def test_help_lists_config_fields(capsys):
    assert train_cli.main("train", ["--help"]) == 0
    out = capsys.readouterr().out
    assert "--eps-high" in out and "clip range above 1" in out and "token_mean" in out
    assert "(in [0, 1)) [default: 0.2]" in " ".join(out.split())  # --eps-low: its bounds, then its default


def test_resumed_summary_counts_the_steps_of_this_process(tmp_path):
    from mathgym.algos.evaluate import EvalResult
    from mathgym.algos.trainer import TrainResult

    ev = EvalResult(0.5, 0.5, 1, 4, 0.5)
    resumed = TrainResult(tmp_path, 200, 82.0, ev, ev, None, first_step=60).summary("MathReason-v0")
    assert "140 steps (resumed at step 60, 200 in all) in 82s" in resumed
    assert "; 200 steps in 82s" in TrainResult(tmp_path, 200, 82.0, ev, ev, None).summary("MathReason-v0")


def test_registry_lazy_entries_load():
    assert {"grpo", "ppo", "dpo", "sft"} <= ALGORITHMS.keys()
    trainer_cls, config_cls = get_algorithm("grpo")
    assert trainer_cls.algo_name == "grpo" and config_cls.__name__ == "GRPOConfig"
    with pytest.raises(ConfigError, match="choose one of"):
        get_algorithm("nope")


def test_progress_bars_say_what_is_happening_and_hide_with_progress_false(model_path, tmp_path, capsys, monkeypatch):
    from mathgym.algos.warm_start import tiny_warm_start

    monkeypatch.setenv("MATHGYM_CACHE", str(tmp_path / "cache"))
    stale = _interrupted_warm_starts(tmp_path / "cache" / "warm_start")
    warm = tiny_warm_start("MathReason-v0", {"system_prompt": "", "difficulty": 0}, steps=1)
    captured = capsys.readouterr()
    assert "warm start of the tiny model (1 SFT steps on MathReason-v0): under a minute on a 2-core CPU" in captured.out
    assert sorted(p.name for p in stale if p.exists()) == [".tmp-fresh", ".tmp-running"]  # another run's are kept
    assert oct(warm.stat().st_mode & 0o777) == oct(0o777 & ~_umask())  # the cache follows the umask too
    assert oct((warm / "model.safetensors").stat().st_mode & 0o777) == oct(0o666 & ~_umask())
    err = captured.err
    assert "warm start: SFT of the tiny model on MathReason-v0" in err and "1/1" in err and "loss=" in err

    assert train_cli.main("eval", ["--model", str(model_path), "--tasks", "3"]) == 0
    assert "evaluating on MathReason-v0 (greedy)" in capsys.readouterr().err
    assert train_cli.main("eval", ["--model", str(model_path), "--tasks", "3", "--progress", "false"]) == 0
    assert "evaluating" not in capsys.readouterr().err

    sft = ["--algo", "sft", "--model", str(model_path), "--steps", "2", "--batch-size", "4", "--num-demonstrations", "8",
           "--eval-tasks", "2", "--run-dir", str(tmp_path / "sft")]
    assert train_cli.main("train", sft) == 0
    err = capsys.readouterr().err
    assert "sft MathReason-v0" in err and "loss/sft=" in err and "reward=" not in err  # SFT has no rollout reward
    assert "evaluating on MathReason-v0" in err


def _interrupted_warm_starts(cache):
    """Temporary warm-start directories as interrupted and running warm starts leave them."""
    import os
    import socket
    import subprocess
    import sys
    import time

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True).stdout.strip()
    owners = {".tmp-killed": f"{socket.gethostname()} {gone}", ".tmp-running": f"{socket.gethostname()} {os.getpid()}"}
    dirs = []
    for name in (".tmp-killed", ".tmp-running", ".tmp-old", ".tmp-fresh"):
        (cache / name / "run").mkdir(parents=True)
        if name in owners:
            (cache / name / "owner").write_text(owners[name] + "\n")
        dirs.append(cache / name)
    hours_ago = time.time() - 7200
    os.utime(cache / ".tmp-old", (hours_ago, hours_ago))  # no owner to ask (older mathgym, another host): its age decides
    return dirs


def test_the_warm_start_time_is_announced_from_its_cost():
    from mathgym.agents.tiny import tiny_model_path
    from mathgym.algos.warm_start import (
        WARM_START_BUDGET_S, chat_token_counter, duration_text, longest_demonstration, tiny_max_positions, warm_start_plan,
    )

    counter = chat_token_counter(tiny_model_path())
    expected = {}
    for env_id in ("MathReason-v0", "Hanoi-v0"):
        longest = longest_demonstration(env_id, {"system_prompt": "", "difficulty": 0}, counter)
        expected[env_id] = warm_start_plan(longest, WARM_START_BUDGET_S, 400, tiny_max_positions()).estimated_s
    assert 30 < expected["MathReason-v0"] < 70  # 400 steps of short demonstrations: about 50 s
    assert 0.9 * WARM_START_BUDGET_S < expected["Hanoi-v0"] <= WARM_START_BUDGET_S  # long transcripts: the whole budget
    assert [duration_text(s) for s in (expected["MathReason-v0"], expected["Hanoi-v0"], 20)] == ["about 1 min", "about 2 min", "under a minute"]
