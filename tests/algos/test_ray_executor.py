"""The Ray executor: sync-mode results from sub-envs on Ray actors, same training runs as the
local executor, actor failures marked as infrastructure and survived, the Ray reward pool.

One local Ray session (2 CPUs) serves the whole module.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import re
import signal
import sys
import threading

import gymnasium as gym
import numpy as np
import pytest

from mathgym.install import extra_hint

ray = pytest.importorskip("ray")
torch = pytest.importorskip("torch")

import mathgym  # noqa: E402,F401
from mathgym.algos.grpo import GRPOConfig, GRPOTrainer  # noqa: E402
from mathgym.algos.metrics import read_metrics  # noqa: E402
from mathgym.algos.configs import TrainConfig  # noqa: E402
from mathgym.algos.executors import vector_env_factory  # noqa: E402
from mathgym.options import build_config, split_overrides  # noqa: E402
from mathgym.errors import ConfigError, InvalidActionError  # noqa: E402
from mathgym.integrations.ray import RayExecutor, RayRewardPool, RayVectorEnv, wait_for_actor  # noqa: E402
from mathgym.rewards import CodeTestsReward, MathVerifier, TestCase, score_in_parallel  # noqa: E402
from tests.trainkit import build_small_model  # noqa: E402

SLEEPER = "```python\nimport time\ntime.sleep(5)\n```"


@pytest.fixture(scope="module", autouse=True)
def ray_session():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def executor():
    with RayExecutor(num_actors=2) as pool:
        yield pool


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    return build_small_model(tmp_path_factory.mktemp("model"))


def _plain(x, drop=("sandbox",)):
    """Comparable form of vector-env output (arrays with their dtype; ``drop``: timing details)."""
    if isinstance(x, dict):
        return {k: _plain(v, drop) for k, v in sorted(x.items()) if k not in drop and k.lstrip("_") not in drop}
    if isinstance(x, np.ndarray):
        return (str(x.dtype), [_plain(v, drop) for v in x.tolist()])
    if isinstance(x, (list, tuple)):
        return type(x).__name__, [_plain(v, drop) for v in x]
    return x


def _drive(envs, script):
    """Run ``script`` (("reset", kwargs) or ("step", actions) items); the plain outputs."""
    out = []
    for op, arg in copy.deepcopy(script):  # gymnasium's reset pops options["reset_mask"] from the caller's dict
        result = envs.reset(**arg) if op == "reset" else envs.step(np.array(arg, dtype=object))
        out.append(_plain(result))
    return out


def test_vector_env_matches_sync_mode_multi_turn_with_autoreset(executor):
    # 4 sub-envs on 2 actors; episodes end at different steps, then autoreset; a masked reset.
    script = [("reset", {"seed": [3, 3, 5, 9]})]
    script += [("step", [str(g) for g in guesses]) for guesses in ([4, 2, 6, 1], [6, 3, 7, 5], [5, 1, 2, 8], [1, 1, 1, 1])]
    script += [("reset", {"seed": [7, 8, 9, 10], "options": {"reset_mask": np.array([True, False, True, False])}})]
    script += [("step", ["4", "x", "6", "2"]), ("reset", {"seed": 11})]
    kwargs = {"high": 8, "max_turns": 3}
    local = _drive(gym.make_vec("GuessNumber-v0", 4, vectorization_mode="sync", **kwargs), script)
    envs = executor("GuessNumber-v0", 4, kwargs)
    try:
        remote = _drive(envs, script)
    finally:
        envs.close()
    statuses = {s for step in local[1:5] for s in step[1][4]["status"][1]}
    assert {"correct", "in_progress"} <= statuses  # the script really plays: wins, misses, autoresets
    assert remote == local
    assert remote[0][1][0][0] == "tuple" and remote[0][1][0][1][0].startswith("I am thinking of an integer")


def test_vector_env_matches_sync_mode_on_code_sandbox(executor):
    probe = gym.make("CodeSandbox-v0")
    probe.reset(seed=1)
    solution = probe.unwrapped.expert_action()
    probe.reset(seed=2)
    other = probe.unwrapped.expert_action()
    actions = [solution, other, "```python\ndef nothing():\n    return None\n```", "no code at all, sorry"]
    script = [("reset", {"seed": [1, 2, 1, 2]}), ("step", actions), ("step", actions), ("reset", {"seed": [2, 1, 2, 1]})]
    local = _drive(gym.make_vec("CodeSandbox-v0", 4, vectorization_mode="sync"), script)
    envs = executor("CodeSandbox-v0", 4, {})
    try:
        remote = _drive(envs, script)
    finally:
        envs.close()
    assert local[1][1][1] == ("float64", [1.0, 1.0, 0.0, 0.0])  # real sandbox verdicts
    assert remote == local


def test_user_errors_raise_as_in_sync_mode(executor):
    with pytest.raises(ConfigError, match="low < high"):
        executor("GuessNumber-v0", 2, {"low": 5, "high": 1})
    envs = executor("GuessNumber-v0", 2, {})
    try:
        envs.reset(seed=0)
        with pytest.raises(InvalidActionError, match="as a str, got int"):
            envs.step((1, 2))
    finally:
        envs.close()
    closed = RayExecutor(num_actors=1)
    closed.close()
    with pytest.raises(ConfigError, match="closed"):
        closed("GuessNumber-v0", 2, {})


def _killing_generate(policy, executor, at_call):
    """Wrap ``policy.generate`` so that its ``at_call``-th call first kills actor 0's process."""
    original, calls = policy.generate, []

    def generate(*args, **kwargs):
        calls.append(1)
        if len(calls) == at_call:
            os.kill(executor.actor_pids()[0], signal.SIGKILL)
        return original(*args, **kwargs)

    policy.generate = generate


