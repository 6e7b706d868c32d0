"""A synchronous client of one MCP server, for envs (gymnasium is synchronous, ``mcp``'s client is not).

:class:`MCPConnection` starts the server (a command line, spoken to over its stdin and stdout) or
connects to it (an ``http(s)://`` URL, streamable HTTP), and runs the ``mcp`` client session in an
event loop on a background thread that the connection owns. Every call waits at most its timeout;
:meth:`MCPConnection.close` ends the session and the server process it started.

What a call gives back is a :class:`ToolReply`, with the failure told apart by whose it is:

* the tool failed (its result has ``isError``, or the server refused the call: unknown tool, bad
  arguments) -> ``is_error``: the model sees the tool's message;
* the tool ran past its time while the server still answers -> ``timed_out``: also the model's
  (its arguments asked for a long run);
* the server is gone (the process died, the connection closed, it does not answer a listing) ->
  ``unavailable``: an infrastructure failure, never the model's.

``mcp`` is optional (the ``mcp`` extra) and imported only here, when a connection opens.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import shlex
import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mathgym.errors import ConfigError, ToolServerError
from mathgym.install import extra_hint, import_extra

INSTALL_HINT = f"MCP tools need the mcp package: {extra_hint('mcp')}"
#: Seconds a closing session may take to end its server before the connection stops waiting.
CLOSE_TIMEOUT_S = 10.0
#: Most seconds the listing that tells a slow tool from a dead server may take.
LIVENESS_TIMEOUT_S = 5.0
#: Characters of the server's stderr quoted when it cannot be started.
STDERR_TAIL_CHARS = 1500


def _mcp() -> Any:
    return import_extra("mcp", INSTALL_HINT)  # optional dependency, imported only when a connection opens


def is_url(server: str | Sequence[str]) -> bool:
    """Whether ``server`` names a streamable-HTTP endpoint rather than a command to start."""
    return isinstance(server, str) and server.startswith(("http://", "https://"))


def server_argv(server: str | Sequence[str]) -> list[str]:
    """The command line of a stdio server: a string is split as a shell would, a list kept.

    Example:
        >>> server_argv("python -m mathgym.mcp_server --no-sql")
        ['python', '-m', 'mathgym.mcp_server', '--no-sql']
    """
    argv = shlex.split(server) if isinstance(server, str) else [str(part) for part in server]
    if not argv:
        raise ConfigError("server= is empty: give a command line that starts an MCP server over stdio, or an http(s):// URL.")
    return argv


@dataclass(frozen=True)
class ToolReply:
    """What one tool call gave.

    Attributes:
        text: The tool's content as text (text blocks as they are, other blocks named), unbounded
            and uncleaned: the env bounds and cleans it as every observation.
        is_error: The tool reported a failure, or the server refused the call.
        timed_out: The call ran past its timeout while the server kept answering.
        unavailable: The server is gone (infrastructure); ``text`` says what happened.
    """

    text: str
    is_error: bool = False
    timed_out: bool = False
    unavailable: bool = False


def openai_tool(tool: Any) -> dict[str, Any]:
    """An MCP tool as the OpenAI function schema that chat templates take as ``tools=[...]``."""
    schema = tool.input_schema if isinstance(tool.input_schema, dict) else {"type": "object", "properties": {}}
    return {"type": "function", "function": {"name": tool.name, "description": tool.description or "", "parameters": schema}}


def _block_text(block: Any) -> str:
    """One content block as text: text as it is, anything else named by its kind."""
    kind = getattr(block, "type", "")
    if kind == "text":
        return str(block.text)
    if kind == "resource":  # an embedded resource: its text, or what it is
        resource = block.resource
        text = getattr(resource, "text", None)
        return str(text) if text is not None else f"[resource {resource.uri} ({resource.mime_type or 'binary'})]"
    if kind == "resource_link":
        return f"[resource link {block.uri}]"
    return f"[{kind or 'unknown'} content ({getattr(block, 'mime_type', None) or 'no type'})]"


def result_text(result: Any) -> str:
    """A ``CallToolResult``'s content as text; its structured content where it has no other."""
    parts = [_block_text(block) for block in result.content or ()]
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, default=str))
    return "\n".join(parts)


