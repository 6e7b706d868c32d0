"""A vector env's step scored in one batch (:mod:`mathgym.envs.ahead`), and one env after another.

1. A PRM-rewarded MathStep-v0 rollout.

The fixture chat model of ``env_learning.py`` (a random 2-layer Qwen2, a BPE tokenizer trained on
MathStep-v0's text) is both the policy and the process reward model (a causal LM read at its step
tag, Math-Shepherd's form). One batch of ``--tasks`` tasks x ``--group`` samples is collected by
:class:`~mathgym.algos.rollout.RolloutCollector`, alternately with ``score_ahead`` (each turn's
steps scored by the PRM in one call: :mod:`mathgym.envs.ahead`) and without it (each env calls
the PRM for its own step, as a synchronous vector env steps them one after another), on the same
seeds. The table gives the seconds of each, the PRM's calls and whether the rewards agree.

2. One step of ``--code-envs`` CodeSandbox-v0 envs (the built-in tasks by seed, half of them
answered by the expert, half by a program that fails its tests), graded side by side on the
sandbox's warm workers, and one after another; the envs' verdicts must agree::

    python benchmarks/bench_score_ahead.py --record score_ahead      # ~3 min on 2 cores
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from env_learning import build_fixture_model  # noqa: E402
from record import machine, write_record  # noqa: E402

ENV_ID = "MathStep-v0"


def collect(prm_dir: Path, policy: Any, args: argparse.Namespace, ahead: bool, seed: int) -> dict[str, Any]:
    """One batch of episodes, timed, with the PRM's calls counted."""
    from mathgym.agents.policy import SamplingParams
    from mathgym.agents.prm_model import PRM
    from mathgym.algos.rollout import RolloutCollector, RolloutSettings

    calls: list[int] = []
    score_steps = PRM.score_steps

    def counting(self: Any, problems: Any, steps: Any) -> Any:
        calls.append(len(problems))
        return score_steps(self, problems, steps)

    settings = RolloutSettings(group_size=args.group, sampling=SamplingParams(1.0, 1.0, args.max_new_tokens),
                               max_episode_tokens=2048, score_ahead=ahead)
    kwargs = {"process_reward": str(prm_dir), "max_steps": args.max_steps}
    collector = RolloutCollector(ENV_ID, kwargs, policy, args.tasks, settings)
    PRM.score_steps = counting  # type: ignore[method-assign]
    try:
        start = time.perf_counter()
        episodes = collector.collect_episodes(list(range(seed, seed + args.tasks)), sampling_seed=seed)
        seconds = time.perf_counter() - start
    finally:
        PRM.score_steps = score_steps  # type: ignore[method-assign]
        collector.close()
    return {"seconds": seconds, "prm_calls": len(calls), "steps_scored": sum(calls),
            "rewards": [r for e in episodes for r in e.step_rewards], "turns": max(len(e.step_rewards) for e in episodes)}


def code_step(envs: Any, ahead: bool) -> tuple[float, list[float]]:
    """One CodeSandbox-v0 step of every env, timed; the rewards."""
    import numpy as np

    from mathgym.envs.ahead import score_step_ahead

    envs.reset(seed=list(range(envs.num_envs)))
    experts = envs.call("expert_action")
    wrong = "```python\ndef solve(*args):\n    return None\n```"
    actions = [a if i % 2 == 0 else wrong for i, a in enumerate(experts)]
    start = time.perf_counter()
    if ahead:
        score_step_ahead(envs, actions, range(envs.num_envs))
    _, rewards, *_ = envs.step(np.array(actions, dtype=object))
    return time.perf_counter() - start, rewards.tolist()


