"""OpenEnv-v0: any OpenEnv environment, in this process or served, as a mathgym text env.

OpenEnv (``openenv-core``, the optional extra ``mathgym[openenv]``) environments take typed
actions and return typed observations (pydantic models) with a ``reward`` and a ``done`` flag.
This env is the text front end of one of them (``env=``):

* ``"package.module:EnvironmentClass"``: an OpenEnv ``Environment`` subclass, made in this process;
* an ``http(s)://`` or ``ws(s)://`` URL: a served OpenEnv env, played through OpenEnv's own
  ``GenericEnvClient`` (one WebSocket session per episode's env).

The model's text becomes the action: the action's one required text field (or ``action_field=``),
or whatever a mapping callable makes of it (``to_action=``, for envs whose actions are not text).
The observation becomes text: its one text field (or ``observation_field=``), else the whole
observation as JSON, or what ``to_text=`` makes of it. OpenEnv's reward is each step's reward,
its ``done`` is ``terminated``; the turn budget (``max_turns``) truncates.

Whose failure is whose: a reply the mapping refuses (``ValueError``, a pydantic validation error)
is the model's (``format_error``, reward 0, the episode goes on with the reason as the
observation); an env or a server that raises or goes away while stepping is an infrastructure
failure (``status="error"``), which ends the episode and leaves it out of training.
"""

from __future__ import annotations

import importlib
import inspect
import json
import math
import typing
from collections.abc import Callable, Mapping
from typing import Any

from mathgym.core import Judgement, Task, TextEnv
from mathgym.errors import ConfigError
from mathgym.install import extra_hint, import_extra
from mathgym.rewards.base import Status
from mathgym.spaces import DEFAULT_MAX_LENGTH

INSTALL_HINT = f"OpenEnv-v0 needs openenv-core: {extra_hint('openenv')}"
#: Observation fields every OpenEnv observation has; the text is looked for among the others.
_STANDARD_FIELDS = frozenset({"done", "reward", "metadata"})
_URL_SCHEMES = ("http://", "https://", "ws://", "wss://")


def _openenv() -> Any:
    return import_extra("openenv.core", INSTALL_HINT)


def load_object(target: Any, what: str) -> Any:
    """``target`` itself, or the object a ``"package.module:name"`` string names."""
    if not isinstance(target, str):
        return target
    module, sep, name = target.partition(":")
    if not sep or not module or not name:
        raise ConfigError(f"{what}={target!r} must be 'package.module:name' (or the object itself).")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as err:
        raise ConfigError(f"{what}={target!r} could not be loaded: {err}") from None


def text_field_of(schema: Mapping[str, Any], what: str) -> str:
    """The one required string field of a JSON schema (an OpenEnv action's), else a ``ConfigError``."""
    properties = schema.get("properties", {})
    required = [n for n in schema.get("required", []) if properties.get(n, {}).get("type") == "string"]
    if len(required) != 1:
        fields = ", ".join(sorted(properties)) or "none"
        raise ConfigError(
            f"the {what} has no single required text field (its fields: {fields}); "
            "name one with action_field=, or map the text yourself with to_action=."
        )
    return required[0]


