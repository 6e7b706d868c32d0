"""A teacher behind a vLLM-shaped completions server, over real HTTP on 127.0.0.1 (``teacher_url``)."""

from __future__ import annotations

import json
import logging

import pytest

torch = pytest.importorskip("torch")

from mathgym.agents.remote_teacher import RemoteTeacher, TeacherRequestError, parse_prompt_logprobs  # noqa: E402
from mathgym.algos.onpolicy_distill import OnPolicyDistillConfig, OnPolicyDistillTrainer  # noqa: E402
from mathgym.errors import ConfigError  # noqa: E402
from mathgym.options import build_config  # noqa: E402
from tests.teacher_server import FixtureTeacherServer  # noqa: E402
from tests.algos.test_onpolicy_distill import _config, _token_logprobs, models  # noqa: E402, F401


def _remote_config(student, url, tmp_path, **overrides):
    return _config("", student, tmp_path, teacher_url=url, **overrides)


def test_the_server_gives_the_in_process_teachers_signal(models, tmp_path):  # noqa: F811
    teacher, student = models
    with FixtureTeacherServer(teacher) as server:
        trainer = OnPolicyDistillTrainer(_remote_config(student, server.url, tmp_path, teacher_kl_estimator="k3"))
        assert trainer.algorithm.remote_teacher.model == "teacher"  # the server's only model, found by name
        assert trainer.algorithm.remote_teacher.max_model_len == server.max_model_len
        batch = trainer.score_learner(trainer.source.make_batch(0)[0])
        mask = batch.loss_mask()
        rows = torch.nonzero(mask.sum(-1) > 0).flatten()
        remote, failed = trainer.algorithm.teacher_logprobs(batch, rows)
        batch.advantages = torch.zeros(len(batch))
        advantages, kl = trainer.algorithm.token_signal(batch, mask)
    assert not failed.any()
    direct = _token_logprobs(teacher, batch) * batch.attention_mask
    torch.testing.assert_close(remote.double()[rows], direct[rows], atol=1e-4, rtol=1e-4)
    assert (remote[:, 0] == 0).all()  # token-aligned: the first token has no log-prob
    log_r = direct - _token_logprobs(student, batch)
    torch.testing.assert_close(kl.double(), (log_r.exp() - 1 - log_r) * mask, atol=1e-4, rtol=1e-4)


def test_a_run_from_the_command_line_against_the_server(models, tmp_path):  # noqa: F811
    from mathgym import train_cli

    teacher, student = models
    with FixtureTeacherServer(teacher, name="qwen-teacher") as server:
        args = ["--algo", "onpolicy-distill", "--teacher-url", server.url, "--teacher", "qwen-teacher", "--model", student,
                "--steps", "2", "--max-new-tokens", "4", "--num-tasks", "2", "--group-size", "2", "--eval-tasks", "0",
                "--progress", "false", "--device", "cpu", "--run-dir", str(tmp_path / "run")]
        assert train_cli.main("train", args) == 0
        assert server.completions >= 2
    metrics = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    steps = [m for m in metrics if "loss/teacher_kl" in m]
    assert len(steps) == 2 and all(m["loss/teacher_kl"] > 0 and m["infra/teacher_failures"] == 0 for m in steps)


def test_rows_the_server_cannot_score_are_infrastructure_failures_left_out_of_the_loss(models, tmp_path):  # noqa: F811
    teacher, student = models
    with FixtureTeacherServer(teacher) as server:
        trainer = OnPolicyDistillTrainer(_remote_config(student, server.url, tmp_path))
        trainer.algorithm.remote_teacher.backoff_s = 0.01
        batch = trainer.score_learner(trainer.source.make_batch(0)[0])
        trainable = int((batch.loss_mask().sum(-1) > 0).sum())
        server.fail = -1  # the engine died after start
        plan = trainer.algorithm.plan(batch)
    assert plan.stats["infra/teacher_failures"] == trainable
    assert batch.infra_failure.sum() >= trainable and batch.loss_mask().sum() == 0  # nothing of it trains
    assert all(len(step.items) == 0 for step in plan.steps)
    assert trainer.algorithm.remote_teacher.stats["retries"] == 2 * trainable


def test_retries_timeouts_and_sequences_too_long(models):  # noqa: F811
    teacher, _ = models
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(teacher)
    ids = tokenizer("What is 2 + 3? The answer is 5.").input_ids
    with FixtureTeacherServer(teacher, fail=2) as server:
        client = RemoteTeacher(server.url, backoff_s=0.01)
        client.connect(tokenizer)
        [values] = client.logprobs([ids])  # two 500s, then an answer
        assert values is not None and len(values) == len(ids) - 1 and client.stats["retries"] == 2
        assert client.logprobs([ids[:1], []]) == [[], []]  # nothing to score, no request
        too_long = [1] * server.max_model_len
        before = server.completions
        assert client.logprobs([too_long]) == [None] and server.completions == before
    with FixtureTeacherServer(teacher, slow_s=1.0) as server:
        client = RemoteTeacher(server.url, timeout_s=0.2, max_retries=1, backoff_s=0.01)
        client.connect(tokenizer)
        assert client.logprobs([ids]) == [None]


