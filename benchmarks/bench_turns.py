"""Multi-turn rollouts with and without the sampler's turn cache, side by side in one run.

For each env (at its easiest level): the fixture chat model of ``env_learning.py`` (a random
2-layer Qwen2 with 2,048 positions, a BPE tokenizer trained on the env's text), one batch of
``--tasks`` tasks x ``--group`` samples collected by :class:`~mathgym.algos.rollout.RolloutCollector`
at temperature 1, alternately with the turn cache (each turn runs its new tokens:
:mod:`mathgym.agents.fast.turn_cache`) and without it (each turn runs the whole episode again),
on the same seeds. The table gives the seconds of each, the ratio, the turns and the prompt
tokens run by the model, and whether the two runs sampled the same episodes::

    python benchmarks/bench_turns.py --record turn_cache        # Hangman-v0 and Wordle-v0 (~6 min on 2 cores)
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from env_learning import build_fixture_model, easiest_kwargs  # noqa: E402
from record import machine, write_record  # noqa: E402


def collect(env_id: str, kwargs: dict[str, Any], policy: Any, args: argparse.Namespace, cached: bool, seed: int) -> dict[str, Any]:
    """One batch of episodes, timed, with the turn cache on or off."""
    from mathgym.agents.policy import LLMPolicy, SamplingParams
    from mathgym.algos.rollout import RolloutCollector, RolloutSettings

    settings = RolloutSettings(group_size=args.group, sampling=SamplingParams(1.0, 1.0, args.max_new_tokens), max_episode_tokens=2048)
    collector = RolloutCollector(env_id, kwargs, policy, args.tasks, settings)
    counts = {"run": 0}
    model_forward = policy.model.forward

    def counting_forward(*a: Any, **kw: Any) -> Any:
        ids = kw["input_ids"]
        if ids.shape[1] > 1:  # a prefill (the decode steps feed one token per row)
            counts["run"] += int(kw["attention_mask"][:, -ids.shape[1]:].sum())
        return model_forward(*a, **kw)

    policy.model.forward = counting_forward
    scope = LLMPolicy.reusing_turns
    if not cached:
        LLMPolicy.reusing_turns = lambda self: contextlib.nullcontext()  # type: ignore[method-assign]
    try:
        start = time.perf_counter()
        episodes = collector.collect_episodes(list(range(seed, seed + args.tasks)), sampling_seed=seed)
        seconds = time.perf_counter() - start
    finally:
        LLMPolicy.reusing_turns = scope  # type: ignore[method-assign]
        policy.model.forward = model_forward
        collector.close()
    return {"seconds": seconds, "episodes": [(e.token_ids, e.status) for e in episodes],
            "turns": max(len(e.step_rewards) for e in episodes), "prompt_tokens_run": counts["run"],
            "episode_tokens": sum(len(e.token_ids) for e in episodes)}


def measure(env_id: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    import torch

    from mathgym.agents.policy import LLMPolicy

    kwargs = easiest_kwargs(env_id)
    path = build_fixture_model(env_id, kwargs, work / env_id.replace("/", "_"))
    policy = LLMPolicy.from_pretrained(str(path), device="cpu", dtype="float32")
    torch.set_num_threads(args.threads)
    runs: dict[str, list[dict[str, Any]]] = {"cached": [], "whole": []}
    for repeat in range(args.repeat):  # alternate, so a change of the machine's load falls on both
        for name in ("cached", "whole"):
            runs[name].append(collect(env_id, kwargs, policy, args, name == "cached", seed=1000 * repeat))
            print(f"  {env_id} {name} run {repeat + 1}: {runs[name][-1]['seconds']:.1f} s", flush=True)
    best = {name: min(r["seconds"] for r in rs) for name, rs in runs.items()}
    same = all(a["episodes"] == b["episodes"] for a, b in zip(runs["cached"], runs["whole"]))
    return {
        "env_kwargs": kwargs, "episodes": args.tasks * args.group, "turns": runs["whole"][0]["turns"],
        "episode_tokens": runs["whole"][0]["episode_tokens"],
        "cached_s": round(best["cached"], 1), "whole_s": round(best["whole"], 1),
        "speedup": round(best["whole"] / best["cached"], 1),
        "prompt_tokens_run_cached": runs["cached"][0]["prompt_tokens_run"],
        "prompt_tokens_run_whole": runs["whole"][0]["prompt_tokens_run"],
        "same_episodes": same,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", action="append", default=[], metavar="ID", help="env to run (repeatable; default Hangman-v0 and Wordle-v0)")
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=16, help="tokens per turn")
    parser.add_argument("--repeat", type=int, default=1, help="alternating runs of each; the fastest of each counts")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--record", default="")
    args = parser.parse_args()
    envs = args.env or ["Hangman-v0", "Wordle-v0"]
    print(f"load average before: {machine()['load_average']}", flush=True)
    results = {}
    with tempfile.TemporaryDirectory(prefix="mathgym-bench-turns-") as tmp:
        for env_id in envs:
            results[env_id] = measure(env_id, args, Path(tmp))
    print("| env | episodes | turns (most) | whole prompt each turn (s) | turn cache (s) | speed-up | prompt tokens run: whole → cached | same episodes |")
    print("|---|---|---|---|---|---|---|---|")
    for env_id, r in results.items():
        print(f"| {env_id} | {r['episodes']} | {r['turns']} | {r['whole_s']} | {r['cached_s']} | {r['speedup']}× | "
              f"{r['prompt_tokens_run_whole']:,} → {r['prompt_tokens_run_cached']:,} | {r['same_episodes']} |")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    if args.record:
        write_record(args.record, {"envs": results, "threads": args.threads})


if __name__ == "__main__":
    main()
