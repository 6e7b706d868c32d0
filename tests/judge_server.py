"""A fixture LLM judge served over real HTTP on 127.0.0.1, for the envs graded by a judge (OpenQA-v0).

The server is the one of ``tests/rewards/test_rewards_judge.py`` (it grades a response 10 when it holds
the reference answer, else 2); :func:`fixture_judge_url` starts one per process, on first use.
:class:`TrickleServer` answers a byte at a time.
"""

from __future__ import annotations

import threading
from http.server import ThreadingHTTPServer

from tests.rewards.test_rewards_judge import FixtureJudge, _handler

_SERVER: dict[str, str] = {}
_LOCK = threading.Lock()


def fixture_judge_url(behaviour: str = "ok") -> str:
    """The ``/v1`` root of this process's fixture judge answering with ``behaviour`` (``"quote"``: a
    naive judge that quotes the whole response around its verdict), started on first call (a daemon thread)."""
    with _LOCK:
        if behaviour not in _SERVER:
            judge = FixtureJudge()
            judge.default = behaviour
            httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(judge))
            httpd.daemon_threads = True
            threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
            _SERVER[behaviour] = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
        return _SERVER[behaviour]


class TrickleServer:
    """A server on 127.0.0.1 that answers every request with a valid reply, one byte every ``every_s``
    seconds (headers and body alike): a client whose timeout bounds each read waits on it forever.

    ``with TrickleServer(body) as server: server.url`` (the ``/v1`` root).
    """

    def __init__(self, body: bytes, every_s: float = 0.05):
        import socket

        self.reply = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
        self.every_s, self.requests = every_s, 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        self.closed = threading.Event()

    def __enter__(self) -> TrickleServer:
        threading.Thread(target=self._serve, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.closed.set()
        self.sock.close()

    def _serve(self) -> None:
        while not self.closed.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.requests += 1
            threading.Thread(target=self._trickle, args=(conn,), daemon=True).start()

    def _trickle(self, conn) -> None:
        with conn:
            try:
                conn.recv(1 << 20)
                for byte in self.reply:
                    if self.closed.wait(self.every_s):
                        return
                    conn.sendall(bytes([byte]))
            except OSError:  # the client gave up
                return
