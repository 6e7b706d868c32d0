"""SFT: the loss by hand, demonstrations (JSONL plain/chat, env expert), token masks, the trainer."""

from __future__ import annotations

import json
import math

import pytest

torch = pytest.importorskip("torch")

from mathgym.agents.policy import LLMPolicy  # noqa: E402
from mathgym.algos.sft import (  # noqa: E402
    SFTConfig,
    SFTTrainer,
    demonstrations_batch,
    encode_demonstration,
    env_demonstrations,
    load_demonstrations,
    sft_loss,
)
from mathgym.errors import DatasetError  # noqa: E402
from tests.trainkit import build_small_model, register_guess_env  # noqa: E402


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    return build_small_model(tmp_path_factory.mktemp("model"))


@pytest.fixture(scope="module")
def policy(model_path):
    return LLMPolicy.from_pretrained(str(model_path), device="cpu")


def test_sft_loss_is_mean_nll_of_masked_tokens():
    logprobs = torch.log(torch.tensor([[0.5, 0.25, 0.9], [0.1, 1.0, 1.0]]))
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    expected = (math.log(2) + math.log(4) + math.log(10)) / 3
    assert sft_loss(logprobs, mask).item() == pytest.approx(expected, rel=1e-6)


def test_jsonl_plain_and_chat(tmp_path):
    path = tmp_path / "demos.jsonl"
    rows = [
        {"prompt": "What is 1 + 1?", "completion": "\\boxed{2}"},
        {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "a"},
                      {"role": "user", "content": "again"}, {"role": "assistant", "content": "b"}]},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    chats = load_demonstrations(path)
    assert chats[0] == [{"role": "user", "content": "What is 1 + 1?"}, {"role": "assistant", "content": "\\boxed{2}"}]
    assert len(chats[1]) == 4
    path.write_text('{"text": "x"}\n')
    with pytest.raises(DatasetError, match="demos.jsonl:1"):
        load_demonstrations(path)


def test_demonstrations_in_the_layouts_sft_sets_ship(tmp_path):
    """ShareGPT's conversations, TRL's conversational prompt-completion, Alpaca, MetaMathQA's
    query/response and MATH's problem/solution, in a JSON list; a row with nothing to train on
    or an unknown speaker is refused with its place."""
    user, reply = {"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}
    rows = [
        {"conversations": [{"from": "system", "value": "Be brief."}, {"from": "human", "value": "2+2?"}, {"from": "gpt", "value": "4"}]},
        {"prompt": [user], "completion": [reply]},
        {"instruction": "Add the numbers.", "input": "2 and 2", "output": "4"},
        {"instruction": "Say 4.", "input": "", "output": "4"},
        {"query": "2+2?", "response": "4", "type": "GSM_Rephrased"},
        {"problem": "2+2?", "solution": "It is $\\boxed{4}$."},
    ]
    path = tmp_path / "demos.json"
    path.write_text(json.dumps(rows))
    chats = load_demonstrations(path)
    assert chats[0] == [{"role": "system", "content": "Be brief."}, user, reply] and chats[1] == [user, reply]
    assert chats[2] == [{"role": "user", "content": "Add the numbers.\n\n2 and 2"}, reply]
    assert chats[3][0] == {"role": "user", "content": "Say 4."} and chats[4] == [user, reply]
    assert chats[5][1] == {"role": "assistant", "content": "It is $\\boxed{4}$."}
    for row, match in (({"messages": [user]}, "no assistant message"), ({"conversations": [{"from": "alien", "value": "x"}]}, "speakers"),
                       ({"prompt": [user], "completion": "4"}, "must both be texts or both lists"), ({"messages": [{"content": "x"}]}, "neither 'role'")):
        path.write_text(json.dumps(row) + "\n")
        with pytest.raises(DatasetError, match=f"demos.json:1: .*{match}"):
            load_demonstrations(path)


def test_demonstration_tokens_only_assistant_turns_are_actions(policy):
    chat = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ab"},
            {"role": "user", "content": "x"}, {"role": "assistant", "content": "c"}]
    ep = encode_demonstration(policy.chat, chat)
    decode = lambda ids: policy.tokenizer.decode(ids, skip_special_tokens=False)  # noqa: E731
    assert decode(ep.token_ids) == policy.chat.render(chat, add_generation_prompt=False)
    actions = [t for t, m in zip(ep.token_ids, ep.action_mask) if m]
    assert decode(actions) == "ab<|end|>c<|end|>"
    assert sorted(set(s for s, m in zip(ep.step_index, ep.action_mask) if m)) == [0, 1]


def test_env_expert_demonstrations_single_and_multi_turn():
    chats = env_demonstrations("MathReason-v0", {"system_prompt": ""}, 3, seed=0)
    assert len(chats) == 3 and chats[0][-1]["role"] == "assistant" and "\\boxed{" in chats[0][-1]["content"]
    guess = env_demonstrations(register_guess_env(), {"high": 5}, 2, seed=0)
    assert guess[0][-1]["content"].isdigit()


def test_sft_trainer_lowers_the_loss(model_path, tmp_path):
    config = SFTConfig(
        model=str(model_path), env_kwargs={"system_prompt": ""}, steps=12, batch_size=8, num_demonstrations=16,
        learning_rate=5e-3, eval_tasks=0, save_every=0, progress=False, run_dir=str(tmp_path / "run"),
    )
    trainer = SFTTrainer(config)
    batch = demonstrations_batch(trainer.policy.chat, env_demonstrations("MathReason-v0", {"system_prompt": ""}, 8, seed=0))
    before = sft_loss(trainer.policy.token_logprobs(batch.input_ids, batch.attention_mask)[0], batch.action_mask).item()
    trainer.train()
    after = sft_loss(trainer.policy.token_logprobs(batch.input_ids, batch.attention_mask)[0], batch.action_mask).item()
    assert after < before - 0.5


