"""A tool call the model itself writes, served by the policy's endpoint to the real ``openai`` client.

A ChatML fixture model (Hermes ``<tool_call>`` template, built in-process and loaded like a hub model)
is taught one agent run with mathgym's SFT loss: call the calculator, then answer with the tool's
result. The demonstration's tokens are made by the endpoint's own recorder, so the prompts it is
taught on are the ones the endpoint feeds. Served with ``tools=[...]``, the model samples the call
(greedy: it is taught until each token is its most likely); the endpoint parses it into OpenAI
``tool_calls`` (``finish_reason="tool_calls"``) from the tokens it recorded, and an agent program runs
the tool and continues the run as one token sequence.

Heavy: teaching the model takes ~50 optimizer steps on a ~370-token run (a minute on 2 busy cores).
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

torch = pytest.importorskip("torch")
openai = pytest.importorskip("openai")

from mathgym.agents.chat_format import ChatFormat  # noqa: E402
from mathgym.agents.endpoint import PolicyEndpoint, Recorder, Sample  # noqa: E402
from mathgym.agents.endpoint.openai_messages import assistant_message, template_messages  # noqa: E402
from mathgym.agents.policy import LLMPolicy, SamplingParams  # noqa: E402
from mathgym.aio_server import ServerThread  # noqa: E402
from mathgym.algos.agent_runs import AgentTask, RunOutcome, play_agent, run_episodes  # noqa: E402
from mathgym.algos.batch import Episode, RolloutBatch  # noqa: E402
from mathgym.algos.sft import sft_loss  # noqa: E402
from tests.agent_programs import calculate  # noqa: E402
from tests.chat_fixtures import cached_chat_model  # noqa: E402

pytestmark = pytest.mark.heavy

#: The calculator with the shortest schema (tests/agent_programs.py's adds ~280 prompt tokens to teach on).
CALCULATOR = {"type": "function", "function": {"name": "calculator", "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}}}}
QUESTION = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 12 * 7?"}]
#: What the model is taught to write first: a call in the fixture template's own (Hermes) format.
CALL_TEXT = '<tool_call>{"name": "calculator", "arguments": {"expression": "12 * 7"}}</tool_call>'
#: And after the tool's result.
ANSWER = "\\boxed{84}"
SAMPLING = SamplingParams(temperature=0.0, max_new_tokens=64)


def demonstration(chat: ChatFormat) -> Episode:
    """The run to teach, as the endpoint's recorder builds it: the call sampled, the tool's result
    appended by the template, the answer sampled; the two completions are the episode's actions."""
    recorder = Recorder(chat)
    tools = [dict(CALCULATOR)]
    first = recorder.start_call("demo", template_messages(QUESTION), tools)
    message = assistant_message(CALL_TEXT, tools_on=True)
    call_ids = chat.encode(CALL_TEXT) + [chat.end_of_turn_id]
    recorder.finish_call(first, [Sample(call_ids, [0.0] * len(call_ids), "tool_calls", message)])
    result = {"role": "tool", "tool_call_id": message["tool_calls"][0]["id"], "content": calculate("12 * 7")}
    second = recorder.start_call("demo", template_messages([*QUESTION, message, result]), tools)
    assert second.parent == (0, 0), "the template does not continue the call as written"
    answer_ids = chat.encode(ANSWER) + [chat.end_of_turn_id]
    recorder.finish_call(second, [Sample(answer_ids, [0.0] * len(answer_ids), "stop", {"role": "assistant", "content": ANSWER})])
    (episode,) = run_episodes(recorder.pop("demo"), "", "", 0, RunOutcome(1.0, "correct", True))
    return episode


@pytest.fixture(scope="module")
def policy(tmp_path_factory) -> LLMPolicy:
    """The ChatML fixture, taught the demonstration until each of its tokens has probability > 1/2 (so
    greedy decoding writes it)."""
    policy = LLMPolicy.from_pretrained(str(cached_chat_model(tmp_path_factory, "chatml")), device="cpu")
    batch = RolloutBatch.from_episodes([demonstration(policy.chat)], policy.pad_token_id)
    torch.manual_seed(0)
    optimizer = torch.optim.AdamW(policy.trainable_parameters(), lr=1e-2)
    policy.model.train()
    for _ in range(200):
        logprobs = policy.forward(batch.input_ids, batch.attention_mask, positions=batch.action_mask).logprobs
        if float(logprobs.detach()[batch.action_mask > 0].min()) > math.log(0.5):
            break
        optimizer.zero_grad()
        sft_loss(logprobs, batch.action_mask).backward()
        optimizer.step()
    else:
        pytest.fail("200 SFT steps did not teach the fixture its tool call")
    policy.model.eval()
    policy.mark_weights_updated()
    return policy