class _Recorder(GRPOTrainer):
    """Keeps each step's batch (token ids, statuses, loss mask): its batch source's, as they come (in the sampling thread under overlap)."""

    def build_source(self):
        source = super().build_source()
        make = source.make_batch

        def recording(step):
            batch, stats = make(step)
            self.__dict__.setdefault("batches", []).append(batch)
            return batch, stats

        source.make_batch = recording
        return source


def _config(model_path, env, env_kwargs, executor, **extra):
    options = {
        "model": str(model_path), "env": env, "env_kwargs": {**env_kwargs, "system_prompt": ""}, "executor": executor,
        "ray_actors": 2, "num_tasks": 2, "group_size": 2, "steps": 2, "max_new_tokens": 6, "max_episode_tokens": 300,
        "eval_tasks": 0, "save_every": 0, "progress": False,
    }
    return GRPOConfig(**{**options, **extra})


@pytest.mark.parametrize(("env", "env_kwargs", "eval_tasks"), [("CodeSandbox-v0", {"level": 0}, 2), ("GuessNumber-v0", {"high": 6}, 0)])
def test_ray_and_local_executors_give_the_same_run(model_path, tmp_path, env, env_kwargs, eval_tasks):
    runs = {}
    for executor in ("local", "ray"):
        config = _config(model_path, env, env_kwargs, executor, eval_tasks=eval_tasks)
        trainer = _Recorder(config, run_dir=tmp_path / executor)
        trainer.train()
        metrics = [{k: v for k, v in r.items() if not k.startswith("perf/")} for r in read_metrics(tmp_path / executor)]
        runs[executor] = (metrics, [b.input_ids.tolist() for b in trainer.batches], [b.statuses for b in trainer.batches])
    (local_metrics, local_ids, local_statuses), (ray_metrics, ray_ids, ray_statuses) = runs["local"], runs["ray"]
    assert ray_ids == local_ids and ray_statuses == local_statuses
    assert [r.pop("infra/actor_failures") for r in ray_metrics if "loss/policy" in r] == [0.0, 0.0]
    assert ray_metrics == local_metrics
    assert any("eval/pass@1" in r for r in ray_metrics) == bool(eval_tasks) and len(local_ids) == 2
    if env == "GuessNumber-v0":
        assert max(r["rollout/turns"] for r in local_metrics if "rollout/turns" in r) > 1  # multi-turn episodes


def test_actor_killed_mid_episode_is_restarted_marked_and_left_out_of_the_loss(model_path, tmp_path):
    config = _config(model_path, "GuessNumber-v0", {"high": 6}, "ray")
    trainer = _Recorder(config, run_dir=tmp_path / "run")
    _killing_generate(trainer.policy, trainer.source.make_envs, at_call=2)  # after the first turn's env step
    trainer.train()
    first, second = trainer.batches
    lost = [i for i, s in enumerate(first.statuses) if s == "actor_error"]
    assert lost and set(lost) <= {0, 2}  # sub-envs 0 and 2 live on actor 0 (those still playing at turn 1)
    assert first.infra_failure[lost].all() and first.loss_mask()[lost].sum() == 0
    assert first.loss_mask()[[1, 3]].sum() > 0
    assert "actor_error" not in second.statuses  # the run went on, on the restarted actor
    metrics = [r for r in read_metrics(tmp_path / "run") if "loss/policy" in r]
    assert [r["infra/failed_episodes"] for r in metrics] == [len(lost), 0.0]
    assert metrics[0]["rollout/status/actor_error"] == len(lost) / 4
    assert metrics[0]["infra/actor_failures"] >= 1


