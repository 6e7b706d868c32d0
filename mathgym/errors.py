"""Errors a user of mathgym can trigger.

Every exception derives from :class:`MathgymError`, and also from the builtin
exception a caller would naturally catch (``TypeError`` for a wrong action type,
``RuntimeError`` for calls out of order, ``ValueError`` for bad options), so
``except ValueError`` keeps working in code that does not know mathgym.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

from gymnasium.error import ResetNeeded


class MathgymError(Exception):
    """Base class of every error raised by mathgym."""


class InvalidActionError(MathgymError, TypeError):
    """``step()`` received something other than a ``str``."""


class ResetNeededError(MathgymError, RuntimeError, ResetNeeded):
    """``step()`` was called before the first ``reset()``.

    It is also gymnasium's :class:`gymnasium.error.ResetNeeded` (what gymnasium's own order
    check raises), so ``except gymnasium.error.ResetNeeded`` catches it from any env.
    """


class EpisodeFinishedError(MathgymError, RuntimeError):
    """``step()`` was called after the episode terminated or was truncated."""


class ConfigError(MathgymError, ValueError):
    """An option has a value outside its allowed set or range."""


class ToolServerError(MathgymError, RuntimeError):
    """An MCP tool server could not be started or reached (an infrastructure failure, not the model's)."""


class DatasetError(MathgymError, ValueError):
    """A data file or data set could not be read or lacks the expected fields."""


class UnknownEnvError(MathgymError, KeyError):
    """An environment id is not registered; the message lists the closest names."""

    def __init__(self, env_id: str, known: Iterable[str]):
        self.env_id = env_id
        self.suggestions = _close_env_ids(env_id, list(known))
        hint = f" Did you mean: {', '.join(self.suggestions)}?" if self.suggestions else ""
        super().__init__(f"No environment registered as {env_id!r}.{hint} Run `mathgym envs` to list them.")

    def __str__(self) -> str:  # KeyError would otherwise repr() the message
        return str(self.args[0])


def _close_env_ids(env_id: str, known: list[str]) -> list[str]:
    """Registered ids whose name (without ``-vN``) is close to ``env_id``'s: the shared version
    suffix alone must not make ``NoSuchEnv-v0`` look like ``Countdown-v0``."""

    def name(i: str) -> str:
        return re.sub(r"-v\d+$", "", i.rsplit("/", 1)[-1]).lower()

    by_name: dict[str, list[str]] = {}
    for i in known:
        by_name.setdefault(name(i), []).append(i)
    close = difflib.get_close_matches(name(env_id), list(by_name), n=3, cutoff=0.6)
    return [i for n in close for i in by_name[n]][:3]


def require_option(name: str, value: object, allowed: Iterable[object]) -> None:
    """Raise :class:`ConfigError` unless ``value`` is one of ``allowed``.

    Example:
        >>> require_option("split", "test", ("train", "test"))
    """
    allowed = tuple(allowed)
    if value not in allowed:
        choices = ", ".join(repr(a) for a in allowed)
        raise ConfigError(f"{name}={value!r} is not allowed; choose one of {choices}.")