class MCPConnection:
    """One session with one MCP server, used from synchronous code.

    Args:
        server: A command line (a string split as a shell would, or a list) that starts a server
            speaking MCP over stdio, or an ``http(s)://`` URL of a streamable-HTTP server.
        env: Environment variables for a started server, over the few ``mcp`` passes on
            (``PATH``, ``HOME``...; the rest of this process's environment is not passed).
        connect_timeout_s: Most seconds to start the server and open the session.
        call_timeout_s: Most seconds one tool call may take.

    Raises:
        ToolServerError: The server could not be started or reached in time.
        ConfigError: ``mcp`` is not installed, or ``server`` is empty.
    """

    def __init__(
        self, server: str | Sequence[str], *, env: Mapping[str, str] | None = None,
        connect_timeout_s: float = 30.0, call_timeout_s: float = 30.0,
    ):
        self.server, self.env = server, dict(env or {})
        self.connect_timeout_s, self.call_timeout_s = float(connect_timeout_s), float(call_timeout_s)
        self.pid = os.getpid()  # a session belongs to the process that opened it
        self._mcp = _mcp()
        self._stderr = None if is_url(server) else tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
        self._client: Any = None
        self.broken = False  # set when a call found the server gone
        self._closing: asyncio.Event | None = None
        self._ended = threading.Event()  # set when the session (and its server) has ended
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="mathgym-mcp-client", daemon=True)
        self._thread.start()
        ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._owner = asyncio.run_coroutine_threadsafe(self._hold(ready), self._loop)
        try:
            ready.result(timeout=self.connect_timeout_s)
        except BaseException as err:  # noqa: BLE001 - whatever stopped the start, the connection is released and named
            self._owner.cancel()
            message = self._start_failure(err)
            self.close()
            raise ToolServerError(message) from None

    def _transport(self) -> Any:
        """The ``mcp`` transport (or URL) of the server."""
        if is_url(self.server):
            return self.server
        from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: PLC0415 - optional dependency

        command, *args = server_argv(self.server)
        return stdio_client(StdioServerParameters(command=command, args=args, env=self.env or None), errlog=self._stderr)

    async def _hold(self, ready: concurrent.futures.Future[None]) -> None:
        """Open the session and hold it until :meth:`close`: the transport's tasks enter and
        leave in this one task, as anyio's task groups require."""
        self._closing = asyncio.Event()
        try:
            async with self._mcp.Client(self._transport()) as client:
                self._client = client
                ready.set_result(None)
                await self._closing.wait()
        except BaseException as err:
            if not ready.done():
                ready.set_exception(err)
            raise
        finally:
            self._client = None
            self._ended.set()

    def _start_failure(self, err: BaseException) -> str:
        what = f"the MCP server at {self.server}" if is_url(self.server) else f"the MCP server `{shlex.join(server_argv(self.server))}`"
        why = f"no session within {self.connect_timeout_s:g} s" if isinstance(err, concurrent.futures.TimeoutError) else _describe(err)
        message = f"{what} could not be started or reached: {why}."
        tail = self._stderr_tail()
        return message + (f" Its stderr ends with:\n{tail}" if tail else "")

    def _stderr_tail(self) -> str:
        if self._stderr is None or self._stderr.closed:
            return ""
        try:
            self._stderr.flush()
            size = self._stderr.seek(0, os.SEEK_END)
            self._stderr.seek(max(0, size - 4 * STDERR_TAIL_CHARS))
            return self._stderr.read()[-STDERR_TAIL_CHARS:].strip()
        except (OSError, ValueError):
            return ""

    @property
    def alive(self) -> bool:
        """Whether the session is open in this process (a dead server is found by a call)."""
        return self._client is not None and not self._owner.done() and os.getpid() == self.pid

    def _run(self, make: Any, timeout: float) -> Any:
        """Run the coroutine ``make(client)`` on the session's loop; at most ``timeout`` seconds."""
        client = self._client
        if client is None or self._owner.done():
            raise ConnectionError("the session is closed")
        future = asyncio.run_coroutine_threadsafe(make(client), self._loop)
        try:
            return future.result(timeout=timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise

    def list_tools(self) -> list[Any]:
        """Every tool the server lists (all pages), as ``mcp`` tool objects."""
        async def listing(client: Any) -> list[Any]:
            tools, cursor = [], None
            for _ in range(100):  # a server whose pages never end cannot hang the env
                page = await client.list_tools(cursor=cursor, cache_mode="refresh")
                tools += page.tools
                cursor = page.next_cursor
                if cursor is None:
                    break
            return tools

        try:
            return self._run(listing, self.connect_timeout_s)
        except BaseException as err:  # noqa: BLE001 - any failure to list is the server's
            self.broken = True
            raise ToolServerError(f"the MCP server {self.server} did not list its tools: {_describe(err)}") from None

    def call(self, name: str, arguments: Mapping[str, Any]) -> ToolReply:
        """Call tool ``name``; never raises: a failure is a :class:`ToolReply` saying whose it is."""
        from mcp import MCPError  # noqa: PLC0415 - optional dependency
        from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT  # noqa: PLC0415

        timeout = self.call_timeout_s
        try:
            result = self._run(lambda client: client.call_tool(name, dict(arguments), read_timeout_seconds=timeout), timeout + 5)
        except MCPError as err:
            if err.code == REQUEST_TIMEOUT:
                return self._timed_out()
            if err.code == CONNECTION_CLOSED:
                return self._gone(f"the connection to the server closed: {err}")
            return ToolReply(f"the server refused the call: {err}", is_error=True)
        except concurrent.futures.TimeoutError:
            return self._timed_out()
        except Exception as err:  # noqa: BLE001 - the transport itself failed: the server is gone
            return self._gone(f"the server is unavailable: {_describe(err)}")
        return ToolReply(result_text(result), is_error=bool(result.is_error))

    def _gone(self, text: str) -> ToolReply:
        self.broken = True
        return ToolReply(text, unavailable=True)

    def _timed_out(self) -> ToolReply:
        """A call ran out of time: the model's when the server still lists its tools, else the server's."""
        try:
            self._run(lambda client: client.list_tools(cache_mode="refresh"), min(LIVENESS_TIMEOUT_S, self.call_timeout_s))
        except BaseException as err:  # noqa: BLE001 - no listing either: the server is gone
            return self._gone(f"the server stopped answering: {_describe(err)}")
        return ToolReply(f"the tool call timed out after {self.call_timeout_s:g} s", timed_out=True)

    def close(self) -> None:
        """End the session (and the server process it started); idempotent, bounded in time.
        In a process that did not open the session (a fork) only forgets it."""
        if os.getpid() != self.pid:
            return
        if self._loop.is_running():
            self._loop.call_soon_threadsafe(lambda: self._closing is not None and self._closing.set())
            if not self._ended.wait(CLOSE_TIMEOUT_S):  # a session that does not end is cancelled
                self._owner.cancel()
                self._ended.wait(CLOSE_TIMEOUT_S)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=CLOSE_TIMEOUT_S)
        if not self._thread.is_alive() and not self._loop.is_closed():
            self._loop.close()
        if self._stderr is not None and not self._stderr.closed:
            self._stderr.close()


