"""An aiohttp application served on a host and port, in this thread or in a background one.

Used by ``mathgym serve`` (:mod:`mathgym.serve`) and by the policy's OpenAI-compatible endpoint
(:mod:`mathgym.agents.endpoint`): anything with an ``app() -> aiohttp.web.Application`` method.
It lives below both (aiohttp is needed only when one is served: ``pip install "mathgym[serve]"``).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Protocol

from aiohttp import web

from mathgym.errors import ConfigError


class ServesApp(Protocol):
    """What can be served: an object that makes its aiohttp application."""

    def app(self) -> web.Application: ...


async def serve_app(server: ServesApp, host: str, port: int, on_ready: Callable[[str], None], stop: asyncio.Event) -> None:
    """Serve ``server`` on ``host:port`` (0: any free port) until ``stop`` is set; ``on_ready`` gets the URL."""
    runner = web.AppRunner(server.app(), handle_signals=False, access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        try:
            await site.start()
        except OSError as err:  # a user's choice of address, not a bug: one line, not a traceback
            raise ConfigError(
                f"cannot listen on {host}:{port}: {err.strerror or err}; choose another --port (0: any free one) "
                "or stop the program that holds it."
            ) from None
        bound_host, bound_port = runner.addresses[0][:2]
        on_ready(f"http://{bound_host if ':' not in bound_host else f'[{bound_host}]'}:{bound_port}")
        await stop.wait()
    finally:
        await runner.cleanup()



class ServerThread:
    """A server running in a background thread (tests, notebooks): ``url`` once started; ``stop()``.

    Example::

        with ServerThread(EnvServer(["GuessNumber-v0"])) as url:   # mathgym.serve.EnvServer
            env = gym.make("mathgym/Remote-v0", url=url)
    """

    def __init__(self, server: ServesApp, host: str = "127.0.0.1", port: int = 0):
        self.server, self.url = server, ""
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, args=(host, port), daemon=True, name="mathgym-serve")

    def _main(self, host: str, port: int) -> None:
        async def main() -> None:
            self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
            await serve_app(self.server, host, port, self._started, self._stop)

        try:
            asyncio.run(main())
        except BaseException as err:  # reported by start()
            self._error = err
            self._ready.set()

    def _started(self, url: str) -> None:
        self.url = url
        self._ready.set()

    def start(self) -> str:
        self._thread.start()
        self._ready.wait(timeout=60)
        if self._error is not None or not self.url:
            raise RuntimeError(f"the server did not start: {self._error!r}")
        return self.url

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=60)

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
