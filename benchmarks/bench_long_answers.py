"""What one env step costs when the answer is a reasoning model's: ~130,000 characters, beside a short one.

Every env accepts an action of up to ``max_length`` characters (131,072 by default: a 32k-token
answer) and parses it in linear time. For MathReason-v0 and CodeSandbox-v0, on the same tasks
(seeds ``0..repeat-1``, the short and long answers alternating), the table gives the wall time of
``env.step`` (``reset`` is not timed) for:

- ``short``: the expert's answer alone (a ``\\boxed{}`` number; a fenced program run on the tests);
- ``long``: the same answer after a chain of thought, 130,000 characters in all;
- ``hostile``: the costliest of the hostile-action suite's shapes (``tests/test_hostile_actions.py``)
  at 130,000 characters, each timed ``repeat`` times (the shape is named);
- ``too long``: a megabyte, refused before any parser reads it.

Medians and 90th percentiles in milliseconds, and each row's median over the short answer's::

    python benchmarks/bench_long_answers.py --repeat 20 --record long_answers     # ~15 s on 2 cores
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from record import machine, write_record  # noqa: E402

ENVS = ("MathReason-v0", "CodeSandbox-v0")
LONG = 130_000
MEGABYTE = 1_000_000
THINKING = "Let me check this step by step: restate the problem, try a small case, verify the result twice. "


def chain_of_thought(answer: str, length: int = LONG) -> str:
    """``answer`` after a chain of thought, ``length`` characters in all."""
    room = length - len(answer) - len("<think>\n\n</think>\n\n")
    return "<think>\n" + (THINKING * (room // len(THINKING) + 1))[:room] + "\n</think>\n\n" + answer


def timed_steps(env: Any, action_for: Callable[[int], str], seeds: range) -> tuple[list[float], set[str]]:
    """Seconds of ``env.step(action_for(seed))`` after ``env.reset(seed=seed)``, for each seed; the statuses."""
    seconds, statuses = [], set()
    for seed in seeds:
        env.reset(seed=seed)
        action = action_for(seed)
        start = time.perf_counter()
        *_, info = env.step(action)
        seconds.append(time.perf_counter() - start)
        statuses.add(str(info["status"]))
    return seconds, statuses


def row(seconds: list[float], statuses: set[str], chars: int, name: str = "") -> dict[str, Any]:
    ms = sorted(1000 * s for s in seconds)
    return {"chars": chars, "median_ms": round(statistics.median(ms), 3), "p90_ms": round(ms[int(0.9 * (len(ms) - 1))], 3),
            "status": "/".join(sorted(statuses)), "shape": name}


def measure_env(env_id: str, repeat: int) -> dict[str, dict[str, Any]]:
    """The four rows of ``env_id``."""
    import gymnasium as gym

    import mathgym  # noqa: F401
    from tests.test_hostile_actions import SHAPES

    env = gym.make(env_id)
    experts = {}
    for seed in range(repeat):
        env.reset(seed=seed)
        experts[seed] = env.unwrapped.expert_action()
    timed_steps(env, experts.__getitem__, range(2))  # warm: the sandbox's workers, math-verify's helpers
    short, long = ([], set()), ([], set())
    for seed in range(repeat):  # alternating, so that a busy spell of the machine falls on both
        for kind, action_for in ((short, experts.__getitem__), (long, lambda s: chain_of_thought(experts[s]))):
            seconds, statuses = timed_steps(env, action_for, range(seed, seed + 1))
            kind[0].extend(seconds)
            kind[1].update(statuses)
    rows = {"short": row(*short, max(len(a) for a in experts.values())), "long": row(*long, LONG)}
    hostile = {name: timed_steps(env, lambda _: shape(LONG), range(repeat)) for name, shape in SHAPES.items()}
    worst = max(hostile, key=lambda name: statistics.median(hostile[name][0]))
    rows["hostile"] = row(*hostile[worst], len(SHAPES[worst](LONG)), worst)
    rows["too long"] = row(*timed_steps(env, lambda _: "x" * MEGABYTE, range(repeat)), MEGABYTE)
    env.close()
    for values in rows.values():
        values["vs_short"] = round(values["median_ms"] / rows["short"]["median_ms"], 2)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=20, help="steps per row (tasks by seed)")
    parser.add_argument("--record", help="write benchmarks/results/NAME.json")
    args = parser.parse_args()
    results = {env_id: measure_env(env_id, args.repeat) for env_id in ENVS}
    print(f"| env | answer | characters | status | median ms | p90 ms | vs short |   (load {machine()['load_average']})")
    print("|---|---|---|---|---|---|---|")
    for env_id, rows in results.items():
        for kind, r in rows.items():
            label = f"{kind} ({r['shape']})" if r["shape"] else kind
            print(f"| {env_id} | {label} | {r['chars']:,} | {r['status']} | {r['median_ms']:.2f} | {r['p90_ms']:.2f} | "
                  f"{r['vs_short']:.2f}× |")
    if args.record:
        write_record(args.record, {**results, "repeat": args.repeat, "long_chars": LONG})


if __name__ == "__main__":
    main()
