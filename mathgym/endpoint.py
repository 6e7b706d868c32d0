"""Requests to an HTTP model server (an LLM judge, a teacher served by vLLM), standard library only.

:func:`send` returns the reply's body or raises :class:`EndpointError`, whose ``retry`` says whether
another attempt may succeed: timeouts, connection errors, HTTP 429 and 5xx may; other HTTP errors and
an oversized body may not. ``timeout_s`` bounds the whole request (connecting, the headers and the
body), not each read: a server that trickles its reply a byte at a time is cut off when the time is
up. The API key is read from the environment variable ``api_key_env`` at each request (sent as a
bearer token when set), never kept.

:func:`with_retries` is the one retry loop of every remote endpoint: further attempts after a
failure that may pass, with exponential waits between them.
"""

from __future__ import annotations

import http.client
import os
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any, NamedTuple


class EndpointError(Exception):
    """One request failed: ``reason``, and whether trying again may help (``retry``)."""

    def __init__(self, reason: str, retry: bool):
        super().__init__(reason)
        self.reason, self.retry = reason, retry


class _Watchdog:
    """Shuts the request's sockets down when its time is up, so that a read blocked on a server
    that sends a byte now and then returns at once (a socket timeout bounds each read, not the whole)."""

    def __init__(self, timeout_s: float):
        self.fired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(timeout_s, self._fire)
        self._timer.daemon = True

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            if self.fired:
                _shut(sock)

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            for sock in self._sockets:
                _shut(sock)

    def __enter__(self) -> _Watchdog:
        self._timer.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._timer.cancel()


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:  # already closed
        pass


def _watched(base: type[http.client.HTTPConnection], watchdog: _Watchdog) -> Callable[..., http.client.HTTPConnection]:
    """A connection class whose socket the watchdog may shut down (a proxy's connection too)."""

    class Watched(base):  # type: ignore[misc, valid-type]
        def connect(self) -> None:
            super().connect()
            watchdog.watch(self.sock)

    return Watched


class _HTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, watchdog: _Watchdog):
        super().__init__()
        self.watchdog = watchdog

    def http_open(self, req: urllib.request.Request) -> Any:
        return self.do_open(_watched(http.client.HTTPConnection, self.watchdog), req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, watchdog: _Watchdog):
        super().__init__()
        self.watchdog = watchdog

    def https_open(self, req: urllib.request.Request) -> Any:
        return self.do_open(_watched(http.client.HTTPSConnection, self.watchdog), req, context=self._context)


def send(url: str, body: bytes | None, *, timeout_s: float, api_key_env: str, max_bytes: int, method: str = "POST") -> bytes:
    """``method`` ``url`` with the JSON ``body``, within ``timeout_s`` in all; the reply's body (at most
    ``max_bytes``), or :class:`EndpointError`."""
    headers = {"Content-Type": "application/json"}
    key = os.environ.get(api_key_env, "")
    if key:
        headers["Authorization"] = f"Bearer {key}"
    request = urllib.request.Request(url, data=body, headers=headers, method=method)
    timeout = EndpointError(f"timeout after {timeout_s}s", retry=True)
    with _Watchdog(timeout_s) as watchdog:
        opener = urllib.request.build_opener(_HTTPHandler(watchdog), _HTTPSHandler(watchdog))
        try:
            with opener.open(request, timeout=timeout_s) as answer:
                raw = answer.read(max_bytes + 1)
        except urllib.error.HTTPError as err:
            err.close()
            raise EndpointError(f"HTTP {err.code}", retry=err.code == 429 or err.code >= 500) from None
        except urllib.error.URLError as err:
            if watchdog.fired or isinstance(err.reason, TimeoutError):
                raise timeout from None
            raise EndpointError(f"connection: {err.reason}", retry=True) from None
        except (TimeoutError, OSError, http.client.HTTPException) as err:  # reset, closed or cut off mid-reply
            if watchdog.fired or isinstance(err, TimeoutError):
                raise timeout from None
            raise EndpointError(f"connection: {err!r}", retry=True) from None
        if watchdog.fired:  # a body with no length ends when the socket is shut: what came is not the reply
            raise timeout
    if len(raw) > max_bytes:
        raise EndpointError(f"reply body over {max_bytes:,} bytes", retry=False)
    return raw


class Attempts(NamedTuple):
    """What :func:`with_retries` got: the ``value`` of the attempt that succeeded (``ok``), and the
    reasons of the attempts that failed before it (all of them when none succeeded)."""

    ok: bool
    value: Any
    failures: list[str]


def with_retries(attempt: Callable[[], Any], *, max_retries: int, backoff_s: float,
                 on_retry: Callable[[], None] | None = None) -> Attempts:
    """Call ``attempt`` until it returns, at most ``1 + max_retries`` times, waiting ``backoff_s * 2 ** i``
    before retry ``i``; an :class:`EndpointError` that may not pass again (``retry=False``) ends it
    early. ``on_retry`` is called before each retry (a counter)."""
    failures: list[str] = []
    for tried in range(max_retries + 1):
        if tried:
            if on_retry is not None:
                on_retry()
            time.sleep(backoff_s * 2 ** (tried - 1))
        try:
            return Attempts(True, attempt(), failures)
        except EndpointError as err:
            failures.append(err.reason)
            if not err.retry:
                break
    return Attempts(False, None, failures)
