"""The policy behind an OpenAI-compatible endpoint, with the real ``openai`` client on 127.0.0.1:
answers (``n``, ``logprobs``, streaming, errors), concurrent calls sampled as one batch, each call
recorded token for token (the recorded tokens are what the model samples from that prompt and
seed; their log-probs are a fresh forward pass's), a conversation continued as one token sequence,
and a template that drops earlier ``<think>`` blocks (Qwen3's) splitting a run into segments."""

from __future__ import annotations

import concurrent.futures as cf

import pytest

torch = pytest.importorskip("torch")
openai = pytest.importorskip("openai")

from mathgym.agents.chat_format import ChatFormat  # noqa: E402
from mathgym.agents.endpoint import PolicyEndpoint, Recorder, Sample  # noqa: E402
from mathgym.agents.policy import LLMPolicy, SamplingParams  # noqa: E402
from mathgym.agents.tiny import tiny_model_path  # noqa: E402
from mathgym.algos.agent_runs import RunOutcome, run_episodes  # noqa: E402
from mathgym.aio_server import ServerThread  # noqa: E402
from tests.chat_fixtures import build_tokenizer  # noqa: E402

QUESTION = [{"role": "user", "content": "What is 2 + 3?"}]


@pytest.fixture(scope="module")
def policy() -> LLMPolicy:
    return LLMPolicy.from_pretrained(str(tiny_model_path()), device="cpu")


@pytest.fixture(scope="module")
def served(policy):
    endpoint = PolicyEndpoint(policy, SamplingParams(max_new_tokens=10), sampling_seed=0, max_context_tokens=400, gather_s=0.05)
    with ServerThread(endpoint) as url:
        yield endpoint, url + "/v1"


def fresh_logprobs(policy: LLMPolicy, prompt: list[int], completion: list[int]) -> torch.Tensor:
    ids = torch.tensor([prompt + completion])
    with torch.no_grad():
        out = policy.forward(ids, torch.ones_like(ids))
    return out.logprobs[0, len(prompt):]


def test_an_answer_is_the_recorded_sample_and_its_logprobs_a_fresh_forward_pass(policy, served):
    endpoint, url = served
    client = openai.OpenAI(base_url=url, api_key="run-answer")
    reply = client.chat.completions.create(model="any", messages=QUESTION, n=2, logprobs=True)
    assert [c.index for c in reply.choices] == [0, 1] and reply.model == endpoint.model_name
    (call,) = endpoint.recorder.run("run-answer").calls
    assert call.prompt_ids == policy.chat.prompt_ids(QUESTION) and call.parent is None
    for choice, sample in zip(reply.choices, call.samples):
        assert choice.message.content == policy.chat.action_text(sample.completion_ids)
        assert [t.logprob for t in choice.logprobs.content] == pytest.approx(sample.logprobs)
        assert reply.usage.prompt_tokens == len(call.prompt_ids)
        # the recorded tokens are what the model samples from this prompt and seed ...
        again = policy.generate([call.prompt_ids], SamplingParams(max_new_tokens=10), seeds=[sample.seed])[0]
        assert again.token_ids == sample.completion_ids
        # ... and their log-probs those of a fresh forward pass
        fresh = fresh_logprobs(policy, call.prompt_ids, sample.completion_ids)
        assert torch.allclose(fresh, torch.tensor(sample.logprobs), atol=1e-4)


def test_streaming_sends_the_answer_in_openai_chunks(served):
    endpoint, url = served
    client = openai.OpenAI(base_url=url, api_key="run-stream")
    chunks = list(client.chat.completions.create(
        model="any", messages=QUESTION, stream=True, stream_options={"include_usage": True},
    ))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] in ("stop", "length")
    assert chunks[-1].usage.completion_tokens == len(endpoint.recorder.run("run-stream").calls[0].samples[0].completion_ids)
    assert text == endpoint.recorder.run("run-stream").calls[0].samples[0].message["content"]


def test_concurrent_calls_are_one_batch_and_runs_are_kept_apart(served):
    endpoint, url = served
    before = len(endpoint.batch_sizes)

    def call(i: int) -> str:
        client = openai.OpenAI(base_url=url, api_key=f"run-many-{i}")
        return client.chat.completions.create(model="any", messages=QUESTION).choices[0].message.content

    with cf.ThreadPoolExecutor(8) as pool:
        list(pool.map(call, range(8)))
    assert max(endpoint.batch_sizes[before:]) > 1  # the sampler saw several calls at once
    assert sum(endpoint.batch_sizes[before:]) == 8
    for i in range(8):
        assert len(endpoint.recorder.run(f"run-many-{i}").calls) == 1


