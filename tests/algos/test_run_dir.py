"""A run directory belongs to one run: a new run is refused a directory that holds one (``--resume``
continues it), and a directory a live process trains in is refused to every other process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

torch = pytest.importorskip("torch")

from mathgym import train_cli  # noqa: E402
from mathgym.algos.checkpoint import latest_checkpoint  # noqa: E402
from mathgym.algos.grpo import GRPOConfig, GRPOTrainer  # noqa: E402
from mathgym.algos.metrics import read_metrics  # noqa: E402
from mathgym.algos.registry import ALGORITHMS, get_algorithm  # noqa: E402
from mathgym.algos.run_dir import LOCK_FILE, check_not_in_use, fresh_run_dir  # noqa: E402
from mathgym.errors import ConfigError  # noqa: E402
from tests.chat_fixtures import cached_chat_model  # noqa: E402
from tests.trainkit import build_small_model, register_guess_env, write_step_labels  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
QUICK = dict(env_kwargs={"high": 2, "max_turns": 2}, num_tasks=2, group_size=2, max_new_tokens=4, eval_tasks=0, progress=False,
             log_samples=0, device="cpu")


@pytest.fixture(scope="module")
def model_path(tmp_path_factory) -> Path:
    return build_small_model(tmp_path_factory.mktemp("model"))


def files_of(run_dir: Path) -> dict[str, bytes]:
    """Every file of a run directory and its bytes (the lock file aside: the trainer holds it)."""
    return {str(p.relative_to(run_dir)): p.read_bytes() for p in sorted(run_dir.rglob("*")) if p.is_file() and p.name != LOCK_FILE}


def cli_train(*args: str) -> list[str]:
    return ["--env", register_guess_env(), "--env-kwargs", "{high: 2, max_turns: 2}", "--num-tasks", "2", "--group-size", "2",
            "--max-new-tokens", "4", "--eval-tasks", "2", "--progress", "false", *args]


def test_the_same_command_on_a_finished_run_is_refused_and_leaves_it_as_it_was(model_path, tmp_path, capsys):
    run = tmp_path / "run"
    command = cli_train("--model", str(model_path), "--steps", "1", "--run-dir", str(run))
    assert train_cli.main("train", command) == 0
    before = files_of(run)
    assert {"config.yaml", "metrics.jsonl", "eval.json", "checkpoints/latest"} <= before.keys()
    capsys.readouterr()

    assert train_cli.main("train", command) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{run} already holds a run (config.yaml, metrics.jsonl, checkpoints, eval.json, final)" in err[0]
    assert f"mathgym train --resume {run}" in err[0] and "--run-dir" in err[0]
    assert files_of(run) == before  # no second step 1, config.yaml, eval.json and final/ untouched

    # a YAML config naming the run directory is the same run started again: refused too
    (tmp_path / "run.yaml").write_text(yaml.safe_dump({"run_dir": str(run), "steps": 1}))
    assert train_cli.main("train", [*cli_train("--model", str(model_path)), "--config", str(tmp_path / "run.yaml")]) == 2
    assert "already holds a run" in capsys.readouterr().err and files_of(run) == before

    # what the message says to do continues the run
    assert train_cli.main("train", ["--resume", str(run), "--steps", "2", "--progress", "false"]) == 0
    assert [r["step"] for r in read_metrics(run) if "rollout/reward" in r] == [1, 2]


def _family_options(algo: str, model: Path, chat_model: Path, data: Path) -> dict:
    """Options that build each algorithm's trainer quickly on the test models."""
    plain = {k: v for k, v in QUICK.items() if k != "env_kwargs"}
    rollouts = dict(QUICK, env=register_guess_env(), model=str(model), steps=1)
    return {
        "grpo": rollouts,
        "ppo": rollouts,
        "dpo": rollouts,
        "sft": dict(rollouts, batch_size=2, num_demonstrations=4),
        "onpolicy-distill": dict(rollouts, teacher=str(model)),
        "distill": dict(plain, model=str(model), teacher=str(model), steps=1, top_k=4),
        "rm": dict(plain, model=str(chat_model), preference_file=str(data / "pairs.jsonl"), pairs_per_step=2, steps=1),
        # eval_data: the PRM trainer measures held-out steps before its first step, and logs them
        "prm": dict(plain, model=str(chat_model), data=str(data / "labels.jsonl"), eval_data=str(data / "labels.jsonl"), steps=1),
    }[algo]


