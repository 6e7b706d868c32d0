"""``mathgym/Remote-v0``: an env served by ``mathgym serve``, used as if it were local.

::

    # in one terminal
    mathgym serve MathReason-v0 --port 8000
    # in Python
    env = gym.make("mathgym/Remote-v0", url="http://127.0.0.1:8000", env_id="MathReason-v0", difficulty=1)
    obs, info = env.reset(seed=0)       # the same task, info and spaces as gym.make("MathReason-v0", difficulty=1)

Each client env holds one session on the server (made by the constructor, ended by
``close()``; the server also ends sessions idle for its ``--session-timeout``). It speaks HTTP/1.1
with keep-alive through the standard library (no dependency); the connection belongs to the
process that opened it, so a client made before a fork, or unpickled in a vector env's worker,
opens its own. Pickling a client copies its session on the server (``POST .../copy``): the copy
continues the episode independently, as a pickled local env does. The wire format and the
errors are described in :mod:`mathgym.envs.served.wire`.

A served env with an ``expert_action()`` keeps it: the client's ``expert_action()`` asks the
server for the expert's action in the session's current state, so a warm start (SFT on the
expert's demonstrations, ``mathgym train``'s first phase) runs against a served env as against
a local one. A client of an env without an expert has no ``expert_action`` attribute, as the
local env has none.

A client process owns the sessions it makes: it sends a random id of its own with every request,
beats a heartbeat (a daemon thread, every third of the server's ``--client-timeout``) while it holds
any, and releases them all as it exits, normally or on an error (``atexit``); a process killed
outright stops beating and the server closes its sessions ``--client-timeout`` seconds later. So a
run that stops never leaves the server full for the next one. :func:`check_session_room` tells a
run that needs more sessions than the server allows how many before it makes any.

A server started with ``--token-env VAR`` wants its token on every request: pass
``token_env="VAR"``, the name of an environment variable of the client's process that holds the
same token. The token is read from the environment at each connection, never stored in the
env, so it stays out of pickles and logs.
"""

from __future__ import annotations

import atexit
import http.client
import json
import os
import secrets
import threading
import time
import urllib.parse
from collections.abc import Mapping
from typing import Any, SupportsFloat

import gymnasium as gym

from mathgym.envs.served.wire import (
    CLIENT_HEADER,
    BadRequestError,
    RemoteEnvError,
    ServerBusyError,
    SessionNotFoundError,
    UnauthorizedError,
    decode,
    encode,
    error_from_body,
    space_from_description,
)
from mathgym.errors import ConfigError, InvalidActionError

__all__ = [
    "BadRequestError", "RemoteEnv", "RemoteEnvError", "ServerBusyError", "SessionNotFoundError", "UnauthorizedError",
    "check_session_room", "make_remote_env",
]
#: The id ``gym.make`` knows this client by (``mathgym.envs.REMOTE_ENV_ID``; not imported: that
#: package imports this module's registration).
_REMOTE_ENV_ID = "mathgym/Remote-v0"


