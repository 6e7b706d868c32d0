"""TRL's own GRPOTrainer on mathgym envs, through ``rollout_func`` and ``environment_factory`` (CPU, tiny model).

The env side is recorded at the source (a gymnasium wrapper around the real env logs every
step's reward), so "the rewards TRL logs equal what the env returned" is checked against
the env itself, not against the adapter's own bookkeeping.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.importorskip("trl")
pytest.importorskip("torch")

import gymnasium as gym  # noqa: E402

import mathgym  # noqa: E402,F401
from mathgym.errors import ConfigError  # noqa: E402
from mathgym.integrations.trl import TRLEnv  # noqa: E402
from mathgym.integrations.trl_tools import GuessNumberTools, MathToolTools, tool_environment_factory  # noqa: E402

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
STEP_REWARDS: list[float] = []
BATCH = 4


class RecordingWrapper(gym.Wrapper):
    """Records every reward the wrapped env returns."""

    def step(self, action):
        out = super().step(action)
        STEP_REWARDS.append(float(out[1]))
        return out


def recorded_id(env_id: str) -> str:
    """A registered id whose envs are ``env_id`` wrapped in :class:`RecordingWrapper`."""
    new_id = f"mathgym-tests/Recorded{env_id}"
    if new_id not in gym.registry:
        gym.register(new_id, entry_point=lambda **kw: RecordingWrapper(gym.make(env_id, **kw)))
    return new_id


@pytest.fixture(scope="module")
def small_model_dir(tmp_path_factory) -> Path:
    from tests.trainkit import build_small_model

    return build_small_model(tmp_path_factory.mktemp("trl") / "model")


def tool_tokenizer_and_model():
    """The small char-level Llama with a tool-calling chat template TRL knows (its own Qwen2.5 file)."""
    import trl

    from mathgym.agents.tiny import build_tiny_model

    model, tok = build_tiny_model(hidden_size=32, num_layers=2)
    tok.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>"]})
    model.resize_token_embeddings(len(tok), mean_resizing=False)
    tok.chat_template = (Path(trl.__file__).parent / "chat_templates" / "qwen2_5.jinja").read_text()
    tok.eos_token = "<|im_end|>"
    model.generation_config.eos_token_id = tok.eos_token_id
    return model, tok


def run_grpo(tmp_path, model, tokenizer, dataset, seed=0, batch=BATCH, max_completion_length=8,
             generation_kwargs=None, max_tool_calling_iterations=None, **trainer_kwargs):
    """Two GRPO steps; returns the trainer and the env's summed step rewards per training step."""
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    per_step: list[float] = []

    class Collect(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            per_step.append(sum(STEP_REWARDS))
            STEP_REWARDS.clear()

    args = GRPOConfig(
        output_dir=str(tmp_path / "out"), per_device_train_batch_size=batch, num_generations=2,
        max_completion_length=max_completion_length, max_steps=2, logging_steps=1, report_to=[], use_cpu=True,
        save_strategy="no", disable_tqdm=True, seed=seed, generation_kwargs=generation_kwargs,
        max_tool_calling_iterations=max_tool_calling_iterations,
    )
    STEP_REWARDS.clear()
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, args=args, train_dataset=dataset,
                          callbacks=[Collect()], **trainer_kwargs)
    trainer.train()
    return trainer, per_step


def logged(trainer, key: str) -> list[float]:
    return [h[key] for h in trainer.state.log_history if key in h]


ROLLOUT_CASES = [  # GuessNumber over 1..3 pays the random model sometimes (seed 42): non-zero rewards compared
    ("MathReason-v0", {}, None, 0),
    ("GuessNumber-v0", {"low": 1, "high": 3}, 3, 42),
    ("MathTool-v0", {"max_turns": 2, "tool_wall_seconds": 5.0}, None, 0),
]


