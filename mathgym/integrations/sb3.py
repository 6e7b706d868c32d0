"""Any mathgym text env as a token-level MDP that Stable-Baselines3 accepts.

:class:`TokenLevelEnv` turns ``gymnasium.Env[str, str]`` into an env whose observation is
a fixed-size integer array (the prompt and the text so far, as token ids of a small
tokenizer, left-padded) and whose action is one token from a ``Discrete`` vocabulary.
Tokens accumulate into the current action; at the end token (or the action's length
limit) the wrapped env is stepped with the decoded text and its reward is returned.
Multi-turn envs continue with the env's reply appended to the observation::

    import gymnasium as gym, mathgym
    from stable_baselines3 import PPO
    from mathgym.integrations.sb3 import TokenLevelEnv

    env = TokenLevelEnv(gym.make("MathReason-v0"))
    PPO("MlpPolicy", env).learn(2_000)

The default tokenizer is the embedded tiny model's character-level one (built in-process
from ``tokenizers``/``transformers``; torch is not needed).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from mathgym.errors import ConfigError, InvalidActionError


def default_tokenizer() -> Any:
    """The embedded tiny model's character-level tokenizer (about 120 tokens)."""
    from mathgym.agents.tiny import build_tokenizer

    return build_tokenizer()


class TokenLevelEnv(gym.Env[np.ndarray, np.int64]):
    """A mathgym text env seen one token at a time.

    Args:
        env: The text env (``gym.make("MathReason-v0")``).
        tokenizer: A Hugging Face tokenizer with an EOS token (default: :func:`default_tokenizer`).
        max_obs_tokens: Length of the observation array; longer text keeps its first
            ``max_obs_tokens - max_action_tokens`` tokens (the task) and its most recent ones.
        max_action_tokens: Tokens after which the current action is sent without an end token.
        action_tokens: The strings the agent may emit (each must be one token of the
            tokenizer); ``None`` allows the whole vocabulary. The end token is always allowed.
        action_prefix: Text put before each decoded action (e.g. ``"\\\\boxed{"``).
        action_suffix: Text put after it (e.g. ``"}"``).

    Observation: ``MultiDiscrete([vocab_size] * max_obs_tokens)``, left-padded with the pad
    token. Action: ``Discrete(n)``; index ``n - 1`` is the end token.
    """

    metadata = {"render_modes": []}

    def __init__(
        self,
        env: gym.Env,
        tokenizer: Any = None,
        *,
        max_obs_tokens: int = 64,
        max_action_tokens: int = 8,
        action_tokens: Sequence[str] | None = None,
        action_prefix: str = "",
        action_suffix: str = "",
    ):
        if not 0 < max_action_tokens < max_obs_tokens:
            raise ConfigError(f"need 0 < max_action_tokens ({max_action_tokens}) < max_obs_tokens ({max_obs_tokens}).")
        self.env = env
        self.tokenizer = tokenizer if tokenizer is not None else default_tokenizer()
        self.end_id = self.tokenizer.eos_token_id
        if self.end_id is None:
            raise ConfigError("the tokenizer has no EOS token; TokenLevelEnv uses it as the end-of-action token.")
        pad = self.tokenizer.pad_token_id
        self.pad_id = int(pad if pad is not None else self.end_id)
        self.max_obs_tokens, self.max_action_tokens = int(max_obs_tokens), int(max_action_tokens)
        self.action_prefix, self.action_suffix = action_prefix, action_suffix
        self.action_ids = self._action_ids(action_tokens)
        vocab = len(self.tokenizer)
        self.observation_space = spaces.MultiDiscrete(np.full(self.max_obs_tokens, vocab, dtype=np.int64))
        self.action_space = spaces.Discrete(len(self.action_ids))
        self._tokens: list[int] = []
        self._action: list[int] = []
        self._prompt_len = 0

    def _action_ids(self, action_tokens: Sequence[str] | None) -> list[int]:
        if action_tokens is None:
            return [i for i in range(len(self.tokenizer)) if i not in (self.end_id, self.pad_id)] + [int(self.end_id)]
        ids = []
        for text in action_tokens:
            encoded = self.tokenizer(text, add_special_tokens=False)["input_ids"]
            if len(encoded) != 1:
                raise ConfigError(
                    f"action token {text!r} is {len(encoded)} tokens in this tokenizer; each must be one token."
                )
            ids.append(int(encoded[0]))
        return ids + [int(self.end_id)]

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _observation(self) -> np.ndarray:
        tokens = self._tokens + self._action
        if len(tokens) > self.max_obs_tokens:
            head = min(self._prompt_len, self.max_obs_tokens - self.max_action_tokens)
            tokens = tokens[:head] + tokens[len(tokens) - (self.max_obs_tokens - head) :]
        obs = np.full(self.max_obs_tokens, self.pad_id, dtype=np.int64)
        if tokens:
            obs[self.max_obs_tokens - len(tokens) :] = tokens
        return obs

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        text, info = self.env.reset(seed=seed, options=options)
        self._tokens = self._encode(str(text))
        self._prompt_len = len(self._tokens)
        self._action = []
        return self._observation(), dict(info)

    def step(self, action: Any) -> tuple[np.ndarray, SupportsFloat, bool, bool, dict[str, Any]]:
        if not self.action_space.contains(np.int64(action) if np.isscalar(action) or np.ndim(action) == 0 else action):
            raise InvalidActionError(
                f"TokenLevelEnv action must be an integer in [0, {self.action_space.n}), got {action!r}."
            )
        token = self.action_ids[int(action)]
        if token != self.end_id:
            self._action.append(token)
        if token != self.end_id and len(self._action) < self.max_action_tokens:
            return self._observation(), 0.0, False, False, {"action_tokens": len(self._action)}
        text = self.action_prefix + self.tokenizer.decode(self._action, skip_special_tokens=True) + self.action_suffix
        reply, reward, terminated, truncated, info = self.env.step(text)
        info = {**info, "action_text": text}
        self._tokens += self._action + [int(self.end_id)]
        self._action = []
        if not (terminated or truncated):
            self._tokens += self._encode(str(reply))
        return self._observation(), float(reward), bool(terminated), bool(truncated), info

    def close(self) -> None:
        self.env.close()
