"""The expert's score on every env of the catalogue: what a perfect-ish policy earns at the env's defaults.

Each env plays ``--episodes`` episodes (seeds 0, 1, ...) with its own ``expert_action()`` turn after
turn, at its default options, and the table gives the mean reward, the share of episodes ended
``correct``, the statuses seen and the time taken. An env that cannot be made with its defaults (it
needs a judge, a tool server or a package not installed here) or has no expert is listed with the
reason and no number. ``mathgym envs`` and ``docs/catalogue.md`` show the recorded mean reward::

    python benchmarks/expert_scores.py --record expert_scores            # every env mathgym registers
    python benchmarks/expert_scores.py --env Hanoi-v0 --episodes 5       # a quick look at one
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from record import write_record  # noqa: E402


def play_expert(env_id: str, episodes: int, budget_s: float) -> dict[str, Any]:
    """The expert's mean reward, solved share and statuses over up to ``episodes`` episodes (fewer when
    ``budget_s`` runs out); ``{"skipped": why}`` where the env cannot be made or has no expert."""
    import gymnasium as gym

    try:
        env = gym.make(env_id)
    except Exception as err:  # noqa: BLE001 - a missing judge, server or package: said in the table
        return {"skipped": f"cannot be made with its defaults: {type(err).__name__}: {str(err)[:160]}"}
    base = env.unwrapped
    if not callable(getattr(base, "expert_action", None)):
        env.close()
        return {"skipped": "no expert_action"}
    rewards: list[float] = []
    solved, statuses, start = 0, collections.Counter(), time.perf_counter()
    try:
        for seed in range(episodes):
            if rewards and time.perf_counter() - start > budget_s:
                break
            total, info = _episode(env, base, seed)
            if total is None:
                return {"skipped": "its expert has no answer for the first task"}
            rewards.append(total)
            solved += bool(info.get("correct"))
            statuses[str(info.get("status", "?"))] += 1
    except Exception as err:  # noqa: BLE001 - the env failed under its own expert: recorded, not hidden
        return {"skipped": f"failed under its expert: {type(err).__name__}: {str(err)[:160]}"}
    finally:
        env.close()
    return {
        "episodes": len(rewards), "mean_reward": round(sum(rewards) / len(rewards), 4),
        "solved": round(solved / len(rewards), 4), "statuses": dict(statuses),
        "wall_s": round(time.perf_counter() - start, 1),
    }


def _episode(env: Any, base: Any, seed: int) -> tuple[float | None, dict[str, Any]]:
    """One episode of the expert: its summed reward and the last step's info (``None``: no expert answer)."""
    env.reset(seed=seed)
    total, done, info = 0.0, False, {}
    while not done:
        action = base.expert_action()
        if action is None:
            return None, {}
        _, reward, terminated, truncated, info = env.step(action)
        total += float(reward)
        done = terminated or truncated
    return total, info


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", action="append", help="env id (repeat; default: every env mathgym registers)")
    parser.add_argument("--episodes", type=int, default=20, help="episodes per env (seeds 0..N-1)")
    parser.add_argument("--budget-s", type=float, default=60.0, help="seconds per env; fewer episodes when it runs out")
    parser.add_argument("--record", metavar="NAME", help="write benchmarks/results/NAME.json")
    args = parser.parse_args()

    import mathgym
    from mathgym.registry import env_sources

    sources = env_sources()
    env_ids = args.env or [env_id for env_id in mathgym.list_envs() if sources[env_id] == "mathgym"]
    results: dict[str, dict[str, Any]] = {}
    print(f"{'env':<44} {'episodes':>8} {'reward':>7} {'solved':>7} {'wall s':>7}  statuses / why not")
    for env_id in env_ids:
        row = results[env_id] = play_expert(env_id, args.episodes, args.budget_s)
        if "skipped" in row:
            print(f"{env_id:<44} {'-':>8} {'-':>7} {'-':>7} {'-':>7}  {row['skipped']}", flush=True)
        else:
            print(f"{env_id:<44} {row['episodes']:>8} {row['mean_reward']:>7.3f} {row['solved']:>7.2f} {row['wall_s']:>7.1f}  {row['statuses']}", flush=True)
    if args.record:
        write_record(args.record, {"episodes": args.episodes, "budget_s": args.budget_s, "envs": results})


if __name__ == "__main__":
    main()