def test_actor_killed_during_a_step_and_reset_retried(executor):
    probe = gym.make("CodeSandbox-v0")
    probe.reset(seed=1)
    solution = probe.unwrapped.expert_action()
    envs = executor("CodeSandbox-v0", 2, {})
    try:
        first_obs, _ = envs.reset(seed=[0, 1])
        pid = executor.actor_pids()[0]
        threading.Timer(1.0, os.kill, (pid, signal.SIGKILL)).start()
        obs, rewards, terminated, truncated, infos = envs.step(np.array([SLEEPER, solution], dtype=object))
        assert list(infos["status"]) == ["actor_error", "correct"]
        assert rewards.tolist() == [0.0, 1.0] and truncated.tolist() == [True, False] and not terminated[0]
        assert wait_for_actor(executor.actors[0]) != pid  # Ray restarted the process
        obs, rewards, _, truncated, infos = envs.step(np.array(["", ""], dtype=object))  # next-step autoreset of both
        assert [m[-1]["content"] for m in infos["messages"]] == list(obs) and not truncated.any()
        # Killed while idle: the reset notices the lost sub-env and redoes it on the restarted actor.
        os.kill(wait_for_actor(executor.actors[0]), signal.SIGKILL)
        again, _ = envs.reset(seed=[0, 1])
        assert again == first_obs
    finally:
        envs.close()


ADD_TESTS = [TestCase("t", "assert", "assert add(2, 3) == 5")]
ADD = "```python\ndef add(a, b):\n    return a + b\n```"


def test_reward_pool_scores_like_inline():
    completions = [ADD, ADD.replace("a + b", "a - b"), "nothing"]
    with contextlib.closing(RayRewardPool()) as pool:
        code = score_in_parallel(CodeTestsReward(), completions, [ADD_TESTS] * 3, executor=pool, chunk_size=1)
        answers, golds = ["\\boxed{4}", "\\boxed{5}", "four"], ["4", "4", "4"]
        math = score_in_parallel(MathVerifier(), answers, golds, executor=pool, chunk_size=1)
    assert [(r.score, str(r.status)) for r in code] == [(1.0, "correct"), (0.0, "wrong"), (0.0, "wrong")]
    inline = score_in_parallel(MathVerifier(), answers, golds)
    assert [(r.score, r.status) for r in math] == [(r.score, r.status) for r in inline]


def test_reward_pool_reruns_an_item_whose_actor_died():
    slow = ADD.replace("def add", "import time\ntime.sleep(1.5)\ndef add")
    with contextlib.closing(RayRewardPool(num_actors=1)) as pool:
        pid = pool.actor_pids()[0]
        threading.Timer(0.5, os.kill, (pid, signal.SIGKILL)).start()
        (result,) = score_in_parallel(CodeTestsReward(), [slow], [ADD_TESTS], executor=pool)
        assert (result.score, str(result.status)) == (1.0, "correct")
        assert pool.hosts.failed_calls >= 1 and pool.actor_pids()[0] != pid


def test_executor_option_from_cli_and_yaml(tmp_path, monkeypatch):
    assert build_config(TrainConfig).executor == "local"
    assert build_config(TrainConfig, overrides=split_overrides(["--executor", "ray"])).executor == "ray"
    path = tmp_path / "run.yaml"
    path.write_text("executor: ray\nray_actors: 3\n")
    config = build_config(TrainConfig, path)
    assert (config.executor, config.ray_actors) == ("ray", 3)
    with pytest.raises(ConfigError, match="'local', 'ray'"):
        build_config(TrainConfig, overrides={"executor": "dask"})
    factory = vector_env_factory(build_config(TrainConfig, overrides={"executor": "ray", "ray_actors": 1}))
    try:
        assert isinstance(factory, RayExecutor) and len(factory.actors) == 1
        envs = factory("GuessNumber-v0", 2, {})
        assert isinstance(envs, RayVectorEnv) and envs.num_envs == 2
        envs.close()
    finally:
        factory.close()
    assert vector_env_factory(TrainConfig()) is None
    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    monkeypatch.delitem(sys.modules, "mathgym.integrations.ray")
    with pytest.raises(ConfigError, match=re.escape(extra_hint("ray"))):
        vector_env_factory(build_config(TrainConfig, overrides={"executor": "ray"}))


def test_train_cli_runs_with_executor_ray(model_path, tmp_path):
    from mathgym.train_cli import run_train

    run_dir = tmp_path / "cli"
    argv = ["--env", "GuessNumber-v0", "--env-kwargs", "{system_prompt: ''}", "--model", str(model_path), "--executor", "ray", "--steps", "1", "--num-tasks", "1",
            "--group-size", "2", "--max-new-tokens", "4", "--eval-tasks", "0", "--progress", "false", "--run-dir", str(run_dir)]
    assert run_train(argv) == 0
    (record,) = [r for r in read_metrics(run_dir) if "loss/policy" in r]
    assert record["infra/actor_failures"] == 0.0 and record["infra/failed_episodes"] == 0.0
    assert json.loads(json.dumps(record))["rollout/turns"] >= 1
