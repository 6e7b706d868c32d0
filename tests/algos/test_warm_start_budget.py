"""The tiny model's warm start fits its time budget: the plan (steps, batch, longest tokens) chosen
from hand numbers, the cache key, SFT's cut of long demonstrations, the warm start's demonstrations
trained whole (a longer one left out, never cut), and every registered env's demonstrations measured
with the tiny tokenizer (no training)."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import pytest

pytest.importorskip("torch")

import mathgym  # noqa: E402
from mathgym.agents.settings import run_env_kwargs  # noqa: E402
from mathgym.agents.tiny import tiny_model_path  # noqa: E402
from mathgym.algos.batch import Episode  # noqa: E402
from mathgym.algos.configs import SFTConfig, TrainConfig, resolved_env_kwargs  # noqa: E402
from mathgym.algos.sft import NoDemonstrations, keep_last_tokens  # noqa: E402
from mathgym.algos.warm_start import (  # noqa: E402
    WARM_START_BUDGET_S, WARM_START_MAX_TOKENS, WARM_START_RECORD, DemonstrationFit, WarmStartPlan, chat_token_counter,
    demonstrations_to_make, expected_warm_start_s, leave_out_long_demonstrations, longest_demonstration, tiny_max_positions,
    warm_start_key, warm_start_plan,
)
from mathgym.errors import ConfigError, DatasetError  # noqa: E402
from tests.envs_under_test import CONTRACT_KWARGS, REASONING_GYM_PREFIX, TEXTARENA_PREFIX, needs_layered_venv  # noqa: E402


def test_the_plan_for_hand_computed_costs():
    # A row of L tokens costs L * (1 + L / 600); a million of cost takes 67 s on 2 cores.
    # MathReason-v0's level 0 (28 tokens): 400 x 64 rows x 29.31 = 0.750 million = 50.3 s, inside 100 s.
    assert warm_start_plan(28, 100.0, 400, 512) == WarmStartPlan(400, 64, 512, 28)
    assert expected_warm_start_s(400, 28) == pytest.approx(50.27, abs=0.01)
    # 88 tokens: 100.91 a row, 100 s buy 14791 rows: 231 steps of 64 (more than 100 steps: the batch stays).
    assert warm_start_plan(88, 100.0, 400, 512) == WarmStartPlan(231, 64, 512, 88)
    # Rows of at most 512 tokens for demonstrations of up to 1814 (the longer ones left out): 948.9 a row,
    # 1572 rows; 15 a batch for 104 steps.
    plan = warm_start_plan(1814, 100.0, 400, 512)
    assert plan == WarmStartPlan(104, 15, 512, 1814) and plan.truncates and plan.row_tokens == 512
    assert plan.estimated_s == pytest.approx(104 * 15 * 948.907 * 67e-6, rel=1e-4) and plan.estimated_s <= 100.0
    assert warm_start_plan(1814, 200.0, 400, 512) == WarmStartPlan(101, 31, 512, 1814)  # twice the budget: 3145 rows, twice the batch
    assert warm_start_plan(512, 100.0, 400, 1024) == WarmStartPlan(104, 15, 1024, 512)  # within the rows: all trained
    # SQLQuery-v0's 836 tokens, trained whole: 2000.8 a row, 745 rows; batches of 8 for 93 steps.
    sql = warm_start_plan(836, 100.0, 400, WARM_START_MAX_TOKENS)
    assert sql == WarmStartPlan(93, 8, 4096, 836) and not sql.truncates and sql.row_tokens == 836
    # --warm-start-steps stays the upper bound; a tiny budget still takes one step of the smallest batch.
    assert warm_start_plan(28, 100.0, 20, 512) == WarmStartPlan(20, 64, 512, 28)
    assert warm_start_plan(512, 1.0, 400, 512) == WarmStartPlan(1, 8, 512, 512)
    assert warm_start_plan(512, 5.0, 400, 512) == WarmStartPlan(9, 8, 512, 512)  # 78 rows: batches of 8


def test_a_slow_expert_makes_fewer_demonstrations():
    plan = WarmStartPlan(104, 15, 512, 1814)
    assert demonstrations_to_make(plan, 100.0, 0.001) == 1560  # a row each
    assert demonstrations_to_make(WarmStartPlan(400, 64, 512, 28), 100.0, 0.0) == 4096
    assert demonstrations_to_make(plan, 100.0, 0.28) == 71  # 20 s of a sandboxed expert at 0.28 s each
    assert demonstrations_to_make(plan, 100.0, 60.0) == 15  # never fewer than a batch


def test_the_cache_key_follows_the_budgets_plan():
    kwargs = {"system_prompt": ""}
    small, large = warm_start_plan(1814, 50.0, 400, 512), warm_start_plan(1814, 100.0, 400, 512)
    assert small != large
    assert warm_start_key("RepoRepair-v0", kwargs, small) != warm_start_key("RepoRepair-v0", kwargs, large)
    same_steps = [WarmStartPlan(104, 15, 512, 1814), WarmStartPlan(104, 30, 512, 1814), WarmStartPlan(104, 15, 256, 1814)]
    assert len({warm_start_key("RepoRepair-v0", kwargs, p) for p in same_steps}) == 3  # batch and cut are in the key
    # A budget that leaves the plan as it is keeps the cache: the default run's key is the one it always had.
    for budget in (60.0, 100.0, 1000.0):
        assert warm_start_key("MathReason-v0", kwargs, warm_start_plan(28, budget, 400, 512)) == "0beb48b5e496"


def _episode(tokens: int, actions: list[int]) -> Episode:
    mask = [1 if i in actions else 0 for i in range(tokens)]
    return Episode("", "", 0, token_ids=list(range(tokens)), action_mask=mask, logprobs=[0.0] * tokens, step_index=[0 if m else -1 for m in mask])


def test_long_demonstrations_keep_their_last_tokens_and_say_so_once(capsys):
    short, long_, no_action_left = _episode(3, [2]), _episode(6, [1, 5]), _episode(6, [0])
    kept = keep_last_tokens([short, long_, no_action_left], 4)
    assert [ep.token_ids for ep in kept] == [[0, 1, 2], [2, 3, 4, 5]]
    assert kept[1].action_mask == [0, 0, 0, 1] and kept[1].step_index == [-1, -1, -1, 0] and len(kept[1].logprobs) == 4
    out = capsys.readouterr().out
    assert out.count("mathgym:") == 1 and "2 of 3 demonstrations are longer than max_length=4" in out and "1 left" in out
    with pytest.raises(DatasetError, match="max_length"):
        keep_last_tokens([no_action_left], 4)


def test_sql_demonstrations_are_trained_whole_past_the_tiny_models_512_positions(tmp_path, monkeypatch, capsys):
    """Issue 48: SQLQuery-v0's warm start cut every demonstration to its last 512 tokens, the schema
    the answer reads lost. Each row trained now is the whole demonstration, system prompt first."""
    from mathgym.algos.sft import SFTTrainer
    from mathgym.algos.warm_start import tiny_warm_start

    monkeypatch.setenv("MATHGYM_CACHE", str(tmp_path))
    rows: list[str] = []
    build_source = SFTTrainer.build_source

    def recording_source(trainer):  # the run's Demonstrations, each batch's rows decoded as they are made
        source = build_source(trainer)
        make_batch = source.make_batch

        def recording(step):
            batch, stats = make_batch(step)
            for ids, mask in zip(batch.input_ids, batch.attention_mask):
                rows.append(trainer.policy.tokenizer.decode(ids[mask.bool()].tolist()))
            return batch, stats

        source.make_batch = recording
        return source

    monkeypatch.setattr(SFTTrainer, "build_source", recording_source)
    kwargs = resolved_env_kwargs(TrainConfig(env="SQLQuery-v0"), model_dir=tiny_model_path())
    warm = tiny_warm_start("SQLQuery-v0", kwargs, steps=1, progress=False, budget_s=2.0)  # one step of a few rows
    first = gym.make("SQLQuery-v0", **kwargs).reset(seed=0)[1]["messages"][0]["content"]
    assert first.startswith("SQLite database:\nCREATE TABLE") and len(rows) >= 8
    for row in rows:  # the prompt from its first line, the answer to its end
        assert row.startswith("<|user|>SQLite database:\nCREATE TABLE") and row.endswith("</answer><|end|>"), row
    counter = chat_token_counter(tiny_model_path())
    record = json.loads((warm / WARM_START_RECORD).read_text())
    assert record["left_out"] == 0 and record["longest"] > tiny_max_positions() and record["trained"] >= 8
    assert record["longest"] >= longest_demonstration("SQLQuery-v0", kwargs, counter)
    assert "the warm start trains them whole" in capsys.readouterr().out


class _Demonstrations:
    """What :func:`leave_out_long_demonstrations` reads of an SFT run's source: its demonstrations."""

    def __init__(self, demos: list[Episode]):
        self.demos = demos

    def use_demonstrations(self, demos) -> None:
        self.demos = list(demos)


