"""``mathgym/Remote-v0`` over loopback against the local env, in one run.

A ``mathgym serve`` server is started in a subprocess on 127.0.0.1, and this process measures:

1. **Latency** (``--latency-env``, MathReason-v0 by default): the same tasks (seeds) stepped with the
   same action (the env's expert answer) on a local env and on a client of the served env, in turns;
   only ``step`` is timed. Target: the client's median step at most 1 ms over the local one's.
2. **Throughput** (``--sessions`` sessions of ``--throughput-env``, CodeSandbox-v0 by default: every
   step runs a program in the sandbox): one step of every env per round, half the actions the
   expert's and half a program that fails its tests. Locally, a synchronous vector env of that many
   envs (its step's sandbox jobs side by side on the warm workers, as the rollout collector does:
   :mod:`mathgym.envs.ahead`); served, as many client envs stepping at once from threads of this
   process, each its own session. Target: the served envs' steps/s at least 90% of the local ones'.

The load average is printed before and after: on a machine doing other work, ratios move::

    python benchmarks/remote_env.py                       # ~1 min on 2 cores
    python benchmarks/remote_env.py --record remote_env   # also write benchmarks/results/remote_env.json
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from record import write_record

WRONG_PROGRAM = "```python\ndef solve(*args):\n    return None\n```"


def start_server(env_ids: list[str], sessions: int) -> tuple[subprocess.Popen, str]:
    """``mathgym serve ENV...`` on a free port of 127.0.0.1; the process and its URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "mathgym", "serve", *env_ids, "--port", "0", "--max-sessions", str(sessions + 8)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert proc.stdout is not None
    address = re.search(r"http://127\.0\.0\.1:\d+", proc.stdout.readline())
    if address is None:
        proc.kill()
        raise SystemExit("the server printed no address")
    return proc, address.group()


def cpu_seconds(pid: int) -> float:
    """The user and system CPU time process ``pid`` has used (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def latency(url: str, env_id: str, steps: int, server_pid: int) -> dict[str, Any]:
    """Each side's median ``step`` time, on the same seeds and actions, the sides in turns; and the
    server's CPU time per request it answered (a reset or a step)."""
    import gymnasium as gym

    from mathgym.envs import REMOTE_ENV_ID

    sides = {"local": gym.make(env_id), "remote": gym.make(REMOTE_ENV_ID, url=url, env_id=env_id)}
    times: dict[str, list[float]] = {name: [] for name in sides}
    rewards: dict[str, list[float]] = {name: [] for name in sides}
    server_cpu = 0.0
    for seed in range(steps + 20):  # the first 20 are not counted (caches, the connection)
        if seed == 20:
            server_cpu = cpu_seconds(server_pid)
        sides["local"].reset(seed=seed)
        action = sides["local"].unwrapped.expert_action()
        sides["local"].reset(seed=seed)
        order = ("local", "remote") if seed % 2 == 0 else ("remote", "local")
        for name in order:
            env = sides[name]
            env.reset(seed=seed)
            start = time.perf_counter()
            _, reward, *_ = env.step(action)
            elapsed = time.perf_counter() - start
            if seed >= 20:
                times[name].append(elapsed)
                rewards[name].append(float(reward))
    server_cpu = cpu_seconds(server_pid) - server_cpu
    for env in sides.values():
        env.close()
    median = {name: statistics.median(t) for name, t in times.items()}
    return {
        "env": env_id, "steps": steps, "local_median_ms": round(1e3 * median["local"], 3),
        "remote_median_ms": round(1e3 * median["remote"], 3),
        "added_ms": round(1e3 * (median["remote"] - median["local"]), 3),
        "server_cpu_ms_per_request": round(1e3 * server_cpu / (2 * steps), 3),
        "same_rewards": rewards["local"] == rewards["remote"],
    }


def _actions(envs: list[Any]) -> list[str]:
    return [env.unwrapped.expert_action() if i % 2 == 0 else WRONG_PROGRAM for i, env in enumerate(envs)]