class _LocalBackend:
    """An OpenEnv ``Environment`` made in this process; speaks the wire's dict format."""

    def __init__(self, env_class: Any, env_kwargs: Mapping[str, Any], action_class: Any = None):
        core = _openenv()
        if not (isinstance(env_class, type) and issubclass(env_class, core.Environment)):
            raise ConfigError(f"env={env_class!r} is not an OpenEnv Environment subclass.")
        self.env = env_class(**env_kwargs)
        self.action_class = action_class or self._declared_action_class(env_class, core.Action)
        self._serialize = core.serialize_observation

    @staticmethod
    def _declared_action_class(env_class: type, base: type) -> type:
        """The action model ``env_class.step`` is annotated with (OpenEnv's server is told it apart)."""
        try:
            hint = typing.get_type_hints(env_class.step).get("action")
        except Exception:  # unresolvable annotations: fall through to the error below
            hint = None
        if isinstance(hint, type) and issubclass(hint, base) and hint is not base:
            return hint
        raise ConfigError(
            f"{env_class.__name__}.step does not annotate its action with an OpenEnv Action subclass; "
            "name it with action_class='package.module:ActionClass'."
        )

    def action_schema(self) -> dict[str, Any]:
        return self.action_class.model_json_schema()

    def _call(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
        params = inspect.signature(method).parameters
        takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        kwargs = {k: v for k, v in kwargs.items() if takes_any or k in params}
        return self._serialize(method(*args, **kwargs))

    def reset(self, seed: int) -> dict[str, Any]:
        return self._call(self.env.reset, seed=seed)

    def step(self, action: Mapping[str, Any]) -> dict[str, Any]:
        return self._call(self.env.step, self.action_class.model_validate(dict(action)))

    def close(self) -> None:
        self.env.close()


class _RemoteBackend:
    """A served OpenEnv env, through OpenEnv's own ``GenericEnvClient`` (a WebSocket session)."""

    def __init__(self, url: str, timeout_s: float):
        core = _openenv()
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self.client = core.GenericEnvClient(base_url=self.url, message_timeout_s=timeout_s).sync()
        self.client.connect()

    def action_schema(self) -> dict[str, Any]:
        import urllib.request  # noqa: PLC0415

        http = self.url.replace("ws://", "http://", 1).replace("wss://", "https://", 1)
        with urllib.request.urlopen(f"{http}/schema", timeout=self.timeout_s) as reply:  # noqa: S310 - the user's URL
            return dict(json.loads(reply.read().decode())["action"])

    @staticmethod
    def _wire(result: Any) -> dict[str, Any]:
        return {"observation": dict(result.observation), "reward": result.reward, "done": bool(result.done)}

    def reset(self, seed: int) -> dict[str, Any]:
        return self._wire(self.client.reset(seed=seed))

    def step(self, action: Mapping[str, Any]) -> dict[str, Any]:
        return self._wire(self.client.step(dict(action)))

    def close(self) -> None:
        self.client.close()


class OpenEnvEnv(TextEnv):
    """An OpenEnv environment (``env=`` a class or a URL) as a multi-turn text env.

    Reward: OpenEnv's reward of each step (``None`` is 0). ``terminated`` when OpenEnv says
    ``done``; then ``correct`` (status ``correct``) when the step's reward reaches
    ``success_reward``, else ``wrong``. A step before the end is ``in_progress``; running out of
    turns is ``wrong``. A reply the mapping refuses is ``format_error`` (the episode goes on);
    an env or server failure is ``error`` (an infrastructure failure; the episode ends).

    ``reset(seed=s)`` draws the OpenEnv seed from ``s`` (``options={"task_index": i}`` uses ``i``)
    and passes it to the OpenEnv env's ``reset`` where it takes one; the same seed gives the same
    task exactly when the OpenEnv env is deterministic by its seed.

    Args:
        env: ``"package.module:EnvironmentClass"`` (or the class) of an OpenEnv ``Environment``,
            or the URL of a served one.
        env_kwargs: Options of the Environment class (in-process envs only).
        action_field: The action's field the model's text goes to (default: its one required
            text field).
        to_action: Instead, a callable (or ``"module:function"``) from the text to the action as a
            dict; raising ``ValueError`` refuses the reply (``format_error``).
        action_class: The action model of an in-process env whose ``step`` does not annotate it.
        observation_field: The observation's field shown to the model (default: its one text
            field, else the whole observation as JSON).
        to_text: Instead, a callable (or ``"module:function"``) from the observation dict to text.
        success_reward: A final reward at least this large counts as solved.
        max_turns: Steps before the episode is truncated.
        timeout_s: Seconds allowed per message to a served env.
        system_prompt: System message; ``""`` for none.
        max_length: Longest observation/action in characters.
        render_mode: ``None`` or ``"ansi"``.

    Example:
        >>> import gymnasium as gym, mathgym
        >>> env = gym.make("OpenEnv-v0", env="http://127.0.0.1:8000")  # doctest: +SKIP
    """

    def __init__(
        self,
        env: Any = None,
        env_kwargs: Mapping[str, Any] | None = None,
        action_field: str | None = None,
        to_action: Callable[[str], Mapping[str, Any]] | str | None = None,
        action_class: Any = None,
        observation_field: str | None = None,
        to_text: Callable[[Mapping[str, Any]], str] | str | None = None,
        success_reward: float = 1.0,
        max_turns: int = 20,
        timeout_s: float = 60.0,
        system_prompt: str | None = None,
        max_length: int = DEFAULT_MAX_LENGTH,
        render_mode: str | None = None,
    ):
        super().__init__(max_turns=max_turns, max_length=max_length, system_prompt=system_prompt, render_mode=render_mode)
        _openenv()
        if env is None:
            raise ConfigError("OpenEnv-v0 needs env=: 'package.module:EnvironmentClass' or the URL of a served OpenEnv env.")
        if action_field is not None and to_action is not None:
            raise ConfigError("give action_field= or to_action=, not both.")
        if observation_field is not None and to_text is not None:
            raise ConfigError("give observation_field= or to_text=, not both.")
        self.source = env
        self.env_kwargs = dict(env_kwargs or {})
        self.action_class = load_object(action_class, "action_class") if action_class is not None else None
        self.to_action = load_object(to_action, "to_action") if to_action is not None else None
        self.to_text = load_object(to_text, "to_text") if to_text is not None else None
        self.observation_field = observation_field
        self.success_reward = float(success_reward)
        self.timeout_s = float(timeout_s)
        self._backend: Any = None
        self.action_field = action_field
        if self.to_action is None and self.action_field is None:
            self.action_field = text_field_of(self._connected().action_schema(), "OpenEnv action")
        self._played: tuple[int, list[str]] | None = None  # (OpenEnv seed, actions): a copy replays them

    @property
    def is_remote(self) -> bool:
        """Whether ``env`` is the URL of a served OpenEnv env."""
        return isinstance(self.source, str) and self.source.startswith(_URL_SCHEMES)

    def _connected(self) -> Any:
        if self._backend is None:
            if self.is_remote:
                self._backend = _RemoteBackend(self.source, self.timeout_s)
            else:
                env_class = load_object(self.source, "env")
                self._backend = _LocalBackend(env_class, self.env_kwargs, self.action_class)
        return self._backend

    # -- text <-> OpenEnv ------------------------------------------------------------------

    def observation_text(self, observation: Mapping[str, Any]) -> str:
        """The text the model reads for an OpenEnv observation (its fields, as on the wire)."""
        if self.to_text is not None:
            return str(self.to_text(observation))
        fields = {k: v for k, v in observation.items() if k not in _STANDARD_FIELDS}
        if self.observation_field is not None:
            if self.observation_field not in fields:
                raise ConfigError(f"observation_field={self.observation_field!r} is not a field of the observation: {', '.join(sorted(fields))}.")
            return str(fields[self.observation_field])
        texts = [k for k, v in fields.items() if isinstance(v, str)]
        if len(texts) == 1:
            return str(fields[texts[0]])
        return json.dumps(fields, sort_keys=True, ensure_ascii=False, default=str)

    def action_payload(self, text: str) -> dict[str, Any]:
        """The OpenEnv action (as a dict) for the model's ``text``; ``ValueError`` when it has none."""
        if self.to_action is None:
            return {str(self.action_field): text}
        action = self.to_action(text)
        if hasattr(action, "model_dump"):
            action = action.model_dump()
        if not isinstance(action, Mapping):
            raise ConfigError(f"to_action returned {type(action).__name__}, not a dict of the action's fields.")
        return dict(action)

    # -- the TextEnv hooks --------------------------------------------------------------------

    def _sample_task(self, options: Mapping[str, Any]) -> Task:
        index = options.get("task_index")
        if index is not None:
            seed = self._task_index(options, 2**31)
        else:
            seed = int(self.np_random.integers(2**31))
        wire = self._connected().reset(seed)
        self._played = (seed, [])
        prompt = self.observation_text(wire["observation"])
        return Task(f"openenv-{seed}", prompt, "", {"seed": seed, "observation": wire["observation"]})

    def _judge(self, action: str) -> Judgement:
        try:
            payload = self.action_payload(action)
        except ValueError as err:  # pydantic's ValidationError is a ValueError too
            return Judgement(0.0, Status.FORMAT_ERROR, False, f"Your reply is not an action of this environment: {err}",
                             {"reward": 0.0}, info={"action_error": str(err)[:500]})
        backend = self._resumed()
        try:
            wire = backend.step(payload)
        except ValueError as err:  # the action model refused the fields the mapping made
            return Judgement(0.0, Status.FORMAT_ERROR, False, f"Your reply is not an action of this environment: {err}",
                             {"reward": 0.0}, info={"action_error": str(err)[:500]})
        except Exception as err:  # noqa: BLE001 - the env or its server failed: infrastructure
            return Judgement(0.0, Status.ERROR, True, reward_breakdown={"reward": 0.0},
                             info={"error": f"the OpenEnv env failed: {type(err).__name__}: {err}"[:500]})
        if self._played is not None:
            self._played[1].append(action)
        reward = wire.get("reward")
        reward = float(reward) if isinstance(reward, (int, float)) and math.isfinite(reward) else 0.0
        extra = {"openenv_observation": wire["observation"]}
        if wire.get("done"):
            solved = reward >= self.success_reward
            status = Status.CORRECT if solved else Status.WRONG
            return Judgement(reward, status, True, reward_breakdown={"reward": reward}, correct=solved, info=extra)
        text = self.observation_text(wire["observation"])
        return Judgement(reward, Status.IN_PROGRESS, False, text, {"reward": reward}, info=extra)

    def _final_judgement(self, last: Judgement) -> Judgement:
        if last.status is Status.IN_PROGRESS or last.status is Status.FORMAT_ERROR:
            return Judgement(last.reward, Status.WRONG, False, "", last.reward_breakdown, False, last.info)
        return last

    # -- copies (pickle) replay the episode on a backend of their own ---------------------------

    def _resumed(self) -> Any:
        """The backend, in the episode's state: a copy without one makes its own and replays."""
        if self._backend is not None:
            return self._backend
        backend = self._connected()
        if self._played is not None:
            seed, actions = self._played
            backend.reset(seed)
            for text in actions:
                backend.step(self.action_payload(text))
        return backend

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_backend"] = None  # a live env or connection: the copy makes its own
        return state

    def close(self) -> None:
        if self._backend is not None:
            backend, self._backend = self._backend, None
            backend.close()
        super().close()
