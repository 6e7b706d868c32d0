"""An env's ``info["tools"]`` reach the chat template: ``ChatFormat.render(tools=...)`` writes them
where the template does, and the collector renders an episode's prompt (and the env's later turns)
with the tools its env listed at reset, on a fixture template that renders tools (ChatML's)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from mathgym.agents.chat_format import ChatFormat  # noqa: E402
from mathgym.agents.policy import LLMPolicy, SamplingParams  # noqa: E402
from mathgym.algos.rollout import RolloutCollector, RolloutSettings  # noqa: E402
from mathgym.core import Judgement, Task, TextEnv  # noqa: E402
from mathgym.envs.tools.tool_calls import PYTHON_TOOL  # noqa: E402
from mathgym.rewards.base import Status  # noqa: E402
from tests.chat_fixtures import build_tokenizer, cached_chat_model  # noqa: E402

TOOLS_ID = "mathgym-tests/ToolsListed-v0"


class ToolsListedEnv(TextEnv):
    """Two turns; lists the Python tool in ``info["tools"]`` at reset, as MCPTools-v0 lists its server's."""

    def __init__(self, render_mode: str | None = None):
        super().__init__(max_turns=2, max_length=256, system_prompt="", render_mode=render_mode)

    def _sample_task(self, options):
        return Task("listed-0", "What is 6 * 7?", "42")

    def reset(self, *, seed=None, options=None):
        obs, info = super().reset(seed=seed, options=options)
        return obs, {**info, "tools": [PYTHON_TOOL]}

    def _judge(self, action: str) -> Judgement:
        return Judgement(0.0, Status.WRONG, False, observation="try again")


def register_tools_env() -> str:
    import gymnasium as gym

    if TOOLS_ID not in gym.registry:
        gym.register(TOOLS_ID, entry_point=ToolsListedEnv)
    return TOOLS_ID


def test_render_writes_the_tools_where_the_template_does():
    chat = ChatFormat(build_tokenizer("chatml"))
    messages = [{"role": "user", "content": "What is 6 * 7?"}]
    plain, listed = chat.render(messages), chat.render(messages, tools=[PYTHON_TOOL])
    assert "<tools>" not in plain and '"name": "python"' in listed and "<tools>" in listed
    assert listed.endswith("<|im_start|>user\nWhat is 6 * 7?<|im_end|>\n<|im_start|>assistant\n")
    assert chat.prompt_ids(messages, tools=[PYTHON_TOOL]) == chat.encode(listed)
    # the env's later turns are the same text with or without the tools (they sit in the system turn)
    assert chat.env_turn_ids(messages, "ok", None, tools=[PYTHON_TOOL]) == chat.env_turn_ids(messages, "ok", None)


def test_the_collector_renders_an_envs_tools_into_its_prompts(tmp_path_factory):
    path = cached_chat_model(tmp_path_factory, "chatml")
    policy = LLMPolicy.from_pretrained(str(path), device="cpu")
    settings = RolloutSettings(group_size=2, sampling=SamplingParams(max_new_tokens=6), max_episode_tokens=512)
    collector = RolloutCollector(register_tools_env(), {}, policy, 1, settings)
    try:
        episodes = collector.collect_episodes([0], torch.Generator().manual_seed(0))
    finally:
        collector.close()
    prompt = policy.chat.prompt_ids([{"role": "user", "content": "What is 6 * 7?"}], tools=[PYTHON_TOOL])
    for ep in episodes:
        assert ep.token_ids[: len(prompt)] == prompt
        assert len(ep.completions) == 2  # the env's reply was appended and the episode played on
        assert '"name": "python"' in policy.chat.decode(ep.token_ids, skip_special_tokens=False)