def test_the_served_model_and_its_vocabulary_are_checked_at_start(models, tmp_path, caplog):  # noqa: F811
    from tokenizers import Tokenizer, models as tok_models, pre_tokenizers, trainers
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    teacher, student = models
    tokenizer = AutoTokenizer.from_pretrained(student)
    with FixtureTeacherServer(teacher, names=["a", "b"]) as server:
        with pytest.raises(ConfigError, match="name the teacher's with --teacher"):
            RemoteTeacher(server.url).connect(tokenizer)
        with pytest.raises(ConfigError, match="does not serve 'c'"):
            RemoteTeacher(server.url, "c").connect(tokenizer)
    core = Tokenizer(tok_models.BPE(unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    core.train_from_iterator(["a different vocabulary entirely"] * 10, trainer=trainers.BpeTrainer(vocab_size=60, special_tokens=["[UNK]"]))
    other = PreTrainedTokenizerFast(tokenizer_object=core, unk_token="[UNK]")
    with FixtureTeacherServer(teacher, tokenizer=other) as server:
        with pytest.raises(ConfigError, match="does not tokenise as the student does"):
            OnPolicyDistillTrainer(_remote_config(student, server.url, tmp_path))
    with FixtureTeacherServer(teacher, no_tokenize=True) as server, caplog.at_level(logging.WARNING):
        RemoteTeacher(server.url).connect(tokenizer)
    assert "could not be checked" in caplog.text
    with pytest.raises(ConfigError, match="server's model list could not be read"):
        RemoteTeacher("http://127.0.0.1:9/v1", max_retries=0).connect(tokenizer)  # nothing listens there


def test_options_of_a_teacher_server():
    ok = build_config(OnPolicyDistillConfig, overrides={"teacher_url": "http://127.0.0.1:8000/v1"})
    assert ok.teacher == ""  # the server's only model
    with pytest.raises(ConfigError, match="temperature=0.7 with a teacher server"):
        build_config(OnPolicyDistillConfig, overrides={"teacher_url": "http://x/v1", "temperature": 0.7})
    with pytest.raises(ConfigError, match="not an http"):
        RemoteTeacher("127.0.0.1:8000/v1")


@pytest.mark.parametrize("entries, reason", [
    ([None, {"7": {"logprob": -1.0}}], "entries for 3 tokens"),
    ([None, {"7": {"logprob": -1.0}}, {"9": {"logprob": -2.0}}], "no valid log-prob for token 8"),
    ([None, {"7": {"logprob": -1.0}}, {"8": {"logprob": 0.5}}], "no valid log-prob for token 8"),
    ([None, {"7": {"logprob": -1.0}}, {"8": {"logprob": float("nan")}}], "no valid log-prob for token 8"),
    ([None, {"7": {"logprob": -1.0}}, {"8": {"logprob": "high"}}], "no valid log-prob for token 8"),
    ([None, {"7": {"logprob": -1.0}}, {"8": True}], "no valid log-prob for token 8"),
    ([None, {"7": {"logprob": -1e30}}, {"8": {"logprob": -2.0}}], "no valid log-prob for token 7"),  # finite, absurd
    ("lots", "no entries"),
])
def test_a_reply_that_does_not_hold_the_log_probs_is_refused(entries, reason):
    with pytest.raises(TeacherRequestError, match=reason):
        parse_prompt_logprobs({"choices": [{"prompt_logprobs": entries}]}, [5, 7, 8])
    with pytest.raises(TeacherRequestError, match="does the server support prompt_logprobs"):
        parse_prompt_logprobs({"choices": []}, [5, 7, 8])
    good = [None, {"7": {"logprob": -1.0}, "3": {"logprob": -0.5}}, {8: {"logprob": -2.0}}]
    assert parse_prompt_logprobs({"choices": [{"prompt_logprobs": good}]}, [5, 7, 8]) == [-1.0, -2.0]


def test_a_teacher_that_trickles_its_reply_is_cut_off_at_the_timeout():
    """``timeout_s`` bounds the whole request, not each read: a server sending a valid reply one byte
    every 50 ms is given up on after ``timeout_s`` per attempt; the sequence is then unscored (``None``)."""
    import time

    from tests.judge_server import TrickleServer

    entries = [None, {"2": {"logprob": -0.5}}, {"3": {"logprob": -1.0}}]
    body = json.dumps({"choices": [{"prompt_logprobs": entries}]}).encode()
    with TrickleServer(body, every_s=0.05) as server:
        teacher = RemoteTeacher(server.url, "m", timeout_s=0.5, max_retries=1, backoff_s=0.0)
        started = time.monotonic()
        assert teacher.logprobs([[1, 2, 3]]) == [None]
        elapsed = time.monotonic() - started
    assert elapsed < 2.5 and server.requests == 2, elapsed
    assert teacher.stats == {"requests": 2, "retries": 1, "failed_sequences": 1}
