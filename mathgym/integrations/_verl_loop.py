"""The verl agent loop over mathgym envs (imports verl: reached through ``mathgym.integrations.verl``).

Kept apart from :mod:`mathgym.integrations.verl` so that writing data rows and scoring need
no verl; that module hands out :class:`MathgymAgentLoop` on first use.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from uuid import uuid4

import gymnasium as gym
from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput, register

import mathgym  # noqa: F401 - registers the envs
from mathgym.errors import ConfigError
from mathgym.integrations._verl_names import AGENT_NAME


def row_env_kwargs(extra: Mapping[str, Any]) -> dict[str, Any]:
    """The env options of a data row: the JSON text :func:`~mathgym.integrations.verl.verl_rows` writes
    (a mapping is taken as it is)."""
    kwargs = extra.get("env_kwargs") or {}
    if isinstance(kwargs, str):
        try:
            kwargs = json.loads(kwargs)
        except ValueError as exc:
            raise ConfigError(f"extra_info['env_kwargs'] must be a JSON object, got {kwargs[:80]!r} ({exc}).") from None
    if not isinstance(kwargs, Mapping):
        raise ConfigError(f"extra_info['env_kwargs'] must be a JSON object, got {type(kwargs).__name__}.")
    return dict(kwargs)


@register(AGENT_NAME)
class MathgymAgentLoop(AgentLoopBase):
    """verl agent loop that plays one episode of any mathgym env per data row.

    Reads ``extra_info["env_id"]``, ``extra_info.get("env_kwargs")`` and
    ``extra_info.get("seed")``; the turn budget is the env's own (``env_kwargs`` changes it),
    and the episode also stops when the response reaches ``rollout.response_length``.
    """

    __module__ = "mathgym.integrations.verl"  # its public home: verl's registry and pickles name it there

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.response_length = int(self.rollout_config.response_length)

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        extra = dict(kwargs.get("extra_info") or {})
        if "env_id" not in extra:
            raise ConfigError(
                "the mathgym agent loop needs extra_info['env_id'] in each data row; write rows with verl_rows()."
            )
        env = gym.make(extra["env_id"], **row_env_kwargs(extra))
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
