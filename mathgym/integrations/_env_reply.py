"""The env's reply as the chat-template text that follows an action, for OpenRLHF's agent (its
``environment_feedback``): shared by :mod:`mathgym.integrations.openrlhf`, which names it, and the
agent classes of :mod:`mathgym.integrations._openrlhf_agent`. Needs transformers (a tokenizer), no model.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any


@lru_cache(maxsize=4)
def _chat_format(tokenizer_path: str) -> Any:
    """The :class:`~mathgym.agents.chat_format.ChatFormat` of the tokenizer at ``tokenizer_path``
    (its chat template as it is: OpenRLHF renders the prompt with no template variables)."""
    from mathgym.agents.chat_format import ChatFormat, load_tokenizer

    return ChatFormat(load_tokenizer(tokenizer_path), name=tokenizer_path)


def env_reply_text(tokenizer_path: str, chat: list[dict[str, str]], action: str, reply: str) -> str:
    """The chat-template text that follows ``action``: the env turn mathgym's rollout collector
    appends (:meth:`~mathgym.agents.chat_format.ChatFormat.env_turn_ids`), as text.

    The action is taken to end with the template's end-of-turn token: OpenRLHF generates
    again only after an action that stopped (one cut by the length budget ends the episode).
    """
    chat_format = _chat_format(tokenizer_path)
    tokens = chat_format.env_turn_ids(chat, reply, last_token=chat_format.end_of_turn_id)
    return chat_format.decode(tokens, skip_special_tokens=False)
