"""docs/scaling.md's pair (issue 48): `mathgym serve` with its defaults holds a default `mathgym train
--env mathgym/Remote-v0` run; the pair runs for real at small sizes; a run the server cannot hold
stops before its first step, in one line naming the sessions it needs and `--max-sessions`, and
leaves the server empty."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator

import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("torch")

from mathgym.algos.configs import GRPOConfig  # noqa: E402
from mathgym.algos.rollout import check_run_room  # noqa: E402
from mathgym.cli import build_parser  # noqa: E402
from mathgym.envs import REMOTE_ENV_ID  # noqa: E402
from mathgym.envs.served.remote import ServerBusyError  # noqa: E402
from mathgym.serve import EnvServer, ServerThread  # noqa: E402
from tests.serve.test_serve_leases import held  # noqa: E402  (the sessions a server holds)

SMALL = ["--steps", "1", "--num-tasks", "2", "--eval-tasks", "2", "--max-new-tokens", "8", "--warm-start-steps", "0",
         "--progress", "false"]


def serve(*options: str) -> Iterator[str]:
    """`mathgym serve MathReason-v0 --port 0 OPTIONS` as the docs run it, in a process of its own."""
    proc = subprocess.Popen([sys.executable, "-m", "mathgym", "serve", "MathReason-v0", "--port", "0", *options],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        address = re.search(r"http://127\.0\.0\.1:\d+", proc.stdout.readline())
        assert address, "the server printed no address"
        yield address.group()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def train(url: str, run_dir: str, *options: str) -> subprocess.CompletedProcess[str]:
    kwargs = json.dumps({"url": url, "env_id": "MathReason-v0", "difficulty": 0})
    return subprocess.run([sys.executable, "-m", "mathgym", "train", "--env", REMOTE_ENV_ID, "--env-kwargs", kwargs,
                           "--run-dir", run_dir, *SMALL, *options], capture_output=True, text=True, timeout=300)


def test_the_servers_defaults_hold_a_default_training_run():
    """128 rollout envs (16 tasks x 8 samples) beside the evaluation's 100: the defaults' run fits."""
    assert build_parser().parse_args(["serve", "MathReason-v0"]).max_sessions == EnvServer(["MathReason-v0"]).max_sessions
    config = GRPOConfig(env=REMOTE_ENV_ID)
    with ServerThread(EnvServer(["MathReason-v0"])) as url:
        check_run_room(config, {"url": url}, config.num_tasks)  # raises where it would not fit
    with ServerThread(EnvServer(["MathReason-v0"], max_sessions=227)) as url:
        with pytest.raises(ServerBusyError, match=r"needs 228 sessions.*--max-sessions 228"):
            check_run_room(config, {"url": url}, config.num_tasks)


def test_the_documented_serve_train_pair_trains(tmp_path):
    server = serve()
    url = next(server)
    try:
        done = train(url, str(tmp_path / "run"), "--group-size", "2")
        assert done.returncode == 0, done.stderr[-2000:]
        assert "accuracy before -> after" in done.stdout
        assert held(url) == 0  # the run closed what it opened
    finally:
        server.close()


def test_a_run_the_server_cannot_hold_says_how_many_sessions_and_which_option(tmp_path):
    server = serve("--max-sessions", "6")
    url = next(server)
    try:
        done = train(url, str(tmp_path / "run"), "--group-size", "4")
        assert done.returncode == 2
        last = done.stderr.strip().splitlines()[-1]
        assert last.startswith("mathgym train: error: this run (8 envs for its rollouts") and "Traceback" not in done.stderr
        assert "needs 10 sessions" in last and "--max-sessions 10" in last, last
        assert held(url) == 0  # nothing left held for the next client
    finally:
        server.close()