class _Connection:
    """One keep-alive HTTP connection to the server, reopened in a new process or after the server
    closed an idle one."""

    def __init__(self, url: str, timeout: float, token_env: str | None = None):
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"url={url!r} is not an http:// or https:// address of a `mathgym serve` server.")
        self.url, self.timeout, self.token_env = url, float(timeout), token_env
        self._token()  # an unset variable is reported before any request
        self._scheme, self._host, self._port = parts.scheme, parts.hostname, parts.port
        self._prefix = parts.path.rstrip("/")
        self._conn: http.client.HTTPConnection | None = None
        self._pid = -1
        self._used = False

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_conn": None, "_pid": -1}

    def _token(self) -> str | None:
        """The token in the environment variable ``token_env`` (``None`` without one)."""
        if self.token_env is None:
            return None
        token = os.environ.get(self.token_env, "")
        if not token.strip():
            raise ConfigError(f"token_env={self.token_env!r}: the environment variable {self.token_env} is not set or empty; "
                              "set it to the token the server was started with (mathgym serve --token-env).")
        return token

    def _open(self) -> http.client.HTTPConnection:
        if self._conn is None or self._pid != os.getpid():
            cls = http.client.HTTPSConnection if self._scheme == "https" else http.client.HTTPConnection
            self._conn, self._pid, self._used = cls(self._host, self._port, timeout=self.timeout), os.getpid(), False
        return self._conn

    def _drop(self) -> None:
        if self._conn is not None and self._pid == os.getpid():
            self._conn.close()
        self._conn = None

    def call(self, method: str, path: str, payload: Any = None) -> Any:
        """Send one request; return the answer's JSON, or raise the error it reports."""
        body = None if payload is None else json.dumps(payload, allow_nan=False).encode()
        headers = {"Accept": "application/json", CLIENT_HEADER: _lease().client_id}
        headers |= {} if body is None else {"Content-Type": "application/json"}
        token = self._token()
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        for attempt in (1, 2):
            conn = self._open()
            reused = self._used
            try:
                conn.request(method, self._prefix + path, body=body, headers=headers)
                response = conn.getresponse()
                raw = response.read()
            except TimeoutError:
                self._drop()
                raise RemoteEnvError(
                    f"no answer from the env server at {self.url} within {self.timeout:g} s ({method} {path})."
                ) from None
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as err:
                self._drop()
                if attempt == 1 and reused:  # the server closed an idle keep-alive connection: send again
                    continue
                raise RemoteEnvError(f"the env server at {self.url} closed the connection ({err}).") from None
            except (OSError, http.client.HTTPException) as err:
                self._drop()
                raise RemoteEnvError(f"cannot reach the env server at {self.url}: {err}") from None
            self._used = True
            if response.will_close:
                self._drop()
            try:
                answer = json.loads(raw)
            except ValueError:
                answer = raw.decode("utf-8", "replace")
            if 200 <= response.status < 300 and isinstance(answer, dict):
                return answer
            raise error_from_body(response.status, answer)
        raise AssertionError("unreachable")

    def close(self) -> None:
        self._drop()


class _Lease:
    """This process' hold on the sessions it made: the random id its requests carry, the heartbeat
    that keeps them while it lives, and their release as it exits (see the module docstring)."""

    #: Heartbeats that may fail in a row before a server is given up (it has closed them by then).
    MAX_MISSED = 3

    def __init__(self) -> None:
        self.pid, self.client_id = os.getpid(), secrets.token_urlsafe(16)
        self._servers: dict[tuple[str, str | None], float] = {}  # (url, token_env) → when last tracked
        self._lock = threading.Lock()

    def track(self, url: str, token_env: str | None, client_timeout: Any) -> None:
        """Beat for the sessions this process holds at ``url`` (a server that names no
        ``client_timeout`` holds no leases: nothing to beat)."""
        if not isinstance(client_timeout, (int, float)) or client_timeout <= 0:
            return
        key = (url, token_env)
        with self._lock:
            beating = key in self._servers
            self._servers[key] = time.monotonic()
        if not beating:  # a thread per server, so that a slow one never starves another's lease
            threading.Thread(target=self._beat_while_held, args=(key, client_timeout / 3), daemon=True,
                             name="mathgym-remote-lease").start()

    def _beat_while_held(self, key: tuple[str, str | None], period: float) -> None:
        missed = 0
        while True:
            with self._lock:
                tracked = self._servers.get(key)
            if tracked is None:
                return
            time.sleep(period)
            held = self._ask(key, "POST", "/lease", timeout=min(10.0, period))
            missed = 0 if held is not None else missed + 1
            with self._lock:
                if self._servers.get(key) != tracked:
                    continue  # a session made meanwhile: keep beating
                if held == 0 or missed >= self.MAX_MISSED:
                    del self._servers[key]
                    return

    def _ask(self, key: tuple[str, str | None], method: str, tail: str, timeout: float) -> int | None:
        """One request about this client's sessions at a server; ``None`` where it failed."""
        try:
            http = _Connection(key[0], timeout, key[1])
            try:
                answer = http.call(method, f"/clients/{self.client_id}{tail}")
            finally:
                http.close()
            return int(answer.get("sessions", answer.get("closed", 0)))
        except Exception:  # noqa: BLE001 - whatever failed, the beat is missed, never the thread lost
            return None

    def release_all(self) -> None:
        """Close every session this process holds (as it exits)."""
        with self._lock:
            servers, self._servers = list(self._servers), {}
        for key in servers:
            self._ask(key, "DELETE", "", timeout=2.0)


