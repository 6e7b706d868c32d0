"""Rollouts: groups, token faithfulness across turns, masks, budgets, infra statuses."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from mathgym.agents.policy import LLMPolicy, SamplingParams  # noqa: E402
from mathgym.algos.batch import RolloutBatch  # noqa: E402
from mathgym.algos.rollout import RolloutCollector, RolloutSettings  # noqa: E402
from tests.trainkit import build_small_model, register_guess_env  # noqa: E402


@pytest.fixture(scope="module")
def policy(tmp_path_factory):
    path = build_small_model(tmp_path_factory.mktemp("model"))
    return LLMPolicy.from_pretrained(str(path), device="cpu")


def _segments(ep):
    """(is_action, step, tokens) runs of an episode."""
    runs = []
    for tok, act, step in zip(ep.token_ids, ep.action_mask, ep.step_index):
        if runs and runs[-1][0] == act and runs[-1][1] == step:
            runs[-1][2].append(tok)
        else:
            runs.append((act, step, [tok]))
    return runs


def test_single_turn_groups_masks_and_logprobs(policy):
    settings = RolloutSettings(group_size=3, sampling=SamplingParams(max_new_tokens=12))
    collector = RolloutCollector("MathReason-v0", {"system_prompt": ""}, policy, num_tasks=2, settings=settings)
    try:
        episodes = collector.collect_episodes([5, 6], torch.Generator().manual_seed(0))
    finally:
        collector.close()
    assert len(episodes) == 6
    assert [e.group_id for e in episodes] == [0, 0, 0, 1, 1, 1]
    assert len({e.task_id for e in episodes[:3]}) == 1 and episodes[0].task_id != episodes[3].task_id
    for ep in episodes:
        runs = _segments(ep)
        assert [(a, s) for a, s, _ in runs] == [(0, -1), (1, 0)]
        prompt = policy.tokenizer.decode(runs[0][2], skip_special_tokens=False)
        assert prompt.startswith("<|user|>What is ") and prompt.endswith("<|end|><|assistant|>")
        assert len(ep.step_rewards) == 1 and ep.status in {"correct", "wrong", "unparseable"}
        assert ep.truncated_tokens == (ep.num_action_tokens == 12 and ep.token_ids[-1] != policy.chat.eos_token_id)
        assert all(lp <= 0 for lp, m in zip(ep.logprobs, ep.action_mask) if m)
    batch = RolloutBatch.from_episodes(episodes, policy.pad_token_id)
    assert batch.input_ids.shape[0] == 6 and batch.action_mask.shape == batch.input_ids.shape
    # stored sampling log-probs are the model's log-probs of those tokens (temperature 1)
    logprobs, _ = policy.token_logprobs(batch.input_ids, batch.attention_mask)
    mask = batch.action_mask.bool()
    assert torch.allclose(logprobs[mask], batch.sampler_logprobs[mask], atol=1e-4)


def test_multi_turn_is_token_faithful_and_flags_turn_budget(policy):
    env_id = register_guess_env()
    settings = RolloutSettings(group_size=2, sampling=SamplingParams(max_new_tokens=6))
    collector = RolloutCollector(env_id, {"high": 1000, "max_turns": 3}, policy, num_tasks=3, settings=settings)
    try:
        episodes = collector.collect_episodes([1, 2, 3], torch.Generator().manual_seed(1))
    finally:
        collector.close()
    decode = lambda t: policy.tokenizer.decode(t, skip_special_tokens=False)  # noqa: E731
    multi = [e for e in episodes if len(e.step_rewards) > 1]
    assert multi, "a random policy should not solve every task in one turn"
    for ep in episodes:
        runs = _segments(ep)
        actions = [r for r in runs if r[0] == 1]
        assert [r[1] for r in actions] == list(range(len(ep.step_rewards)))
        assert len(ep.completions) == len(ep.step_rewards) <= 3
        for k in range(1, len(runs) - 1, 2):  # env segments between actions
            env_text = decode(runs[k + 1][2])
            prev_action = runs[k][2]
            expected_prefix = "" if prev_action[-1] == policy.chat.eos_token_id else "<|end|>"
            assert env_text.startswith(expected_prefix + "<|user|>")
            assert env_text.endswith("<|end|><|assistant|>")
            assert env_text[len(expected_prefix) + len("<|user|>") : -len("<|end|><|assistant|>")] in {"higher", "lower", "Say a number."}
        if len(ep.step_rewards) == 3 and ep.status != "correct":
            assert ep.truncated_turns


def test_collector_turn_cap_and_token_budget(policy):
    env_id = register_guess_env()
    settings = RolloutSettings(group_size=1, sampling=SamplingParams(max_new_tokens=8), max_turns=2, max_episode_tokens=40)
    collector = RolloutCollector(env_id, {"high": 1000, "max_turns": 5}, policy, num_tasks=4, settings=settings)
    try:
        episodes = collector.collect_episodes([1, 2, 3, 4], torch.Generator().manual_seed(2))
    finally:
        collector.close()
    for ep in episodes:
        assert len(ep.token_ids) <= 40
        assert len(ep.step_rewards) <= 2
        if ep.status != "correct":
            assert ep.truncated


def test_infra_failures_are_counted_and_masked(policy):
    env_id = register_guess_env()
    settings = RolloutSettings(group_size=2, sampling=SamplingParams(max_new_tokens=4))
    collector = RolloutCollector(env_id, {"high": 4, "infra_failure_every": 2}, policy, num_tasks=8, settings=settings)
    try:
        batch = collector.collect(list(range(8)), torch.Generator().manual_seed(3))
    finally:
        collector.close()
    infra = torch.tensor([s == "sandbox_error" for s in batch.statuses])
    assert infra.any() and (~infra).any()
    assert torch.equal(batch.infra_failure, infra)
    mask = batch.loss_mask()
    assert mask[infra].sum() == 0 and mask[~infra].sum() > 0
    assert torch.equal(batch.loss_mask(mask_truncated=True)[batch.truncated].sum(), torch.tensor(0.0))


def test_select_and_to_keep_every_field(policy):
    settings = RolloutSettings(group_size=2, sampling=SamplingParams(max_new_tokens=4))
    collector = RolloutCollector("MathReason-v0", {"system_prompt": ""}, policy, num_tasks=2, settings=settings)
    try:
        batch = collector.collect([0, 1])
    finally:
        collector.close()
    sub = batch.select([3, 0])
    assert sub.task_ids == [batch.task_ids[3], batch.task_ids[0]]
    assert torch.equal(sub.input_ids[0], batch.input_ids[3]) and len(sub) == 2
    assert sub.to("cpu").statuses == sub.statuses


def test_multi_turn_episodes_are_the_same_with_the_turn_cache(policy, monkeypatch):
    import contextlib

    env_id = register_guess_env()
    settings = RolloutSettings(group_size=2, sampling=SamplingParams(max_new_tokens=6))

    def collect() -> list:
        collector = RolloutCollector(env_id, {"high": 1000, "max_turns": 4}, policy, num_tasks=3, settings=settings)
        try:
            return collector.collect_episodes([1, 2, 3], sampling_seed=7)
        finally:
            collector.close()

    saved = []
    scope = LLMPolicy.reusing_turns

    @contextlib.contextmanager
    def counting(self):
        with scope(self) as turns:
            yield turns
            saved.append(turns.reused_tokens)

    monkeypatch.setattr(LLMPolicy, "reusing_turns", counting)
    cached = collect()
    assert saved and saved[0] > 0
    monkeypatch.setattr(LLMPolicy, "reusing_turns", lambda self: contextlib.nullcontext())
    plain = collect()
    assert max(len(e.step_rewards) for e in plain) > 1
    for a, b in zip(cached, plain):
        assert a.token_ids == b.token_ids and a.step_rewards == b.step_rewards and a.status == b.status
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-5)
