"""Any mathgym env as an OpenEnv environment (``openenv-core``, the extra ``mathgym[openenv]``).

:class:`MathgymEnvironment` is an OpenEnv ``Environment`` over one mathgym env: its action is
:class:`TextAction` (``message``: the model's text), its observation :class:`TextObservation`
(``text``: the env's reply, ``messages``: the chat so far, ``info``: the step's ``info``, JSON),
with OpenEnv's ``reward`` and ``done`` (``terminated or truncated``; which one is in
``info["truncated"]``). :func:`create_openenv_app` serves it with OpenEnv's own app factory
(``create_app``: HTTP ``/reset``, ``/step``, ``/schema`` and the WebSocket sessions OpenEnv's
``EnvClient`` speaks), one env per session::

    mathgym serve --format openenv GuessNumber-v0 --port 8000 -o max_turns=8
    python -m mathgym.integrations.openenv GuessNumber-v0 --port 8000 -o max_turns=8   # the same server

Any OpenEnv client then plays it: ``GenericEnvClient(base_url="http://127.0.0.1:8000")``, and
with it the trainers that drive OpenEnv clients (TRL's OpenEnv examples, SkyRL, Unsloth, ART).
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from mathgym.errors import ConfigError
from mathgym.install import extra_hint

try:
    from openenv.core.env_server.http_server import create_app
    from openenv.core.env_server.interfaces import Environment
    from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation, State
    from pydantic import Field
except ModuleNotFoundError as _err:  # the module is only imported by someone who wants OpenEnv
    # still a ModuleNotFoundError naming the missing package, so callers can tell it from a broken install
    raise ModuleNotFoundError(f"mathgym.integrations.openenv needs openenv-core: {extra_hint('openenv')} ({_err})",
                              name=_err.name) from None

#: Sessions one server holds at once unless told otherwise.
DEFAULT_MAX_SESSIONS = 64


class TextAction(Action):
    """The model's reply to the env."""

    message: str = Field(..., description="The model's text: the action of the mathgym env")


class TextObservation(Observation):
    """What the mathgym env said, with the chat so far and the step's info."""

    text: str = Field(default="", description="The env's observation: the task at reset, its reply after a step ('' at the end)")
    messages: list[dict[str, Any]] = Field(default_factory=list, description="The chat so far (system, user, assistant...)")
    info: dict[str, Any] = Field(default_factory=dict, description="The mathgym env's info (JSON): task_id, status, turn, truncated...")


def _json_info(info: Mapping[str, Any]) -> dict[str, Any]:
    """``info`` as JSON values (statuses as their names, anything else as its ``str``)."""
    return dict(json.loads(json.dumps(dict(info), default=str)))


class MathgymEnvironment(Environment):
    """A mathgym env (``env_id``, options ``env_kwargs``) behind OpenEnv's ``Environment`` interface.

    ``reset(seed=..., task_index=...)`` is the env's ``reset(seed=..., options={"task_index": ...})``;
    ``step(TextAction(message=...))`` its ``step(message)``.

    Example:
        >>> env = MathgymEnvironment("GuessNumber-v0", max_turns=3)
        >>> env.reset(seed=0).info["task_id"] == env.state.task_id
        True
    """

    SUPPORTS_CONCURRENT_SESSIONS = True  # each session gets an env of its own (create_app's factory)

    def __init__(self, env_id: str, **env_kwargs: Any):
        import gymnasium as gym

        import mathgym  # noqa: F401 - registers the ids

        super().__init__()
        self.env_id = env_id
        self.env = gym.make(env_id, **env_kwargs)
        self._state = State(step_count=0)
        self._messages: list[dict[str, Any]] = []

    def reset(self, seed: int | None = None, episode_id: str | None = None, task_index: int | None = None, **kwargs: Any) -> TextObservation:
        options = {"task_index": task_index} if task_index is not None else None
        text, info = self.env.reset(seed=seed, options=options)
        self._messages = list(info.get("messages", []))
        self._state = State(episode_id=episode_id, step_count=0, env_id=self.env_id, task_id=info.get("task_id"))
        return TextObservation(text=text, messages=self._messages, info=_json_info(info), done=False, reward=None)

    def step(self, action: TextAction, timeout_s: float | None = None, **kwargs: Any) -> TextObservation:
        text, reward, terminated, truncated, info = self.env.step(action.message)
        self._state.step_count += 1
        self._messages = list(info.get("messages", self._messages))
        info = {**info, "terminated": bool(terminated), "truncated": bool(truncated)}
        return TextObservation(text=text, messages=self._messages, info=_json_info(info),
                               done=bool(terminated or truncated), reward=float(reward))

    @property
    def state(self) -> State:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        from mathgym.registry import describe

        return EnvironmentMetadata(name=self.env_id, description=describe(self.env_id), version="1")

    def close(self) -> None:
        self.env.close()