_LEASE: _Lease | None = None


def _lease() -> _Lease:
    """This process' lease (a forked child gets its own: its parent's sessions are not its own)."""
    global _LEASE
    if _LEASE is None or _LEASE.pid != os.getpid():
        _LEASE = _Lease()
    return _LEASE


@atexit.register
def _release_at_exit() -> None:
    if _LEASE is not None and _LEASE.pid == os.getpid():
        _LEASE.release_all()


class RemoteEnv(gym.Env[Any, Any]):
    """A client of one env session on a ``mathgym serve`` server; see the module docstring.

    Args:
        url: The server's address, e.g. ``"http://127.0.0.1:8000"``.
        env_id: The env to make there (default: the one env the server serves).
        request_timeout: Seconds to wait for any answer of the server.
        token_env: The name of an environment variable holding the server's token
            (``mathgym serve --token-env``); ``None``: the server wants none.
        **env_kwargs: The env's constructor options (JSON-encodable, see :mod:`mathgym.envs.served.wire`).

    Raises:
        UnknownEnvError: The server does not serve ``env_id``.
        ConfigError: The env does not take these options.
        ServerBusyError: The server holds ``--max-sessions`` sessions already.
        UnauthorizedError: The server wants a token and ``token_env`` holds none or another.
        RemoteEnvError: The server cannot be reached, or the env failed on it.
    """

    def __init__(self, url: str, env_id: str | None = None, *, request_timeout: float = 300.0,
                 token_env: str | None = None, **env_kwargs: Any):
        self._http = _Connection(url, request_timeout, token_env)
        self._session: str | None = None
        answer = self._http.call("POST", "/sessions", {"env_id": env_id, "kwargs": encode(env_kwargs)})
        self._session = str(answer["session_id"])
        self.env_id = str(answer["env_id"])
        self.observation_space = space_from_description(answer["observation_space"])
        self.action_space = space_from_description(answer["action_space"])
        self.metadata = decode(answer.get("metadata") or {})
        self.render_mode = answer.get("render_mode")
        if isinstance(answer.get("max_turns"), int):
            self.max_turns = int(answer["max_turns"])
        self._has_expert = bool(answer.get("expert"))
        if self._has_expert:
            self.expert_action = self._expert_action
        _lease().track(self._http.url, token_env, answer.get("client_timeout"))

    def _expert_action(self) -> Any:
        """The served env's ``expert_action()`` in this session's current state."""
        return decode(self._http.call("GET", self._session_path("/expert"))["action"])

    @property
    def session_id(self) -> str | None:
        """The id of this env's session on the server (``None`` once closed)."""
        return self._session

    def _session_path(self, tail: str) -> str:
        if self._session is None:
            raise SessionNotFoundError(f"this {self.env_id} client env is closed; make a new one.")
        return f"/sessions/{urllib.parse.quote(self._session, safe='')}{tail}"

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        payload = {"seed": None if seed is None else int(seed), "options": encode(options)}
        answer = self._http.call("POST", self._session_path("/reset"), payload)
        return decode(answer["observation"]), decode(answer["info"])

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        if isinstance(self.action_space, gym.spaces.Text) and not isinstance(action, str):
            raise InvalidActionError(f"{self.env_id} step() takes the model's text as a str, got {type(action).__name__}.")
        answer = self._http.call("POST", self._session_path("/step"), {"action": encode(action)})
        return (decode(answer["observation"]), decode(answer["reward"]), bool(answer["terminated"]),
                bool(answer["truncated"]), decode(answer["info"]))

    def render(self) -> Any:
        return decode(self._http.call("GET", self._session_path("/render"))["render"])

    def close(self) -> None:
        """End the session on the server (a server that is gone or forgot it is no error here)."""
        if self._session is not None:
            try:
                self._http.call("DELETE", self._session_path(""))
            except RemoteEnvError:
                pass
            self._session = None
        self._http.close()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("expert_action", None)  # bound to this client: __setstate__ binds the copy's own
        if self._session is not None:  # the copy gets a session of its own, in the same state
            state["_session"] = str(self._http.call("POST", self._session_path("/copy"))["session_id"])
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if self.__dict__.get("_has_expert"):
            self.expert_action = self._expert_action