def _describe(err: BaseException) -> str:
    """An exception in one line; an exception group by its first leaf (anyio wraps transport failures)."""
    while isinstance(err, BaseExceptionGroup) and err.exceptions:
        err = err.exceptions[0]
    text = str(err).strip().splitlines()[0] if str(err).strip() else ""
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


#: The open connections of this process: (server, env, timeouts, pid) -> [connection, users].
_SHARED: dict[tuple[Any, ...], list[Any]] = {}
_SHARED_LOCK = threading.Lock()


def _key(server: str | Sequence[str], env: Mapping[str, str] | None, connect_timeout_s: float, call_timeout_s: float) -> tuple[Any, ...]:
    spec = server if isinstance(server, str) else tuple(str(part) for part in server)
    return (spec, tuple(sorted((env or {}).items())), float(connect_timeout_s), float(call_timeout_s), os.getpid())


def acquire(
    server: str | Sequence[str], *, env: Mapping[str, str] | None = None,
    connect_timeout_s: float = 30.0, call_timeout_s: float = 30.0,
) -> MCPConnection:
    """The process's connection to ``server``, opened on first use and shared by the envs that
    name the same server: a vector env of 64 envs starts one server process, not 64 (an
    ``AsyncVectorEnv`` one per worker process). Give it back with :func:`release`.

    A connection a call found dead (:attr:`MCPConnection.broken`) is never handed out again.
    """
    key = _key(server, env, connect_timeout_s, call_timeout_s)
    with _SHARED_LOCK:
        entry = _SHARED.get(key)
        if entry is not None and not entry[0].broken and entry[0].alive:
            entry[1] += 1
            return entry[0]
    # Opened outside the lock: a slow server does not hold up envs of other servers.
    connection = MCPConnection(server, env=env, connect_timeout_s=connect_timeout_s, call_timeout_s=call_timeout_s)
    with _SHARED_LOCK:
        old = _SHARED.get(key)
        _SHARED[key] = [connection, 1]
    if old is not None and old[1] <= 0:
        old[0].close()
    return connection


def release(connection: MCPConnection) -> None:
    """Give back a connection from :func:`acquire`; the last user closes it."""
    with _SHARED_LOCK:
        entry = next((e for e in _SHARED.values() if e[0] is connection), None)
        if entry is not None:
            entry[1] -= 1
            if entry[1] > 0:
                return
            for key in [k for k, e in _SHARED.items() if e is entry]:
                del _SHARED[key]
    connection.close()