def test_demonstrations_longer_than_the_rows_are_left_out_never_cut(capsys):
    short, long_, longer = _episode(3, [2]), _episode(6, [1, 5]), _episode(8, [7])
    source = _Demonstrations([short, long_, longer])
    fit = leave_out_long_demonstrations("Env-v0", source, 5)
    assert fit == DemonstrationFit(trained=1, left_out=2, longest=8, max_tokens=5)
    assert source.demos == [short]  # the one that fits, whole
    out = capsys.readouterr().out
    assert "warning: 2 of 3 of Env-v0's demonstrations are longer than 5 tokens (up to 8)" in out and "leaves them out" in out
    assert leave_out_long_demonstrations("Env-v0", _Demonstrations([long_]), 6) == DemonstrationFit(1, 0, 6, 6)
    assert capsys.readouterr().out == ""  # nothing left out: nothing said
    with pytest.raises(NoDemonstrations, match="all 2 of Env-v0's demonstrations are longer than 4 tokens"):
        leave_out_long_demonstrations("Env-v0", _Demonstrations([long_, longer]), 4)


def test_the_budget_and_length_options_are_checked():
    assert TrainConfig().warm_start_budget == WARM_START_BUDGET_S
    with pytest.raises(ConfigError, match="warm_start_budget"):
        TrainConfig(warm_start_budget=0).validate()
    with pytest.raises(ConfigError, match="max_length"):
        SFTConfig(max_length=-1).validate()


