"""mathgym envs inside verl: an agent loop registered as ``mathgym`` and a custom reward function.

Agent loop (multi-turn, any env)::

    # agent_loop.yaml, passed as actor_rollout_ref.rollout.agent.agent_loop_config_path
    - name: mathgym
      _target_: mathgym.integrations.verl.MathgymAgentLoop

Each data row names its env in ``extra_info`` (``env_id``, ``env_kwargs``, ``seed``) and
sets ``agent_name: mathgym``; :func:`verl_rows` writes such rows. The loop resets the env
with the row's seed, generates through verl's server manager, steps the env with the
decoded text, and appends the env's reply with verl's own Continuous Token builder (the
same token bookkeeping verl's tool agent uses), so response tokens stay exactly what the
server generated. The episode's return is ``reward_score``.

Reward function (single-turn math, verl's ``custom_reward_function``)::

    custom_reward_function.path=$(python -c "import mathgym.integrations.verl as m; print(m.__file__)")
    custom_reward_function.name=compute_score
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from uuid import uuid4

import gymnasium as gym
from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput, register

import mathgym  # noqa: F401 - registers the envs
from mathgym.errors import ConfigError
from mathgym.rewards.math import MathVerifier

AGENT_NAME = "mathgym"
_VERIFIER: MathVerifier | None = None


def compute_score(
    data_source: str, solution_str: str, ground_truth: str, extra_info: Mapping[str, Any] | None = None
) -> float:
    """verl's custom reward function: 1.0 when ``solution_str``'s final answer equals ``ground_truth``.

    Uses mathgym's :class:`~mathgym.rewards.math.MathVerifier` in ``"lenient"`` mode (it
    scores other people's prompts, whose answer format it does not control). An
    infrastructure failure (the verifier crashed) scores 0.0 and is not retried.
    """
    global _VERIFIER
    if _VERIFIER is None:
        _VERIFIER = MathVerifier(answer_extraction="lenient")
    return float(_VERIFIER.score(str(solution_str), str(ground_truth)).score)


def verl_rows(
    env_id: str, n: int, *, env_kwargs: Mapping[str, Any] | None = None, start_seed: int = 0
) -> list[dict[str, Any]]:
    """``n`` rows of verl's RLHF data format for ``env_id`` (write them to parquet with pandas).

    Each row: ``data_source`` (``mathgym/<env_id>``), ``prompt`` (the env's chat),
    ``agent_name`` (``mathgym``), ``reward_model`` (style ``env``; the ground truth is left
    empty: the env judges), ``extra_info`` (``env_id``, ``env_kwargs``, ``seed``).
    """
    env = gym.make(env_id, **dict(env_kwargs or {}))
    rows = []
    try:
        for seed in range(start_seed, start_seed + n):
            _, info = env.reset(seed=seed)
            rows.append({
                "data_source": f"mathgym/{env_id}",
                "prompt": [{"role": m["role"], "content": m["content"]} for m in info["messages"]],
                "agent_name": AGENT_NAME,
                "reward_model": {"style": "env", "ground_truth": ""},
                "extra_info": {"env_id": env_id, "env_kwargs": dict(env_kwargs or {}), "seed": seed},
            })
    finally:
        env.close()
    return rows


@register(AGENT_NAME)
class MathgymAgentLoop(AgentLoopBase):
    """verl agent loop that plays one episode of any mathgym env per data row.

    Reads ``extra_info["env_id"]``, ``extra_info.get("env_kwargs")`` and
    ``extra_info.get("seed")``; the turn budget is the env's own (``env_kwargs`` changes it),
    and the episode also stops when the response reaches ``rollout.response_length``.
    """

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.response_length = int(self.rollout_config.response_length)

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        extra = dict(kwargs.get("extra_info") or {})
        if "env_id" not in extra:
            raise ConfigError(
                "the mathgym agent loop needs extra_info['env_id'] in each data row; write rows with verl_rows()."
            )
        env = gym.make(extra["env_id"], **dict(extra.get("env_kwargs") or {}))
        try:
            return await self._play(env, extra.get("seed"), sampling_params)
        finally:
            env.close()

    async def _play(self, env: gym.Env, seed: Any, sampling_params: dict[str, Any]) -> AgentLoopOutput:
        _, info = env.reset(seed=None if seed is None else int(seed))
        messages = [dict(m) for m in info["messages"]]
        prompt_ids = await self.ct_build_initial_tokens(messages)
        runtime, mask, logprobs = list(prompt_ids), [], None
        total, turns, status, correct = 0.0, 0, "in_progress", False
        while True:
            out = await self.server_manager.generate(
                request_id=uuid4().hex, prompt_ids=runtime, sampling_params=sampling_params
            )
            if out.log_probs and logprobs is None:
                logprobs = [0.0] * len(mask)  # verl aligns log-probs with the mask; env tokens carry 0
            merged, mask, logprobs = await self.ct_merge_assistant_token(
                runtime, out.token_ids, mask, logprobs if out.log_probs else None, assistant_logprobs=out.log_probs or None
            )
            runtime = merged.token_ids
            text = self.tokenizer.decode(out.token_ids, skip_special_tokens=True)
            reply, reward, terminated, truncated, step_info = env.step(text)
            total, turns = total + float(reward), turns + 1
            status, correct = str(step_info.get("status", status)), bool(step_info.get("correct", False))
            if terminated or truncated or len(mask) >= self.response_length:
                break
            before = messages + [{"role": "assistant", "content": text}]
            messages = before + [{"role": "user", "content": str(reply)}]
            merged, mask, logprobs = await self.ct_merge_context_msg(before, messages, runtime, mask, logprobs)
            runtime = merged.token_ids
        response = runtime[len(prompt_ids) :]
        return AgentLoopOutput(
            prompt_ids=list(prompt_ids),
            response_ids=response[: self.response_length],
            response_mask=mask[: self.response_length],
            response_logprobs=logprobs[: self.response_length] if logprobs else None,
            reward_score=total,
            num_turns=2 * turns,  # verl counts chat messages: the prompt, the actions and the env's replies
            metrics=AgentLoopMetrics(),
            extra_fields={"env_status": status, "env_correct": correct, "env_turns": turns},
        )