@pytest.mark.torch
@pytest.mark.parametrize(("env_id", "env_kwargs", "max_turns", "seed"), ROLLOUT_CASES)
def test_grpo_trainer_with_rollout_func(tmp_path, small_model_dir, env_id, env_kwargs, max_turns, seed):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    env = TRLEnv(recorded_id(env_id), max_turns=max_turns, env_kwargs=env_kwargs)
    outputs = []

    def rollout_func(prompts, trainer):
        out = env.rollout_func(prompts, trainer)
        outputs.append(out)
        return out

    model = AutoModelForCausalLM.from_pretrained(small_model_dir)
    tokenizer = AutoTokenizer.from_pretrained(small_model_dir)
    trainer, env_sums = run_grpo(tmp_path, model, tokenizer, env.dataset(8), seed=seed, rollout_func=rollout_func,
                                 reward_funcs=env.reward_funcs)
    means = logged(trainer, "rewards/env_reward/mean")
    if env_id.startswith("Guess"):
        assert sum(env_sums) > 0, "the check below must compare non-zero rewards"
    assert len(means) == 2 and len(env_sums) == 2
    assert means == pytest.approx([s / BATCH for s in env_sums]), "TRL's logged reward is not what the env returned"
    for out in outputs:
        assert len(out["completion_ids"]) == BATCH
        for ids, mask, turns in zip(out["completion_ids"], out["env_mask"], out["env_turns"]):
            assert len(ids) == len(mask) and mask[0] == 1
            assert (0 in mask) == (turns > 1), "env tokens (mask 0) appear exactly in multi-turn episodes"
            if turns > 1 and env_id.startswith("Guess"):
                env_text = tokenizer.decode([t for t, m in zip(ids, mask) if m == 0])
                assert "guesses left" in env_text  # the env's feedback, as chat-template tokens
    assert logged(trainer, "rollout/env_turns")
    env.close()


def forced_call_bias(tokenizer, call: str) -> dict[tuple[int, ...], float]:
    """A ``sequence_bias`` under which the random model writes ``call`` (a tool call in Qwen2.5's format)."""
    ids = tokenizer(f"<tool_call>\n{call}\n</tool_call><|im_end|>", add_special_tokens=False)["input_ids"]
    return {tuple(ids[: i + 1]): 20.0 * (i + 1) for i in range(len(ids))}


TOOL_CASES = [  # the model is made to call the tool (generation_kwargs' sequence_bias): TRL parses and runs it
    ("GuessNumber-v0", {"low": 1, "high": 3}, '{"name": "guess", "arguments": {"number": 2}}'),
    ("MathTool-v0", {"max_turns": 2}, '{"name": "answer", "arguments": {"answer": "7"}}'),  # python(): tested below
]


@pytest.mark.torch
@pytest.mark.parametrize(("env_id", "env_kwargs", "call"), TOOL_CASES)
def test_grpo_trainer_with_environment_factory(tmp_path, env_id, env_kwargs, call):
    env = TRLEnv(recorded_id(env_id), env_kwargs=env_kwargs)
    model, tokenizer = tool_tokenizer_and_model()
    dataset = env.dataset(12)
    if env_id.startswith("Guess"):  # keep the games whose secret is 2: guess(2) wins them, rewards are 1
        game = gym.make(env_id, **env_kwargs).unwrapped
        dataset = dataset.filter(lambda row: game.reset(seed=row["seed"]) and game.task.metadata["secret"] == 2)
    trainer, env_sums = run_grpo(tmp_path, model, tokenizer, dataset, batch=2, seed=1,
                                 environment_factory=env.environment_factory, max_completion_length=64,
                                 generation_kwargs={"sequence_bias": forced_call_bias(tokenizer, call)},
                                 max_tool_calling_iterations=1)
    name = "GuessNumberTools" if env_id.startswith("Guess") else "MathToolTools"
    means = logged(trainer, f"rewards/{name}/mean")  # get_reward() is the column TRL adds for the env
    assert len(means) == 2
    assert logged(trainer, "tools/call_frequency") and min(logged(trainer, "tools/call_frequency")) >= 1
    assert logged(trainer, "tools/failure_frequency") == [0.0, 0.0]
    assert means == pytest.approx([s / 2 for s in env_sums])
    if env_id.startswith("Guess"):
        assert env_sums == [2.0, 2.0], "guess(2) finds the secret 2 in every game: non-zero rewards are compared"


