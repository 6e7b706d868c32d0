"""What a new user meets through the real ``mathgym`` command: each mistake is one short
message on stderr and a non-zero exit, never a traceback; Ctrl-C and a closed pipe are quiet;
help answers without the training stack."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from mathgym.install import extra_hint

REPO = Path(__file__).resolve().parents[1]
TRAIN_EXTRA_BLOCKER = """
import importlib.abc, sys

class BlockTrainExtra(importlib.abc.MetaPathFinder):
    # What a machine without `pip install "mathgym[train]"` looks like to the import system.
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "transformers", "peft", "accelerate"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, BlockTrainExtra())
from mathgym.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _env(**extra: str) -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, **extra}


def _interruptible() -> None:
    """In the child, before exec: Ctrl-C as a terminal delivers it. A shell's background job (``pytest ... &``)
    starts with SIGINT ignored, and an interpreter that starts so never raises KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def mathgym(*args: str, cwd: Path, env: dict[str, str] | None = None, stdin: str = "") -> subprocess.CompletedProcess:
    """Run ``mathgym ARGS`` as a user would (a fresh interpreter, the real entry point)."""
    return subprocess.run(
        [sys.executable, "-m", "mathgym.cli", *args], cwd=cwd, env=env or _env(), input=stdin,
        capture_output=True, text=True, timeout=120,
    )


def assert_one_message(result: subprocess.CompletedProcess, *expected: str) -> None:
    assert result.returncode != 0, result.stdout
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for text in expected:
        assert text in lines[0], lines[0]


ERROR_CASES = {
    "train-unknown-env": (["train", "--env", "MathReasn-v0"], ["No environment registered as 'MathReasn-v0'", "Did you mean: MathReason-v0"]),
    "eval-unknown-env": (["eval", "--env", "MathReasn-v0"], ["mathgym eval: error:", "Did you mean: MathReason-v0"]),
    "train-missing-model-dir": (["train", "--model", "/nope/model"], ["--model /nope/model: no such directory"]),
    "eval-missing-model-dir": (["eval", "--model", "./nope/model"], ["--model ./nope/model: no such directory"]),
    "model-dir-without-config": (["train", "--model", "not_a_run"], ["--model not_a_run: the directory holds no config.json"]),
    "env-kwargs-without-space": (["train", "--env-kwargs", "{difficulty:99}"], ["'difficulty:99' looks like KEY:VALUE", "{difficulty: 99}"]),
    "unknown-env-option": (["train", "--env-kwargs", "{difficultly: 3}"], ["MathReason-v0 has no option 'difficultly'", "Did you mean 'difficulty'", "Its options: difficulty, dataset"]),
    "misspelt-eval-option": (["train", "--eval-env-kwargs", "{splitt: train}"], ["--eval-env-kwargs {'splitt': 'train'}", "MathReason-v0 has no option 'splitt'", "Did you mean 'split'"]),
    "misspelt-option": (["train", "--lr", "3e-4"], ["Unknown option --lr", "Did you mean --learning-rate"]),
    "eval-misspelt-option": (["eval", "--taks", "5"], ["mathgym eval: error: Unknown option --taks", "Did you mean --tasks"]),
    "eval-misspelt-option-with-value": (["eval", "--tempreature=2"], ["Unknown option --tempreature", "Did you mean --temperature"]),
    "eval-stray-positional": (["eval", "stray"], ["Unexpected argument 'stray'"]),
    "label-steps-misspelt-option": (["label-steps", "--out", "x.jsonl", "--sampels", "2"], ["Unknown option --sampels", "Did you mean --samples"]),
    "unknown-algo": (["train", "--algo", "nosuchalgo"], ["'nosuchalgo'", "dpo, grpo, onpolicy-distill, ppo, prm, rm, sft"]),
    "stray-positional": (["train", "stray"], ["Unexpected argument 'stray'"]),
    "missing-config": (["train", "--config", "missing.yaml"], ["Cannot read config file missing.yaml"]),
    "list-config": (["train", "--config", "list.yaml"], ["list.yaml must hold a YAML mapping"]),
    "bad-yaml-config": (["train", "--config", "broken.yaml"], ["broken.yaml is not valid YAML"]),
    "resume-not-a-run": (["train", "--resume", "not_a_run"], ["--resume not_a_run", "has no config.yaml"]),
    "resume-missing": (["train", "--resume", "no_such_dir"], ["--resume no_such_dir: does not exist"]),
    "run-dir-holds-a-run": (["train", "--run-dir", "old_run"], ["old_run already holds a run (config.yaml)", "`mathgym train --resume old_run`"]),
    "eval-zero-tasks": (["eval", "--tasks", "0"], ["--tasks 0", "at least 1"]),
    "bad-o": (["check", "MathReason-v0", "-o", "difficulty"], ["-o 'difficulty'", "KEY=VALUE"]),
    "train-bad-o": (["train", "-o", "difficulty"], ["-o 'difficulty'", "KEY=VALUE"]),
    "train-o-unknown-option": (["train", "--env-kwargs", "{difficulty: 1}", "-o", "difficultly=3"], ["MathReason-v0 has no option 'difficultly'"]),
    "eval-o-unknown-option": (["eval", "-o", "difficultly=3"], ["MathReason-v0 has no option 'difficultly'"]),
    "check-bad-value-said-once": (["check", "MathReason-v0", "-o", "difficulty=99"], ["difficulty=99 is not allowed"]),
    "play-unknown-option": (["play", "GuessNumber-v0", "-o", "foo=1"], ["GuessNumber-v0 has no option 'foo'", "Its options: low, high"]),
    "play-unknown-env": (["play", "GuessNumbr-v0"], ["Did you mean: GuessNumber-v0"]),
}


@pytest.mark.parametrize("case", sorted(ERROR_CASES))
def test_each_mistake_is_one_message_and_leaves_no_run_dir(case, tmp_path):
    args, expected = ERROR_CASES[case]
    (tmp_path / "list.yaml").write_text("- steps: 3\n")
    (tmp_path / "broken.yaml").write_text("steps: [3\n")
    (tmp_path / "not_a_run").mkdir()
    (tmp_path / "old_run").mkdir()
    (tmp_path / "old_run" / "config.yaml").write_text("algo: grpo\n")
    result = mathgym(*args, cwd=tmp_path)
    assert_one_message(result, *expected)
    assert result.returncode == 2
    assert "Config" not in result.stderr.replace("Config file", "")  # no internal class names (GRPOConfig...)
    assert not (tmp_path / "runs").exists()  # a run that cannot start leaves no directory


def test_a_hub_id_that_is_not_cached_fails_at_once_offline(tmp_path):
    env = _env(HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf"))
    for command in ("train", "eval"):
        result = mathgym(command, "--model", "nosuchorg/nosuchmodel", cwd=tmp_path, env=env)
        assert_one_message(result, "--model nosuchorg/nosuchmodel", "cannot be reached (offline)", "not in the local cache")


@pytest.mark.torch
def test_a_directory_that_is_not_a_model_is_one_message(tmp_path):
    pytest.importorskip("transformers")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "config.json").write_text("{}")
    result = mathgym("train", "--model", "broken", "--eval-tasks", "0", cwd=tmp_path)
    assert_one_message(result, "--model broken: could not be loaded:", "model_type")
    assert not (tmp_path / "runs").exists()


def test_help_and_option_errors_need_no_training_stack_and_training_says_how_to_get_it(tmp_path):
    def blocked(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", TRAIN_EXTRA_BLOCKER, *args], cwd=tmp_path, env=_env(),
                              capture_output=True, text=True, timeout=120)

    help_text = blocked("train", "--help")
    assert help_text.returncode == 0, help_text.stderr
    for algo in ("grpo", "ppo", "dpo", "sft"):
        assert f"{algo} (" in help_text.stdout, help_text.stdout  # the algorithms listed with their descriptions
    assert "--learning-rate" in help_text.stdout
    assert "--value-coef" in blocked("train", "--algo", "ppo", "--help").stdout  # each algorithm's own options
    assert_one_message(blocked("train", "--lr", "1"), "Did you mean --learning-rate")
    for command in (["train", "--steps", "1"], ["eval", "--tasks", "1"]):
        result = blocked(*command)
        assert_one_message(result, extra_hint("train"))  # said the way this mathgym was installed
    assert not (tmp_path / "runs").exists()


def test_eval_help_shows_the_defaults(tmp_path):
    result = mathgym("eval", "--help", cwd=tmp_path)
    assert result.returncode == 0
    text = " ".join(result.stdout.split())  # argparse wraps the help at the terminal's width
    assert "[default: 200]" in text and "[default: the env the model was trained on (its mathgym.json), else MathReason-v0]" in text


def test_a_closed_pipe_ends_the_listing_quietly(tmp_path):
    read_end, write_end = os.pipe()
    os.close(read_end)  # `mathgym envs | head -1` once head has gone
    try:
        result = subprocess.run([sys.executable, "-m", "mathgym.cli", "envs"], cwd=tmp_path, env=_env(), stdout=write_end,
                                stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)
    assert result.stderr == "", result.stderr
    assert result.returncode != 0


def test_play_ignores_arrow_keys_and_empty_lines_and_labels_the_reference_solution(tmp_path):
    keys = "\x1b[A\x1b[D\n\n   \n50\n51\n"  # up and left arrows, an empty line, blanks: none of them a turn
    result = mathgym("play", "GuessNumber-v0", "--seed", "0", "-o", "max_turns=2", cwd=tmp_path, stdin=keys)
    assert result.returncode == 0, result.stderr
    turns = [line for line in result.stdout.splitlines() if "· turn " in line]
    assert turns and "status format_error" not in turns[0] and "does not count" not in result.stdout, result.stdout
    assert "50 is too" in result.stdout or "status correct" in turns[0]  # the first turn was the guess 50
    assert "== out of turns" in result.stdout or "== solved" in result.stdout
    assert "reference solution: " in result.stdout


def _wait_for(predicate, proc: subprocess.Popen, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def test_ctrl_c_in_play_is_quiet(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "mathgym.cli", "play", "GuessNumber-v0"], cwd=tmp_path, env=_env(),
                            preexec_fn=_interruptible,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = ""
        while "GuessNumber-v0" not in line:  # the header: the game waits for a guess
            line = proc.stdout.readline()
            assert line, proc.stderr.read() if proc.stderr else ""
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)  # stdin stays open: an end of input racing the signal would read as a quit
        err = proc.stderr.read() if proc.stderr else ""
    finally:
        proc.kill()
    assert proc.returncode == 130 and "Traceback" not in err and "interrupted" in err, err


@pytest.mark.torch
def test_ctrl_c_in_train_says_where_the_checkpoint_is_and_how_to_resume(tmp_path):
    pytest.importorskip("torch")
    from tests.trainkit import build_small_model

    model = build_small_model(tmp_path / "model")
    run = tmp_path / "run"
    args = ["train", "--model", str(model), "--steps", "10000", "--save-every", "1", "--eval-tasks", "0", "--num-tasks", "2",
            "--group-size", "2", "--max-new-tokens", "4", "--dynamic-sampling", "false", "--progress", "false", "--run-dir", str(run)]
    proc = subprocess.Popen([sys.executable, "-m", "mathgym.cli", *args], cwd=tmp_path, env=_env(), preexec_fn=_interruptible,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(lambda: (run / "checkpoints" / "latest").is_file(), proc)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=180)  # it finishes the step it is in first; slow on a loaded machine
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err, err
    assert "last checkpoint: " + str(run / "checkpoints" / "step-") in err, err
    assert f"Resume with: mathgym train --resume {run}" in err, err


def test_cli_error_test_helper_can_fail(tmp_path):
    """The checks above would catch a traceback: a real one is not 'one message'."""
    result = subprocess.run([sys.executable, "-c", textwrap.dedent("raise ValueError('x')")], capture_output=True, text=True)
    with pytest.raises(AssertionError):
        assert_one_message(result)


def test_env_options_with_o_merge_over_env_kwargs():
    from mathgym.train_cli import _with_options

    assert _with_options("{difficulty: 1, split: test}", ["difficulty=3", "dataset=x.jsonl"]) == {"difficulty": 3, "split": "test", "dataset": "x.jsonl"}
    assert _with_options({"high": 20}, []) == {"high": 20} and _with_options(None, ["high=7"]) == {"high": 7}
