"""On-policy distillation: the student's samples are graded token by token by a teacher's reverse KL."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from mathgym.algos.onpolicy_distill import OnPolicyDistillConfig, OnPolicyDistillTrainer  # noqa: E402
from mathgym.errors import ConfigError  # noqa: E402
from mathgym.options import build_config  # noqa: E402


def _save(model, tokenizer, path):
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """A 2-layer teacher with peaked next-token distributions and a fresh 1-layer student, one tokenizer."""
    from mathgym.agents.tiny import build_tiny_model

    root = tmp_path_factory.mktemp("onpolicy")
    teacher, tokenizer = build_tiny_model(seed=1, hidden_size=32, num_layers=2)
    with torch.no_grad():
        teacher.model.norm.weight.mul_(12.0)
    student, _ = build_tiny_model(seed=2, hidden_size=32, num_layers=1)
    return _save(teacher, tokenizer, root / "teacher"), _save(student, tokenizer, root / "student")


def _config(teacher, student, tmp_path, **overrides):
    options = dict(
        teacher=teacher, model=student, env="MathReason-v0", steps=1, num_tasks=2, group_size=3, max_new_tokens=8,
        eval_tasks=0, save_every=0, log_samples=0, progress=False, run_dir=str(tmp_path / "run"), device="cpu",
    )
    return OnPolicyDistillConfig(**{**options, **overrides})


def _token_logprobs(path, batch):
    """``(B, T)`` log-probs of the batch's tokens under the model at ``path``, from its logits directly."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path).eval()
    with torch.no_grad():
        logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
    logp = torch.log_softmax(logits[:, :-1].double(), dim=-1).gather(-1, batch.input_ids[:, 1:, None]).squeeze(-1)
    return torch.cat([torch.zeros_like(logp[:, :1]), logp], dim=1)


