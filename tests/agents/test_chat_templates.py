"""Chat templates end to end: end-of-turn tokens, env reply tokens, token faithfulness per
template, the sampler/learner log-prob difference, and tool calls in the model's format."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import gymnasium as gym  # noqa: E402

from mathgym.agents.chat import end_of_turn_id, turn_suffix  # noqa: E402
from mathgym.agents.policy import LLMPolicy, SamplingParams  # noqa: E402
from mathgym.algos.batch import RolloutBatch  # noqa: E402
from mathgym.algos.preferences import PreferencePair, pair_episodes  # noqa: E402
from mathgym.algos.rollout import RolloutCollector, RolloutSettings  # noqa: E402
from mathgym.algos.sft import encode_demonstration  # noqa: E402
from mathgym.envs.tools.tool_calls import PYTHON_TOOL, find_tool_calls  # noqa: E402
from mathgym.errors import ConfigError  # noqa: E402
from tests.chat_fixtures import DEFAULT_SYSTEM, END_OF_TURN, QWEN3_TEMPLATE, STYLES, assert_episode_text, cached_chat_model  # noqa: E402

ARCH = {"chatml": "qwen2", "chatml-base": "qwen2", "llama3": "llama", "qwen3": "qwen2", "gemma": "llama", "mistral": "llama", "harmony": "llama", "llama2": "llama"}


@pytest.fixture(scope="module")
def policies(tmp_path_factory):
    cache: dict[str, LLMPolicy] = {}

    def get(style: str) -> LLMPolicy:
        if style not in cache:
            path = cached_chat_model(tmp_path_factory, style, ARCH[style])
            cache[style] = LLMPolicy.from_pretrained(str(path), device="cpu", dtype="float32")
        return cache[style]

    return get


class RecordingPolicy(LLMPolicy):
    """The real policy, keeping every prompt it was given and every generation it returned."""

    calls: list

    def generate(self, prompts, params, generator=None):
        out = super().generate(prompts, params, generator)
        self.calls.append(([list(p) for p in prompts], out))
        return out


def recording(policy: LLMPolicy) -> RecordingPolicy:
    rec = RecordingPolicy(model=policy.model, tokenizer=policy.tokenizer, device=policy.device, name_or_path=policy.name_or_path)
    rec.set_backend("native")
    rec.calls = []
    return rec


@pytest.mark.parametrize("style", STYLES)
def test_end_of_turn_comes_from_the_template(policies, style):
    policy = policies(style)
    tok = policy.tokenizer
    assert tok.convert_ids_to_tokens(end_of_turn_id(tok)) == END_OF_TURN[style]
    assert policy.chat.end_of_turn_id == tok.convert_tokens_to_ids(END_OF_TURN[style])
    assert {policy.chat.eos_token_id, policy.chat.end_of_turn_id} <= set(policy.chat.stop_token_ids)


@pytest.mark.parametrize("backend", ["native", "hf"])
def test_generation_stops_at_end_of_turn_that_is_not_eos(policies, backend):
    """chatml-base: EOS is <|endoftext|>, the turn ends with <|im_end|>; a model that says
    <|im_end|> first stops there. The output row is steered to it through the (untied) LM head."""
    base = policies("chatml-base")
    model = __import__("copy").deepcopy(base.model)
    policy = LLMPolicy(model=model, tokenizer=base.tokenizer, device=base.device, name_or_path=base.name_or_path)
    policy.set_backend(backend)
    eot, eos = policy.chat.end_of_turn_id, policy.chat.eos_token_id
    assert eot != eos
    prompt = policy.chat.prompt_ids([{"role": "user", "content": "What is 2 + 3?"}])
    with torch.no_grad():
        hidden = model(input_ids=torch.tensor([prompt]), output_hidden_states=True).hidden_states[-1][0, -1]
        head = torch.nn.Parameter(model.lm_head.weight.detach().clone())
        head[eot] = hidden * (50.0 / hidden.norm() ** 2) + head[eot] * 0
        model.lm_head.weight = head
    out = policy.generate([prompt], SamplingParams(temperature=0.0, max_new_tokens=6))[0]
    assert out.token_ids == [eot] and out.finish_reason == "stop"
    assert policy.chat.action_text(out.token_ids) == ""


@pytest.mark.parametrize("ended_with", ["end_of_turn", "length"])
def test_reply_tokens_add_no_extra_eos_before_the_end_of_turn(policies, ended_with):
    """The reported bug: `5<eos><|end|>` where the template renders `5<|end|>`."""
    policy = policies("chatml-base")
    chat = [{"role": "system", "content": "S"}, {"role": "user", "content": "Guess."}]
    action = policy.chat.encode("5") + ([policy.chat.end_of_turn_id] if ended_with == "end_of_turn" else [])
    reply = policy.chat.env_turn_ids(chat, "higher", action[-1])
    tokens = policy.chat.prompt_ids(chat) + action + reply
    rendered = policy.chat.render(chat + [{"role": "assistant", "content": "5"}, {"role": "user", "content": "higher"}])
    assert policy.tokenizer.decode(tokens, skip_special_tokens=False) == rendered
    assert policy.chat.eos_token_id not in tokens


def test_reply_tokens_never_inject_a_second_system_prompt(policies):
    """A ChatML template that adds a default system prompt to a chat without one must not add it mid-episode."""
    policy = policies("chatml")
    chat = [{"role": "user", "content": "Guess my number."}]
    suffix = turn_suffix(policy.chat.render, chat, "higher")
    assert suffix == "<|im_end|>\n<|im_start|>user\nhigher<|im_end|>\n<|im_start|>assistant\n"
    assert policy.chat.render(chat).count(DEFAULT_SYSTEM) == 1 and "system" not in suffix


def test_qwen3_style_keeps_the_sampled_reasoning_in_the_token_sequence(policies):
    """Qwen3 drops earlier turns' reasoning when re-rendering: the token sequence stays the
    single source of truth, so it keeps the reasoning the model saw; the template's rendering
    of the finished chat differs from it by exactly those reasoning blocks."""
    policy = policies("qwen3")
    chat = [{"role": "user", "content": "Guess my number."}]
    action_text = "<think>try 5</think>\n5"
    action = policy.chat.encode(action_text) + [policy.chat.end_of_turn_id]
    reply = policy.chat.env_turn_ids(chat, "higher", action[-1])
    tokens = policy.chat.prompt_ids(chat) + action + reply
    decoded = policy.tokenizer.decode(tokens, skip_special_tokens=False)
    final = chat + [{"role": "assistant", "content": action_text}, {"role": "user", "content": "higher"}]
    rendered = policy.chat.render(final)
    assert decoded == policy.chat.render(chat) + action_text + "<|im_end|>\n<|im_start|>user\nhigher<|im_end|>\n<|im_start|>assistant\n"
    assert rendered == decoded.replace("<think>try 5</think>\n", "")  # what re-rendering would have trained on
    assert decoded.count("<|im_start|>") == 4  # no second system prompt, no re-rendered turn


def test_a_template_that_rewrites_history_is_refused_with_its_name():
    def rewriting(messages, add_generation_prompt):  # numbers each turn by the total count: nothing is a prefix
        return "".join(f"[{len(messages)}:{m['role']}]{m['content']}" for m in messages) + ("[a]" if add_generation_prompt else "")

    with pytest.raises(ConfigError, match="my-template rewrites earlier turns"):
        turn_suffix(rewriting, [{"role": "user", "content": "q"}], "r", "my-template")


ENVS = {"single": ("MathReason-v0", {"system_prompt": ""}), "multi": ("GuessNumber-v0", {})}


@pytest.mark.parametrize("style", [*STYLES, "harmony"])
@pytest.mark.parametrize("turns", ["single", "multi"])
def test_rollouts_are_token_faithful(policies, style, turns):
    """The ids the learner trains on are the sampler's ids, turn after turn; env tokens are the
    template's; every episode decodes to the template's rendering of the env's messages; the
    learner's log-probs match the sampler's."""
    policy = recording(policies(style))
    env_id, kwargs = ENVS[turns]
    settings = RolloutSettings(group_size=2, sampling=SamplingParams(max_new_tokens=6), max_turns=3)
    collector = RolloutCollector(env_id, kwargs, policy, num_tasks=2, settings=settings)
    try:
        episodes = collector.collect_episodes([3, 4], torch.Generator().manual_seed(0))
    finally:
        collector.close()
    if turns == "multi":
        assert any(len(e.step_rewards) > 1 for e in episodes)
    turns_of: list[list] = [[] for _ in episodes]  # (prompt, generation) of each turn of each episode
    for turn, (prompts, gens) in enumerate(policy.calls):
        active = [i for i, e in enumerate(episodes) if len(e.step_rewards) > turn]
        assert len(active) == len(prompts)
        for j, i in enumerate(active):
            turns_of[i].append((prompts[j], gens[j]))
    for ep, seen in zip(episodes, turns_of):
        position = 0
        for step, (prompt, gen) in enumerate(seen):
            assert prompt == ep.token_ids[: len(prompt)]  # the prompt of each turn is the episode so far
            start = len(prompt)
            actions = [t for t, m, s in zip(ep.token_ids, ep.action_mask, ep.step_index) if m and s == step]
            assert actions == gen.token_ids and ep.token_ids[start : start + len(actions)] == gen.token_ids
            assert ep.logprobs[start : start + len(actions)] == pytest.approx(gen.logprobs)
            position = start + len(actions)
        assert position == len(ep.token_ids)
        if style == "harmony":
            assert_harmony_episode_text(policy, ep, [gen for _, gen in seen])
        else:
            assert_episode_text(policy.tokenizer, ep.token_ids, ep.messages, policy.chat.stop_token_ids)
    batch = RolloutBatch.from_episodes(episodes, policy.pad_token_id)
    with torch.no_grad():
        logprobs, _ = policy.token_logprobs(batch.input_ids, batch.attention_mask)
    mask = batch.action_mask.bool()
    assert float((logprobs - batch.sampler_logprobs).abs()[mask].max()) <= 1e-3


def test_math_tool_runs_the_tool_call_the_chatml_template_renders(policies):
    policy = policies("chatml")
    call = {"type": "function", "function": {"name": "python", "arguments": {"code": "print(6 * 7)"}}}
    chat = [{"role": "user", "content": "What is 6 * 7?"}]
    rendered = policy.tokenizer.apply_chat_template(
        chat + [{"role": "assistant", "content": "Let me run it.", "tool_calls": [call]}], tools=[PYTHON_TOOL], tokenize=False
    )
    assert '"name": "python"' in rendered.split("<|im_end|>")[0]  # the tool schema is in the system prompt
    action = rendered[len(policy.tokenizer.apply_chat_template(chat, tools=[PYTHON_TOOL], tokenize=False, add_generation_prompt=True)) :]
    action = action[: action.index("<|im_end|>")]
    assert [c.arguments for c in find_tool_calls(action)] == [{"code": "print(6 * 7)"}]
    env = gym.make("MathTool-v0")
    try:
        env.reset(seed=0)
        obs, reward, terminated, _, info = env.step(action)
        assert "42" in obs and not terminated and info["tool_calls"] == 1
        bad_calls = {"<tool_call>{not json</tool_call>": "not valid JSON", '<tool_call>{"name": "sh", "arguments": {}}</tool_call>': "unknown tool"}
        for bad, why in bad_calls.items():
            obs, _, terminated, _, info = env.step(bad)
            assert why in obs and info["status"] == "format_error" and not terminated
    finally:
        env.close()


#: How other chat templates render an assistant's tool call (the shapes of Mistral's v3 and v11,
#: Llama 3.1's and Qwen3-Coder's templates, written here): each ends with the template's end marker.
TOOL_CALL_TEMPLATES = {
    "mistral-v3": "{% for m in messages %}{% if m['role'] == 'assistant' %}[TOOL_CALLS] [{% for c in m['tool_calls'] %}"
                  "{\"name\": \"{{ c['function']['name'] }}\", \"arguments\": {{ c['function']['arguments'] | tojson }}}"
                  "{% endfor %}]</s>{% else %}[INST] {{ m['content'] }} [/INST]{% endif %}{% endfor %}",
    "mistral-v11": "{% for m in messages %}{% if m['role'] == 'assistant' %}{% for c in m['tool_calls'] %}[TOOL_CALLS]"
                   "{{ c['function']['name'] }}[ARGS]{{ c['function']['arguments'] | tojson }}{% endfor %}</s>"
                   "{% else %}[INST]{{ m['content'] }}[/INST]{% endif %}{% endfor %}",
    "llama-3.1": "{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n{% if m['role'] == 'assistant' %}"
                 "{% set c = m['tool_calls'][0]['function'] %}{\"name\": \"{{ c['name'] }}\", \"parameters\": {{ c['arguments'] | tojson }}}"
                 "{% else %}{{ m['content'] }}{% endif %}<|eot_id|>{% endfor %}",
    "qwen3-coder": "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{% if m['role'] == 'assistant' %}{% for c in m['tool_calls'] %}"
                   "<tool_call>\n<function={{ c['function']['name'] }}>\n{% for k, v in c['function']['arguments'].items() %}"
                   "<parameter={{ k }}>\n{{ v }}\n</parameter>\n{% endfor %}</function>\n</tool_call>{% endfor %}"
                   "{% else %}{{ m['content'] }}{% endif %}<|im_end|>\n{% endfor %}",
    "gpt-oss": "{% for m in messages %}{% if m['role'] == 'assistant' %}{% for c in m['tool_calls'] %}<|start|>assistant"
               "<|channel|>commentary to=functions.{{ c['function']['name'] }} <|constrain|>json<|message|>"
               "{{ c['function']['arguments'] | tojson }}<|call|>{% endfor %}"
               "{% else %}<|start|>{{ m['role'] }}<|message|>{{ m['content'] }}<|end|>{% endif %}{% endfor %}",
}


@pytest.mark.parametrize("style", sorted(TOOL_CALL_TEMPLATES))
def test_tool_calls_in_other_models_formats_run(policies, style):
    """The tool envs read a call in the format each model family's template renders it: Mistral's
    [TOOL_CALLS] (both versions), Llama 3.1's JSON with parameters, Qwen3-Coder's XML, gpt-oss's
    commentary message to ``functions.python``."""
    tokenizer = policies("chatml").tokenizer
    call = {"type": "function", "function": {"name": "python", "arguments": {"code": "print(6 * 7)"}}}
    user = [{"role": "user", "content": "What is 6 * 7?"}]
    rendered = tokenizer.apply_chat_template(user + [{"role": "assistant", "tool_calls": [call]}], tokenize=False,
                                             chat_template=TOOL_CALL_TEMPLATES[style])
    action = rendered[len(tokenizer.apply_chat_template(user, tokenize=False, chat_template=TOOL_CALL_TEMPLATES[style])):]
    for end in ("</s>", "<|eot_id|>", "<|im_end|>", "<|call|>"):
        action = action.split(end)[0]
    action = action.split("<|end_header_id|>\n\n")[-1].split("<|im_start|>assistant\n")[-1]
    assert [(c.name, c.arguments, c.error) for c in find_tool_calls(action)] == [("python", {"code": "print(6 * 7)"}, "")], action
    env = gym.make("MathTool-v0")
    try:
        env.reset(seed=0)
        obs, _, terminated, _, info = env.step(action)
        assert "42" in obs and not terminated and info["tool_calls"] == 1
    finally:
        env.close()


def test_a_json_answer_is_not_taken_for_a_llama_call():
    """An untagged JSON object counts as a call only when it is the whole message and names its
    arguments; a malformed call after a tag is a format error that says so."""
    assert find_tool_calls('The answer is {"name": "python", "parameters": {}} here.') == []
    assert find_tool_calls('{"name": "Ada", "age": 36}') == []
    (bad,) = find_tool_calls('<|python_tag|>{"name": "python", "parameters": ')
    assert bad.error == "the tool call is not valid JSON"
    (bad,) = find_tool_calls("[TOOL_CALLS]python[ARGS]{not json")
    assert bad.error == "the tool call is not valid JSON"


def test_gpt_oss_calls_are_read_from_the_message_header():
    """A gpt-oss message is a call when its header names a recipient (``to=``, in the channel or
    the role part); JSON arguments, or a built-in tool's ``code`` message as the code; prose with
    ``to=`` is no call, and arguments that are not JSON say so."""
    calls = find_tool_calls(
        "<|channel|>analysis<|message|>set to=5 first<|end|><|start|>assistant to=functions.python<|channel|>commentary json"
        '<|message|>{"code": "print(1)"}<|call|>'
    )
    assert [(c.name, c.arguments, c.error) for c in calls] == [("python", {"code": "print(1)"}, "")]
    (builtin,) = find_tool_calls("<|channel|>analysis to=python code<|message|>x = 6\nprint(x * 7)")
    assert (builtin.name, builtin.arguments) == ("python", {"code": "x = 6\nprint(x * 7)"})
    assert find_tool_calls("Set x to=5, then a to=<|message|>b") == []
    (bad,) = find_tool_calls("<|channel|>commentary to=functions.python <|constrain|>json<|message|>{print(1)")
    assert "not valid JSON" in bad.error and bad.name == ""
    env = gym.make("MathTool-v0")
    try:
        env.reset(seed=0)
        obs, _, _, _, info = env.step("<|channel|>analysis to=python code<|message|>print(6 * 7)")
        assert "42" in obs and info["tool_calls"] == 1
    finally:
        env.close()


def test_a_broken_chat_template_is_one_clear_error(tmp_path):
    from mathgym.agents.policy import LLMPolicy
    from mathgym.errors import ConfigError
    from tests.trainkit import build_small_model

    policy = LLMPolicy.from_pretrained(str(build_small_model(tmp_path / "model")), device="cpu")
    policy.tokenizer.chat_template = "{% for m in messages %}{{ m['role'] }"  # unclosed: a syntax error
    with pytest.raises(ConfigError, match="cannot render the env's messages"):
        policy.chat.prompt_ids([{"role": "user", "content": "What is 2 + 3?"}])


def test_a_template_without_a_system_role_gets_the_system_text_in_the_first_user_turn(policies):
    """Mistral-style templates raise on a system message: the system text heads the first user
    turn, the same in every rendering (so the multi-turn suffix still appends); any other error
    of the template is still the user's to fix."""
    policy = policies("mistral")
    chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}]
    assert policy.chat.render(chat) == "<s>[INST] Be brief.\n\n2+2? [/INST]"
    assert turn_suffix(policy.chat.render, chat, "higher") == "</s>[INST] higher [/INST]"
    with pytest.raises(ConfigError, match="cannot render the env's messages"):
        policy.chat.render([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
    with pytest.raises(ConfigError, match="cannot render the env's messages"):
        policy.chat.render([{"role": "system", "content": "alone"}])


def test_a_generation_prompt_that_opens_the_answer_is_kept_where_the_model_saw_it(tmp_path_factory):
    """DeepSeek-R1-style templates end the generation prompt with ``<think>\\n``, which a finished
    turn does not show: the episode keeps it before each action, and what the template writes
    after a turn is appended; multi-turn rollouts and SFT demonstrations are built the same way."""
    policy = LLMPolicy.from_pretrained(str(cached_chat_model(tmp_path_factory, "think-prompt", "llama")), device="cpu")
    policy.set_backend("native")
    chat = [{"role": "system", "content": "S"}, {"role": "user", "content": "Guess."}]
    assert turn_suffix(policy.chat.render, chat, "higher") == "<|end|><|User|>higher<|Assistant|><think>\n"
    demo = chat + [{"role": "assistant", "content": "r</think>5"}, {"role": "user", "content": "higher"},
                   {"role": "assistant", "content": "7"}]
    ep = encode_demonstration(policy.chat, demo)
    text = policy.tokenizer.decode(ep.token_ids, skip_special_tokens=False)
    assert text == "S<|User|>Guess.<|Assistant|><think>\nr</think>5<|end|><|User|>higher<|Assistant|><think>\n7<|end|>"
    settings = RolloutSettings(group_size=2, sampling=SamplingParams(max_new_tokens=4), max_turns=3)
    collector = RolloutCollector("GuessNumber-v0", {}, policy, num_tasks=1, settings=settings)
    try:
        episodes = collector.collect_episodes([3], torch.Generator().manual_seed(0))
    finally:
        collector.close()
    for ep in episodes:
        text = policy.tokenizer.decode(ep.token_ids, skip_special_tokens=False)
        assert text.count("<|Assistant|><think>\n") == len(ep.step_rewards) == len(ep.completions)
        answered = [m["content"] for m, then in zip(ep.messages[2:], ep.messages[3:]) if m["role"] == "user" and then["role"] == "assistant"]
        for reply in answered:  # the env's replies the model answered (one after the last action is not in the tokens)
            assert f"<|end|><|User|>{reply}<|Assistant|><think>\n" in text
    assert any(len(ep.step_rewards) > 1 for ep in episodes)


def assert_harmony_episode_text(policy, ep, gens):
    """A gpt-oss-style episode: the first prompt as rendered, then each action as sampled, each
    env reply as the template writes it after an earlier turn (``<|end|>`` closing the action
    unless the model closed it with ``<|return|>``), and the message the env got: the action's text."""
    tok = policy.tokenizer
    first = next(i for i, m in enumerate(ep.messages) if m["role"] == "assistant")
    expected = policy.chat.render(ep.messages[:first])
    replies = [m["content"] for m in ep.messages[first:] if m["role"] == "user"]
    for step, gen in enumerate(gens):
        expected += tok.decode(gen.token_ids, skip_special_tokens=False)
        assert ep.completions[step] == policy.chat.action_text(gen.token_ids)
        if step + 1 < len(gens):
            closed = gen.token_ids[-1:] == [policy.chat.end_of_turn_id]
            expected += ("" if closed else "<|end|>") + f"<|start|>user<|message|>{replies[step]}<|end|><|start|>assistant"
    assert tok.decode(ep.token_ids, skip_special_tokens=False) == expected


def test_a_gpt_oss_style_template_closes_turns_and_answers_as_its_history_does(policies):
    """gpt-oss's template ends the generation prompt at ``<|start|>assistant`` (the model writes
    the channel header), closes a chat's last turn with ``<|return|>`` (its stop token) but earlier
    ones with ``<|end|>`` (no stop token: it also closes the analysis channel). Multi-turn episodes
    append the env's reply after the sampled ``<|return|>`` without a second close; the env gets
    the final channel's text; demonstrations and preference pairs train the header and ``<|return|>``."""
    policy = policies("harmony")
    tok = policy.tokenizer
    assert tok.convert_ids_to_tokens([policy.chat.end_of_turn_id, policy.chat.message_close_id]) == ["<|return|>", "<|end|>"]
    assert policy.chat.answer_opening == "<|channel|>final<|message|>"
    assert policy.chat.end_of_turn_id in policy.chat.stop_token_ids and policy.chat.message_close_id not in policy.chat.stop_token_ids
    chat = [{"role": "user", "content": "Guess."}]
    assert turn_suffix(policy.chat.render, chat, "higher") == "<|end|><|start|>user<|message|>higher<|end|><|start|>assistant"
    sampled = policy.chat.encode("<|channel|>analysis<|message|>say 3<|end|><|start|>assistant<|channel|>final<|message|>5<|return|>")
    assert policy.chat.action_text(sampled) == "5"
    reply = policy.chat.env_turn_ids(chat, "higher", sampled[-1])
    assert tok.decode(reply, skip_special_tokens=False) == "<|start|>user<|message|>higher<|end|><|start|>assistant"
    cut = policy.chat.env_turn_ids(chat, "higher", sampled[-2])  # cut by the length cap: the template closes it
    assert tok.decode(cut, skip_special_tokens=False) == "<|end|><|start|>user<|message|>higher<|end|><|start|>assistant"
    demo = chat + [{"role": "assistant", "content": "5"}, {"role": "user", "content": "higher"}, {"role": "assistant", "content": "7"}]
    ep = encode_demonstration(policy.chat, demo)
    head = "<|start|>system<|message|>Reasoning: low<|end|><|start|>user<|message|>Guess.<|end|><|start|>assistant"
    assert tok.decode(ep.token_ids, skip_special_tokens=False) == (
        head + "<|channel|>final<|message|>5<|return|><|start|>user<|message|>higher<|end|><|start|>assistant<|channel|>final<|message|>7<|return|>"
    )
    learned = [t for t, m in zip(ep.token_ids, ep.action_mask) if m]
    assert tok.decode(learned, skip_special_tokens=False) == "<|channel|>final<|message|>5<|return|><|channel|>final<|message|>7<|return|>"
    chosen, rejected = pair_episodes(policy.chat, PreferencePair(prompt=tuple(chat), chosen="5", rejected="9"), 0)
    assert tok.decode(chosen.token_ids, skip_special_tokens=False) == head + "<|channel|>final<|message|>5<|return|>"
    assert tok.decode([t for t, m in zip(rejected.token_ids, rejected.action_mask) if m], skip_special_tokens=False) == (
        "<|channel|>final<|message|>9<|return|>"
    )


#: Qwen3's way with a chat's last assistant turn: a think block (empty when the content has none)
#: before the content, the reasoning of earlier turns dropped.
THINK_BLOCK_TEMPLATE = (
    "{% for m in messages %}{% set content = m['content'] %}"
    "{% if m['role'] == 'assistant' %}{% set reasoning = '' %}"
    "{% if '</think>' in content %}{% set reasoning = content.split('</think>')[0].split('<think>')[-1].strip('\\n') %}"
    "{% set content = content.split('</think>')[-1].lstrip('\\n') %}{% endif %}"
    "{% if loop.last %}{% set content = '<think>\\n' + reasoning + '\\n</think>\\n\\n' + content %}{% endif %}{% endif %}"
    "{{ '<|im_start|>' + m['role'] + '\\n' + content + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


@pytest.mark.parametrize("content, written", [("5", "<think>\n\n</think>\n\n5"), ("<think>try 5</think>5", "<think>\ntry 5\n</think>\n\n5")])
def test_demonstrations_are_written_as_the_template_writes_a_last_turn(tmp_path_factory, content, written):
    """A template that writes a think block at the head of the chat's last answer (Qwen3's) trains
    it, as the model writes it after the generation prompt; its own rewriting of the content applies."""
    policy = LLMPolicy.from_pretrained(str(cached_chat_model(tmp_path_factory, "qwen3", "qwen2")), device="cpu", dtype="float32")
    policy.tokenizer.chat_template = THINK_BLOCK_TEMPLATE
    chat = [{"role": "user", "content": "Guess."}]
    ep = encode_demonstration(policy.chat, [*chat, {"role": "assistant", "content": content}])
    learned = [t for t, m in zip(ep.token_ids, ep.action_mask) if m]
    assert policy.tokenizer.decode(learned, skip_special_tokens=False) == written + "<|im_end|>"
    assert policy.tokenizer.decode(ep.token_ids, skip_special_tokens=False) == "<|im_start|>user\nGuess.<|im_end|>\n<|im_start|>assistant\n" + written + "<|im_end|>"
    assert policy.chat.answer_opening == "<think>\n\n</think>\n\n" and policy.chat.message_close_id is None
    assert policy.chat.action_text(policy.chat.encode("<think>\n\n</think>\n\n5") + [policy.chat.end_of_turn_id]) == "5"


#: Qwen3's way with ``reasoning_content``: written in the think block of a chat's last answer.
REASONING_FIELD_TEMPLATE = (
    "{% for m in messages %}{% set content = m['content'] %}"
    "{% if m['role'] == 'assistant' and loop.last %}{% set content = '<think>\\n' + (m.get('reasoning_content') or '') + '\\n</think>\\n\\n' + content %}{% endif %}"
    "{{ '<|im_start|>' + m['role'] + '\\n' + content + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


@pytest.mark.parametrize("template, learned", [
    (REASONING_FIELD_TEMPLATE, "<think>\none and one\n</think>\n\n2<|im_end|>"),  # the template reads reasoning_content
    (THINK_BLOCK_TEMPLATE, "<think>\none and one\n</think>\n\n2<|im_end|>"),  # it reads none: a think block in the content
    ("harmony", "<|channel|>analysis<|message|>one and one<|end|><|start|>assistant<|channel|>final<|message|>2<|return|>"),  # thinking
])
def test_a_demonstrated_turns_reasoning_is_trained_as_the_template_writes_it(tmp_path_factory, policies, template, learned):
    """Reasoning kept apart from the content (``reasoning_content``, ``thinking``) is trained where
    the template writes it, under the name it reads; a template that reads none gets it as a think block."""
    if template == "harmony":
        policy = policies("harmony")
    else:
        policy = LLMPolicy.from_pretrained(str(cached_chat_model(tmp_path_factory, "qwen3", "qwen2")), device="cpu", dtype="float32")
        policy.tokenizer.chat_template = template
    chat = [{"role": "user", "content": "1 + 1?"}, {"role": "assistant", "content": "2", "reasoning_content": "one and one"}]
    ep = encode_demonstration(policy.chat, chat)
    assert policy.tokenizer.decode([t for t, m in zip(ep.token_ids, ep.action_mask) if m], skip_special_tokens=False) == learned


def test_a_demonstrated_tool_call_is_trained_as_the_template_renders_it(policies):
    """A turn that calls a tool is trained with its call (ChatML's ``<tool_call>``), the tool's
    result as the template writes it between the turns; a template that cannot write calls is an error."""
    call = {"type": "function", "function": {"name": "python", "arguments": {"code": "print(1 + 1)"}}}
    chat = [{"role": "user", "content": "1 + 1?"}, {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "content": "2"}, {"role": "assistant", "content": "2"}]
    policy = policies("chatml")
    ep = encode_demonstration(policy.chat, chat)
    tok = policy.tokenizer
    assert tok.decode([t for t, m in zip(ep.token_ids, ep.action_mask) if m], skip_special_tokens=False) == (
        '<tool_call>{"name": "python", "arguments": {"code": "print(1 + 1)"}}</tool_call><|im_end|>2<|im_end|>'
    )
    assert tok.decode(ep.token_ids, skip_special_tokens=False).endswith(
        "</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n2\n</tool_response><|im_end|>\n<|im_start|>assistant\n2<|im_end|>"
    )
    from mathgym.errors import DatasetError

    with pytest.raises(DatasetError, match="makes tool calls, which the chat template of .* does not write"):
        encode_demonstration(policies("llama3").chat, chat)


def test_a_llama2_style_template_s_spaces_neither_double_the_close_nor_cut_the_answer(policies):
    """Llama 2's template writes ``[/INST] answer </s>``: the model writes the space before its
    answer and ends with ``</s>``; the space the template puts before ``</s>`` is not appended
    after a sampled ``</s>`` (no ``</s> </s>``), and the answer is never cut at a space."""
    policy = policies("llama2")
    tok = policy.tokenizer
    chat = [{"role": "system", "content": "S"}, {"role": "user", "content": "Guess."}]
    assert turn_suffix(policy.chat.render, chat, "higher") == " </s><s>[INST] higher [/INST]"
    assert policy.chat.answer_opening == ""
    action = policy.chat.encode(" I say 5") + [policy.chat.end_of_turn_id]
    assert policy.chat.action_text(action) == " I say 5"
    tokens = policy.chat.prompt_ids(chat) + action + policy.chat.env_turn_ids(chat, "higher", action[-1])
    head = "<s>[INST] <<SYS>>\nS\n<</SYS>>\n\nGuess. [/INST]"
    assert tok.decode(tokens, skip_special_tokens=False) == head + " I say 5</s><s>[INST] higher [/INST]"
    cut = policy.chat.encode(" I say")  # cut by the length cap: the template's close follows, space and all
    assert tok.decode(policy.chat.env_turn_ids(chat, "higher", cut[-1]), skip_special_tokens=False) == " </s><s>[INST] higher [/INST]"
    demo = chat + [{"role": "assistant", "content": "5"}, {"role": "user", "content": "higher"}, {"role": "assistant", "content": "7"}]
    ep = encode_demonstration(policy.chat, demo)
    assert tok.decode(ep.token_ids, skip_special_tokens=False) == head + " 5</s><s>[INST] higher [/INST] 7</s>"


#: Qwen3's switch: ``enable_thinking=False`` opens the answer with an empty think block in the generation prompt.
THINKING_SWITCH_TEMPLATE = (
    "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{% if enable_thinking is defined and not enable_thinking %}{{ '<think>\\n\\n</think>\\n\\n' }}{% endif %}{% endif %}"
)


def test_chat_template_kwargs_reach_every_rendering_and_stay_with_the_trained_model(tmp_path_factory, tmp_path):
    """``chat_template_kwargs`` (Qwen3's ``enable_thinking``) go to the template in prompts, probes
    and demonstrations; a trainer saves them in the model's mathgym.json, so a later load
    prompts the model the same way; an argument mathgym sets itself is refused."""
    from mathgym.agents.policy import template_options
    from mathgym.agents.settings import read_model_settings
    from mathgym.algos.configs import GRPOConfig
    from mathgym.algos.grpo import GRPOTrainer

    source = LLMPolicy.from_pretrained(str(cached_chat_model(tmp_path_factory, "qwen3", "qwen2")), device="cpu", dtype="float32")
    source.tokenizer.chat_template = THINKING_SWITCH_TEMPLATE
    source.save_pretrained(tmp_path / "model")
    chat = [{"role": "user", "content": "Guess."}]
    plain = LLMPolicy.from_pretrained(str(tmp_path / "model"), device="cpu")
    assert plain.chat.render(chat).endswith("<|im_start|>assistant\n")
    config = GRPOConfig(model=str(tmp_path / "model"), chat_template_kwargs={"enable_thinking": False}, eval_tasks=0, progress=False,
                        device="cpu")
    trainer = GRPOTrainer(config, tmp_path / "run")
    policy = trainer.policy
    assert policy.chat.render(chat).endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    ep = encode_demonstration(policy.chat, [*chat, {"role": "assistant", "content": "5"}])
    assert policy.tokenizer.decode([t for t, m in zip(ep.token_ids, ep.action_mask) if m], skip_special_tokens=False) == "5<|im_end|>"
    trainer.save_model(tmp_path / "trained")
    assert read_model_settings(tmp_path / "trained")["chat_template_kwargs"] == {"enable_thinking": False}
    reloaded = LLMPolicy.from_pretrained(str(tmp_path / "trained"), device="cpu")
    assert reloaded.chat.template_kwargs == {"enable_thinking": False}
    assert reloaded.chat.render(chat) == policy.chat.render(chat)
    with pytest.raises(ConfigError, match="'add_generation_prompt' is set by mathgym itself"):
        template_options({"add_generation_prompt": False})


def test_a_template_that_will_not_end_with_an_answer_still_gives_demonstrations(tmp_path_factory):
    """A template that raises on a chat whose last message is an answer (it renders only prompts
    and whole exchanges) cannot show a last turn's head: the demonstration trains the content, as before."""
    policy = LLMPolicy.from_pretrained(str(cached_chat_model(tmp_path_factory, "qwen3", "qwen2")), device="cpu", dtype="float32")
    policy.tokenizer.chat_template = (
        "{% if messages[-1]['role'] == 'assistant' and not add_generation_prompt and messages|length == 2 %}"
        "{{ raise_exception('a chat must not end with the answer') }}{% endif %}" + QWEN3_TEMPLATE
    )
    chat = [{"role": "user", "content": "Guess."}, {"role": "assistant", "content": "5"}]
    ep = encode_demonstration(policy.chat, chat)
    assert policy.tokenizer.decode([t for t, m in zip(ep.token_ids, ep.action_mask) if m], skip_special_tokens=False) == "5<|im_end|>"
