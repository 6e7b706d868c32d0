"""The policy's OpenAI endpoint: what one call costs over the policy's own generation, and what
concurrent agent runs buy, in one run on the embedded tiny model (``mathgym.agents.tiny``, CPU).

1. **Overhead per call.** The same prompt, answered alternately by one Chat Completions call through
   the real ``openai`` client to :class:`~mathgym.agents.endpoint.PolicyEndpoint` on 127.0.0.1 and by
   :meth:`LLMPolicy.generate <mathgym.agents.policy.LLMPolicy.generate>` called directly on the
   prompt's tokens, both greedy with the same ``max_tokens`` (so both write the same tokens, checked).
   The medians of each, their difference (the endpoint's cost: HTTP, JSON, the chat template, the
   recorder, the batcher's ``gather_s`` wait) and their ratio.
2. **Concurrent agent runs.** 16 agent runs, each a multi-turn agent program (its answer, then
   "Check it." and again, ``--calls`` calls, each continuing the conversation), one thread each, all
   against one endpoint: their concurrent calls are the sampler's batches. The same 16 runs one at a
   time (same seeds, so the same calls): calls/s of each, the ratio, the samples per sampler batch.

::

    python benchmarks/endpoint.py --record endpoint       # ~1 min on 2 idle cores

The machine's load average is printed at the start and the end (and recorded): on a shared machine
the figures are only comparable at the same load.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from record import write_record  # noqa: E402

QUESTION = [{"role": "user", "content": "What is 17 + 25? Give the final answer in \\boxed{}."}]


def overhead(policy: Any, endpoint: Any, url: str, args: argparse.Namespace) -> dict[str, Any]:
    """Median wall time of one call through the endpoint vs ``policy.generate`` on the same prompt."""
    import openai

    from mathgym.agents.endpoint import RUN_HEADER
    from mathgym.agents.policy import SamplingParams

    client = openai.OpenAI(base_url=url, api_key="overhead", max_retries=0)
    prompt = policy.chat.prompt_ids(QUESTION)
    params = SamplingParams(temperature=0.0, max_new_tokens=args.max_tokens)
    times: dict[str, list[float]] = {"endpoint": [], "direct": []}
    tokens: dict[str, int] = {}
    for i in range(args.warmup + args.repeat):  # alternating: a change of the machine's load falls on both
        start = time.perf_counter()
        reply = client.chat.completions.create(
            model="policy", messages=QUESTION, max_tokens=args.max_tokens, extra_headers={RUN_HEADER: f"overhead-{i}"},
        )  # each call its own run, as an agent's first call is
        endpoint_s = time.perf_counter() - start
        endpoint.recorder.pop(f"overhead-{i}")
        start = time.perf_counter()
        (gen,) = policy.generate([prompt], params)
        direct_s = time.perf_counter() - start
        tokens = {"endpoint": reply.usage.completion_tokens, "direct": len(gen.token_ids)}
        if tokens["endpoint"] != tokens["direct"] or reply.choices[0].message.content != policy.chat.action_text(gen.token_ids):
            raise RuntimeError(f"the two sides wrote different completions ({tokens})")
        if i >= args.warmup:
            times["endpoint"].append(endpoint_s)
            times["direct"].append(direct_s)
    endpoint_ms, direct_ms = (1000 * statistics.median(times[k]) for k in ("endpoint", "direct"))
    return {
        "calls": args.repeat, "max_tokens": args.max_tokens, "completion_tokens": tokens["direct"],
        "endpoint_ms": round(endpoint_ms, 1), "direct_ms": round(direct_ms, 1),
        "overhead_ms": round(endpoint_ms - direct_ms, 1), "ratio": round(endpoint_ms / direct_ms, 2),
    }


def agent_run(url: str, run_id: str, calls: int, max_tokens: int) -> list[int]:
    """A multi-turn agent program: answer, then ``calls - 1`` times "Check it."; its completion lengths."""
    import openai

    client = openai.OpenAI(base_url=url, api_key=run_id, max_retries=0)
    messages: list[dict[str, Any]] = list(QUESTION)
    lengths = []
    for _ in range(calls):
        reply = client.chat.completions.create(model="policy", messages=messages, max_tokens=max_tokens)
        lengths.append(reply.usage.completion_tokens)
        messages += [reply.choices[0].message.model_dump(exclude_none=True), {"role": "user", "content": "Check it."}]
    return lengths


def agent_runs(endpoint: Any, url: str, args: argparse.Namespace, concurrent: int, round_: int) -> dict[str, Any]:
    """``args.runs`` agent runs, ``concurrent`` at a time; calls/s and the sampler's batches."""
    ids = [f"round{round_}-run{k}" for k in range(args.runs)]  # the same ids both ways: the same seeds, the same calls
    for run_id in ids:
        endpoint.recorder.open(run_id)
    first = len(endpoint.batch_sizes)
    start = time.perf_counter()
    with ThreadPoolExecutor(concurrent, thread_name_prefix="agent") as pool:
        lengths = list(pool.map(lambda run_id: agent_run(url, run_id, args.calls, args.max_tokens), ids))
    seconds = time.perf_counter() - start
    tokens = {run_id: endpoint.recorder.pop(run_id) for run_id in ids}
    sizes = endpoint.batch_sizes[first:]
    return {
        "seconds": seconds, "calls": sum(len(x) for x in lengths), "completion_tokens": sum(map(sum, lengths)),
        "samples": {k: [s.completion_ids for c in r.calls for s in c.samples] for k, r in tokens.items()},
        "batch_mean": sum(sizes) / max(len(sizes), 1),
    }


