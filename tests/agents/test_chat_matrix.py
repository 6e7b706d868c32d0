"""`mathgym train/eval --model PATH` with chat-template fixture models: every template style ×
single/multi-turn × GRPO; PPO, DPO, SFT and LoRA on one; every registered env; run dirs that
log the log-prob mismatch and readable samples; a model that carries its own prompt."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")

from transformers import AutoTokenizer  # noqa: E402

from mathgym import train_cli  # noqa: E402
from mathgym.agents.chat import stop_token_ids  # noqa: E402
from mathgym.agents.settings import MODEL_SETTINGS_FILE, read_model_settings  # noqa: E402
from tests.chat_fixtures import STYLES, assert_episode_text, cached_chat_model  # noqa: E402
from tests.envs_under_test import REASONING_GYM_PREFIX, REASONING_GYM_SAMPLE, contract_env_ids, contract_kwargs  # noqa: E402

ARCH = {"chatml": "qwen2", "chatml-base": "qwen2", "llama3": "llama", "qwen3": "qwen2", "gemma": "llama", "mistral": "llama"}
SMALL = [
    "--steps", "1", "--num-tasks", "2", "--group-size", "2", "--max-new-tokens", "6", "--max-turns", "3",
    "--eval-tasks", "1", "--save-every", "0", "--progress", "false", "--device", "cpu", "--dtype", "float32", "--threads", "1",
]


def train(model: Path, run: Path, *args: str) -> Path:
    assert train_cli.main("train", ["--model", str(model), "--run-dir", str(run), *SMALL, *args]) == 0
    return run


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def check_run(run: Path, model: Path) -> None:
    """The run logged the mismatch (≈0 on the native backend in fp32) and samples that decode
    to the template's rendering of the env's messages."""
    steps = [r for r in records(run / "metrics.jsonl") if "rollout/reward" in r]
    assert steps and all(r["rollout/logprob_diff_max"] <= 1e-3 for r in steps)
    assert all(0 <= r["rollout/logprob_diff_mean"] <= r["rollout/logprob_diff_max"] for r in steps)
    samples = records(run / "samples.jsonl")
    assert samples and {s["step"] for s in samples} == {r["step"] for r in steps}
    tokenizer = AutoTokenizer.from_pretrained(model)
    stops = stop_token_ids(tokenizer, _GenerationEos(model))
    for s in samples:
        assert len(s["token_ids"]) == len(s["action_mask"]) and sum(s["action_mask"]) > 0
        assert {"reward", "status", "messages"} <= set(s)
        assert_episode_text(tokenizer, s["token_ids"], s["messages"], stops)


class _GenerationEos:
    """The ``eos_token_id`` of a saved ``generation_config.json``."""

    def __init__(self, model: Path):
        self.eos_token_id = json.loads((model / "generation_config.json").read_text()).get("eos_token_id")


@pytest.mark.parametrize("env_id", ["MathReason-v0", "GuessNumber-v0"])
@pytest.mark.parametrize("style", STYLES)
def test_grpo_on_every_template_style(tmp_path_factory, tmp_path, style, env_id):
    """Single-turn runs sample with `model.generate` (hf backend), multi-turn ones with the native loop."""
    model = cached_chat_model(tmp_path_factory, style, ARCH[style])
    backend = "hf" if env_id == "MathReason-v0" else "native"
    check_run(train(model, tmp_path / "run", "--env", env_id, "--backend", backend), model)


@pytest.mark.parametrize("algo", ["ppo", "dpo", "sft"])
def test_other_algorithms_on_the_chatml_model(tmp_path_factory, tmp_path, algo):
    model = cached_chat_model(tmp_path_factory, "chatml")
    extra = {"sft": ["--batch-size", "4", "--num-demonstrations", "8"], "ppo": ["--num-minibatches", "1"], "dpo": []}[algo]
    run = train(model, tmp_path / "run", "--algo", algo, *extra)
    assert (run / "final" / "config.json").is_file() and read_model_settings(run / "final")["env"] == "MathReason-v0"
    if algo != "sft":  # SFT trains on demonstrations: nothing was sampled
        check_run(run, model)


def test_lora_on_the_llama3_model(tmp_path_factory, tmp_path):
    model = cached_chat_model(tmp_path_factory, "llama3", "llama")
    run = train(model, tmp_path / "run", "--env", "GuessNumber-v0", "--lora-r", "4", "--beta", "0.05")
    check_run(run, model)
    assert (run / "final" / "adapter_config.json").is_file() and (run / "final" / MODEL_SETTINGS_FILE).is_file()


#: One ReasoningGym/<task>-v0 id stands for all (they share one class; the contract tests cover more).
TRAINED_ENV_IDS = [e for e in contract_env_ids() if not e.startswith(REASONING_GYM_PREFIX) or e == REASONING_GYM_SAMPLE[0]]


@pytest.mark.parametrize("env_id", TRAINED_ENV_IDS)
def test_train_and_eval_any_registered_env_with_a_chat_model(tmp_path_factory, tmp_path, env_id, capsys):
    model = cached_chat_model(tmp_path_factory, "chatml")
    kwargs = json.dumps(contract_kwargs(env_id))
    run = train(model, tmp_path / "run", "--env", env_id, "--env-kwargs", kwargs, "--num-tasks", "1")
    assert (run / "final" / "config.json").is_file()
    args = ["--model", str(run / "final"), "--env", env_id, "--env-kwargs", kwargs, "--tasks", "1", "--device", "cpu"]
    code = train_cli.main("eval", args)
    assert code == 0 and f"{env_id} (1 tasks" in capsys.readouterr().out


def eval_line(capsys, model: Path, *args: str) -> str:
    capsys.readouterr()
    assert train_cli.main("eval", ["--model", str(model), "--tasks", "16", "--device", "cpu", *args]) == 0
    return capsys.readouterr().out


def test_eval_of_a_run_final_model_reproduces_the_runs_final_accuracy(tmp_path, monkeypatch, capsys):
    """The embedded tiny model's short prompt (its mathgym.json) and the run's evaluation budget
    travel with RUN/final: `mathgym eval --model RUN/final` reports what the run reported."""
    monkeypatch.setenv("MATHGYM_CACHE", str(tmp_path / "cache"))
    run = tmp_path / "run"
    args = ["--algo", "sft", "--warm-start-steps", "0", "--steps", "30", "--batch-size", "64", "--num-demonstrations", "512",
            "--learning-rate", "1e-2", "--eval-tasks", "16", "--max-new-tokens", "4", "--run-dir", str(run),
            "--progress", "false", "--save-every", "0", "--device", "cpu", "--threads", "1"]
    assert train_cli.main("train", args) == 0
    after = json.loads((run / "eval.json").read_text())["after"]
    settings = read_model_settings(run / "final")
    assert settings["env_kwargs"] == {"system_prompt": ""} and settings["generation"]["max_new_tokens"] == 4
    statuses = ", ".join(f"{k}={v}" for k, v in sorted(after["statuses"].items()))
    expected = f"pass@1 = {after['pass_at_1']:.1%} (greedy)\nstatuses: {statuses}\n"
    assert eval_line(capsys, run / "final").endswith(expected)
    # `mathgym train --model RUN/final` starts from the same accuracy.
    again = tmp_path / "again"
    assert train_cli.main("train", ["--model", str(run / "final"), "--steps", "1", "--num-tasks", "1", "--group-size", "2",
                                    "--eval-tasks", "16", "--run-dir", str(again), "--progress", "false", "--save-every", "0",
                                    "--device", "cpu", "--threads", "1"]) == 0
    assert json.loads((again / "eval.json").read_text())["before"] == after
    # Without the file the model is prompted and budgeted differently, and scores differently.
    (run / "final" / MODEL_SETTINGS_FILE).unlink()
    assert not eval_line(capsys, run / "final").endswith(expected)


@pytest.mark.parametrize("name", ["qwen2.5-0.5b-gsm8k.yaml", "qwen2.5-0.5b-gsm8k-lora.yaml"])
def test_real_model_recipe_configs_validate(name):
    import yaml

    from mathgym.algos.registry import get_algorithm
    from mathgym.options import build_config
    from mathgym.registry import env_accepts

    path = Path(__file__).resolve().parents[2] / "examples" / name
    _, config_cls = get_algorithm(yaml.safe_load(path.read_text())["algo"])
    config = build_config(config_cls, path)
    assert config.model == "Qwen/Qwen2.5-0.5B-Instruct" and config.env == "MathReason-v0"
    assert all(env_accepts(config.env, key) for key in {**config.env_kwargs, **config.eval_env_kwargs})
    assert (config.lora_r > 0) == name.endswith("-lora.yaml")


def test_saved_env_options_apply_to_their_env_and_prompt_options_travel(tmp_path):
    from mathgym.agents.settings import write_model_settings
    from mathgym.algos.configs import TrainConfig, resolved_env_kwargs

    write_model_settings(tmp_path, {"env": "MathReason-v0", "env_kwargs": {"system_prompt": "Be brief.", "difficulty": 2}})
    same = TrainConfig(env="MathReason-v0", model=str(tmp_path))
    assert resolved_env_kwargs(same) == {"system_prompt": "Be brief.", "difficulty": 2}
    assert resolved_env_kwargs(TrainConfig(env="MathReason-v0", model=str(tmp_path), env_kwargs={"difficulty": 0})) == {
        "system_prompt": "Be brief.", "difficulty": 0,
    }
    # Another env: only the prompt options travel (GuessNumber-v0 takes system_prompt, not difficulty).
    assert resolved_env_kwargs(TrainConfig(env="GuessNumber-v0", model=str(tmp_path))) == {"system_prompt": "Be brief."}
    assert resolved_env_kwargs(TrainConfig(env="MathReason-v0", model="Qwen/Qwen2.5-0.5B-Instruct")) == {}