def test_a_continued_conversation_is_one_token_sequence(policy, served):
    endpoint, url = served
    client = openai.OpenAI(base_url=url, default_headers={"X-Mathgym-Run": "run-chat"}, api_key="unused")
    messages = list(QUESTION)
    for turn in range(3):
        message = client.chat.completions.create(model="any", messages=messages).choices[0].message
        messages += [message.model_dump(exclude_none=True), {"role": "user", "content": f"Check {turn}."}]
    run = endpoint.recorder.pop("run-chat")
    assert [c.parent for c in run.calls] == [None, (0, 0), (1, 0)]
    for earlier, later in zip(run.calls, run.calls[1:]):
        assert later.prompt_ids[: len(earlier.sequence(0))] == earlier.sequence(0)  # the sampled tokens, not re-tokenised
    (episode,) = run_episodes(run, "env", "task", 0, RunOutcome(1.0, "correct", True))
    last = run.calls[-1]
    assert episode.token_ids == last.sequence(0)
    actions = [t for t, m in zip(episode.token_ids, episode.action_mask) if m]
    assert actions == [t for c in run.calls for t in c.samples[0].completion_ids]
    assert episode.step_rewards == [0.0, 0.0, 1.0] and sorted(set(episode.step_index)) == [-1, 0, 1, 2]
    fresh = fresh_logprobs(policy, episode.token_ids[:1], episode.token_ids[1:])
    mask = torch.tensor(episode.action_mask[1:], dtype=torch.bool)
    assert torch.allclose(fresh[mask], torch.tensor(episode.logprobs[1:])[mask], atol=1e-4)
    with pytest.raises(openai.ConflictError):  # the run is closed: a late call is refused
        client.chat.completions.create(model="any", messages=QUESTION)


def test_requests_the_endpoint_cannot_serve_are_openai_errors(served):
    _, url = served
    client = openai.OpenAI(base_url=url, api_key="run-errors")
    with pytest.raises(openai.BadRequestError, match="role"):
        client.chat.completions.create(model="any", messages=[{"role": "narrator", "content": "x"}])
    with pytest.raises(openai.BadRequestError, match="context"):
        client.chat.completions.create(model="any", messages=[{"role": "user", "content": "7 + 8 " * 200}])
    with pytest.raises(openai.BadRequestError, match="n must"):
        client.chat.completions.create(model="any", messages=QUESTION, n=0)
    assert [m.id for m in client.models.list().data] == ["mathgym-policy"]


# -- a template that drops earlier reasoning (Qwen3's) ------------------------------------------


def qwen3_run(history: str):
    """A run of two calls on the Qwen3-style fixture template: the first sample thinks, then the
    agent sends a new user turn (the template drops the think block of turns before it)."""
    chat = ChatFormat(build_tokenizer("qwen3"))
    recorder = Recorder(chat, history)
    first = recorder.start_call("r", [dict(m) for m in QUESTION], None)
    text = "<think>\n2 plus 3</think>\n\n\\boxed{5}"
    completion = chat.encode(text) + [chat.end_of_turn_id]
    recorder.finish_call(first, [Sample(completion, [-0.5] * len(completion), "stop", {"role": "assistant", "content": text})])
    messages = [*QUESTION, {"role": "assistant", "content": text}, {"role": "user", "content": "Sure?"}]
    second = recorder.start_call("r", messages, None)
    recorder.finish_call(second, [Sample(completion, [-0.25] * len(completion), "stop", {"role": "assistant", "content": text})])
    return chat, recorder.pop("r"), completion, messages


def test_a_template_that_drops_earlier_thinking_splits_the_run_into_segments():
    chat, run, completion, messages = qwen3_run("template")
    assert run.calls[1].parent is None  # the template's prompt is not the continuation of the sampled tokens
    assert run.calls[1].prompt_ids == chat.prompt_ids(messages) and "2 plus 3" not in chat.decode(run.calls[1].prompt_ids)
    episodes = run_episodes(run, "env", "task", 0, RunOutcome(1.0, "correct", True))
    assert len(episodes) == 2  # each segment its own prompt -> completion sample, both with the run's reward
    for episode, call in zip(episodes, run.calls):
        assert episode.token_ids == call.sequence(0) and episode.reward == 1.0
        assert [t for t, m in zip(episode.token_ids, episode.action_mask) if m] == completion


def test_history_sampled_keeps_the_sampled_thinking_in_one_sequence():
    chat, run, completion, _ = qwen3_run("sampled")
    assert run.calls[1].parent == (0, 0)
    assert "2 plus 3" in chat.decode(run.calls[1].prompt_ids)  # the model sees its own earlier reasoning
    (episode,) = run_episodes(run, "env", "task", 0, RunOutcome(0.0, "wrong"))
    assert [t for t, m in zip(episode.token_ids, episode.action_mask) if m] == completion * 2