def throughput(url: str, env_id: str, sessions: int, rounds: int) -> dict[str, Any]:
    """Steps/s of a local synchronous vector env of ``sessions`` envs and of as many client envs stepping at once."""
    import gymnasium as gym
    import numpy as np

    from mathgym.envs import REMOTE_ENV_ID
    from mathgym.envs.ahead import score_step_ahead
    from mathgym.rewards.sandbox import default_sandbox

    default_sandbox().warm_up()
    vector = gym.make_vec(env_id, num_envs=sessions, vectorization_mode="sync")
    clients = [gym.make(REMOTE_ENV_ID, url=url, env_id=env_id) for _ in range(sessions)]
    threads = ThreadPoolExecutor(sessions)
    seeds = list(range(sessions))

    def local_round() -> tuple[float, list[float]]:
        vector.reset(seed=seeds)
        actions = _actions(list(vector.envs))
        start = time.perf_counter()
        score_step_ahead(vector, actions, range(sessions))
        _, rewards, *_ = vector.step(np.array(actions, dtype=object))
        return time.perf_counter() - start, [float(r) for r in rewards]

    def remote_round() -> tuple[float, list[float]]:
        list(threads.map(lambda pair: pair[1].reset(seed=pair[0]), enumerate(clients)))
        actions = _actions(vector.envs)  # the same tasks by seed: the local envs' experts
        start = time.perf_counter()
        steps = list(threads.map(lambda pair: pair[0].step(pair[1]), zip(clients, actions)))
        return time.perf_counter() - start, [float(step[1]) for step in steps]

    local_round(), remote_round()  # warm: the server's sandbox workers, the connections
    runs: dict[str, list[tuple[float, list[float]]]] = {"local": [], "remote": []}
    for repeat in range(rounds):
        for name, run in (("local", local_round), ("remote", remote_round))[:: 1 if repeat % 2 == 0 else -1]:
            runs[name].append(run())
            print(f"  {env_id} x {sessions} {name} round {repeat + 1}: {runs[name][-1][0]:.2f} s", flush=True)
    threads.shutdown()
    for client in clients:
        client.close()
    vector.close()
    median = {name: statistics.median(t for t, _ in r) for name, r in runs.items()}
    rate = {name: sessions / median[name] for name in runs}
    return {
        "env": env_id, "sessions": sessions, "rounds": rounds, "sandbox_workers": default_sandbox().workers,
        "local_steps_per_s": round(rate["local"], 1), "remote_steps_per_s": round(rate["remote"], 1),
        "remote_share": round(rate["remote"] / rate["local"], 2),
        "same_rewards": all(a[1] == b[1] for a, b in zip(runs["local"], runs["remote"])),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency-env", default="MathReason-v0")
    parser.add_argument("--steps", type=int, default=1000, help="timed steps of each side (latency)")
    parser.add_argument("--throughput-env", default="CodeSandbox-v0")
    parser.add_argument("--sessions", type=int, default=64, help="envs stepping at once (throughput)")
    parser.add_argument("--rounds", type=int, default=8, help="timed steps of every env, each side (throughput)")
    parser.add_argument("--record", default="")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    print(f"load average before: {load_before:.2f}", flush=True)
    proc, url = start_server(sorted({args.latency_env, args.throughput_env}), args.sessions)
    try:
        lat = latency(url, args.latency_env, args.steps, proc.pid)
        thr = throughput(url, args.throughput_env, args.sessions, args.rounds)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    load_after = os.getloadavg()[0]
    print("| env | steps | local median step (ms) | Remote-v0 median step (ms) | added (ms) | server CPU a request (ms) | same rewards |")
    print("|---|---|---|---|---|---|---|")
    print(f"| {lat['env']} | {lat['steps']} | {lat['local_median_ms']} | {lat['remote_median_ms']} | {lat['added_ms']} | "
          f"{lat['server_cpu_ms_per_request']} | {lat['same_rewards']} |")
    print()
    print("| env | sessions at once | local vector env (steps/s) | Remote-v0 sessions (steps/s) | share | same rewards |")
    print("|---|---|---|---|---|---|")
    print(f"| {thr['env']} | {thr['sessions']} | {thr['local_steps_per_s']} | {thr['remote_steps_per_s']} | "
          f"{thr['remote_share']:.0%} | {thr['same_rewards']} |")
    print(f"load average after: {load_after:.2f}")
    if args.record:
        write_record(args.record, {"latency": lat, "throughput": thr, "load_average_before": round(load_before, 2),
                                   "load_average_after": round(load_after, 2)})


if __name__ == "__main__":
    main()