def _warm_started_envs() -> list[str]:
    """Every registered env a warm start runs on (one ReasoningGym/<task>-v0 id stands for all)."""
    ids = []
    for env_id in mathgym.list_envs():
        if env_id.startswith(REASONING_GYM_PREFIX) and env_id != "ReasoningGym/basic_arithmetic-v0":
            continue
        if env_id.startswith(TEXTARENA_PREFIX):  # against a random mover, without an expert: no warm start
            continue
        if needs_layered_venv(env_id):  # its package lives in another venv (.ci/run)
            continue
        ids.append(env_id)
    return ids


def test_every_envs_warm_start_plan_fits_the_budget():
    counter, positions = chat_token_counter(tiny_model_path()), WARM_START_MAX_TOKENS
    plans, skipped = {}, {}
    for env_id in _warm_started_envs():
        kwargs = run_env_kwargs(env_id, tiny_model_path(), CONTRACT_KWARGS.get(env_id, {}))
        try:
            env = gym.make(env_id, **kwargs)
        except Exception as err:  # noqa: BLE001 - an env that needs a service (a judge) to be built
            skipped[env_id] = f"{type(err).__name__}: {err}"
            continue
        has_expert = hasattr(env.unwrapped, "expert_action")
        env.close()
        if not has_expert:
            skipped[env_id] = "no expert_action(): no warm start"
            continue
        plans[env_id] = warm_start_plan(longest_demonstration(env_id, kwargs, counter), WARM_START_BUDGET_S, 400, positions)
    assert {"MathReason-v0", "CodeSandbox-v0", "RepoRepair-v0", "SQLQuery-v0", "Game2048-v0"} <= set(plans), skipped
    # an LLM judge and a NeMo-Gym server are not given here; an OpenEnv env brings no expert to imitate
    assert set(skipped) <= {"OpenQA-v0", "NeMoGym-v0", "OpenEnv-v0"}, skipped
    over = {env_id: round(p.estimated_s) for env_id, p in plans.items() if p.estimated_s > WARM_START_BUDGET_S}
    assert not over
    assert plans["MathReason-v0"] == WarmStartPlan(400, 64, positions, 28)  # the default run: unchanged
    assert not [env_id for env_id, p in plans.items() if p.truncates]  # every env's demonstrations trained whole
    assert plans["SQLQuery-v0"].row_tokens > tiny_max_positions() and plans["RepoRepair-v0"].row_tokens > 1500
    assert plans["RepoRepair-v0"].steps >= 20  # whole repositories of 1,800 tokens: fewer steps, none cut


def test_a_second_builder_waits_for_the_first_and_uses_its_warm_start(tmp_path, capsys):
    """Two runs building one warm start: the second blocks on the first's lock (held here by another
    process), then finds the result in the cache instead of training it again."""
    import subprocess
    import sys
    import threading

    from mathgym.algos.warm_start import build_lock, cached

    target = tmp_path / "warm_start" / "Env-v0-sft8-abc"
    target.parent.mkdir(parents=True)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, sys; f = open(sys.argv[1], 'a'); fcntl.flock(f, fcntl.LOCK_EX); "
         "print('held', flush=True); sys.stdin.readline()", str(target.parent / f".{target.name}.lock")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    assert holder.stdout.readline().strip() == "held"
    seen: list[bool] = []

    def second() -> None:
        with build_lock(target) as waited:
            seen.append(waited and cached(target, {"env": "Env-v0", "env_kwargs": {}}))

    thread = threading.Thread(target=second)
    thread.start()
    thread.join(0.5)
    assert thread.is_alive() and not seen  # blocked while the first builder holds the lock
    target.mkdir()
    (target / "config.json").write_text("{}")  # the first builder's result lands in the cache
    holder.stdin.write("\n")
    holder.stdin.flush()
    holder.wait(10)
    thread.join(10)
    assert seen == [True]
    assert "another process is building the warm start" in capsys.readouterr().out
    with build_lock(target) as waited:  # free now: no wait
        assert not waited