def create_openenv_app(env_id: str, env_kwargs: Mapping[str, Any] | None = None, max_sessions: int = DEFAULT_MAX_SESSIONS) -> Any:
    """OpenEnv's FastAPI app (``create_app``) serving ``env_id``: one env per client session.

    Example:
        >>> app = create_openenv_app("MathReason-v0", {"difficulty": 0})
        >>> sorted(r.path for r in app.routes if r.path in ("/reset", "/step", "/ws"))
        ['/reset', '/step', '/ws']
    """
    import mathgym  # noqa: F401 - registers the ids
    from mathgym.registry import check_env_kwargs, resolve_env_id

    env_id = resolve_env_id(env_id)
    kwargs = dict(env_kwargs or {})
    check_env_kwargs(env_id, kwargs)
    if max_sessions < 1:
        raise ConfigError(f"max_sessions={max_sessions!r} must be at least 1.")

    def factory() -> MathgymEnvironment:
        return MathgymEnvironment(env_id, **kwargs)

    return create_app(factory, TextAction, TextObservation, env_name=env_id, max_concurrent_envs=max_sessions)


def _option(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    try:
        return key, json.loads(value)
    except ValueError:
        return key, value


def serve(env_id: str, env_kwargs: Mapping[str, Any] | None = None, host: str = "127.0.0.1", port: int = 8000,
          max_sessions: int = DEFAULT_MAX_SESSIONS) -> None:
    """Serve :func:`create_openenv_app` on ``host:port`` (0: any free port) with uvicorn until
    SIGINT or SIGTERM, printing the address once listening (``mathgym serve --format openenv``)."""
    import uvicorn

    import mathgym  # noqa: F401 - registers the ids
    from mathgym.registry import resolve_env_id

    env_id = resolve_env_id(env_id)
    app = create_openenv_app(env_id, env_kwargs, max_sessions)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)  # bound here, not by uvicorn, so that port 0 is announced as the port it became
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)  # from here a client's connection waits in the backlog until uvicorn accepts it
    except OSError as err:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {err.strerror or err}; choose another --port (0: any free one) "
                          "or stop the program that holds it.") from None
    bound_host, bound_port = sock.getsockname()[:2]
    url = f"http://{bound_host if family == socket.AF_INET else f'[{bound_host}]'}:{bound_port}"
    print(f"mathgym serve: {env_id} in OpenEnv's format on {url} (at most {max_sessions} sessions; "
          f"clients: openenv.core.GenericEnvClient(base_url={url!r}))", flush=True)
    # uvicorn stops gracefully on SIGINT or SIGTERM, then raises the signal again under the handlers it
    # found: handlers that do nothing make that stop an exit 0, as `mathgym serve`'s is
    quiet = threading.current_thread() is threading.main_thread()
    previous = {sig: signal.signal(sig, lambda *_: None) for sig in (signal.SIGINT, signal.SIGTERM)} if quiet else {}
    try:
        with sock:
            uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m mathgym.integrations.openenv ENV_ID [--host H] [--port P] [-o KEY=VALUE ...]``."""
    parser = argparse.ArgumentParser(prog="python -m mathgym.integrations.openenv", description="Serve a mathgym env as an OpenEnv environment.")
    parser.add_argument("env_id")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000, help="port (0: any free one; the address is printed)")
    parser.add_argument("-o", "--option", type=_option, action="append", default=[], metavar="KEY=VALUE", help="env constructor option (JSON value, else text)")
    parser.add_argument("--max-sessions", type=int, default=DEFAULT_MAX_SESSIONS, help="client sessions held at once")
    args = parser.parse_args(argv)
    try:
        serve(args.env_id, dict(args.option), args.host, args.port, args.max_sessions)
    except (ConfigError, KeyError) as err:
        parser.error(str(err))


if __name__ == "__main__":
    main()