def concurrency(endpoint: Any, url: str, args: argparse.Namespace) -> dict[str, Any]:
    """Calls/s of ``args.runs`` agent runs all at once vs one at a time, alternately, the best of each."""
    best: dict[str, dict[str, Any]] = {}
    same = True
    for round_ in range(args.rounds):
        done = {}
        for name, at_once in (("concurrent", args.runs), ("one_at_a_time", 1)):
            done[name] = agent_runs(endpoint, url, args, at_once, round_)
            print(f"  round {round_ + 1}, {name}: {done[name]['calls']} calls in {done[name]['seconds']:.1f} s", flush=True)
            if name not in best or done[name]["seconds"] < best[name]["seconds"]:
                best[name] = done[name]
        same &= done["concurrent"]["samples"] == done["one_at_a_time"]["samples"]
    rate = {name: r["calls"] / r["seconds"] for name, r in best.items()}
    return {
        "runs": args.runs, "calls_per_run": args.calls, "calls": best["concurrent"]["calls"], "max_tokens": args.max_tokens,
        "completion_tokens": best["concurrent"]["completion_tokens"],
        "concurrent_calls_per_s": round(rate["concurrent"], 1), "one_at_a_time_calls_per_s": round(rate["one_at_a_time"], 1),
        "speedup": round(rate["concurrent"] / rate["one_at_a_time"], 1),
        "sampler_batch_mean_concurrent": round(best["concurrent"]["batch_mean"], 1),
        "sampler_batch_mean_one_at_a_time": round(best["one_at_a_time"]["batch_mean"], 1),
        "same_samples": same,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=100, help="timed calls of each side (overhead)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed calls of each side first")
    parser.add_argument("--max-tokens", type=int, default=32, help="max_tokens of every call")
    parser.add_argument("--runs", type=int, default=16, help="agent runs (all at once, then one at a time)")
    parser.add_argument("--calls", type=int, default=4, help="calls per agent run")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds of both ways; the fastest of each counts")
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    parser.add_argument("--record", default="", help="write benchmarks/results/NAME.json")
    args = parser.parse_args()

    import torch

    from mathgym.agents.endpoint import PolicyEndpoint
    from mathgym.agents.policy import LLMPolicy, SamplingParams
    from mathgym.agents.tiny import tiny_model_path
    from mathgym.aio_server import ServerThread

    load_start = os.getloadavg()
    print(f"load average at start: {load_start[0]:.2f} {load_start[1]:.2f} {load_start[2]:.2f} ({os.cpu_count()} CPUs)", flush=True)
    torch.set_num_threads(args.threads)
    policy = LLMPolicy.from_pretrained(str(tiny_model_path()), device="cpu", dtype="float32")
    results: dict[str, Any] = {"threads": args.threads}
    greedy = PolicyEndpoint(policy, SamplingParams(temperature=0.0, max_new_tokens=args.max_tokens))
    with ServerThread(greedy) as url:
        results["overhead"] = overhead(policy, greedy, url + "/v1", args)
    sampled = PolicyEndpoint(policy, SamplingParams(temperature=1.0, max_new_tokens=args.max_tokens), sampling_seed=0)
    with ServerThread(sampled) as url:
        results["concurrency"] = concurrency(sampled, url + "/v1", args)
    load_end = os.getloadavg()
    results["load_average_start"], results["load_average_end"] = round(load_start[0], 2), round(load_end[0], 2)
    results["gather_s"] = greedy.gather_s

    o, c = results["overhead"], results["concurrency"]
    print(f"\none call, greedy, {o['completion_tokens']} new tokens (max_tokens={o['max_tokens']}), median of {o['calls']}:")
    print("| way | ms per call |")
    print("|---|---|")
    print(f"| policy.generate, direct | {o['direct_ms']} |")
    print(f"| openai client -> PolicyEndpoint | {o['endpoint_ms']} |")
    print(f"| overhead | {o['overhead_ms']} ms ({o['ratio']}x) |")
    print(f"\n{c['runs']} agent runs x {c['calls_per_run']} calls ({c['calls']} calls, max_tokens={c['max_tokens']}), best of {args.rounds}:")
    print("| runs at once | calls/s | samples per sampler batch |")
    print("|---|---|---|")
    print(f"| 1 | {c['one_at_a_time_calls_per_s']} | {c['sampler_batch_mean_one_at_a_time']} |")
    print(f"| {c['runs']} | {c['concurrent_calls_per_s']} ({c['speedup']}x) | {c['sampler_batch_mean_concurrent']} |")
    print(f"same samples both ways: {c['same_samples']}")
    print(f"load average at end: {load_end[0]:.2f} {load_end[1]:.2f} {load_end[2]:.2f}")
    if args.record:
        write_record(args.record, results)


if __name__ == "__main__":
    main()