def check_session_room(env_id: str, env_kwargs: Mapping[str, Any], sessions: int, what: str) -> None:
    """Before a run makes ``sessions`` envs of ``mathgym/Remote-v0`` at once: raise
    :class:`ServerBusyError` naming the number and ``--max-sessions`` where the server cannot hold them
    beside those it holds (any other env id: nothing to check).

    Args:
        env_id: The run's env id.
        env_kwargs: Its options (the client's ``url``, ``token_env``, ``request_timeout``).
        sessions: How many envs the run holds at once.
        what: Who needs them, for the message (``"this run (...)"``).
    """
    if env_id != _REMOTE_ENV_ID or "url" not in env_kwargs:
        return
    url = str(env_kwargs["url"])
    http = _Connection(url, float(env_kwargs.get("request_timeout", 300.0)), env_kwargs.get("token_env"))
    try:
        health = http.call("GET", "/")
    finally:
        http.close()
    most, held, mine = int(health["max_sessions"]), int(health["sessions"]), int(health.get("yours", 0))
    if held + sessions <= most:
        return
    others = f", {held - mine} of them other clients'" if held > mine else ""
    raise ServerBusyError(
        f"{what} needs {sessions} sessions of the env server at {url} at once; it allows {most} and holds {held}{others}: "
        f"start it with `mathgym serve ... --max-sessions {held + sessions}` or more, or ask for fewer envs."
    )


#: The options of :class:`RemoteEnv` itself (the others are the served env's).
CLIENT_OPTIONS = ("url", "env_id", "request_timeout", "token_env")


def make_remote_env(url: str, env_id: str | None = None, **kwargs: Any) -> RemoteEnv:
    """The entry point of ``mathgym/Remote-v0``: a :class:`RemoteEnv` (a function, so that the env
    options it passes on are not checked against ``RemoteEnv``'s own arguments)."""
    return RemoteEnv(url, env_id, **kwargs)


def accepted_options(env_kwargs: dict[str, Any]) -> list[str] | None:
    """The options ``mathgym/Remote-v0`` takes with ``env_kwargs``: its own and those of the env the
    server at ``env_kwargs["url"]`` serves (``None``: any), asked of the server
    (:func:`mathgym.registry.env_options`'s hook)."""
    if "url" not in env_kwargs:
        return None
    http = _Connection(str(env_kwargs["url"]), float(env_kwargs.get("request_timeout", 300.0)), env_kwargs.get("token_env"))
    try:
        served = http.call("GET", "/")["options"]
    finally:
        http.close()
    env_id = env_kwargs.get("env_id") or (next(iter(served)) if len(served) == 1 else None)
    if env_id not in served:
        return None  # making the env will say what is wrong with env_id
    return None if served[env_id] is None else [*CLIENT_OPTIONS, *served[env_id]]


make_remote_env.accepted_options = accepted_options  # type: ignore[attr-defined]