@pytest.fixture(scope="module")
def served(policy):
    endpoint = PolicyEndpoint(policy, SAMPLING, sampling_seed=0)
    with ServerThread(endpoint) as url:
        yield endpoint, url + "/v1"


def test_the_models_own_tool_call_comes_back_as_openai_tool_calls(policy, served):
    endpoint, url = served
    client = openai.OpenAI(base_url=url, api_key="run-probe")
    reply = client.chat.completions.create(model="policy", messages=QUESTION, tools=[CALCULATOR], logprobs=True)
    (choice,) = reply.choices
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    (tool_call,) = choice.message.tool_calls
    assert tool_call.type == "function" and tool_call.function.name == "calculator"
    assert json.loads(tool_call.function.arguments) == {"expression": "12 * 7"}
    # the call is read from the tokens the model sampled, which the recorder kept ...
    (call,) = endpoint.recorder.run("run-probe").calls
    (sample,) = call.samples
    assert call.prompt_ids == policy.chat.prompt_ids(QUESTION, tools=[CALCULATOR])  # the tools are in the prompt
    assert policy.chat.decode(sample.completion_ids, skip_special_tokens=False) == CALL_TEXT + "<|im_end|>"
    assert [t.logprob for t in choice.logprobs.content] == pytest.approx(sample.logprobs)
    again = policy.generate([call.prompt_ids], SAMPLING, seeds=[sample.seed])[0]
    assert again.token_ids == sample.completion_ids  # ... and are what the model samples from that prompt and seed
    # with tool_choice="none", the same text is left as text
    plain = client.chat.completions.create(model="policy", messages=QUESTION, tools=[CALCULATOR], tool_choice="none")
    assert plain.choices[0].finish_reason == "stop" and plain.choices[0].message.content == CALL_TEXT


def calculator_agent(task: AgentTask) -> str:
    """A multi-turn agent: offer the calculator, run each call the model makes, send the result back."""
    client = task.client()
    messages: list[dict[str, Any]] = list(task.messages)
    for _ in range(3):
        message = client.chat.completions.create(model=task.model, messages=messages, tools=task.tools).choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            return message.content or ""
        for call in message.tool_calls:
            expression = json.loads(call.function.arguments).get("expression", "")
            messages.append({"role": "tool", "tool_call_id": call.id, "content": calculate(expression)})
    return ""


def test_an_agent_run_continues_with_the_tools_result_as_one_sequence(policy, served):
    endpoint, url = served
    task = AgentTask(url, "run-agent", "run-agent", endpoint.model_name, list(QUESTION), [CALCULATOR], QUESTION[1]["content"], "t0")
    endpoint.recorder.open("run-agent")
    answer = play_agent(calculator_agent, task)  # runs the calculator on the model's call, sends the result back
    run = endpoint.recorder.pop("run-agent")
    assert answer == ANSWER and len(run.calls) == 2
    first, second = run.calls
    assert first.samples[0].finish_reason == "tool_calls" and second.samples[0].finish_reason == "stop"
    assert second.messages[-1]["role"] == "tool" and second.messages[-1]["content"] == "84"
    assert second.parent == (0, 0) and second.prompt_ids[: len(first.sequence(0))] == first.sequence(0)
    assert "<tool_response>\n84\n</tool_response>" in policy.chat.decode(second.prompt_ids, skip_special_tokens=False)
    (episode,) = run_episodes(run, "env", "t0", 0, RunOutcome(1.0, "correct", True))
    assert episode.token_ids == second.sequence(0)
    actions = [t for t, m in zip(episode.token_ids, episode.action_mask) if m]
    assert actions == first.samples[0].completion_ids + second.samples[0].completion_ids  # the tool's result masked
