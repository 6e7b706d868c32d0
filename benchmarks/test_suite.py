"""Run the README's test command's pytest and record what it counted and how long it took.

    python benchmarks/test_suite.py --record test_suite

The README quotes the default run's counts and wall time from this record (a figures block that
``tests/test_docs_figures.py`` checks), so the figures there are a measurement, not a memory.
Run it from the repository root in the venv the README's test command makes, on an otherwise
idle machine; everything after ``--`` goes to pytest (the default: the suite as configured in
``pyproject.toml``, ``-n 2``).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from record import split_passthrough, write_record  # noqa: E402

#: pytest's closing line: "1769 passed, 36 skipped, 2 xfailed in 301.2s (0:05:01)".
_COUNT = re.compile(r"(\d+) (passed|failed|skipped|xfailed|xpassed|errors?|deselected|warnings?)")


def counts(summary: str) -> dict[str, int]:
    """The numbers in pytest's closing line, by outcome ("error" for "errors")."""
    return {word.rstrip("s") if word.startswith("error") else word: int(n) for n, word in _COUNT.findall(summary)}


def main() -> None:
    own, extra = split_passthrough(sys.argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", default="", help="write benchmarks/results/NAME.json")
    args = parser.parse_args(own)
    with tempfile.TemporaryDirectory(prefix="mathgym-suite-") as tmp:
        # An empty cache and HOME, as on a fresh machine: the learning checks build their warm start.
        env = {**os.environ, "MATHGYM_CACHE": str(Path(tmp) / "cache"), "HOME": tmp}
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra]
        start = time.perf_counter()
        done = subprocess.run(command, env=env, capture_output=True, text=True)
        wall_s = time.perf_counter() - start
    tail = [line for line in done.stdout.splitlines() if line.strip()][-1:] or [""]
    print("\n".join(done.stdout.splitlines()[-15:]))
    got = counts(tail[0])
    minutes, seconds = divmod(round(wall_s), 60)
    results = {
        "returncode": done.returncode,
        "summary": tail[0].strip("= "),
        **got,
        "wall_s": round(wall_s, 1),
        "wall_min": minutes,
        "wall_min_s": seconds,
    }
    print(f"rc {done.returncode}; {got}; {minutes} min {seconds} s")
    if args.record:
        write_record(args.record, results)
    sys.exit(done.returncode)


if __name__ == "__main__":
    main()
