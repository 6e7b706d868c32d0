"""mathgym envs inside OpenRLHF: this file is an ``--agent_func_path`` agent and a ``reward_func`` file.

Multi-turn, any env (OpenRLHF's ``MultiTurnAgentExecutor`` drives :class:`AgentInstance`)::

    python -m openrlhf.cli.train_ppo_ray ... --train.agent_func_path \\
        $(python -c "import mathgym.integrations.openrlhf as m; print(m.__file__)")

Each data row's ``label`` names the env task as JSON (``env_id``, ``env_kwargs``, ``seed``,
and ``tokenizer``: the model path, whose chat template renders the env's replies);
:func:`openrlhf_rows` writes such rows. ``step`` returns the env's reward, the episode's
return as ``scores``, and ``environment_feedback``: the env's reply as the chat-template
text that follows the action (end of the assistant turn, a user turn, the next generation
prompt), written by the chat format of the row's tokenizer as mathgym's rollout collector writes it
(:class:`~mathgym.agents.chat_format.ChatFormat`; no model is loaded).

Single-turn math (``--reward.remote_url`` pointing at this file): :func:`reward_func`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import mathgym  # noqa: F401 - registers the envs
from mathgym.integrations._env_reply import env_reply_text  # noqa: F401 - public here
from mathgym.integrations._prompts import env_prompts
from mathgym.integrations._labels import label_scores


def openrlhf_rows(env_id: str, n: int, *, tokenizer: str, env_kwargs: Mapping[str, Any] | None = None,
                  start_seed: int = 0) -> list[dict[str, Any]]:
    """``n`` rows for OpenRLHF (``--data.input_key prompt --data.label_key label --data.apply_chat_template``).

    Args:
        env_id: Registered env id.
        n: Number of tasks (seeds ``start_seed`` ...).
        tokenizer: Path or hub id of the trained model's tokenizer (renders the env's replies).
        env_kwargs: Constructor options of the env.
        start_seed: First seed.

    Raises:
        UnknownEnvError: ``env_id`` is not registered (the message suggests close ids).
        ConfigError: ``env_kwargs`` names an option the env does not take.
    """
    kwargs, prompts = env_prompts(env_id, n, env_kwargs, start_seed)
    rows = []
    for seed, messages in prompts:
        label = {"env_id": env_id, "env_kwargs": kwargs, "seed": seed, "tokenizer": tokenizer}
        rows.append({"prompt": messages, "label": json.dumps(label)})
    return rows


def reward_func(queries: Sequence[str], prompts: Sequence[str], labels: Sequence[str]) -> dict[str, Any]:
    """OpenRLHF's ``reward_func(queries, prompts, labels)``: 1.0 where the response's final answer is
    the label, or where the label holds a program's tests (APPS's ``inputs`` and ``outputs``, or a
    list of input/output cases, as JSON) and the response's program passes them all in mathgym's
    sandbox.

    ``queries`` are prompt + response as text; the response is what follows the prompt.
    Answers are scored by :class:`~mathgym.rewards.math.MathVerifier` in ``"lenient"`` mode, each
    label read as MathReason-v0 reads a data set's answer (bare LaTeX as LaTeX, a JSON list of
    forms matched by any: :meth:`~mathgym.rewards.math.MathVerifier.score_references`).
    """
    import torch

    responses = [q[len(p):] if q.startswith(p) else q for q, p in zip(queries, prompts)]
    scores = torch.tensor(label_scores(responses, list(labels)), dtype=torch.float32)
    return {"rewards": scores, "scores": scores, "extra_logs": {}}


def __getattr__(name: str) -> Any:
    """``AgentInstance`` and ``AgentExecutor``, OpenRLHF's agent classes, built on first use (OpenRLHF
    looks ``AgentExecutor`` up in this file): OpenRLHF and torch are imported only then."""
    if name in ("AgentInstance", "AgentExecutor"):
        from mathgym.integrations import _openrlhf_agent

        return getattr(_openrlhf_agent, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
