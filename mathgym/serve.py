"""``mathgym serve``: registered envs (plugins included) over HTTP, one env per session.

The server runs on aiohttp (``pip install "mathgym[serve]"``). Each session holds one env made with
the options its client sent; the env's calls run in a thread pool, one at a time per session,
so a slow step (a sandboxed program) holds up only its own session. The client is
``gym.make("mathgym/Remote-v0", url=..., env_id=..., **env_kwargs)`` (:mod:`mathgym.envs.served.remote`).

Routes (JSON bodies, values encoded as :mod:`mathgym.envs.served.wire` describes):

============================  ==========================================  ============================================
route                         request body                                answer
============================  ==========================================  ============================================
``GET /``                     --                                          ``envs``, ``options`` (env id → the options
                                                                          its constructor takes), ``sessions``,
                                                                          ``max_sessions``, ``session_timeout``,
                                                                          ``client_timeout``, ``yours`` (the sessions
                                                                          of the client asking)
``POST /sessions``            ``env_id`` (``null``: the one served),      201: ``session_id``, ``env_id``,
                              ``kwargs`` (env options)                    ``observation_space``, ``action_space``,
                                                                          ``metadata``, ``render_mode``,
                                                                          ``max_turns`` (``null``: the env has none),
                                                                          ``expert`` (whether it has an expert)
``POST /sessions/ID/reset``   ``seed`` (int or ``null``), ``options``     ``observation``, ``info``
``POST /sessions/ID/step``    ``action`` (a string for a text env)        ``observation``, ``reward``, ``terminated``,
                                                                          ``truncated``, ``info``
``GET /sessions/ID/render``   --                                          ``render``
``GET /sessions/ID/expert``   --                                          ``action``: the env's ``expert_action()``
                                                                          in its current state (what a warm start
                                                                          imitates)
``POST /sessions/ID/copy``    --                                          201: ``session_id`` of a copy of the env
``DELETE /sessions/ID``       --                                          ``closed: true``
``POST /clients/CID/lease``   --                                          ``sessions``: those client ``CID`` holds (its
                                                                          heartbeat: they stay while it beats)
``DELETE /clients/CID``       --                                          ``closed``: how many of its sessions
============================  ==========================================  ============================================

Leases. A client that sends the header ``X-Mathgym-Client: CID`` (``mathgym/Remote-v0`` does: a
random id per process) owns the sessions it makes or copies. They stay while the client is heard
from (any request carrying its id, or a heartbeat every third of ``--client-timeout``) and close
once it is not for ``--client-timeout`` seconds (a client killed mid-run frees its places in
seconds, not after ``--session-timeout``); a client that exits releases them at once
(``DELETE /clients/CID``). A session without an owner (curl) closes when idle for ``--session-timeout``.

Errors answer ``{"error": {"type", "message"}}`` with the status of :data:`mathgym.envs.served.wire.ERRORS`:
400 unreadable request (a value that does not decode, or names more memory than the request may:
:func:`mathgym.envs.served.wire.decode_request`; a negative seed; an expert asked of an env that has none),
401 a missing or wrong token, 404 unknown env or session, 409 step before reset or after the end,
422 an action that is not a string or options the env refuses, 503 ``--max-sessions`` reached or
:data:`MAX_QUEUED_CALLS` calls of the session queued (with ``Retry-After``), 500 an exception of
the env itself (the server carries on).

Trust: a client may pass any option the env's constructor takes (file paths of data sets
included), so serve on 127.0.0.1 (the default) or a network whose clients you trust. A shared
secret narrows who that is: ``mathgym serve ENV --token-env VAR`` reads a token from the
environment variable ``VAR`` (never from the command line, where other users of the machine see
it) and answers 401 to every request without the header ``Authorization: Bearer <token>``; the
client sends it with ``gym.make("mathgym/Remote-v0", url=..., token_env="VAR")``. The token
travels in clear over ``http://``: across an untrusted network, put the server behind TLS.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import pickle
import secrets
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
from aiohttp import web

from mathgym.aio_server import ServerThread, serve_app  # noqa: F401 - ServerThread: serve an EnvServer from a test or notebook
from mathgym.envs.served.wire import (
    CLIENT_HEADER,
    BadRequestError,
    ServerBusyError,
    SessionNotFoundError,
    UnauthorizedError,
    decode_request,
    describe_space,
    encode,
    error_body,
)
from mathgym.errors import ConfigError, InvalidActionError, MathgymError, UnknownEnvError
from mathgym.registry import check_env_kwargs, env_options, resolve_env_id

log = logging.getLogger("mathgym.serve")
#: Largest request body accepted (an action is at most the env's ``max_length`` characters).
MAX_REQUEST_BYTES = 16 * 1024 * 1024
#: Most calls one session may have waiting or running; one more answers 503. A client waits for each
#: answer before its next call, so only a careless or hostile one queues more, and its queue holds
#: request bodies in memory.
MAX_QUEUED_CALLS = 8
#: Sessions held at once by default: a default ``mathgym train`` run's (16 tasks × 8 samples for its
#: rollouts, 100 envs for its evaluation) with room to spare.
DEFAULT_MAX_SESSIONS = 256


@dataclass
class Session:
    """One client's env, the lock that keeps its calls in order, and when it was last used.

    The lock is the event loop's, not a thread's: a call waits for the session's earlier ones
    before it takes a pool thread, so a session with a queue of slow calls holds one thread, never
    the pool (a thread waiting on a session's lock would be a thread no other session can use).
    """

    env: gym.Env
    env_id: str
    owner: str | None = None  # the client id whose lease holds it (None: the idle timeout does)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    last_used: float = field(default_factory=time.monotonic)
    calls_in_flight: int = 0


class EnvServer:
    """The sessions of the served envs and the aiohttp application that reaches them.

    Args:
        env_ids: The envs clients may make (registered ids, plugins included).
        max_sessions: Most sessions held at once; one more answers 503.
        session_timeout: Seconds after which an idle session without an owner is closed.
        client_timeout: Seconds after which the sessions of a client that sends no heartbeat are closed.
        env_kwargs: Options every session's env gets under its client's own.
        token: A shared secret every request must carry as ``Authorization: Bearer <token>``
            (``None``: no check).
    """

    def __init__(self, env_ids: Sequence[str], *, max_sessions: int = DEFAULT_MAX_SESSIONS, session_timeout: float = 600.0,
                 client_timeout: float = 30.0, env_kwargs: Mapping[str, Any] | None = None, token: str | None = None):
        if not env_ids:
            raise ConfigError("mathgym serve needs at least one env id.")
        if token is not None and not token.strip():
            raise ConfigError("the server's token is empty: set the environment variable --token-env names to a secret.")
        self._expected_auth = None if token is None else f"Bearer {token}".encode()
        if max_sessions < 1 or session_timeout <= 0 or client_timeout <= 0:
            raise ConfigError(
                "--max-sessions must be at least 1 and --session-timeout and --client-timeout positive, "
                f"got {max_sessions}, {session_timeout} and {client_timeout}."
            )
        self.client_timeout = float(client_timeout)
        self._heard: dict[str, float] = {}  # client id → when it was last heard from (owners only)
        self.env_ids = [resolve_env_id(env_id) for env_id in env_ids]
        self.max_sessions, self.session_timeout = int(max_sessions), float(session_timeout)
        self.env_kwargs = dict(env_kwargs or {})
        for env_id in self.env_ids:
            check_env_kwargs(env_id, self.env_kwargs, "-o")
        #: Env id → the options its constructor takes (``None``: any), for clients that ask.
        self.options = {env_id: env_options(env_id) for env_id in self.env_ids}
        self.sessions: dict[str, Session] = {}
        self._opening = 0  # sessions being made (counted against max_sessions)
        self._pool = ThreadPoolExecutor(max_workers=min(32, self.max_sessions), thread_name_prefix="mathgym-env")

    # -- the application ---------------------------------------------------------------------

    def app(self) -> web.Application:
        """The aiohttp application: routes, the error middleware, the idle-session reaper."""
        app = web.Application(middlewares=[_errors_as_json, self._authorize], client_max_size=MAX_REQUEST_BYTES)
        app.add_routes([
            web.get("/", self.health),
            web.post("/sessions", self.create),
            web.post("/sessions/{sid}/reset", self.reset),
            web.post("/sessions/{sid}/step", self.step),
            web.get("/sessions/{sid}/render", self.render),
            web.get("/sessions/{sid}/expert", self.expert),
            web.post("/sessions/{sid}/copy", self.copy),
            web.delete("/sessions/{sid}", self.delete),
            web.post("/clients/{cid}/lease", self.lease),
            web.delete("/clients/{cid}", self.release),
        ])
        app.cleanup_ctx.append(self._lifetime)
        return app

    async def _lifetime(self, app: web.Application) -> Any:
        reaper = asyncio.create_task(self._reap_forever())
        yield
        reaper.cancel()
        await asyncio.gather(*(self._close(sid) for sid in list(self.sessions)))
        self._pool.shutdown(wait=False, cancel_futures=True)

    async def _reap_forever(self) -> None:
        while True:
            await asyncio.sleep(min(5.0, self.session_timeout / 4, self.client_timeout / 4))
            await self.reap_idle()

    async def reap_idle(self) -> list[str]:
        """Close every session whose owner was not heard from for ``client_timeout``, and every
        session without an owner idle for longer than ``session_timeout``; return their ids."""
        idle = [sid for sid, s in self.sessions.items() if not s.calls_in_flight and self._expired(s)]
        for sid in idle:
            log.info("closing session %s (%s)", sid, "its client went silent" if self.sessions[sid].owner else "idle")
            await self._close(sid)
        owners = {s.owner for s in self.sessions.values()}
        for cid in [cid for cid in self._heard if cid not in owners]:
            del self._heard[cid]
        return idle

    def _expired(self, session: Session) -> bool:
        now = time.monotonic()
        if session.owner is not None:
            return now - self._heard.get(session.owner, 0.0) > self.client_timeout
        return now - session.last_used > self.session_timeout

    async def _close(self, sid: str) -> None:
        session = self.sessions.pop(sid, None)
        if session is not None:  # after the session's queued calls, and never refused for their number
            await asyncio.shield(self._in_turn(session, session.env.close))

    async def _run(self, session: Session, call: Callable[..., Any], *args: Any) -> Any:
        """``call(*args)`` in the pool, after the session's earlier calls (a client that leaves
        mid-call leaves the call to finish: shielded, it keeps the session's lock until it is done)."""
        if session.calls_in_flight >= MAX_QUEUED_CALLS:
            raise ServerBusyError(
                f"this session already has {session.calls_in_flight} calls waiting or running (at most {MAX_QUEUED_CALLS}): "
                "wait for an answer before the next call, or make another env."
            )
        session.calls_in_flight += 1
        session.last_used = time.monotonic()
        try:
            return await asyncio.shield(self._in_turn(session, call, *args))
        finally:
            session.calls_in_flight -= 1

    async def _in_turn(self, session: Session, call: Callable[..., Any], *args: Any) -> Any:
        async with session.lock:
            try:
                return await asyncio.get_running_loop().run_in_executor(self._pool, call, *args)
            finally:
                session.last_used = time.monotonic()

    @web.middleware
    async def _authorize(self, request: web.Request, handler: Callable[[web.Request], Any]) -> web.StreamResponse:
        """With a token: 401 for a request whose ``Authorization`` header is not ``Bearer <token>``."""
        if self._expected_auth is not None:
            given = request.headers.get("Authorization", "").encode("utf-8", "surrogateescape")
            if not secrets.compare_digest(given, self._expected_auth):
                what = "a wrong token" if given else "no token"
                raise UnauthorizedError(
                    f"this server wants a token (mathgym serve --token-env) and the request carried {what}: "
                    "pass token_env='VAR' to mathgym/Remote-v0, VAR being an environment variable that holds it."
                )
        cid = _client_id(request)
        if cid in self._heard:  # any request of an owner counts as its heartbeat
            self._heard[cid] = time.monotonic()
        return await handler(request)

    # -- routes ------------------------------------------------------------------------------

    async def health(self, request: web.Request) -> web.Response:
        return _json({"envs": self.env_ids, "options": self.options, "sessions": len(self.sessions),
                      "max_sessions": self.max_sessions, "session_timeout": self.session_timeout,
                      "client_timeout": self.client_timeout, "yours": self._held_by(_client_id(request))})

    async def lease(self, request: web.Request) -> web.Response:
        """A client's heartbeat: its sessions stay another ``client_timeout``."""
        cid = request.match_info["cid"]
        held = self._held_by(cid)
        if held:
            self._heard[cid] = time.monotonic()
        return _json({"sessions": held})

    async def release(self, request: web.Request) -> web.Response:
        """Close every session of a client (what it does as it exits)."""
        cid = request.match_info["cid"]
        mine = [sid for sid, s in self.sessions.items() if s.owner == cid]
        await asyncio.gather(*(self._close(sid) for sid in mine))
        self._heard.pop(cid, None)
        if mine:
            log.info("closed %d sessions of a client that left", len(mine))
        return _json({"closed": len(mine)})

    async def create(self, request: web.Request) -> web.Response:
        body, size = await _body(request)
        env_id = self._served_id(_field(body, "env_id", (str, type(None)), default=None))
        kwargs = decode_request(_field(body, "kwargs", dict, default={}), size)
        check_env_kwargs(env_id, kwargs, "kwargs")
        if self._room() < 1:
            await self.reap_idle()
        with self._place("a new env"):
            env = await asyncio.get_running_loop().run_in_executor(self._pool, _make_env, env_id, {**self.env_kwargs, **kwargs})
            try:
                spaces = {"observation_space": describe_space(env.observation_space), "action_space": describe_space(env.action_space)}
            except ConfigError:
                env.close()
                raise
            sid = self._add(Session(env, env_id), _client_id(request))
        log.info("session %s: %s %s", sid, env_id, kwargs)
        max_turns = getattr(env.unwrapped, "max_turns", None)
        return _json({"session_id": sid, "env_id": env_id, **spaces, "metadata": encode(env.metadata),
                      "render_mode": env.render_mode, "max_turns": max_turns if type(max_turns) is int else None,
                      "expert": callable(getattr(env.unwrapped, "expert_action", None)),
                      "client_timeout": self.client_timeout}, status=201)

    async def reset(self, request: web.Request) -> web.Response:
        session, (body, size) = self._session(request), await _body(request)
        seed = _field(body, "seed", (int, type(None)), default=None)
        options = decode_request(_field(body, "options", (dict, type(None)), default=None), size)
        if isinstance(seed, bool) or (seed is not None and seed < 0):
            raise BadRequestError(f"'seed' must be a non-negative integer or null (numpy seeds no negative ones), got {seed}.")
        obs, info = await self._run(session, lambda: session.env.reset(seed=seed, options=options))
        return _json({"observation": encode(obs), "info": encode(info)})

    async def step(self, request: web.Request) -> web.Response:
        session, (body, size) = self._session(request), await _body(request)
        if "action" not in body:
            raise BadRequestError("the request body lacks 'action'.")
        action = body["action"]
        if isinstance(session.env.action_space, gym.spaces.Text):
            if not isinstance(action, str):
                raise InvalidActionError(f"{session.env_id} step() takes the model's text as a JSON string, got {_json_type(action)}.")
        else:
            action = decode_request(action, size)
        obs, reward, terminated, truncated, info = await self._run(session, session.env.step, action)
        return _json({"observation": encode(obs), "reward": encode(float(reward)), "terminated": bool(terminated),
                      "truncated": bool(truncated), "info": encode(info)})

    async def render(self, request: web.Request) -> web.Response:
        session = self._session(request)
        return _json({"render": encode(await self._run(session, session.env.render))})

    async def expert(self, request: web.Request) -> web.Response:
        session = self._session(request)
        expert_action = getattr(session.env.unwrapped, "expert_action", None)
        if not callable(expert_action):
            raise BadRequestError(f"{session.env_id} has no expert_action(); only envs that have one answer this route.")
        return _json({"action": encode(await self._run(session, expert_action))})

    async def copy(self, request: web.Request) -> web.Response:
        session = self._session(request)
        with self._place("a copy"):
            env = await self._run(session, lambda: pickle.loads(pickle.dumps(session.env)))
            return _json({"session_id": self._add(Session(env, session.env_id), _client_id(request))}, status=201)

    async def delete(self, request: web.Request) -> web.Response:
        self._session(request)
        await self._close(request.match_info["sid"])
        return _json({"closed": True})

    # -- helpers -----------------------------------------------------------------------------

    def _served_id(self, env_id: str | None) -> str:
        if env_id is None:
            if len(self.env_ids) == 1:
                return self.env_ids[0]
            raise BadRequestError(f"this server serves {', '.join(self.env_ids)}: name one as 'env_id'.")
        if env_id not in self.env_ids:
            err = UnknownEnvError(env_id, self.env_ids)
            hint = f" Did you mean: {', '.join(err.suggestions)}?" if err.suggestions else ""
            err.args = (f"This server does not serve {env_id!r}; it serves {', '.join(self.env_ids)}.{hint}",)
            raise err
        return env_id

    def _room(self) -> int:
        """Sessions that may still be made: ``max_sessions`` less those held and those being made."""
        return self.max_sessions - len(self.sessions) - self._opening

    @contextlib.contextmanager
    def _place(self, what: str) -> Iterator[None]:
        """Hold one of ``max_sessions``' places while a session is made (checked and taken with no
        ``await`` between, so concurrent creates and copies never pass the limit together)."""
        if self._room() < 1:
            raise ServerBusyError(
                f"the server holds its maximum of {self.max_sessions} sessions (--max-sessions) and {what} needs one more; "
                f"close an env, or retry once idle sessions time out (--session-timeout {self.session_timeout:g} s)."
            )
        self._opening += 1
        try:
            yield
        finally:
            self._opening -= 1

    def _add(self, session: Session, owner: str | None) -> str:
        sid = secrets.token_urlsafe(16)
        self.sessions[sid] = session
        if owner is not None:
            session.owner, self._heard[owner] = owner, time.monotonic()
        return sid

    def _held_by(self, cid: str | None) -> int:
        return 0 if cid is None else sum(s.owner == cid for s in self.sessions.values())

    def _session(self, request: web.Request) -> Session:
        sid = request.match_info["sid"]
        session = self.sessions.get(sid)
        if session is None:
            raise SessionNotFoundError(
                f"no session {sid!r} on this server: it was closed, its client went silent for {self.client_timeout:g} s "
                f"(--client-timeout), it was idle for more than {self.session_timeout:g} s (--session-timeout), "
                "or the server restarted; make a new env."
            )
        return session


def _client_id(request: web.Request) -> str | None:
    """The id in the request's ``X-Mathgym-Client`` header (``None``: none, or not an id)."""
    cid = request.headers.get(CLIENT_HEADER)
    return cid if cid and len(cid) <= 64 and cid.replace("-", "").replace("_", "").isalnum() and cid.isascii() else None


def _make_env(env_id: str, kwargs: dict[str, Any]) -> gym.Env:
    """``gym.make``, with a constructor's ``ValueError`` / ``TypeError`` reported as the options' fault."""
    try:
        return gym.make(env_id, **kwargs)
    except MathgymError:
        raise
    except (ValueError, TypeError) as err:
        raise ConfigError(f"{env_id} refused its options {kwargs!r}: {type(err).__name__}: {err}") from err


@web.middleware
async def _errors_as_json(request: web.Request, handler: Callable[[web.Request], Any]) -> web.StreamResponse:
    """Every failure as ``{"error": {"type", "message"}}``; an env's own exception is a 500, logged."""
    try:
        return await handler(request)
    except web.HTTPException as err:  # aiohttp's own: unknown route, wrong method, body too large
        if err.status < 400:
            raise
        name = "RemoteEnvError" if err.status >= 500 else "BadRequestError"
        return _json({"error": {"type": name, "message": f"{request.method} {request.path}: {err.reason}"}}, status=err.status)
    except ConnectionError as err:  # the client left mid-request: nobody will read the answer
        log.info("%s %s: the client went away (%s)", request.method, request.path, err)
        return _json({"error": {"type": "BadRequestError", "message": f"the connection was lost: {err}"}}, status=400)
    except Exception as err:
        status, body = error_body(err)
        if body["error"]["type"] == "RemoteEnvError":  # the env's own failure: its traceback for the operator
            log.exception("%s %s failed", request.method, request.path)
        elif status >= 500:
            log.warning("%s %s: %s", request.method, request.path, err)
        response = _json(body, status=status)
        if isinstance(err, ServerBusyError):
            response.headers["Retry-After"] = "5"
        return response


async def _body(request: web.Request) -> tuple[dict[str, Any], int]:
    """The request's JSON object and its size in bytes (what bounds the values decoded from it)."""
    raw = await request.read()
    try:
        body = json.loads(raw) if raw else {}
    except ValueError as err:
        raise BadRequestError(f"the request body is not JSON ({err}).") from None
    except RecursionError:  # json's own depth limit, reached by a body of nothing but brackets
        raise BadRequestError("the request body nests too deep to read.") from None
    if not isinstance(body, dict):
        raise BadRequestError(f"the request body must be a JSON object, got {_json_type(body)}.")
    return body, len(raw)


def _field(body: dict[str, Any], name: str, types: type | tuple[type, ...], *, default: Any) -> Any:
    value = body.get(name, default)
    if not isinstance(value, types):
        raise BadRequestError(f"{name!r} must be {_type_names(types)}, got {_json_type(value)}.")
    return value


_JSON_TYPES = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "an integer",
               float: "a number", type(None): "null"}


def _json_type(value: Any) -> str:
    return next((name for t, name in _JSON_TYPES.items() if isinstance(value, t)), type(value).__name__)


def _type_names(types: type | tuple[type, ...]) -> str:
    return " or ".join(_JSON_TYPES.get(t, t.__name__) for t in (types if isinstance(types, tuple) else (types,)))


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(text=json.dumps(data, allow_nan=False), status=status, content_type="application/json")


# -- running it ---------------------------------------------------------------------------------


def run_forever(server: EnvServer, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Serve in this thread until SIGINT or SIGTERM, printing the address once listening."""
    import signal

    if not logging.getLogger().handlers:  # sessions opened and closed, and the env's tracebacks (500s)
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        limits = (f"at most {server.max_sessions} sessions, closed {server.client_timeout:g} s after their client went silent "
                  f"or {server.session_timeout:g} s idle")
        def announce(url: str) -> None:
            print(f"mathgym serve: {', '.join(server.env_ids)} on {url} ({limits})", flush=True)

        await serve_app(server, host, port, announce, stop)

    asyncio.run(main())