@pytest.fixture(scope="module")
def family_data(tmp_path_factory) -> Path:
    from mathgym.algos.preferences import expert_vs_corrupted_pairs, save_preference_jsonl

    root = tmp_path_factory.mktemp("family-data")
    save_preference_jsonl(expert_vs_corrupted_pairs("MathReason-v0", {"system_prompt": "", "difficulty": 0}, 4, seed=1), root / "pairs.jsonl")
    write_step_labels(root / "labels.jsonl", range(4))
    return root


@pytest.mark.parametrize("algo", sorted(ALGORITHMS))
def test_every_trainer_refuses_a_directory_holding_a_run_it_did_not_resume(algo, model_path, family_data, tmp_path_factory, tmp_path):
    """The Python API (a script run twice): ``train()`` refuses before it writes a thing, for every algorithm."""
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "config.yaml").write_text(f"algo: {algo}\nsteps: 5\n")
    (run / "metrics.jsonl").write_text(json.dumps({"step": 1, "rollout/reward": 0.5}) + "\n")
    before = files_of(run)
    trainer_cls, config_cls = get_algorithm(algo)
    options = _family_options(algo, model_path, cached_chat_model(tmp_path_factory, "chatml"), family_data)
    trainer = trainer_cls(config_cls(**options, run_dir=str(run)))
    with pytest.raises(ConfigError, match=r"already holds a run \(config.yaml, metrics.jsonl, checkpoints\).*--resume"):
        trainer.train()
    trainer.close()
    assert files_of(run) == before


LAUNCH = (  # `mathgym train` with the test env registered (the CLI's own entry point)
    "import sys; from tests.trainkit import register_guess_env; register_guess_env(); "
    "from mathgym.cli import main; sys.exit(main(['train'] + sys.argv[1:]))"
)


def _mathgym_train(*args: str, **popen) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-c", LAUNCH, *args], env=env, text=True, **popen)


def test_a_directory_a_live_run_trains_in_is_refused_to_any_other_process(model_path, tmp_path):
    run = tmp_path / "run"
    live = _mathgym_train(*cli_train("--model", str(model_path), "--steps", "500", "--save-every", "1", "--eval-tasks", "0",
                                     "--threads", "1", "--run-dir", str(run)),
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while latest_checkpoint(run) is None and live.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert live.poll() is None and latest_checkpoint(run) is not None, live.stderr.read()[-2000:] if live.poll() is not None else ""

        for args in (["--resume", str(run)], cli_train("--model", str(model_path), "--run-dir", str(run))):
            second = _mathgym_train(*args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            out, err = second.communicate(timeout=120)
            assert second.returncode == 2, out + err
            assert err.strip().count("\n") == 0 and "Traceback" not in err, err
            assert f"{run} is in use by a training process that is still running (pid {live.pid} on " in err

        config = GRPOConfig(**QUICK, env=register_guess_env(), model=str(model_path), steps=500, run_dir=str(run))
        with pytest.raises(ConfigError, match="is in use by a training process that is still running"):
            GRPOTrainer(config)  # the Python API too, before its model loads
    finally:
        live.send_signal(signal.SIGKILL)
        live.communicate()

    # killed, the process holds nothing: no stale lock, and the run resumes
    check_not_in_use(run)
    resumed = GRPOTrainer(config)
    assert resumed.resume() and resumed.step >= 1
    resumed.close()


def test_a_run_killed_before_its_first_checkpoint_starts_over_on_resume_without_doubled_records(model_path, tmp_path, capsys):
    run = tmp_path / "run"
    config = GRPOConfig(**QUICK, env=register_guess_env(), model=str(model_path), steps=3, save_every=0, run_dir=str(run))
    killed = GRPOTrainer(config)
    original = killed.train_step

    def die_at_step_2():
        if killed.step == 2:
            raise KeyboardInterrupt
        return original()

    killed.train_step = die_at_step_2
    with pytest.raises(KeyboardInterrupt):
        killed.train()
    assert latest_checkpoint(run) is None and [r["step"] for r in read_metrics(run)] == [1, 2]

    assert train_cli.main("train", ["--resume", str(run)]) == 0
    assert f"no checkpoint in {run}; starting from step 0" in capsys.readouterr().out
    assert [r["step"] for r in read_metrics(run) if "rollout/reward" in r] == [1, 2, 3]


def test_default_run_directories_started_in_the_same_second_are_distinct(tmp_path):
    stamp = tmp_path / "runs" / "grpo-MathReason-v0-20261202-120000"
    assert fresh_run_dir(stamp) == stamp and stamp.is_dir()
    assert fresh_run_dir(stamp) == stamp.with_name(stamp.name + "-2")
    assert fresh_run_dir(stamp) == stamp.with_name(stamp.name + "-3")
