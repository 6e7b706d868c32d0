"""Training on agent runs: ``--agent module:function`` runs an agent program (OpenAI client, multi-turn)
per task against the policy's endpoint; the runs' recorded tokens are the batch GRPO trains on, with
the env's verifier's rewards, the same logging and checkpoints as env training."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("openai")

from mathgym.algos.grpo import GRPOConfig  # noqa: E402
from mathgym.algos.metrics import read_metrics  # noqa: E402
from tests.algos.test_dynamic_sampling import Recorder  # noqa: E402  (keeps the batches it trained on)
from tests.trainkit import build_small_model  # noqa: E402


def test_a_multi_turn_agent_trains_with_the_env_verifiers_rewards(tmp_path_factory, tmp_path):
    model = build_small_model(tmp_path_factory.mktemp("agent-model"))
    config = GRPOConfig(
        env="MathReason-v0", model=str(model), agent="tests.agent_programs:two_turn_agent", num_tasks=2, group_size=2,
        steps=2, max_new_tokens=8, eval_tasks=0, progress=False, run_dir=str(tmp_path / "run"), save_every=2,
    )
    trainer = Recorder(config)
    try:
        trainer.train()
    finally:
        trainer.close()
    rows = [r for r in read_metrics(tmp_path / "run") if "agent/calls_per_run" in r]
    assert [r["step"] for r in rows] == [1, 2]
    for row in rows:
        assert row["agent/calls_per_run"] == 2.0 and row["agent/segments_per_run"] == 1.0 and row["agent/errors"] == 0
        assert row["agent/sampler_batch_mean"] > 1  # the four runs' concurrent calls shared batches
        assert row["rollout/logprob_diff_max"] < 1e-3  # what was sampled is what the learner scores
    for batch in trainer.batches:
        assert len(batch) == 4 and batch.group_ids.tolist() == [0, 0, 1, 1]
        # graded by MathReason-v0's verifier: the env's statuses, none an agent's or the endpoint's failure
        assert not set(batch.statuses) & {"in_progress", "error", "agent_error"}
        # two actions per row: the model's two turns, the prompt and the user's check masked out
        for row in range(4):
            steps = batch.step_index[row][batch.action_mask[row] > 0].unique().tolist()
            assert steps == [0, 1]
    assert any(Path(tmp_path / "run").glob("checkpoint*")), "no checkpoint written"


def test_an_agent_written_with_openais_agents_sdk_plays_against_the_endpoint(tmp_path_factory, tmp_path):
    pytest.importorskip("agents")
    from mathgym.agents.policy import LLMPolicy
    from mathgym.algos.agent_runs import AgentBatchSource
    from mathgym.algos.distributed import Distributed

    model = build_small_model(tmp_path_factory.mktemp("agent-model"))
    policy = LLMPolicy.from_pretrained(str(model), device="cpu")
    config = GRPOConfig(
        env="MathReason-v0", model=str(model), agent="tests.agent_programs:sdk_agent", num_tasks=1, group_size=2,
        max_new_tokens=8, eval_tasks=0,
    )
    source = AgentBatchSource(config, Distributed.from_environment("cpu"), policy, {})
    recorded = []
    finish = source.endpoint.recorder.finish_call
    source.endpoint.recorder.finish_call = lambda call, samples: (recorded.append(call), finish(call, samples))
    try:
        batch, stats = source.make_batch(0)
    finally:
        source.close()
    assert len(batch) == 2 and stats["agent/errors"] == 0
    assert {tuple(t["function"]["name"] for t in call.tools) for call in recorded} == {("calculator",)}  # the SDK's tool
    for call in recorded:
        assert call.prompt_ids == policy.chat.prompt_ids(call.messages, tools=call.tools)
    for row in range(2):  # the episode is the recorded prompt and sample, the sample the action
        length = int(batch.attention_mask[row].sum())
        ids = batch.input_ids[row, :length].tolist()
        assert any(ids == call.sequence(0) for call in recorded)


def test_mathgym_train_agent_runs_an_agent_program_per_task(tmp_path_factory, tmp_path):
    from mathgym import train_cli

    model = build_small_model(tmp_path_factory.mktemp("agent-model"))
    code = train_cli.main("train", [
        "--env", "MathReason-v0", "--model", str(model), "--agent", "tests.agent_programs:two_turn_agent",
        "--num-tasks", "2", "--group-size", "2", "--steps", "1", "--max-new-tokens", "6", "--eval-tasks", "0",
        "--progress", "false", "--run-dir", str(tmp_path / "run"),
    ])
    assert code == 0
    (row,) = [r for r in read_metrics(tmp_path / "run") if "agent/calls_per_run" in r]
    assert row["agent/calls_per_run"] == 2.0 and any(k.startswith("loss/") for k in row)
