"""The env's reply as the chat-template text that follows an action, for OpenRLHF's agent (its
``environment_feedback``): shared by :mod:`mathgym.integrations.openrlhf`, which names it, and the
agent classes of :mod:`mathgym.integrations._openrlhf_agent`. Imports torch only when called.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any


@lru_cache(maxsize=4)
def _reply_policy(tokenizer_path: str) -> Any:
    """A model-less :class:`LLMPolicy` (tokenizer and chat template only) for rendering env replies."""
    import torch

    from mathgym.agents.policy import LLMPolicy, load_tokenizer

    return LLMPolicy(model=None, tokenizer=load_tokenizer(tokenizer_path), device=torch.device("cpu"))


def env_reply_text(tokenizer_path: str, chat: list[dict[str, str]], action: str, reply: str) -> str:
    """The chat-template text that follows ``action``: mathgym's ``env_reply_tokens``, as text.

    The action is taken to end with the template's end-of-turn token: OpenRLHF generates
    again only after an action that stopped (one cut by the length budget ends the episode).
    """
    from types import SimpleNamespace

    from mathgym.algos.rollout import RolloutCollector

    policy = _reply_policy(tokenizer_path)
    collector = SimpleNamespace(policy=policy)  # env_reply_tokens reads only self.policy
    tokens = RolloutCollector.env_reply_tokens(collector, chat, reply, last_token=policy.end_of_turn_id)  # type: ignore[arg-type]
    return policy.tokenizer.decode(tokens, skip_special_tokens=False)
