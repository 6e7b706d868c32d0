"""Data-parallel GRPO is the single-process run: the same seed gives the same tasks, the same
samples and the same parameters (up to float reduction order) on one process or two ranks."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from tests import dp_worker  # noqa: E402
from tests.algos.test_accelerate import _free_port, _launch, _state  # noqa: E402
from tests.trainkit import build_small_model, register_guess_env  # noqa: E402

STEPS = 3


def test_a_batch_split_over_collectors_gives_the_whole_batchs_episodes(tmp_path):
    """Multi-turn: each episode's samples are keyed by (sampling seed, task, sample, turn), not by its batch."""
    from mathgym.agents.policy import LLMPolicy, SamplingParams
    from mathgym.algos.rollout import RolloutCollector, RolloutSettings

    policy = LLMPolicy.from_pretrained(str(build_small_model(tmp_path / "model")), device="cpu")
    settings = RolloutSettings(group_size=3, sampling=SamplingParams(max_new_tokens=4), max_episode_tokens=200)
    env, kwargs, seeds = register_guess_env(), {"high": 3, "max_turns": 3}, [11, 12, 13, 14]

    def collect(task_seeds, sampling_seed=7):
        collector = RolloutCollector(env, kwargs, policy, len(task_seeds), settings)
        try:
            return collector.collect_episodes(task_seeds, sampling_seed=sampling_seed)
        finally:
            collector.close()

    whole = collect(seeds)
    halves = collect(seeds[:2]) + collect(seeds[2:])
    reordered = collect(seeds[::-1])
    assert max(len(e.completions) for e in whole) > 1  # some episodes ran several turns
    assert [e.token_ids for e in halves] == [e.token_ids for e in whole]
    assert [e.reward for e in halves] == [e.reward for e in whole]
    flipped = [ep for g in range(4) for ep in reordered[(3 - g) * 3 : (4 - g) * 3]]
    assert [e.token_ids for e in flipped] == [e.token_ids for e in whole]
    assert [e.token_ids for e in collect(seeds, sampling_seed=8)] != [e.token_ids for e in whole]


def test_two_ranks_train_the_single_process_parameters(tmp_path):
    model = str(build_small_model(tmp_path / "model"))
    one, two = tmp_path / "one", tmp_path / "two"
    threads = torch.get_num_threads()
    try:  # the config asks for 1 thread, as in the launched ranks; leave the session's setting as it was
        dp_worker.plain_run(model, str(one), STEPS)
    finally:
        torch.set_num_threads(threads)
    _launch([
        "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(_free_port()),
        "tests/dp_worker.py", model, str(two), "plain", str(STEPS),
    ])
    single, double = _state(one, STEPS), _state(two, STEPS)
    worst = max(float((double["model"][k] - w).abs().max()) for k, w in single["model"].items())
    print(f"largest parameter difference after {STEPS} steps, 1 process vs 2 ranks: {worst:.3g}")
    assert worst <= 1e-5


@pytest.mark.heavy
def test_two_ranks_refill_and_curriculum_as_one_process(tmp_path):
    """Dynamic sampling's refill and the curriculum's pass rates see every rank's groups: two ranks
    train on the groups one process does, and keep the same curriculum state."""
    model = str(build_small_model(tmp_path / "model"))
    one, two = tmp_path / "one", tmp_path / "two"
    threads = torch.get_num_threads()
    try:
        dp_worker.plain_run(model, str(one), STEPS, **dp_worker.TOOLBOX)
    finally:
        torch.set_num_threads(threads)
    _launch([
        "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(_free_port()),
        "tests/dp_worker.py", model, str(two), "toolbox", str(STEPS),
    ])
    single, double = _state(one, STEPS), _state(two, STEPS)
    assert single["curriculum"] == double["curriculum"] and single["curriculum"]["tasks"]
    worst = max(float((double["model"][k] - w).abs().max()) for k, w in single["model"].items())
    assert worst <= 1e-5
    from mathgym.algos.metrics import read_metrics

    counts = [(r["rollout/filtered_groups"], r["rollout/extra_rounds"]) for r in read_metrics(one) if "rollout/extra_rounds" in r]
    assert counts == [(r["rollout/filtered_groups"], r["rollout/extra_rounds"]) for r in read_metrics(two) if "rollout/extra_rounds" in r]
    assert sum(f for f, _ in counts) > 0


@pytest.mark.heavy
def test_two_ranks_with_the_batch_ahead_train_the_single_process_parameters(tmp_path):
    """off_policy_steps=1: each rank samples its share of the next batch during the update, with the
    weights every rank holds; the run is the single process's with the same option."""
    model = str(build_small_model(tmp_path / "model"))
    one, two = tmp_path / "one", tmp_path / "two"
    threads = torch.get_num_threads()
    try:
        dp_worker.plain_run(model, str(one), STEPS, off_policy_steps=1)
    finally:
        torch.set_num_threads(threads)
    _launch([
        "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(_free_port()),
        "tests/dp_worker.py", model, str(two), "overlap", str(STEPS),
    ])
    single, double = _state(one, STEPS), _state(two, STEPS)
    worst = max(float((double["model"][k] - w).abs().max()) for k, w in single["model"].items())
    assert worst <= 1e-5
    from mathgym.algos.metrics import read_metrics

    rows_one, rows_two = read_metrics(one), read_metrics(two)
    assert [r["rollout/staleness"] for r in rows_two] == [0.0] + [1.0] * (STEPS - 1)
    for key in ("rollout/reward", "rollout/logprob_diff_max"):
        assert [r[key] for r in rows_one] == pytest.approx([r[key] for r in rows_two], rel=1e-5, abs=1e-6), key


@pytest.mark.heavy
def test_two_ranks_with_the_batch_ahead_resume_exactly(tmp_path):
    """Each rank's batch ahead is in the checkpoint: two ranks stopped after it and resumed train the
    parameters of two ranks never stopped."""
    model = str(build_small_model(tmp_path / "model"))
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    for run_dir, mode in ((straight, "overlap"), (resumed, "overlap-stop"), (resumed, "overlap-resume")):
        _launch([
            "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(_free_port()),
            "tests/dp_worker.py", model, str(run_dir), mode, "4",
        ])
    assert len(_state(resumed, 2)["ranks"]) == 2 and all(r["rollouts_ahead"]["step"] == 2 for r in _state(resumed, 2)["ranks"])
    a, b = _state(straight, 4), _state(resumed, 4)
    for name, weight in a["model"].items():
        assert torch.allclose(weight, b["model"][name], rtol=1e-6, atol=1e-7), name
