"""NeMo-Gym resources servers for the tests, served by an interpreter that has nemo-gym.

nemo-gym needs Python >= 3.12 and mathgym's venv may be older, so the servers run in a venv of
their own: ``$MATHGYM_NEMO_GYM_PYTHON``, else ``.venv-ci-nemo-gym/bin/python`` in the repository
(made by ``.ci/nemo-gym-venv``). Without one, the tests that need a server skip, saying so.
Each server is started once per test process, on 127.0.0.1, and stops with the process (or after
:data:`LIFETIME_S`, whichever comes first).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest

from mathgym.envs.interop.nemo_gym_http import PYTHON_ENV_VAR, LaunchedServer

REPO = Path(__file__).resolve().parents[1]
DEFAULT_VENV_PYTHON = REPO / ".venv-ci-nemo-gym" / "bin" / "python"
#: The test servers stop by themselves after this many seconds.
LIFETIME_S = 1800.0
FIXTURE = "nemo_gym_fixture:EchoResourcesServer"


def nemo_gym_python() -> tuple[str | None, str]:
    """``(interpreter, "")`` when there is one for nemo-gym, else ``(None, why not)``. An interpreter
    that is there but cannot serve fails the tests that start a server (the launcher says why)."""
    python = os.environ.get(PYTHON_ENV_VAR) or (str(DEFAULT_VENV_PYTHON) if DEFAULT_VENV_PYTHON.exists() else None)
    if python is None:
        return None, (f"no interpreter with nemo-gym (Python >= 3.12): set {PYTHON_ENV_VAR} or run .ci/nemo-gym-venv "
                      f"(it makes {DEFAULT_VENV_PYTHON.relative_to(REPO)})")
    return python, ""


def require_nemo_gym() -> str:
    """The interpreter with nemo-gym, or a skip that says why there is none."""
    python, why = nemo_gym_python()
    if python is None:
        pytest.skip(why)
    return python


@functools.cache
def served(server: str, config_json: str = "{}") -> LaunchedServer:
    """Resources server ``server`` (shipped by nemo-gym, or :data:`FIXTURE`), started once per process."""
    import json

    return LaunchedServer(server, require_nemo_gym(), json.loads(config_json), paths=(str(REPO / "tests"),), lifetime_s=LIFETIME_S)


def contract_kwargs() -> dict:
    """NeMoGym-v0's options in a contract run: nemo-gym's own mcqa server and its example task set."""
    server = served("mcqa")
    return {"server_url": server.url, "dataset": server.dataset, "timeout_s": 30.0}
