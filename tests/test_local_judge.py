"""LocalJudge: a local chat model as the judge, through its chat template, batched, cached.

A random model does not write ``SCORE: n``; its real replies test the failure path (an infra
status, never 0, not cached). The success path scripts what ``generate`` appends after the real,
left-padded prompts it receives (the replies a trained judge would write), so that the rendering,
batching, slicing of the new tokens, parsing and caching are all the worker's own.
"""

from __future__ import annotations

import re

import pytest

pytest.importorskip("torch")
import torch  # noqa: E402

from mathgym.agents.local_judge import LocalJudge  # noqa: E402
from mathgym.rewards import Status  # noqa: E402
from mathgym.rewards.judge import JudgeInput  # noqa: E402
from tests.chat_fixtures import cached_chat_model  # noqa: E402

QUESTION = "What is the capital of France?"


@pytest.fixture(scope="module")
def judge_dir(tmp_path_factory):
    return cached_chat_model(tmp_path_factory, "chatml")


def _scripted(judge: LocalJudge, calls: list[list[str]]) -> None:
    """Make the model append, after each real prompt, the verdict a judge would write on the response it holds."""
    real = judge.model.generate

    def generate(input_ids, attention_mask, **kwargs):
        real(input_ids=input_ids, attention_mask=attention_mask, **{**kwargs, "max_new_tokens": 2})  # the model runs
        texts = judge.tokenizer.batch_decode(input_ids, skip_special_tokens=False)
        calls.append(texts)
        rows = []
        for text in texts:
            nonce = re.search(r"<response-([0-9a-f]+)>", text).group(1)
            response = text.split(f"<response-{nonce}>\n", 1)[1].split(f"\n</response-{nonce}>", 1)[0]
            verdict = "SCORE: 10" if "paris" in response.lower() else "SCORE: 3"
            rows.append(judge.tokenizer.encode(f"Compared with the reference.\n{verdict}") + [judge.tokenizer.eos_token_id])
        width = max(len(r) for r in rows)
        tail = torch.tensor([r + [judge.tokenizer.pad_token_id] * (width - len(r)) for r in rows])
        return torch.cat([input_ids, tail], dim=1)

    judge.model.generate = generate


def test_local_judge_renders_batches_parses_and_caches(judge_dir):
    judge = LocalJudge.from_pretrained(str(judge_dir), device="cpu", batch_size=2)
    calls: list[list[str]] = []
    _scripted(judge, calls)
    task = JudgeInput(QUESTION, reference="Paris")
    responses = ["It is Paris.", "Lyon", "paris, of course", "It is Paris."]
    results = judge.score_batch(responses, [task] * 4)
    assert [r.score for r in results] == [1.0, 0.3, 1.0, 1.0]
    assert [r.status for r in results] == [Status.CORRECT, Status.PARTIAL, Status.CORRECT, Status.CORRECT]
    # three distinct judgements, two per generate call, each prompt rendered by the chat template
    assert [len(c) for c in calls] == [2, 1]
    assert all("<|im_start|>system" in t and t.rstrip().endswith("<|im_start|>assistant") for c in calls for t in c)
    assert all("Reference answer (correct):\nParis" in t for c in calls for t in c)
    again = judge.score("It is Paris.", task)
    assert again.score == 1.0 and again.details["cached"] and len(calls) == 2


def test_an_unparseable_local_judgement_is_an_infra_status_not_zero_and_not_cached(judge_dir):
    judge = LocalJudge.from_pretrained(str(judge_dir), device="cpu", max_new_tokens=8)
    task = {"question": QUESTION, "reference": "Paris"}
    first = judge.score_batch(["Paris", "Lyon"], [task, task])  # the random model's real replies hold no verdict
    assert all(r.status is Status.ERROR and r.status.is_infra_failure for r in first)
    assert judge.stats["errors"] == 2 and judge.stats["requests"] == 2
    judge.score("Paris", task)
    assert judge.stats["requests"] == 3  # a failure is not cached: asked again
    too_long = judge.score("x" * 30_000, task)
    assert too_long.status is Status.TOO_LONG and judge.stats["requests"] == 3


def test_a_template_without_a_system_role_gets_the_system_text_in_the_user_turn(tmp_path_factory):
    judge = LocalJudge.from_pretrained(str(cached_chat_model(tmp_path_factory, "gemma")), device="cpu", max_new_tokens=2)
    from mathgym.agents.local_judge import render_chat

    text = judge.tokenizer.decode(render_chat(judge.tokenizer, judge.messages("Paris", JudgeInput(QUESTION, "Paris"), nonce="ab12")))
    assert "strict grader" in text and "<response-ab12>" in text
    with pytest.raises(TypeError, match="not pickled"):
        import pickle

        pickle.dumps(judge)
