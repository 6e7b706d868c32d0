"""A model as the fixed opponent of a two-player env: ``(messages) -> reply``, loaded when first asked.

The envs take an opponent as a plain callable (:class:`~mathgym.envs.multiagent.versus.ChatOpponent`),
so the env layer never imports torch; this adapter makes one of an :class:`LLMPolicy` or of a
model directory (a saved checkpoint: loaded on the first move, so an env made in a vector env's
worker loads it there, once).

Example:
    >>> import gymnasium as gym, mathgym
    >>> opponent = PolicyOpponent("runs/tictactoe/final")        # nothing loaded yet
    >>> env = gym.make("TicTacToe-v0", opponent=opponent)        # doctest: +SKIP
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mathgym.agents.sampling import SamplingParams


class PolicyOpponent:
    """A chat policy answering as the opponent: greedy by default, the reply's text as the move.

    Args:
        policy: An :class:`~mathgym.agents.policy.LLMPolicy`, or a model directory / hub id loaded
            with ``LLMPolicy.from_pretrained`` on the first call.
        max_new_tokens: Longest reply in tokens.
        temperature: ``0`` for greedy; above, replies are drawn with ``seed`` then ``seed + 1``, ...
        device: Where a model loaded here lives.
        seed: First seed of sampled replies.
    """

    def __init__(self, policy: Any, *, max_new_tokens: int = 256, temperature: float = 0.0, device: str = "cpu", seed: int = 0):
        self._policy = None if isinstance(policy, (str, Path)) else policy
        self.source = str(policy) if isinstance(policy, (str, Path)) else getattr(policy, "name_or_path", "")
        self.params = SamplingParams(temperature=temperature, max_new_tokens=max_new_tokens)
        self.device = device
        self._next_seed = seed

    @property
    def policy(self) -> Any:
        """The policy (loaded on first use when given a directory)."""
        if self._policy is None:
            from mathgym.agents.policy import LLMPolicy  # noqa: PLC0415 - torch only once a move is asked

            self._policy = LLMPolicy.from_pretrained(self.source, device=self.device)
        return self._policy

    def __call__(self, messages: list[dict[str, str]]) -> str:
        policy = self.policy
        prompt = policy.chat.prompt_ids(messages)
        seed, self._next_seed = self._next_seed, self._next_seed + 1
        generation = policy.generate([prompt], self.params, seeds=[seed])[0]
        return policy.chat.action_text(generation.token_ids)

    def __getstate__(self) -> dict[str, Any]:
        # A copy (a vector env's worker) loads its own model from the directory; a live policy travels as it is.
        state = dict(self.__dict__)
        if self.source and Path(self.source).exists():
            state["_policy"] = None
        return state