def test_options_an_env_declares_reward_only_leave_the_warm_start_alone(tmp_path, monkeypatch):
    """A process reward (here a callable that counts its calls) given to MathStep-v0 neither scores
    the warm start's demonstrations nor makes a second cached warm start."""
    from mathgym.algos.warm_start import demonstration_kwargs, tiny_warm_start
    from mathgym.registry import reward_only_options

    monkeypatch.setenv("MATHGYM_CACHE", str(tmp_path))
    calls = []

    def counting(problem, steps):
        calls.append(steps)
        return 1.0

    with pytest.raises(ConfigError, match="process_cap"):  # left out of the demonstrations, still checked first
        tiny_warm_start("MathStep-v0", {"process_cap": 7}, steps=2, progress=False)
    assert not (tmp_path / "warm_start").exists()
    assert {"process_reward", "process_weight", "verifier"} <= reward_only_options("MathStep-v0")
    assert reward_only_options("Hanoi-v0") == frozenset()
    rewarded = {"difficulty": 0, "process_reward": counting, "process_weight": 0.3}
    assert demonstration_kwargs("MathStep-v0", rewarded) == {"difficulty": 0}
    plain = tiny_warm_start("MathStep-v0", {"difficulty": 0}, steps=2, progress=False)
    assert tiny_warm_start("MathStep-v0", rewarded, steps=2, progress=False) == plain and not calls
    models = [p for p in (tmp_path / "warm_start").iterdir() if p.is_dir() and not p.name.startswith(".")]
    assert models == [plain]


def test_the_warm_start_steps_with_the_per_tensor_adamw_its_recipe_was_fixed_with(tmp_path):
    # The fused kernel rounds differently, and the tiny model's short SFT is sensitive to rounding (the
    # learning check's 400-step warm start fell to a tenth of its accuracy with it); trainers default to it.
    from mathgym.algos.sft import SFTTrainer
    from mathgym.algos.warm_start import warm_start_config

    kwargs = run_env_kwargs("MathReason-v0", tiny_model_path(0), {})
    trainer = SFTTrainer(warm_start_config("MathReason-v0", kwargs, WarmStartPlan(2, 4, 512, 28), 8, 0, tmp_path / "run"))
    assert not trainer.loop.optimizer.defaults.get("fused")
    assert TrainConfig().fused_optimizer


def test_a_wrong_evaluation_option_is_refused_before_the_warm_start(tmp_path, monkeypatch):
    from mathgym.algos.warm_start import prepare_model

    monkeypatch.setenv("MATHGYM_CACHE", str(tmp_path))
    config = TrainConfig(eval_env_kwargs={"split": "tset"}, warm_start_steps=2, progress=False)
    with pytest.raises(ConfigError, match=r"--eval-env-kwargs .*split='tset' is not allowed"):
        prepare_model(config)
    assert not (tmp_path / "warm_start").exists()
    # Without an evaluation the option is not read, and the warm start is made.
    assert (tmp_path / "warm_start") in Path(prepare_model(TrainConfig(eval_env_kwargs={"split": "tset"}, eval_tasks=0,
                                                                        warm_start_steps=2, progress=False))).parents


def test_an_evaluation_key_the_env_lacks_is_refused_unless_it_is_the_defaults():
    # A misspelt key would otherwise leave the evaluation on the env's default split, silently.
    with pytest.raises(ConfigError, match=r"MathReason-v0 has no option 'splitt'.*Did you mean 'split'"):
        run_env_kwargs("MathReason-v0", tiny_model_path(), {}, {"splitt": "train"}, optional=TrainConfig().eval_env_kwargs)
    # The default's split is meant for the envs that have one: an env without it is evaluated without it.
    assert "split" not in run_env_kwargs("GuessNumber-v0", tiny_model_path(), {}, {"split": "test"}, optional={"split"})
    with pytest.raises(ConfigError, match=r"GuessNumber-v0 has no option 'split'"):
        run_env_kwargs("GuessNumber-v0", tiny_model_path(), {}, {"split": "test"})
    assert run_env_kwargs("MathReason-v0", tiny_model_path(), {}, {"split": "train"})["split"] == "train"
    # Through a config: its default evaluation options are the optional ones.
    assert "split" not in resolved_env_kwargs(TrainConfig(env="GuessNumber-v0"), evaluation=True)
    with pytest.raises(ConfigError, match="no option 'levle'"):
        resolved_env_kwargs(TrainConfig(eval_env_kwargs={"split": "test", "levle": 1}), evaluation=True)
