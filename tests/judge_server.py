"""A fixture LLM judge served over real HTTP on 127.0.0.1, for the envs graded by a judge (OpenQA-v0).

The server is the one of ``tests/test_rewards_judge.py`` (it grades a response 10 when it holds
the reference answer, else 2); :func:`fixture_judge_url` starts one per process, on first use.
"""

from __future__ import annotations

import threading
from http.server import ThreadingHTTPServer

from tests.test_rewards_judge import FixtureJudge, _handler

_SERVER: dict[str, str] = {}
_LOCK = threading.Lock()


def fixture_judge_url() -> str:
    """The ``/v1`` root of this process's fixture judge (started on first call, a daemon thread)."""
    with _LOCK:
        if "url" not in _SERVER:
            httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(FixtureJudge()))
            httpd.daemon_threads = True
            threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
            _SERVER["url"] = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
        return _SERVER["url"]