def test_warm_starts_of_long_demonstrations_take_fewer_steps():
    from mathgym.agents.tiny import tiny_model_path
    from mathgym.algos.warm_start import WARM_START_BUDGET_S, affordable_warm_start_steps, chat_token_counter, expected_warm_start_s

    tokens = chat_token_counter(tiny_model_path())
    assert affordable_warm_start_steps("MathReason-v0", {"system_prompt": ""}, 400, tokens) == 400  # the default run keeps its steps
    steps = affordable_warm_start_steps("Hangman-v0", {"difficulty": 0, "system_prompt": ""}, 400, tokens)
    assert 1 <= steps < 400 and expected_warm_start_s(steps, 512, batch_size=8) <= WARM_START_BUDGET_S  # transcripts of 500+ tokens


def test_the_tiny_models_warm_start_is_a_step_before_the_trainer(tmp_path, monkeypatch):
    """A trainer never trains another model in its constructor: model='tiny' with a warm start asks for
    prepare_model(config) first, which makes (then finds in the cache) the warm start the trainer loads."""
    from mathgym.algos.grpo import GRPOConfig, GRPOTrainer
    from mathgym.algos.warm_start import prepare_model
    from mathgym.errors import ConfigError

    monkeypatch.setenv("MATHGYM_CACHE", str(tmp_path / "cache"))
    config = GRPOConfig(env_kwargs={"difficulty": 0}, warm_start_steps=2, eval_tasks=0, progress=False, run_dir=str(tmp_path / "run"))
    with pytest.raises(ConfigError, match="prepare_model"):
        GRPOTrainer(config)
    assert not (tmp_path / "run").exists() and not (tmp_path / "cache" / "warm_start").exists()
    path = prepare_model(config)
    assert "warm_start" in path and prepare_model(config) == path  # made once, then cached
    trainer = GRPOTrainer(config, model_path=path)
    assert trainer.policy.name_or_path == path and trainer.env_kwargs["system_prompt"] == ""  # its mathgym.json
    untrained = GRPOConfig(warm_start_steps=0, eval_tasks=0, progress=False, run_dir=str(tmp_path / "run0"))
    assert "warm_start" not in GRPOTrainer(untrained).policy.name_or_path  # no warm start: no step before


def test_tasks_without_a_reference_are_left_out_of_demonstrations_and_the_warm_start(tmp_path, monkeypatch, capsys):
    """A code data set whose records carry no solution (LiveCodeBench's): demonstrations come from the
    tasks that have one; with none at all, SFT says to give --data and the tiny model's warm start
    is skipped with a message instead of stopping the run."""
    from mathgym.algos.sft import NoDemonstrations
    from mathgym.algos.warm_start import tiny_warm_start
    from mathgym.agents.tiny import tiny_model_path

    def row(i, solution):
        return {"problem_id": i, "question": f"Print {i}.", "solutions": json.dumps([solution] if solution else []),
                "input_output": json.dumps({"inputs": [""], "outputs": [f"{i}\n"]})}

    mixed, bare = tmp_path / "mixed.jsonl", tmp_path / "bare.jsonl"
    mixed.write_text("".join(json.dumps(row(i, f"print({i})" if i % 2 else "")) + "\n" for i in range(6)))
    bare.write_text("".join(json.dumps(row(i, "")) + "\n" for i in range(3)))
    chats = env_demonstrations("CodeSandbox-v0", {"dataset": str(mixed)}, 4, seed=0)
    assert len(chats) == 4 and all("print(" in chat[-1]["content"] for chat in chats)
    with pytest.raises(NoDemonstrations, match="--data"):
        env_demonstrations("CodeSandbox-v0", {"dataset": str(bare)}, 4, seed=0)
    monkeypatch.setenv("MATHGYM_CACHE", str(tmp_path / "cache"))
    assert tiny_warm_start("CodeSandbox-v0", {"dataset": str(bare)}, steps=5, progress=False) == tiny_model_path(0)
    assert "no reference solutions" in capsys.readouterr().out


def test_chats_keep_content_parts_reasoning_and_tool_calls(tmp_path):
    """OpenAI's content parts are joined; reasoning under any of the names data sets use, tool
    calls and a tool result's id are kept (the template renders them); a non-text part is an error."""
    from mathgym.algos.sft import read_chats

    call = {"type": "function", "function": {"name": "python", "arguments": {"code": "print(2)"}}}
    rows = [
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "1 + "}, {"type": "text", "text": "1?"}]},
                      {"role": "assistant", "content": "2", "thinking": "one and one"}]},
        {"messages": [{"role": "user", "content": "Run it."}, {"role": "assistant", "content": None, "tool_calls": [call]},
                      {"role": "tool", "content": "2", "tool_call_id": "c1"}, {"role": "assistant", "content": "2"}]},
    ]
    path = tmp_path / "chats.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    (_, first), (_, second) = read_chats(path, "demonstrations")
    assert first == [{"role": "user", "content": "1 + 1?"}, {"role": "assistant", "content": "2", "reasoning_content": "one and one"}]
    assert second[1] == {"role": "assistant", "content": "", "tool_calls": [call]}
    assert second[2] == {"role": "tool", "content": "2", "tool_call_id": "c1"}
    path.write_text(json.dumps({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]},
                                             {"role": "assistant", "content": "a cat"}]}) + "\n")
    with pytest.raises(DatasetError, match="chats.jsonl:1: a message holds a 'image_url' part; only text parts are read"):
        read_chats(path, "demonstrations")
