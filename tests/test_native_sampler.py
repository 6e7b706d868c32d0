"""The native sampler's batching: a group's prompt runs once, a finished sample leaves the batch,
and each sample is still the one its seed draws alone."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from mathgym.agents.policy import LLMPolicy, SamplingParams  # noqa: E402
from tests.trainkit import build_small_model  # noqa: E402


@pytest.fixture(scope="module")
def policy(tmp_path_factory):
    return LLMPolicy.from_pretrained(str(build_small_model(tmp_path_factory.mktemp("model"))), device="cpu")


def rows_per_call(policy: LLMPolicy, prompts, params, seeds) -> tuple[list, list[int]]:
    """The generations, and the number of rows of each forward call of the model (the prompts' first)."""
    rows: list[int] = []
    hook = policy.model.register_forward_pre_hook(lambda m, args, kwargs: rows.append(len(kwargs["input_ids"])), with_kwargs=True)
    try:
        gens = policy.generate(prompts, params, seeds=seeds)
    finally:
        hook.remove()
    return gens, rows


def test_finished_samples_leave_the_batch_and_each_sample_is_its_seeds(policy):
    questions = ("What is 2 + 3?", "Name a prime.")
    prompts = [policy.encode_chat([{"role": "user", "content": q}]) for q in questions for _ in range(8)]
    params = SamplingParams(max_new_tokens=40)
    gens, rows = rows_per_call(policy, prompts, params, seeds=list(range(16)))
    lengths = [len(g.token_ids) for g in gens]
    stopped = [n for n, g in zip(lengths, gens) if g.finish_reason == "stop"]
    assert stopped and min(stopped) < 10 and max(lengths) == 40  # samples end at different steps
    assert rows[0] == 2  # each distinct prompt runs once for its group
    # Call j feeds the token of step j - 1 of the samples still going (shared while they agree).
    for j, count in enumerate(rows[1:], start=1):
        assert count <= sum(n > j for n in lengths), (j, count, lengths)
    assert len(rows) == max(lengths)  # no call after the last token
    for i in (2, 5, 13):  # a sample that stopped early, one that ran to the end: each is its seed's alone
        alone = policy.generate([prompts[i]], params, seeds=[i])[0]
        assert alone.token_ids == gens[i].token_ids and alone.finish_reason == gens[i].finish_reason
        assert alone.logprobs == pytest.approx(gens[i].logprobs, abs=1e-5)
