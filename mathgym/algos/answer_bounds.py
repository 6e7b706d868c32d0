"""Whether the completions a run samples fit the env's bound on an action, said at run start.

An env refuses an action longer than its ``max_length`` characters before reading it
(``status="too_long"``, reward 0). A run whose ``max_new_tokens`` lets the policy write more
than that scores every long chain of thought 0, whatever its answer, and GRPO learns to stop
thinking. The trainer calls :func:`check_answer_bounds` once at the start of a run: each bound a
completion of ``max_new_tokens`` tokens can pass is printed with the option that raises it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import gymnasium as gym

#: Characters a token is counted for: reasoning text averages 3 to 4.5 characters a token with
#: today's tokenizers, so ``max_new_tokens * 4`` is about the longest real answer (the envs'
#: default bound, 131,072, holds a 32k-token one). A degenerate completion of long tokens (runs
#: of spaces) can be longer; it is refused as ``too_long``, which the metrics count.
CHARS_PER_TOKEN = 4


def env_answer_bounds(env: gym.Env) -> dict[tuple[str, ...], int]:
    """The bounds on an action of ``env`` (wrappers looked through), by the path of the option
    that sets each; an env that is not a mathgym ``TextEnv`` gives its text action space's bound
    under the empty path (no option known), and nothing when its actions are not text."""
    inner = env.unwrapped
    bounds = getattr(inner, "answer_bounds", None)
    if bounds is not None:
        return dict(bounds())
    space = inner.action_space
    return {(): int(space.max_length)} if isinstance(space, gym.spaces.Text) else {}


def option_hint(path: tuple[str, ...], value: int) -> str:
    """How a ``mathgym train`` user sets the option at ``path`` to ``value``.

    Example:
        >>> option_hint(("max_length",), 8)
        '-o max_length=8'
        >>> option_hint(("env_kwargs", "MathReason-v0", "max_length"), 8)
        "--env-kwargs '{env_kwargs: {MathReason-v0: {max_length: 8}}}' (beside your other env options)"
    """
    if len(path) == 1:
        return f"-o {path[0]}={value}"
    nested: str = str(value)
    for key in reversed(path):
        nested = f"{{{key}: {nested}}}"
    return f"--env-kwargs '{nested}' (beside your other env options)"


def answer_bound_warnings(
    env: gym.Env, env_id: str, max_new_tokens: int, chars_per_token: int = CHARS_PER_TOKEN
) -> list[str]:
    """One line for each bound of ``env`` that a completion of ``max_new_tokens`` tokens (at
    ``chars_per_token`` characters each) can pass; none when every one fits.

    Example:
        >>> import mathgym
        >>> env = gym.make("MathReason-v0", max_length=1000)
        >>> answer_bound_warnings(env, "MathReason-v0", 512)[0][:60]
        'MathReason-v0 refuses an answer over max_length=1000 charact'
    """
    longest = int(max_new_tokens) * int(chars_per_token)
    lines = []
    for path, bound in env_answer_bounds(env).items():
        if longest <= bound:
            continue
        where = f"{env_id}'s {path[-2]}" if len(path) > 1 else env_id
        name = path[-1] if path else "the action space's max_length"
        fix = option_hint(path, _round_up(longest)) if path else "the env's own option for it"
        lines.append(
            f"{where} refuses an answer over {name}={bound} characters (status too_long, reward 0), but "
            f"max_new_tokens={max_new_tokens} lets the policy write about {longest} ({chars_per_token} a token): "
            f"a long chain of thought would score 0 whatever its answer. Raise the bound with {fix}, "
            "or lower --max-new-tokens."
        )
    return lines


def check_answer_bounds(env_id: str, env_kwargs: Mapping[str, Any], max_new_tokens: int) -> list[str]:
    """Build ``env_id`` once, print a warning for each bound a completion can pass (see
    :func:`answer_bound_warnings`) and return them."""
    env = gym.make(env_id, **dict(env_kwargs))
    try:
        lines = answer_bound_warnings(env, env_id, max_new_tokens)
    finally:
        env.close()
    for line in lines:
        print(f"mathgym: warning: {line}")
    return lines


def _round_up(chars: int) -> int:
    """``chars`` rounded up to a multiple of 1,024 (a bound someone would type)."""
    return int(math.ceil(chars / 1024) * 1024)