@pytest.mark.parametrize("estimator", ["k1", "k3"])
def test_the_signal_is_the_reverse_kl_computed_from_both_models_logits(models, tmp_path, estimator):
    teacher, student = models
    trainer = OnPolicyDistillTrainer(_config(teacher, student, tmp_path, teacher_kl_estimator=estimator, kl_coef=0.5))
    batch = trainer.score_learner(trainer.source.make_batch(0)[0])
    mask = batch.loss_mask()
    assert mask.sum() > 10
    env_advantages = torch.linspace(-1.0, 1.0, len(batch))
    batch.advantages = env_advantages

    advantages, kl = trainer.algorithm.token_signal(batch, mask)

    log_s, log_t = _token_logprobs(student, batch), _token_logprobs(teacher, batch)
    log_r = log_t - log_s  # r = p_t / p_s at the sampled token
    expected = (-log_r if estimator == "k1" else log_r.exp() - 1 - log_r) * mask
    torch.testing.assert_close(kl.double(), expected, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(advantages.double(), -0.5 * expected, atol=1e-4, rtol=1e-4)
    assert float((expected * mask).sum() / mask.sum()) > 0.5  # the teacher is far from the student: a real signal
    if estimator == "k3":
        assert (kl >= 0).all()

    trainer.config.env_reward_coef = 2.0  # the env's advantage is added to every token of its episode
    mixed, _ = trainer.algorithm.token_signal(batch, mask)
    torch.testing.assert_close(mixed.double(), (2.0 * env_advantages[:, None].double() - 0.5 * expected) * mask, atol=1e-4, rtol=1e-4)


@pytest.mark.heavy  # a policy gradient on sampled tokens: ~30 steps before the KL falls (about 20 s)
def test_the_student_gets_closer_to_the_teacher_on_its_own_samples(models, tmp_path):
    trainer = OnPolicyDistillTrainer(_config(*models, tmp_path, steps=40, num_tasks=4, group_size=2, learning_rate=1e-2))
    trainer.train()
    metrics = [json.loads(line) for line in (trainer.run_dir / "metrics.jsonl").read_text().splitlines()]
    kl = [m["loss/teacher_kl"] for m in metrics if "loss/teacher_kl" in m]
    assert len(kl) == 40 and sum(kl[-5:]) < 0.5 * sum(kl[:5]), kl
    assert all(p.grad is None for p in trainer.algorithm.teacher.model.parameters())


def test_the_command_line_on_a_single_turn_and_a_multi_turn_env(models, tmp_path, capsys):
    from mathgym import train_cli

    teacher, student = models
    common = ["--algo", "onpolicy-distill", "--teacher", teacher, "--model", student, "--steps", "1", "--max-new-tokens", "4",
              "--num-tasks", "2", "--group-size", "2", "--eval-tasks", "0", "--progress", "false", "--device", "cpu"]
    assert train_cli.main("train", [*common, "--run-dir", str(tmp_path / "a")]) == 0
    guess = [*common, "--env", "GuessNumber-v0", "--max-turns", "2", "--teacher-kl-estimator", "k3",
             "--env-reward-coef", "1.0", "--teacher-device", "cpu", "--run-dir", str(tmp_path / "b")]
    assert train_cli.main("train", guess) == 0
    for run in ("a", "b"):
        metrics = [json.loads(line) for line in (tmp_path / run / "metrics.jsonl").read_text().splitlines()]
        assert any(m.get("loss/teacher_kl", 0) > 0 for m in metrics)
    samples = (tmp_path / "b" / "config.yaml").read_text()
    assert "teacher_kl_estimator: k3" in samples
    assert train_cli.main("train", [*common, "--teacher", ""]) == 2
    assert "teacher is empty" in capsys.readouterr().err


def test_options_are_checked_where_the_config_is_built(models, tmp_path):
    with pytest.raises(ConfigError, match="teacher is empty"):
        build_config(OnPolicyDistillConfig)
    with pytest.raises(ConfigError, match="teacher_kl_estimator='k2' is not allowed"):
        build_config(OnPolicyDistillConfig, overrides={"teacher": "t", "teacher_kl_estimator": "k2"})
    for name in ("kl_coef", "env_reward_coef"):
        with pytest.raises(ConfigError, match=name):
            build_config(OnPolicyDistillConfig, overrides={"teacher": "t", name: -1.0})
    with pytest.raises(ConfigError, match="both 0"):
        build_config(OnPolicyDistillConfig, overrides={"teacher": "t", "kl_coef": 0.0})
    from transformers import AutoModelForCausalLM, AutoTokenizer

    teacher_path, student_path = models
    tokenizer = AutoTokenizer.from_pretrained(teacher_path)
    tokenizer.add_tokens(["<extra>"])
    model = AutoModelForCausalLM.from_pretrained(teacher_path)
    model.resize_token_embeddings(len(tokenizer))
    other = _save(model, tokenizer, tmp_path / "other")
    with pytest.raises(ConfigError, match="do not share a vocabulary"):
        OnPolicyDistillTrainer(_config(other, student_path, tmp_path))


def test_per_token_env_advantages_add_token_by_token():
    """A per-turn estimator (gigpo, step_reinforce) gives ``(B, T)`` env advantages: each token adds its own."""
    from mathgym.algos.onpolicy_distill import distillation_advantages

    student = torch.log(torch.tensor([[0.5, 0.25, 0.5]]))
    teacher = torch.log(torch.tensor([[0.25, 0.25, 0.5]]))
    env = torch.tensor([[1.0, -2.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    adv, kl = distillation_advantages(student, teacher, env, mask, kl_coef=1.0, env_reward_coef=0.5, estimator="k1")
    # k1 = log p_s - log p_t: [log 2, 0, 0]; advantages = 0.5 * env - kl on the mask
    assert torch.allclose(adv, torch.tensor([[0.5 - 0.6931472, -1.0, 0.0]]), atol=1e-6)
