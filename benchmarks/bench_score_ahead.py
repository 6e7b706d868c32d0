"""A PRM-rewarded MathStep-v0 rollout with each turn's steps scored in one batch, and one by one.

The fixture chat model of ``env_learning.py`` (a random 2-layer Qwen2, a BPE tokenizer trained on
MathStep-v0's text) is both the policy and the process reward model (a causal LM read at its step
tag, Math-Shepherd's form). One batch of ``--tasks`` tasks x ``--group`` samples is collected by
:class:`~mathgym.algos.rollout.RolloutCollector`, alternately with ``score_ahead`` (each turn's
steps scored by the PRM in one call: :mod:`mathgym.envs.ahead`) and without it (each env calls
the PRM for its own step, as a synchronous vector env steps them one after another), on the same
seeds. The table gives the seconds of each, the PRM's calls and whether the rewards agree::

    python benchmarks/bench_score_ahead.py --record score_ahead      # ~2 min on 2 cores
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--max-steps", type=int, default=4, help="MathStep-v0's step budget")
    parser.add_argument("--max-new-tokens", type=int, default=24, help="tokens per step")
    parser.add_argument("--repeat", type=int, default=2, help="alternating runs of each; the fastest of each counts")
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
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    if args.record:
        write_record(args.record, {ENV_ID: result, "threads": args.threads})


if __name__ == "__main__":
    main()
