"""Issue 47 part 4: SQLQuery-v0's result comparison and RepoRepair-v0's patch search at their bounds.

Prints one row per case: the seconds one comparison / one diff takes (best of 3).

    python benchmarks/bench_env_search.py
"""

from __future__ import annotations

import time

from mathgym.envs.sql.sql_compare import results_match
from mathgym.envs.repo.unified_diff import PatchError, apply_unified_diff


def _best_of_3(call) -> float:
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best


def _patch(files: dict[str, str], diff: str) -> None:
    try:
        apply_unified_diff(files, diff)
    except PatchError:
        pass  # a refused diff is an outcome: its time is what is measured


def cases() -> dict[str, object]:
    distinct = [(f"row {i}", i) for i in range(10_000)]
    gold = [(f"gold {i}", i) for i in range(30)]
    rows = [(f"row {i}", i * 0.37) for i in range(10_000)]
    nudged = [(t, v + 0.004) for t, v in reversed(rows)]
    lines = [f"x{i % 7}" for i in range(97_000)]
    for i in range(0, 97_000, 100):
        lines[i] = f"target {i}"
    big = {"big.txt": "\n".join(lines) + "\n"}
    misplaced = "--- a/big.txt\n+++ b/big.txt\n" + "".join(f"@@ -1 +1 @@\n-target {i}\n+fixed {i}\n" for i in range(0, 95_000, 100))
    zigzag = "--- a/big.txt\n+++ b/big.txt\n" + "".join(
        f"@@ -1 +1 @@\n-target {i}\n+fixed {i}\n" for k in range(475) for i in (k * 100, 94_900 - k * 100))
    return {
        "SQL set: 10,000 distinct rows vs 30": lambda: results_match(distinct, gold, "set"),
        "SQL multiset: 10,000 rows, reversed, nudged": lambda: results_match(nudged, rows, "multiset"),
        "SQL set: 10,000 gold rows, answer twice over": lambda: results_match(nudged * 2, rows, "set"),
        "diff: 950 hunks stated at line 1, 97,000 lines": lambda: _patch(big, misplaced),
        "diff: 950 hunks zigzagging, 97,000 lines (refused)": lambda: _patch(big, zigzag),
    }


def main() -> None:
    print(f"| {'case':<52} | seconds |\n|{'-' * 54}|---------|")
    for name, call in cases().items():
        print(f"| {name:<52} | {_best_of_3(call):7.3f} |")


if __name__ == "__main__":
    main()
