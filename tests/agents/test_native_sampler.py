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


def generate_recording(policy: LLMPolicy, prompts, params, seeds, read=lambda ids: len(ids)) -> tuple[list, list[int]]:
    """The generations, and ``read(input_ids)`` of each pass of the model (default: its rows; the
    first is the prompts' prefill, each later one a decoding step)."""
    from mathgym.agents.fast.lean_decode import lean_step

    lean_step(policy.model)  # its one-time check of the model runs outside the record
    seen: list[int] = []
    # the token embedding sees every pass's input: the model's forward and a lean decoding step
    hook = policy.model.get_input_embeddings().register_forward_pre_hook(lambda m, args: seen.append(read(args[0])))
    try:
        gens = policy.generate(prompts, params, seeds=seeds)
    finally:
        hook.remove()
    return gens, seen


def test_finished_samples_leave_the_batch_and_each_sample_is_its_seeds(policy):
    questions = ("What is 2 + 3?", "Name a prime.")
    prompts = [policy.chat.prompt_ids([{"role": "user", "content": q}]) for q in questions for _ in range(8)]
    params = SamplingParams(max_new_tokens=40)
    gens, rows = generate_recording(policy, prompts, params, seeds=list(range(16)))
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


def test_a_next_turn_runs_only_its_new_tokens_and_samples_what_the_whole_prompt_would(policy):
    questions = ("What is 2 + 3?", "Name a prime.")
    prompts = [policy.chat.prompt_ids([{"role": "user", "content": q}]) for q in questions for _ in range(4)]
    params = SamplingParams(max_new_tokens=24)
    reply = policy.chat.encode("<|user|>go on<|end|><|assistant|>")
    with policy.reusing_turns() as turns:
        first = policy.generate(prompts, params, seeds=list(range(8)))
        assert turns.reused_tokens == 0 and turns.run_tokens == sum(len(p) for p in {tuple(p) for p in prompts})
        assert {g.finish_reason for g in first} == {"stop", "length"}  # both ways a turn ends are kept
        # the next turn of each episode, and one prompt that extends none of them (it runs whole)
        following = [p + g.token_ids + reply for p, g in zip(prompts, first)] + [policy.chat.prompt_ids([{"role": "user", "content": "Hi"}])]
        kept, widths = generate_recording(policy, following, params, list(range(100, 109)), lambda ids: ids.shape[1])
        assert turns.reused_tokens > 0
    fresh, fresh_widths = generate_recording(policy, following, params, list(range(100, 109)), lambda ids: ids.shape[1])
    assert fresh_widths[0] == max(len(p) for p in following)
    # each episode's prefill is its new tokens: the action's last (unrun) token and the reply, not the whole prompt
    assert widths[0] == max(len(reply) + 1, len(following[-1]))
    for a, b in zip(kept, fresh):
        assert a.token_ids == b.token_ids and a.finish_reason == b.finish_reason
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-5)
    # outside the scope nothing is kept
    assert policy._backend_impl.turns is None