def test_tool_methods_step_the_env_and_get_reward_is_its_return():
    from transformers.utils import get_json_schema

    schema = get_json_schema(GuessNumberTools.guess)  # what TRL renders into the prompt
    assert schema["function"]["parameters"]["properties"]["number"]["type"] == "integer"
    factory = tool_environment_factory("GuessNumber-v0", {"low": 1, "high": 4})
    tools = factory()
    tools.reset(prompt=[], seed=3, task_id="x")
    reference = gym.make("GuessNumber-v0", low=1, high=4)
    reference.reset(seed=3)
    secret = reference.unwrapped.task.metadata["secret"]
    wrong = 1 if secret != 1 else 4
    reply = tools.guess(wrong)
    assert "higher" in reply or "lower" in reply
    assert tools.get_reward() == 0.0
    assert "over" in tools.guess(secret) and tools.get_reward() == 1.0
    assert "over" in tools.guess(secret) and tools.get_reward() == 1.0  # no steps after the end


def test_math_tool_tools_run_python_in_the_sandbox_and_score_the_answer():
    tools = tool_environment_factory("MathTool-v0", {"max_turns": 3})()
    tools.reset(seed=0)
    reference = gym.make("MathTool-v0")
    reference.reset(seed=0)
    gold = reference.unwrapped.task.answer
    assert "42" in tools.python("print(6 * 7)")
    assert tools.get_reward() == 0.0
    tools.answer(gold)
    assert tools.get_reward() == 1.0
    assert isinstance(MathToolTools.answer.__doc__, str)


def test_errors_name_what_to_do():
    with pytest.raises(ConfigError, match="rollout_func"):
        tool_environment_factory("MathReason-v0")
    with pytest.raises(ConfigError, match=r"dataset\(\)"):
        TRLEnv("MathReason-v0")._seeds_for([[{"role": "user", "content": "not from the data set"}]], 2)
    with pytest.raises(ConfigError, match="rollout_func"):
        TRLEnv("MathReason-v0").reward_funcs[0](prompts=["p"], completions=["c"])


def test_groups_share_a_task_and_hidden_secrets_are_taken_in_turn():
    env = TRLEnv("GuessNumber-v0", env_kwargs={"low": 1, "high": 50})
    rows = env.dataset(3)
    prompts = [rows[0]["prompt"]] * 4  # one prompt for every secret: seeds taken in turn, one per group of 2
    assert env._seeds_for(prompts, 2) == [0, 0, 1, 1]
    math = TRLEnv("MathReason-v0")
    rows = math.dataset(3)
    assert math._seeds_for([rows[2]["prompt"]] * 2 + [rows[1]["prompt"]] * 2, 2) == [2, 2, 1, 1]


FROZEN_LAKE = "FrozenLakeText-v0" if "FrozenLakeText-v0" in gym.registry else "FrozenLake-v0"  # renamed this round


@pytest.mark.parametrize("env_id", ["Sokoban-v0", FROZEN_LAKE])
def test_game_move_tools_play_the_expert_to_a_win(env_id):
    """The move tools step the real game: the env's own expert moves, sent through the tool, win it."""
    tools = tool_environment_factory(env_id)()
    tools.reset(seed=1)
    game = tools._env.unwrapped  # the tool's own env, to ask it for the expert move
    for _ in range(game.max_turns):
        reply = tools.move(game.expert_action())
        if "over" in reply:
            break
    assert reply == "The episode is over: correct." and tools.get_reward() > 0


def test_math_reward_grades_a_data_set_of_ones_own_by_its_reference_columns():
    from mathgym.integrations.trl import math_reward

    chat = [[{"role": "assistant", "content": "so \\boxed{0.333}"}], [{"role": "assistant", "content": "so \\boxed{2x}"}]]
    assert math_reward(chat, ground_truth=['["\\\\frac{1}{3}", "0.333"]', "2x"]) == [1.0, 1.0]  # any listed form; bare LaTeX
    assert math_reward(["\\boxed{5}", "\\boxed{5}"], reward_model=[{"ground_truth": "5"}, {"ground_truth": "6"}]) == [1.0, 0.0]
    # TRL's math sets keep the final answer in `solution`; a worked solution gives its last box
    assert math_reward(["\\boxed{7}", "\\boxed{7}"], solution=["7", "So it is \\boxed{7}."]) == [1.0, 1.0]
    worked = "Half way we have \\boxed{3}; in the end \\boxed{7}."
    assert math_reward(["\\boxed{3}", "\\boxed{7}"], solution=[worked, worked]) == [0.0, 1.0]  # the last box only
    assert math_reward(["\\boxed{7}", "\\boxed{7}"], answer=["7", None], solution=[None, None]) == [1.0, None]  # no reference: left out


