"""``hf:`` data sets fail at once, with a clear message, when the hub cannot be reached."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LOAD = textwrap.dedent("""
    import time
    from mathgym.envs.math.data import hub_offline, load_dataset
    from mathgym.errors import DatasetError
    start = time.perf_counter()
    print("offline:", hub_offline())
    try:
        load_dataset("hf:nosuch-org/nosuch-dataset:main", split="test")
    except DatasetError as err:
        print("error:", err)
    print(f"seconds: {time.perf_counter() - start:.1f}")
""")


def _run(tmp_path: Path, **env: str) -> str:
    base = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HF_ENDPOINT")}
    base["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    base["HF_HOME"] = str(tmp_path / "hf")  # an empty cache
    result = subprocess.run([sys.executable, "-c", LOAD], env={**base, **env}, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_hf_offline_is_said_at_once(tmp_path):
    out = _run(tmp_path, HF_HUB_OFFLINE="1")
    assert "offline: True" in out
    assert "error: could not load data set 'nosuch-org/nosuch-dataset'" in out
    assert "cannot be reached (offline) and the data set is not in the local cache" in out


def test_a_first_failed_connection_counts_as_offline(tmp_path):
    out = _run(tmp_path, HF_ENDPOINT="http://127.0.0.1:9")  # nothing listens there: the connection is refused
    assert "offline: True" in out and "cannot be reached (offline)" in out, out
