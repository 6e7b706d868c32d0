"""The tests' own HTTP servers stay quiet when a client hangs up before its answer (a client timeout):
socketserver prints a ``BrokenPipeError`` traceback for every such request otherwise, in a passing run."""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from collections.abc import Callable

import pytest

pytest.importorskip("torch")
from tests.teacher_server import FixtureTeacherServer  # noqa: E402
from tests.trainkit import build_small_model  # noqa: E402


def hang_up_before_the_answer(port: int, path: str, body: dict, read: Callable[[], bool]) -> None:
    """POST ``body``, wait until the server has ``read`` it, and close the connection with a reset, as a
    client whose timeout expired while the server worked on its answer."""
    data = json.dumps(body).encode()
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
        deadline = time.monotonic() + 30
        while not read() and time.monotonic() < deadline:
            time.sleep(0.01)
        # SO_LINGER 0: close sends a reset, so the server's first write fails (after a plain close it may not, yet)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def wait_for_handlers(baseline: int, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while threading.active_count() > baseline and time.monotonic() < deadline:
        time.sleep(0.02)
    assert threading.active_count() == baseline, "the server's handler thread did not finish"


def test_the_teacher_server_says_nothing_when_its_client_hangs_up(tmp_path, capfd):
    model = build_small_model(tmp_path / "teacher")
    with FixtureTeacherServer(str(model), slow_s=0.3) as server:
        time.sleep(0.1)  # the serving thread is up
        baseline = threading.active_count()
        port = int(server.url.split(":")[-1].split("/")[0])
        body = {"model": "teacher", "prompt": [1, 2, 3], "max_tokens": 1}
        hang_up_before_the_answer(port, "/v1/completions", body, read=lambda: server.completions == 1)
        wait_for_handlers(baseline)
    err = capfd.readouterr().err
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