def test_code_reward_runs_a_data_set_of_ones_own_in_the_sandbox():
    """code_reward reads the rows' tests in any layout CodeSandbox-v0 reads (here HumanEval's,
    APPS's input_output, a ground_truth of cases) and runs the completions' programs."""
    import json

    from mathgym.errors import ConfigError
    from mathgym.integrations.trl import code_reward

    add = "def add(a, b):\n    return a + b\n"
    human_eval = {"prompt": ["def add(a, b):\n"] * 2, "entry_point": ["add"] * 2,
                  "test": ["def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(-1, 1) == 0\n"] * 2}
    assert code_reward([f"```python\n{add}```", "```python\ndef add(a, b):\n    return 3\n```"], **human_eval) == [1.0, 0.0]
    apps = json.dumps({"inputs": ["1 2\n"], "outputs": ["3\n"]})
    chat = [[{"role": "assistant", "content": "```python\nprint(sum(map(int, input().split())))\n```"}],
            [{"role": "assistant", "content": "no code here"}]]
    prompts = [[{"role": "user", "content": "Add two numbers from standard input."}]] * 2
    assert code_reward(chat, prompts=prompts, input_output=[apps, apps]) == [1.0, 0.0]
    assert code_reward(chat, ground_truth=[apps, [{"input": "1 2\n", "output": "4\n"}]]) == [1.0, 0.0]
    assert code_reward(chat, ground_truth=[apps, "42"]) == [1.0, None]  # a row without tests is left out
    with pytest.raises(ConfigError, match="no tests in the batch's columns .answer"):
        code_reward(chat, answer=["3", "3"])


@pytest.mark.torch
def test_code_reward_is_a_reward_function_of_trls_grpo_trainer(tmp_path, small_model_dir):
    import json

    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from mathgym.integrations.trl import code_reward

    returned = []

    def reward(completions, **columns):
        out = code_reward(completions, **columns)
        returned.append(out)
        return out

    reward.__name__ = "code_reward"
    rows = [{"prompt": f"Print {a} + {a}.", "input_output": json.dumps({"inputs": [""], "outputs": [f"{2 * a}\n"]})} for a in range(8)]
    model = AutoModelForCausalLM.from_pretrained(small_model_dir)
    tokenizer = AutoTokenizer.from_pretrained(small_model_dir)
    trainer, _ = run_grpo(tmp_path, model, tokenizer, Dataset.from_list(rows), reward_funcs=[reward])
    assert len(returned) == 2 and all(len(r) == BATCH and all(v in (0.0, 1.0) for v in r) for r in returned)
    assert logged(trainer, "rewards/code_reward/mean") == pytest.approx([sum(r) / len(r) for r in returned])


@pytest.mark.torch
def test_math_reward_is_a_reward_function_of_trls_grpo_trainer(tmp_path, small_model_dir):
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from mathgym.integrations.trl import math_reward

    returned = []

    def reward(completions, **columns):
        out = math_reward(completions, **columns)
        returned.append(out)
        return out

    reward.__name__ = "math_reward"
    rows = [{"prompt": f"What is {a} + {a}?", "answer": str(2 * a)} for a in range(8)]
    model = AutoModelForCausalLM.from_pretrained(small_model_dir)
    tokenizer = AutoTokenizer.from_pretrained(small_model_dir)
    trainer, _ = run_grpo(tmp_path, model, tokenizer, Dataset.from_list(rows), reward_funcs=[reward])
    means = logged(trainer, "rewards/math_reward/mean")
    assert len(returned) == 2 and all(len(r) == BATCH and all(v in (0.0, 1.0) for v in r) for r in returned)
    assert means == pytest.approx([sum(r) / len(r) for r in returned])