def measure_code(args: argparse.Namespace) -> dict[str, Any]:
    import gymnasium as gym

    from mathgym.rewards.sandbox import default_sandbox

    default_sandbox().warm_up()
    envs = gym.make_vec("CodeSandbox-v0", num_envs=args.code_envs, vectorization_mode="sync")
    code_step(envs, True)  # the workers' first jobs are not timed
    runs: dict[str, list[tuple[float, list[float]]]] = {"side_by_side": [], "one_by_one": []}
    for repeat in range(args.repeat + 1):
        for name in runs:
            runs[name].append(code_step(envs, name == "side_by_side"))
            print(f"  CodeSandbox-v0 {name} run {repeat + 1}: {runs[name][-1][0]:.2f} s", flush=True)
    envs.close()
    best = {name: min(t for t, _ in r) for name, r in runs.items()}
    same = all(a[1] == b[1] for a, b in zip(runs["side_by_side"], runs["one_by_one"]))
    return {"envs": args.code_envs, "workers": default_sandbox().workers, "side_by_side_s": round(best["side_by_side"], 2),
            "one_by_one_s": round(best["one_by_one"], 2), "speedup": round(best["one_by_one"] / best["side_by_side"], 1),
            "passed": sum(runs["one_by_one"][0][1]), "same_verdicts": same}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--max-steps", type=int, default=4, help="MathStep-v0's step budget")
    parser.add_argument("--max-new-tokens", type=int, default=24, help="tokens per step")
    parser.add_argument("--repeat", type=int, default=2, help="alternating runs of each; the fastest of each counts")
    parser.add_argument("--code-envs", type=int, default=64, help="CodeSandbox-v0 envs in the vector env of part 2")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--record", default="")
    args = parser.parse_args()
    import torch

    from mathgym.agents.policy import LLMPolicy

    torch.set_num_threads(args.threads)
    print(f"load average before: {machine()['load_average']}", flush=True)
    runs: dict[str, list[dict[str, Any]]] = {"batched": [], "one_by_one": []}
    with tempfile.TemporaryDirectory(prefix="mathgym-bench-ahead-") as tmp:
        path = build_fixture_model(ENV_ID, {}, Path(tmp) / "model")
        policy = LLMPolicy.from_pretrained(str(path), device="cpu", dtype="float32")
        for repeat in range(args.repeat):  # alternate, so a change of the machine's load falls on both
            for name in runs:
                runs[name].append(collect(path, policy, args, name == "batched", seed=1000 * repeat))
                print(f"  {name} run {repeat + 1}: {runs[name][-1]['seconds']:.1f} s", flush=True)
    best = {name: min(r["seconds"] for r in rs) for name, rs in runs.items()}
    gap = max(abs(a - b) for x, y in zip(runs["batched"], runs["one_by_one"]) for a, b in zip(x["rewards"], y["rewards"]))
    result = {
        "episodes": args.tasks * args.group, "turns": runs["batched"][0]["turns"],
        "steps_scored": runs["one_by_one"][0]["steps_scored"],
        "prm_calls_batched": runs["batched"][0]["prm_calls"], "prm_calls_one_by_one": runs["one_by_one"][0]["prm_calls"],
        "batched_s": round(best["batched"], 1), "one_by_one_s": round(best["one_by_one"], 1),
        "speedup": round(best["one_by_one"] / best["batched"], 1), "largest_reward_gap": gap,
    }
    print("| env | episodes | steps scored | PRM calls: one by one → batched | one by one (s) | batched (s) | speed-up | largest reward gap |")
    print("|---|---|---|---|---|---|---|---|")
    print(f"| {ENV_ID} | {result['episodes']} | {result['steps_scored']:,} | {result['prm_calls_one_by_one']:,} → "
          f"{result['prm_calls_batched']} | {result['one_by_one_s']} | {result['batched_s']} | {result['speedup']}× | {gap:.1e} |")
    code = measure_code(args)
    print()
    print("| env | envs stepped | sandbox workers | one by one (s) | side by side (s) | speed-up | tests passed | same verdicts |")
    print("|---|---|---|---|---|---|---|---|")
    print(f"| CodeSandbox-v0 | {code['envs']} | {code['workers']} | {code['one_by_one_s']} | {code['side_by_side_s']} | "
          f"{code['speedup']}× | {code['passed']:g} | {code['same_verdicts']} |")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    if args.record:
        write_record(args.record, {ENV_ID: result, "CodeSandbox-v0": code, "threads": args.threads})


if __name__ == "__main__":
    main()
