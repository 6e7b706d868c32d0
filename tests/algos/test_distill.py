"""Off-policy distillation: a smaller student gets closer to its teacher; a vocabulary mismatch is refused at start."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from mathgym.algos.distill import DistillConfig, DistillTrainer, load_distill_rows  # noqa: E402
from mathgym.errors import ConfigError, DatasetError  # noqa: E402
from mathgym.options import build_config  # noqa: E402


def _save(model, tokenizer, path):
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """A 2-layer teacher with peaked next-token distributions and a fresh 1-layer student, one tokenizer."""
    from mathgym.agents.tiny import build_tiny_model

    root = tmp_path_factory.mktemp("distill")
    teacher, tokenizer = build_tiny_model(seed=1, hidden_size=32, num_layers=2)
    with torch.no_grad():  # the final norm's gain scales the logits: a confident teacher, far from the near-uniform student
        teacher.model.norm.weight.mul_(12.0)
    student, _ = build_tiny_model(seed=2, hidden_size=32, num_layers=1)
    return _save(teacher, tokenizer, root / "teacher"), _save(student, tokenizer, root / "student")


def _config(teacher, student, tmp_path, **overrides):
    options = dict(
        teacher=teacher, model=student, env="MathReason-v0", steps=12, num_tasks=8, group_size=1, max_new_tokens=10,
        learning_rate=1e-2, eval_tasks=0, save_every=0, log_samples=0, progress=False, run_dir=str(tmp_path / "run"),
        top_k=8, device="cpu",
    )
    return DistillConfig(**{**options, **overrides})


def test_a_smaller_student_gets_closer_to_the_teacher_on_held_out_prompts(models, tmp_path):
    trainer = DistillTrainer(_config(*models, tmp_path, divergence="forward_kl", distill_weight=0.8))
    held_out = trainer.source.collector.collect(list(range(10_000, 10_008)), torch.Generator().manual_seed(5))  # teacher samples
    before = trainer.algorithm.divergence_on(held_out)
    trainer.train()
    after = trainer.algorithm.divergence_on(held_out)
    assert after < 0.6 * before, (before, after)
    metrics = [json.loads(line) for line in (trainer.run_dir / "metrics.jsonl").read_text().splitlines()]
    logged = [m["loss/divergence"] for m in metrics if "loss/divergence" in m]
    assert len(logged) == 12 and logged[-1] < logged[0]
    assert all(p.grad is None for p in trainer.algorithm.teacher.model.parameters())  # the teacher never learns


def test_a_teacher_with_another_vocabulary_is_refused_at_start(models, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    teacher_path, student_path = models
    tokenizer = AutoTokenizer.from_pretrained(teacher_path)
    tokenizer.add_tokens(["<extra>"])
    model = AutoModelForCausalLM.from_pretrained(teacher_path)
    model.resize_token_embeddings(len(tokenizer))
    other = _save(model, tokenizer, tmp_path / "other")
    with pytest.raises(ConfigError, match=r"do not share a vocabulary .*1 only in the teacher's \(e.g. '<extra>'\)"):
        DistillTrainer(_config(other, student_path, tmp_path))
    with pytest.raises(ConfigError, match="--teacher .*no-such-model.*could not be loaded"):
        DistillTrainer(_config(str(tmp_path / "no-such-model"), student_path, tmp_path))


def test_jsonl_prompts_are_answered_by_the_teacher_and_given_responses_kept(models, tmp_path):
    data = tmp_path / "rows.jsonl"
    rows = [
        {"prompt": "What is 2 + 3?"},
        {"prompt": "What is 1 + 1?", "completion": "\\boxed{2}"},
        {"messages": [{"role": "user", "content": "What is 4 - 1?"}, {"role": "assistant", "content": "\\boxed{3}"}]},
    ]
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert [c[-1]["role"] for c in load_distill_rows(data)] == ["user", "assistant", "assistant"]
    trainer = DistillTrainer(_config(*models, tmp_path, data=str(data), num_tasks=3, group_size=2, steps=2))
    batch = trainer.source.make_batch(0)[0]
    assert sorted(batch.statuses) == ["given", "given", "teacher_sample", "teacher_sample"]
    given = [c for c, s in zip(batch.completions, batch.statuses) if s == "given"]
    assert sorted(c[0] for c in given) == ["\\boxed{2}", "\\boxed{3}"]
    assert batch.action_mask.sum() > 0
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "?"}\n')
    with pytest.raises(DatasetError, match="bad.jsonl:1: expected"):
        load_distill_rows(bad)
    bad.write_text(json.dumps([{"question": "What is 5 - 2?"}, {"instruction": "Add 1 and 1.", "output": "2"}]))  # other layouts
    assert load_distill_rows(bad) == [[{"role": "user", "content": "What is 5 - 2?"}],
                                      [{"role": "user", "content": "Add 1 and 1."}, {"role": "assistant", "content": "2"}]]


def test_the_command_line_on_a_jsonl_file_and_on_a_multi_turn_env(models, tmp_path, capsys):
    from mathgym import train_cli
    from tests.trainkit import register_guess_env

    teacher, student = models
    data = tmp_path / "rows.jsonl"
    data.write_text('{"prompt": "What is 2 + 3?"}\n{"prompt": "What is 1 + 1?", "completion": "2"}\n')
    common = ["--algo", "distill", "--teacher", teacher, "--model", student, "--steps", "1", "--max-new-tokens", "4",
              "--eval-tasks", "0", "--progress", "false", "--device", "cpu"]
    assert train_cli.main("train", [*common, "--data", str(data), "--num-tasks", "2", "--run-dir", str(tmp_path / "a")]) == 0
    guess = [*common, "--env", register_guess_env(), "--env-kwargs", "{high: 5, max_turns: 2}", "--num-tasks", "2",
             "--divergence", "jsd", "--top-k", "0", "--run-dir", str(tmp_path / "b")]
    assert train_cli.main("train", guess) == 0
    metrics = [json.loads(line) for line in (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()]
    assert any(m.get("loss/divergence", 0) > 0 for m in metrics)
    assert train_cli.main("train", [*common, "--teacher", ""]) == 2
    assert "teacher is empty" in capsys.readouterr().err


def test_options_are_checked_where_the_config_is_built():
    with pytest.raises(ConfigError, match="teacher is empty"):
        build_config(DistillConfig)
    with pytest.raises(ConfigError, match="divergence='tvd' is not allowed"):
        build_config(DistillConfig, overrides={"teacher": "t", "divergence": "tvd"})
    for name, value in (("distill_weight", 1.5), ("jsd_beta", 1.0), ("skew_lambda", 1.0), ("top_k", -1), ("student_temperature", 0.0)):
        with pytest.raises(ConfigError, match=name):
            build_config(DistillConfig, overrides={"teacher": "t", name: value})
