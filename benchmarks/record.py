"""Recorded benchmark results: what the docs quote, with the command, date and machine.

Every benchmark script takes ``--record NAME``: after printing its table it writes
``benchmarks/results/NAME.json``::

    {"name": ..., "command": "python benchmarks/bench_code.py --repeat 3 --record code",
     "date": "2026-11-25T09:40:12Z", "machine": {...}, "results": {...}}

A figure on a documentation page sits in a block that names its record
(``<!-- figures: code -->`` ... ``<!-- /figures -->``), and ``tests/test_docs_figures.py``
checks that every percentage, ratio and rate in the block is one of the record's numbers,
so a page cannot drift from what was measured.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import shlex
import sys
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def python_loop_s() -> float:
    """Seconds of ``sum(range(10**7))``, the best of three: how fast this machine runs Python right
    now. The machines these run on vary from day to day (a shared host); the probe tells a reader
    whether two records were taken at the same speed."""
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        sum(range(10**7))
        best = min(best, time.perf_counter() - start)
    return round(best, 3)


def machine() -> dict[str, Any]:
    """The machine a result was measured on: CPU model and count, memory, load, Python's speed
    (:func:`python_loop_s`), GPU."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as handle:
            cpu = next((line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")), cpu)
    except OSError:
        pass
    memory_gib = None
    try:
        with open("/proc/meminfo") as handle:
            total_kb = next(int(line.split()[1]) for line in handle if line.startswith("MemTotal"))
        memory_gib = round(total_kb / 2**20, 1)
    except (OSError, StopIteration, ValueError):
        pass
    gpu = None
    try:
        import torch

        gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    except ImportError:
        pass
    return {
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "memory_gib": memory_gib,
        "load_average": round(os.getloadavg()[0], 2),
        "python": platform.python_version(),
        "python_loop_s": python_loop_s(),
        "gpu": gpu,
    }


def split_passthrough(argv: list[str]) -> tuple[list[str], list[str]]:
    """``argv`` split at its first ``--``: the script's own arguments, and those it passes on."""
    if "--" not in argv:
        return argv, []
    return argv[: argv.index("--")], argv[argv.index("--") + 1 :]


def write_record(name: str, results: dict[str, Any], argv: list[str] | None = None) -> Path:
    """Write ``results`` (plain JSON numbers and strings) as the record ``name``; returns its path."""
    argv = list(sys.argv if argv is None else argv)
    script = Path(argv[0])
    try:
        script = script.resolve().relative_to(Path.cwd())
    except ValueError:
        pass
    record = {
        "name": name,
        "command": shlex.join(["python", str(script), *argv[1:]]),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": machine(),
        "results": results,
    }
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(record, indent=2) + "\n")
    print(f"recorded: {path}")
    return path
