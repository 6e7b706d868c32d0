"""Checkpoints: stop a run mid-way, resume it, and get the same metrics and weights step for step.

Every algorithm (GRPO with a KL reference, PPO with its value head, DPO online and offline,
SFT), with full fine-tuning, LoRA and gradient accumulation. The test model has attention
dropout, so the global torch RNG matters too. :func:`test_each_piece_of_state_matters` drops
one restored piece at a time and checks that the comparison then fails.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from mathgym.algos.checkpoint import latest_checkpoint  # noqa: E402
from mathgym.algos.dpo import DPOConfig, DPOTrainer  # noqa: E402
from mathgym.algos.grpo import GRPOConfig, GRPOTrainer  # noqa: E402
from mathgym.algos.metrics import read_metrics  # noqa: E402
from mathgym.algos.ppo import PPOConfig, PPOTrainer  # noqa: E402
from mathgym.algos.preferences import expert_vs_corrupted_pairs, save_preference_jsonl  # noqa: E402
from mathgym.algos.sft import SFTConfig, SFTTrainer  # noqa: E402
from tests.trainkit import register_guess_env  # noqa: E402

TIMING = ("perf/",)
# A multi-turn env in which the random test model finds the number now and then: rewards vary.
COMMON = dict(
    env=register_guess_env(), env_kwargs={"high": 2, "max_turns": 2}, steps=4, num_tasks=2, max_new_tokens=5, learning_rate=5e-3, lr_schedule="linear",
    warmup_steps=1, save_every=2, eval_tasks=0, progress=False, seed=3,
)
# name -> (trainer class, config class, options on top of COMMON)
CASES = {
    "grpo-kl": (GRPOTrainer, GRPOConfig, dict(beta=0.1, group_size=3)),
    "grpo-kl-lora-accum": (GRPOTrainer, GRPOConfig, dict(beta=0.1, group_size=3, lora_r=4, grad_accum_steps=2)),
    # 4 samples a task, seed 8: an episode is rewarded by step 2, so the value head has learned by the checkpoint
    # (the KL penalty is exactly 0 at first: the learner and the reference score in eval mode alike).
    "ppo": (PPOTrainer, PPOConfig, dict(kl_coef=0.05, group_size=4, ppo_epochs=1, seed=8)),
    "ppo-lora-accum": (PPOTrainer, PPOConfig, dict(kl_coef=0.05, group_size=2, lora_r=4, grad_accum_steps=2, num_minibatches=1, ppo_epochs=1)),
    "dpo-online": (DPOTrainer, DPOConfig, dict(group_size=3, beta=0.5)),
    "dpo-offline-lora-accum": (DPOTrainer, DPOConfig, dict(pairs_per_step=2, lora_r=4, grad_accum_steps=2)),
    "sft-accum": (SFTTrainer, SFTConfig, dict(batch_size=4, num_demonstrations=6, grad_accum_steps=2)),
}


class Killed(Exception):
    pass


@pytest.fixture(scope="module")
def model_path(tmp_path_factory) -> Path:
    from tests.trainkit import build_dropout_model

    return build_dropout_model(tmp_path_factory.mktemp("dropout-model"))


@pytest.fixture(scope="module")
def pref_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("prefs") / "pairs.jsonl"
    save_preference_jsonl(expert_vs_corrupted_pairs("MathReason-v0", {"system_prompt": "", "difficulty": 0}, 5, seed=1), path)
    return path


def make(case: str, model_path: Path, run_dir: Path, pref_file: Path | None = None, **overrides):
    trainer_cls, config_cls, options = CASES[case]
    options = dict(options)
    if "pairs_per_step" in options:
        options["preference_file"] = str(pref_file)
    config = config_cls(**{**COMMON, **options, **overrides}, model=str(model_path), run_dir=str(run_dir))
    return trainer_cls(config)


def kill_at(trainer, step: int) -> None:
    """Run ``trainer`` and stop it (as a crash would) when it is about to train step ``step``."""
    original = trainer.train_step

    def train_step():
        if trainer.step == step:
            raise Killed
        return original()

    trainer.train_step = train_step
    with pytest.raises(Killed):
        trainer.train()


def comparable(run_dir: Path) -> list[dict]:
    return [{k: v for k, v in r.items() if not k.startswith(TIMING)} for r in read_metrics(run_dir)]


def weights(trainer) -> dict[str, torch.Tensor]:
    out = {f"policy.{k}": v for k, v in trainer.policy.model.state_dict().items()}
    if trainer.algorithm.value_model is not None:
        out.update({f"value.{k}": v for k, v in trainer.algorithm.value_model.state_dict().items()})
    return out


def assert_same_metrics(full_dir: Path, resumed_dir: Path) -> None:
    a, b = comparable(full_dir), comparable(resumed_dir)
    assert [r["step"] for r in a] == [r["step"] for r in b]
    for ra, rb in zip(a, b):
        assert ra.keys() == rb.keys(), ra["step"]
        for key in ra:
            assert ra[key] == pytest.approx(rb[key], rel=1e-6, abs=1e-7), (ra["step"], key)


def assert_same_run(full_dir: Path, full, resumed_dir: Path, resumed) -> None:
    assert_same_metrics(full_dir, resumed_dir)
    wa, wb = weights(full), weights(resumed)
    assert wa.keys() == wb.keys()
    for name in wa:
        assert torch.allclose(wa[name].float(), wb[name].float(), rtol=1e-6, atol=1e-7), name


@pytest.fixture(scope="module")
def uninterrupted(model_path, pref_file, tmp_path_factory):
    """``case -> (run dir, trainer)`` of the run that is never stopped (each trained once per module)."""
    runs: dict[str, tuple[Path, object]] = {}

    def run(case: str):
        if case not in runs:
            run_dir = tmp_path_factory.mktemp(f"full-{case}")
            trainer = make(case, model_path, run_dir, pref_file)
            trainer.train()
            runs[case] = (run_dir, trainer)
        return runs[case]

    return run


@pytest.mark.parametrize("case", list(CASES))
def test_stop_and_resume_equals_an_uninterrupted_run(case, model_path, pref_file, uninterrupted, tmp_path):
    full_dir, full = uninterrupted(case)

    killed = make(case, model_path, tmp_path / "run", pref_file)
    kill_at(killed, 3)
    assert latest_checkpoint(tmp_path / "run").name == "step-000002"
    assert max(r["step"] for r in read_metrics(tmp_path / "run")) == 3  # logged past the checkpoint

    resumed = make(case, model_path, tmp_path / "run", pref_file)
    assert resumed.resume() and resumed.step == 2
    resumed.train()
    assert_same_run(full_dir, full, tmp_path / "run", resumed)
    after_resume = [r for r in read_metrics(tmp_path / "run") if r["step"] > 2]
    assert any(r.get("loss/grad_norm", 0) > 0 or r.get("loss/sft", 0) > 0 for r in after_resume)  # it trained


PIECES = {  # piece of state -> a case whose resumed run depends on it
    "model": "grpo-kl",
    "optimizer": "grpo-kl",
    "scheduler": "grpo-kl",
    "generator": "ppo",  # its minibatch shuffles (rollout samples are keyed by seed, step and task instead)
    "rng": "sft-accum",  # SFT samples nothing: only the dropout masks draw from the global RNG
    "extra": "ppo",  # the value head
    "scaler": None,  # fp16 only: see tests/agents/test_precision.py
}


@pytest.mark.parametrize("piece", [p for p, case in PIECES.items() if case])
def test_each_piece_of_state_matters(piece, model_path, pref_file, uninterrupted, tmp_path):
    """Resume with ``piece`` left at its fresh value: the runs must then differ (the test above can fail)."""
    case = PIECES[piece]
    full_dir, full = uninterrupted(case)
    killed = make(case, model_path, tmp_path / "run", pref_file)
    kill_at(killed, 2)
    resumed = make(case, model_path, tmp_path / "run", pref_file)
    fresh = resumed.state_dict()
    original = resumed.load_state_dict

    def load_without_piece(state):
        original({**state, piece: fresh[piece]})

    resumed.load_state_dict = load_without_piece
    assert resumed.resume()
    resumed.train()
    with pytest.raises(AssertionError):
        assert_same_run(full_dir, full, tmp_path / "run", resumed)


def test_checkpoint_is_written_atomically(model_path, tmp_path):
    trainer = make("grpo-kl", model_path, tmp_path / "run")
    stale = tmp_path / "run" / "checkpoints" / ".tmp-killed-mid-write"
    stale.mkdir(parents=True)
    (stale / "state.pt").write_bytes(b"half a checkpoint")
    trainer.step = 7
    path = trainer.save()
    assert path.name == "step-000007" and (path / "state.pt").is_file()
    assert not [p for p in (tmp_path / "run" / "checkpoints").iterdir() if p.name.startswith(".tmp")]
    state = torch.load(path / "state.pt", weights_only=False)
    assert {"model", "optimizer", "scheduler", "generator", "rng", "step", "config", "algo"} <= state.keys()
    assert json.loads(json.dumps(state["config"]))["seed"] == 3


LAUNCH = (  # `mathgym train` with the test env registered (the CLI's own entry point)
    "import sys; from tests.trainkit import register_guess_env; register_guess_env(); "
    "from mathgym.cli import main; sys.exit(main(['train'] + sys.argv[1:]))"
)


def test_sigkill_then_resume_from_the_command_line(model_path, tmp_path):
    """A real ``mathgym train`` process killed with SIGKILL once a checkpoint exists, resumed with ``--resume``."""
    import os
    import signal
    import subprocess
    import sys
    import time

    import yaml

    options = {**COMMON, **CASES["grpo-kl-lora-accum"][2], "steps": 6, "eval_tasks": 2, "eval_every": 3, "threads": 1}
    options.update(model=str(model_path), run_dir=str(tmp_path / "run"))
    (tmp_path / "run.yaml").write_text(yaml.safe_dump({"algo": "grpo", **options}))
    child_env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    child = subprocess.Popen(
        [sys.executable, "-c", LAUNCH, "--config", str(tmp_path / "run.yaml")], env=child_env,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 120
    while latest_checkpoint(tmp_path / "run") is None and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    child.send_signal(signal.SIGKILL)
    _, err = child.communicate()
    assert child.returncode == -signal.SIGKILL, err.decode()[-2000:]
    assert not (tmp_path / "run" / "final").exists()  # killed mid-run
    killed_at = int(latest_checkpoint(tmp_path / "run").name.removeprefix("step-"))
    assert 2 <= killed_at < 6

    resumed = subprocess.run(
        [sys.executable, "-c", LAUNCH, "--resume", str(tmp_path / "run")], env=child_env, capture_output=True, text=True,
    )
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert f"resumed {tmp_path / 'run'} at step {killed_at}; it stops at step 6" in resumed.stdout

    threads = torch.get_num_threads()
    try:  # the uninterrupted run, in this process, with the same single thread
        full = GRPOTrainer(GRPOConfig(**{**options, "run_dir": str(tmp_path / "full")}))
        full.train()
    finally:
        torch.set_num_threads(threads)
    assert_same_metrics(tmp_path / "full", tmp_path / "run")
    from safetensors.torch import load_file

    adapter_a = load_file(tmp_path / "full" / "final" / "adapter_model.safetensors")
    adapter_b = load_file(tmp_path / "run" / "final" / "adapter_model.safetensors")
    assert adapter_a.keys() == adapter_b.keys() and adapter_a
    for name in adapter_a:
        assert torch.allclose(adapter_a[name], adapter_b[name], rtol=1e-6, atol=1e-7), name
    for name in ("config.yaml", "metrics.jsonl", "reward_curve.png", "eval.json"):
        assert (tmp_path / "run" / name).exists(), name
    assert json.loads((tmp_path / "run" / "eval.json").read_text())["before"]["num_tasks"] == 2


def test_resume_says_what_changed_and_refuses_what_shapes_training(model_path, tmp_path, capsys):
    from mathgym.errors import ConfigError

    trainer = make("sft-accum", model_path, tmp_path / "run", steps=2)
    trainer.train()
    saved_config = (tmp_path / "run" / "config.yaml").read_text()

    with pytest.raises(ConfigError) as refused:
        make("sft-accum", model_path, tmp_path / "run", steps=3, learning_rate=1e-3, batch_size=2).resume()
    message = str(refused.value)
    assert "learning_rate 0.005 -> 0.001" in message and "batch_size 4 -> 2" in message and "steps" not in message.split(".")[0]
    assert (tmp_path / "run" / "config.yaml").read_text() == saved_config  # a refused resume leaves the run as it was

    with pytest.raises(ConfigError, match="already at step 2"):
        make("sft-accum", model_path, tmp_path / "run", steps=1).resume()
    with pytest.raises(ConfigError, match="trained with --algo sft, not dpo"):
        make("dpo-online", model_path, tmp_path / "run").resume()

    capsys.readouterr()
    resumed = make("sft-accum", model_path, tmp_path / "run", steps=3, save_every=1, grad_accum_steps=4)
    assert resumed.resume() and resumed.step == 2
    out = capsys.readouterr().out
    assert "steps 2 -> 3 (the linear learning-rate schedule now spans 3 steps" in out
    assert "save_every 2 -> 1" in out
    assert "warning: grad_accum_steps 2 -> 4 (the same update in other micro-batches" in out
    assert {c.name: c.verdict for c in resumed.resume_changes} == {"steps": "warning", "save_every": "allowed", "grad_accum_steps": "warning"}
    resumed.train()
    assert [r["step"] for r in read_metrics(tmp_path / "run") if "loss/sft" in r] == [1, 2, 3]
    assert "steps: 3" in (tmp_path / "run" / "config.yaml").read_text()


def test_resume_changes_are_sorted_into_allowed_warned_and_refused():
    from mathgym.algos.checkpoint import resume_changes
    from mathgym.algos.configs import TrainConfig

    saved = TrainConfig(steps=10).to_dict()
    current = TrainConfig(steps=20, eval_every=5, threads=4, env="GuessNumber-v0", seed=1).to_dict()
    verdicts = {c.name: c.verdict for c in resume_changes(saved, current, step=6)}
    assert verdicts == {"env": "refused", "seed": "refused", "steps": "allowed", "threads": "warning", "eval_every": "allowed"}
    assert [c.verdict for c in resume_changes(saved, TrainConfig(steps=5).to_dict(), step=6)] == ["refused"]
    assert [c.name for c in resume_changes({**current, "steps": 10}, current, step=6)] == ["steps"]
    assert resume_changes(saved, TrainConfig(steps=10).to_dict(), step=6) == []


def test_options_an_older_checkpoint_lacks_are_reported_and_a_known_earlier_behaviour_is_named():
    from mathgym.algos.checkpoint import check_resume, resume_changes
    from mathgym.algos.configs import TrainConfig

    current = TrainConfig(steps=10).to_dict()
    older = {k: v for k, v in current.items() if k not in ("micro_batch_tokens", "eval_every", "max_turns")}
    changes = {c.name: c for c in resume_changes(older, current, step=6)}
    assert set(changes) == {"micro_batch_tokens", "max_turns"}  # eval_every is free to change
    assert changes["micro_batch_tokens"].verdict == "warning" and changes["micro_batch_tokens"].old == 0
    assert "ran as micro_batch_tokens=0; pass 0 to continue it exactly" in str(changes["micro_batch_tokens"])
    assert changes["max_turns"].verdict == "warning" and "predates this option" in str(changes["max_turns"])
    check_resume("run", "grpo", "grpo", list(changes.values()), quiet=True)  # warnings never refuse
    assert resume_changes(older, {**current, "micro_batch_tokens": 0, "max_turns": None}, step=6)[0].name == "max_turns"
    assert [c.name for c in resume_changes(older, {**current, "micro_batch_tokens": 0}, step=6)] == ["max_turns"]
    assert resume_changes({"steps": 10, "extra_option_of_a_newer_mathgym": 1}, {"steps": 10}, step=6) == []


def test_evaluation_options_of_the_algorithm_configs_may_change_on_resume():
    from mathgym.algos.checkpoint import resume_changes
    from mathgym.algos.configs import OnPolicyDistillConfig, RMConfig

    saved = RMConfig(preference_file="a.jsonl").to_dict()
    current = RMConfig(preference_file="a.jsonl", eval_pairs_every=5, eval_preference_file="b.jsonl", pairs_per_step=8).to_dict()
    verdicts = {c.name: c.verdict for c in resume_changes(saved, current, step=3)}
    assert verdicts == {"eval_preference_file": "warning", "eval_pairs_every": "allowed", "pairs_per_step": "refused"}
    saved = OnPolicyDistillConfig(teacher="t").to_dict()
    current = OnPolicyDistillConfig(teacher="t", teacher_device="cpu", kl_coef=0.5).to_dict()
    verdicts = {c.name: c.verdict for c in resume_changes(saved, current, step=3)}
    assert verdicts == {"teacher_device": "warning", "kl_coef": "refused"}
    current = OnPolicyDistillConfig(teacher="t", teacher_url="http://h/v1", teacher_concurrency=2, teacher_timeout_s=9.0).to_dict()
    verdicts = {c.name: c.verdict for c in resume_changes(saved, current, step=3)}
    assert verdicts == {"teacher_url": "warning", "teacher_concurrency": "allowed", "teacher_timeout_s": "allowed"}


def test_a_metrics_line_cut_by_a_kill_is_dropped_on_resume(tmp_path):
    from mathgym.algos.metrics import MetricsLogger

    logger = MetricsLogger(tmp_path, False, False, {})
    for step in (1, 2, 3):
        logger.log(step, {"rollout/reward": step / 10})
    with (tmp_path / "metrics.jsonl").open("a") as fh:
        fh.write('{"step": 4, "rollout/rew')  # the process died mid-write
    logger.truncate_after(2)
    assert [r["step"] for r in read_metrics(tmp_path)] == [1, 2]


class _InterruptWhilePickled:
    """Sends this process a Ctrl-C (SIGINT) when ``torch.save`` pickles it: mid-write."""

    def __reduce__(self):
        import os
        import signal

        os.kill(os.getpid(), signal.SIGINT)
        return (int, (7,))


@pytest.fixture
def ctrl_c_raises():
    """Python's own Ctrl-C handler for the test: a shell's background job (``pytest ... &``) starts with
    SIGINT ignored, and an interpreter started so never installs it (nor raises KeyboardInterrupt)."""
    import signal

    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def test_a_ctrl_c_while_a_checkpoint_is_written_comes_after_it_is_whole(tmp_path, ctrl_c_raises):
    from mathgym.algos.checkpoint import save_checkpoint

    state = {"weights": torch.arange(100_000.0), "marker": _InterruptWhilePickled(), "more": torch.ones(100_000)}
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(tmp_path, 3, state)
    saved = latest_checkpoint(tmp_path)
    assert saved is not None and saved.name == "step-000003"
    loaded = torch.load(saved / "state.pt", weights_only=False)
    assert loaded["marker"] == 7 and torch.equal(loaded["more"], state["more"])
    assert not list((tmp_path / "checkpoints").glob(".tmp-*"))
    # The handler is Python's again: the next Ctrl-C interrupts at once.
    import signal

    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_run_resumed_with_more_steps_takes_its_next_step_at_its_own_schedules_rate(model_path, tmp_path):
    """A 1-step linear run ends its schedule at rate 0; resumed to 3 steps, its second step runs at
    2/3 of the base rate (the loaded optimizer held the saved run's 0) and changes the weights."""
    options = {**COMMON, "model": str(model_path), "steps": 1, "save_every": 1, "warmup_steps": 0, "group_size": 3}
    GRPOTrainer(GRPOConfig(**options, run_dir=str(tmp_path))).train()
    resumed = GRPOTrainer(GRPOConfig(**{**options, "steps": 3}, run_dir=str(tmp_path)))
    assert resumed.resume() and resumed.step == 1
    assert resumed.loop.optimizer.param_groups[0]["lr"] == pytest.approx(COMMON["learning_rate"] * 2 / 3)
    assert resumed.loop.scheduler.get_last_lr()[0] == pytest.approx(COMMON["learning_rate"] * 2 / 3)
    before = [p.detach().clone() for p in resumed.policy.trainable_parameters()]
    resumed.train_step()
    assert any(not torch.equal(b, p) for b, p in zip(before, resumed.policy.trainable_parameters()))
