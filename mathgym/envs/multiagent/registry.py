"""The registry of multi-agent envs: ``make_multiagent(id)`` beside gymnasium's ``gym.make(id)``.

gymnasium's registry makes single-agent ``Env`` s (``gym.make`` wraps what it makes in
``Env`` wrappers), so a multi-agent env has a registry of its own. Each game has one id in both:
``gym.make("TicTacToe-v0")`` is the single-agent env against the game's expert
(:class:`~mathgym.envs.multiagent.versus.VersusEnv`), ``make_multiagent("TicTacToe-v0")`` the
two-player game itself, for a collector that drives every seat.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mathgym.envs.multiagent.base import MultiAgentTextEnv
from mathgym.errors import UnknownEnvError
from mathgym.registry import load_entry_point


@dataclass(frozen=True)
class MultiAgentSpec:
    """A registered multi-agent env: its entry point (``"module:Class"``), fixed keywords and one line."""

    env_id: str
    entry_point: str
    description: str
    kwargs: dict[str, Any] = field(default_factory=dict)


_MULTIAGENT: dict[str, MultiAgentSpec] = {}


def register_multiagent(env_id: str, entry_point: str, description: str, **kwargs: Any) -> None:
    """Register a multi-agent env under ``env_id`` (``kwargs``: keywords its entry point always gets)."""
    _MULTIAGENT[env_id] = MultiAgentSpec(env_id, entry_point, description, dict(kwargs))


def multiagent_spec(env_id: str) -> MultiAgentSpec:
    """The registration of ``env_id``; raises :class:`UnknownEnvError` (with close names) when there is none."""
    if env_id not in _MULTIAGENT:
        raise UnknownEnvError(env_id, list(_MULTIAGENT))
    return _MULTIAGENT[env_id]


def make_multiagent(env_id: str, **kwargs: Any) -> MultiAgentTextEnv:
    """Make the multi-agent env registered as ``env_id``.

    Example:
        >>> import mathgym
        >>> game = make_multiagent("Nim-v0")
        >>> observations, info = game.reset(seed=0)
        >>> game.current_player, list(observations)
        (0, [0])
    """
    spec = multiagent_spec(env_id)
    return load_entry_point(spec.entry_point)(**{**spec.kwargs, **kwargs})


def list_multiagent_envs() -> dict[str, str]:
    """Every registered multi-agent env: id → one-line description."""
    return {env_id: spec.description for env_id, spec in sorted(_MULTIAGENT.items())}
