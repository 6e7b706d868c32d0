"""The wire side of NeMoGym-v0: one HTTP session with a NeMo-Gym resources server, and a server
started for the env (:mod:`mathgym.envs.interop.nemo_gym_launch`, run by an interpreter that has nemo-gym).

Standard library only: mathgym needs no nemo-gym import to play its servers.
"""

from __future__ import annotations

import http.client
import http.cookies
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mathgym.errors import ConfigError, ToolServerError

#: The environment variable naming an interpreter that has nemo-gym (Python >= 3.12).
PYTHON_ENV_VAR = "MATHGYM_NEMO_GYM_PYTHON"
LAUNCHER = Path(__file__).with_name("nemo_gym_launch.py")
#: Longest reply body read from a resources server.
MAX_REPLY_BYTES = 16 * 2**20
INSTALL_HINT = (
    "NeMoGym-v0 plays a NeMo-Gym resources server over HTTP: give server_url= of a running one, or "
    f"resources_server= with python= (or ${PYTHON_ENV_VAR}) an interpreter that has nemo-gym "
    "(Python >= 3.12: python3.12 -m venv VENV && VENV/bin/pip install nemo-gym==0.4.0)"
)


@dataclass(frozen=True)
class Reply:
    """A resources server's answer: HTTP status and body."""

    status: int
    body: bytes

    def json(self) -> Any:
        """The body as JSON (``None`` where it is not)."""
        try:
            return json.loads(self.body.decode("utf-8", "replace"))
        except ValueError:
            return None

    def text(self) -> str:
        return self.body.decode("utf-8", "replace")


class ResourcesServerSession:
    """HTTP/1.1 requests to one resources server, carrying one session's cookies.

    A NeMo-Gym resources server keeps a rollout's state under a signed session cookie: the reply
    to ``/seed_session`` sets it and every later request (tools, ``/verify``) sends it back.

    Raises (from :meth:`post`): :class:`~mathgym.errors.ToolServerError` when the server cannot be
    reached; ``TimeoutError`` when it does not answer within ``timeout_s``.
    """

    def __init__(self, url: str, timeout_s: float):
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"server_url={url!r} is not an http(s) URL of a resources server.")
        self.url, self.timeout_s = url.rstrip("/"), float(timeout_s)
        self._parts = parts
        self.cookies: dict[str, str] = {}

    def _connection(self, timeout_s: float) -> http.client.HTTPConnection:
        kind = http.client.HTTPSConnection if self._parts.scheme == "https" else http.client.HTTPConnection
        return kind(self._parts.hostname, self._parts.port, timeout=timeout_s)

    def request(self, method: str, path: str, payload: Any = None, timeout_s: float | None = None) -> Reply:
        """One request; the reply's ``Set-Cookie`` headers update the session's cookies."""
        connection = self._connection(self.timeout_s if timeout_s is None else timeout_s)
        headers = {"Accept": "application/json"}
        body = None
        if payload is not None:
            body, headers["Content-Type"] = json.dumps(payload).encode(), "application/json"
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        try:
            connection.request(method, self._parts.path.rstrip("/") + path, body=body, headers=headers)
            response = connection.getresponse()
            data = response.read(MAX_REPLY_BYTES)
            for header in response.headers.get_all("Set-Cookie") or ():
                jar: http.cookies.SimpleCookie = http.cookies.SimpleCookie()
                jar.load(header)
                self.cookies.update({name: morsel.value for name, morsel in jar.items()})
            return Reply(response.status, data)
        except TimeoutError:
            raise
        except OSError as err:
            raise ToolServerError(f"the NeMo-Gym resources server at {self.url} cannot be reached: {err}") from None
        finally:
            connection.close()

    def post(self, path: str, payload: Any) -> Reply:
        return self.request("POST", path, payload)

    def alive(self) -> bool:
        """Whether the server answers its liveness route (``GET /``) within a few seconds."""
        try:
            return self.request("GET", "/", timeout_s=min(self.timeout_s, 5.0)).status == 200
        except (ToolServerError, TimeoutError):
            return False


def nemo_gym_python(python: str | None = None) -> str:
    """The interpreter that serves resources servers: ``python``, else ``$MATHGYM_NEMO_GYM_PYTHON``,
    else this one."""
    return python or os.environ.get(PYTHON_ENV_VAR) or sys.executable


class LaunchedServer:
    """A resources server that nemo-gym ships (``name``) or of one's own (``"module:Class"``), served on
    127.0.0.1 by ``python`` for as long as this object lives (:meth:`stop`; it also stops by itself
    when this process is gone).

    Attributes:
        url: Where it answers.
        dataset: The example data set nemo-gym ships beside it (``None`` for none).
    """

    def __init__(self, server: str, python: str | None = None, config: Mapping[str, Any] | None = None,
                 paths: tuple[str, ...] = (), startup_timeout_s: float = 120.0, lifetime_s: float = 0.0):
        self.python = nemo_gym_python(python)
        command = [self.python, "-P", str(LAUNCHER), server, "--config", json.dumps(dict(config or {})),
                   "--lifetime-s", str(lifetime_s)]
        for path in paths:
            command += ["--path", str(path)]
        # Files, not pipes: a chatty server never blocks. They live as long as the server (closed by stop()).
        self._logs = [tempfile.TemporaryFile(), tempfile.TemporaryFile()]  # noqa: SIM115
        try:
            self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=self._logs[0], stderr=self._logs[1])
        except OSError as err:
            raise ConfigError(f"python={self.python!r} could not be started ({err}). {INSTALL_HINT}") from None
        first = self._first_line(startup_timeout_s)
        if "url" not in first:
            self.stop()
            raise ConfigError(f"resources_server={server!r} did not start: {first.get('error', '')} {INSTALL_HINT}".strip())
        self.url: str = first["url"]
        self.dataset: str | None = first.get("dataset")
        self._wait_alive(startup_timeout_s)

    def _log(self, index: int) -> bytes:
        log = self._logs[index]
        log.seek(0)
        return log.read(MAX_REPLY_BYTES)

    def _first_line(self, timeout_s: float) -> dict[str, Any]:
        """The launcher's JSON line (``{"error": ...}`` with its stderr when it printed none)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            line, newline, _ = self._log(0).partition(b"\n")
            if newline:
                try:
                    reply = json.loads(line.decode("utf-8", "replace"))
                    if isinstance(reply, dict):
                        return reply
                except ValueError:
                    pass
            if self.process.poll() is not None and not newline:
                break
            time.sleep(0.05)
        self.process.kill()
        self.process.wait(timeout=10)
        stderr = self._log(1).decode("utf-8", "replace")[-1500:].strip()
        return {"error": f"the launcher exited with status {self.process.returncode}: {stderr}"}

    def _wait_alive(self, timeout_s: float) -> None:
        session, deadline = ResourcesServerSession(self.url, 5.0), time.monotonic() + timeout_s
        while not session.alive():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise ToolServerError(f"the resources server at {self.url} did not answer within {timeout_s:g} s")
            time.sleep(0.1)

    def stop(self) -> None:
        """End the server process (idempotent)."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=10)
        for log in self._logs:
            log.close()
