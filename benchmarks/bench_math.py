"""Math verifier throughput: mathgym's MathVerifier vs plain math_verify parse+verify, one run.

The 10,000 model-style completions are generated here with a fixed seed (integers,
thousands separators, decimals, fractions, percentages, currency, and LaTeX expressions
such as roots, pi, polynomials, intervals and tuples; about half correct, in
equivalent or identical forms). Every completion string is distinct. Both sides check
the same (completion, gold) pairs:

* peer: ``verify(parse("$gold$"), parse(completion))`` in the main thread with
  math-verify's default (SIGALRM) timeouts — how the library is used directly;
* mathgym: ``MathVerifier().score_batch(completions, golds)`` (extraction, exact fast
  path, math-verify in 2 watchdog helper processes), and ``score`` one at a time.

Each share is timed in blocks, alternating which side goes first, so that both sides see
the same background load on average; both sides first warm up on other samples.

Usage: ``python benchmarks/bench_math.py [--n 10000] [--seed 0] [--workers 2] [--blocks 10]``
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import random
import time
from fractions import Fraction

from mathgym.rewards import MathVerifier, Status
from mathgym.rewards._procpool import pool_for
from mathgym.rewards.math import _WORKER_SCRIPT

REASONING = [
    "First, {a} + {b} = {c}.",
    "We have {a} groups of {b}, which gives {c}.",
    "Subtracting, {c} - {a} = {b}.",
    "So the total is {c} after {a} steps.",
    "Let me double-check: {a} times {b} is {c}.",
]


def _reasoning(rng: random.Random) -> str:
    lines = []
    for template in rng.sample(REASONING, rng.randint(1, 3)):
        a, b = rng.randint(2, 999), rng.randint(2, 99)
        lines.append(template.format(a=a, b=b, c=a * b))
    return " ".join(lines)


def _wrap(answer: str, rng: random.Random) -> str:
    ending = rng.choice(["Therefore, the answer is $\\boxed{{{}}}$.", "So the final answer is \\boxed{{{}}}.", "\\[\\boxed{{{}}}\\]"])
    return f"{_reasoning(rng)}\n{ending.format(answer)}"


def _number_forms(value: Fraction, rng: random.Random) -> list[str]:
    """Ways a model writes ``value``."""
    forms = []
    if value.denominator == 1:
        n = int(value)
        forms += [str(n), f"{n:,}", f"{n}.0", f"\\${n}"] if abs(n) >= 1000 else [str(n), f"{n}.0", f"\\${n}"]
    else:
        sign = "-" if value < 0 else ""
        p, q = abs(value.numerator), value.denominator
        forms += [f"{sign}\\frac{{{p}}}{{{q}}}", f"{sign}{p}/{q}", f"{sign}\\dfrac{{{p}}}{{{q}}}"]
        if 10**6 % q == 0:
            forms.append(f"{float(value):.6f}".rstrip("0"))
    return forms


def _numeric_sample(rng: random.Random) -> tuple[str, str]:
    kind = rng.choice(["int", "int", "big", "decimal", "fraction", "percent"])
    if kind == "int":
        gold_value = Fraction(rng.randint(-50, 500))
    elif kind == "big":
        gold_value = Fraction(rng.randint(1000, 5_000_000))
    elif kind == "decimal":
        gold_value = Fraction(rng.randint(1, 100_000), 100)
    elif kind == "fraction":
        gold_value = Fraction(rng.randint(-30, 60), rng.randint(2, 40))
    else:
        pct = rng.randint(1, 99)
        gold = f"{pct}\\%" if rng.random() < 0.5 else str(pct)
        answer = rng.choice([f"{pct}\\%", str(pct), f"{pct}%", f"{pct / 100:g}", f"{pct + rng.randint(1, 5)}\\%"])
        return gold, answer
    gold = _number_forms(gold_value, rng)[0]
    value = gold_value if rng.random() < 0.5 else gold_value + rng.choice([1, -1, Fraction(1, 2), 10, Fraction(rng.randint(1, 9), 7)])
    return gold, rng.choice(_number_forms(value, rng))


def _latex_sample(rng: random.Random) -> tuple[str, str]:
    a, b, c = rng.randint(2, 9), rng.choice([2, 3, 5, 6, 7, 10, 11]), rng.randint(2, 12)
    right = rng.random() < 0.5
    d = a if right else a + rng.randint(1, 3)
    kind = rng.choice(["sqrt", "frac_sqrt", "pi", "poly", "interval", "tuple", "power", "sum"])
    if kind == "sqrt":
        return f"{a}\\sqrt{{{b}}}", rng.choice([f"{d}\\sqrt{{{b}}}", f"\\sqrt{{{d * d * b}}}", f"{d} \\sqrt {b}"])
    if kind == "frac_sqrt":
        return f"\\frac{{{a}\\sqrt{{{b}}}}}{{{c}}}", rng.choice([f"\\frac{{{d}}}{{{c}}}\\sqrt{{{b}}}", f"\\frac{{{d}\\sqrt{{{b}}}}}{{{c}}}"])
    if kind == "pi":
        return f"\\frac{{{a}\\pi}}{{{c}}}", rng.choice([f"\\frac{{{d}}}{{{c}}}\\pi", f"{d}\\pi/{c}"])
    if kind == "poly":
        return f"(x+{a})(x-{c})", rng.choice([f"x^2+{d - c}x-{d * c}", f"(x-{c})(x+{d})"])
    if kind == "interval":
        return f"[{-a}, {c})", rng.choice([f"[{-d}, {c})", f"[{-d},{c})", f"({-d}, {c}]"])
    if kind == "tuple":
        return f"({a}, {-c})", rng.choice([f"({d}, {-c})", f"\\left({d},{-c}\\right)"])
    if kind == "power":
        return f"{a}^{{{c}}}", rng.choice([f"{d}^{{{c}}}", str(d**c)])
    return f"\\frac{{{a}}}{{{c}}} + \\sqrt{{{b}}}", rng.choice([f"\\sqrt{{{b}}} + \\frac{{{d}}}{{{c}}}", f"\\frac{{{d} + {c}\\sqrt{{{b}}}}}{{{c}}}"])


def generate(n: int, seed: int) -> list[tuple[str, str, str]]:
    """``n`` distinct (completion, gold, share) samples, 60% numeric and 40% LaTeX."""
    rng = random.Random(seed)
    samples, seen = [], set()
    while len(samples) < n:
        share = "numeric" if rng.random() < 0.6 else "latex"
        gold, answer = _numeric_sample(rng) if share == "numeric" else _latex_sample(rng)
        completion = _wrap(answer, rng)
        if completion not in seen:
            seen.add(completion)
            samples.append((completion, gold, share))
    return samples


def _timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def _cpu_seconds(pids: list[int]) -> float:
    """CPU seconds used so far by this process and the given helper processes."""
    total = time.process_time()
    for pid in pids:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _measure_share(subset, verifier: MathVerifier, parse, verify, blocks: int) -> dict:
    """Time both sides on ``subset``, interleaved block by block (alternating which side
    goes first) so that both see the same background load on average."""
    totals = dict.fromkeys(("peer_s", "peer_cpu", "batch_s", "batch_cpu", "single_s"), 0.0)
    peer_all, ours_all, loads = [], [], []
    helpers = pool_for(_WORKER_SCRIPT, verifier.workers).pids()
    size = -(-len(subset) // blocks)
    for index in range(0, len(subset), size):
        completions = [c for c, _, _ in subset[index : index + size]]
        golds = [g for _, g, _ in subset[index : index + size]]

        def run_peer():
            cpu = time.process_time()
            out, seconds = _timed(lambda: [verify(parse(f"${g}$"), parse(c)) for c, g in zip(completions, golds)])
            totals["peer_s"] += seconds
            totals["peer_cpu"] += time.process_time() - cpu
            return out

        def run_ours():
            cpu = _cpu_seconds(helpers)
            out, seconds = _timed(lambda: verifier.score_batch(completions, golds))
            totals["batch_s"] += seconds
            totals["batch_cpu"] += _cpu_seconds(helpers) - cpu
            return out

        if (index // size) % 2 == 0:
            peer, batch = run_peer(), run_ours()
        else:
            batch, peer = run_ours(), run_peer()
        if subset[0][2] == "numeric":  # one at a time; on LaTeX it would only repeat the batch's work
            totals["single_s"] += _timed(lambda: [verifier.score(c, g) for c, g in zip(completions, golds)])[1]
        else:
            totals["single_s"] = float("nan")
        peer_all += peer
        ours_all += batch
        loads.append(os.getloadavg()[0])
    verdicts = [r.status == Status.CORRECT for r in ours_all]
    disagreements = [(c, g, p) for (c, g, _), p, o in zip(subset, peer_all, verdicts) if bool(p) != o]
    return {
        **totals,
        "disagreements": disagreements,
        "agree": len(subset) - len(disagreements),
        "fast": sum(r.details.get("path") == "exact" for r in ours_all),
        "correct": sum(verdicts),
        "load": sum(loads) / len(loads),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000, help="number of samples")
    parser.add_argument("--seed", type=int, default=0, help="generator seed")
    parser.add_argument("--workers", type=int, default=2, help="math-verify helper processes of mathgym")
    parser.add_argument("--blocks", type=int, default=10, help="blocks per share, timed alternately on each side")
    parser.add_argument("--warmup", type=int, default=300, help="samples (another seed) run through both sides first, untimed")
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # math-verify logs each timeout; none is expected here
    from math_verify import parse, verify

    samples = generate(args.n, args.seed)
    verifier = MathVerifier(workers=args.workers)
    verifier.warm_up()  # start the 2 helper processes (one-off, excluded from timings)
    # Warm both sides alike (imports, sympy's and math-verify's caches) on other samples.
    warm = generate(args.warmup, args.seed + 1)
    [verify(parse(f"${g}$"), parse(c)) for c, g, _ in warm]
    verifier.score_batch([c for c, _, _ in warm], [g for _, g, _ in warm])
    rows, cpu_rows, disagreements = [], [], []
    for share in ("numeric", "latex"):
        subset = [s for s in samples if s[2] == share]
        m = _measure_share(subset, verifier, parse, verify, args.blocks)
        disagreements += m["disagreements"]
        n = len(subset)
        rows.append((share, n, n / m["peer_s"], n / m["single_s"], n / m["batch_s"], m["agree"], m["fast"], m["correct"], m["load"]))
        cpu_rows.append((share, 1e3 * m["peer_cpu"] / n, 1e3 * m["batch_cpu"] / n))
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; python {platform.python_version()}")
    print(f"{'share':8} {'n':>6} {'math_verify/s':>14} {'mathgym 1-by-1/s':>17} {'mathgym batch/s':>16} {'speed-up':>9} {'agree':>12} {'fast path':>10} {'correct':>8} {'load':>5}")
    for share, n, peer_rate, single_rate, batch_rate, agree, fast, correct, load in rows:
        print(
            f"{share:8} {n:6d} {peer_rate:14.0f} {single_rate:17.0f} {batch_rate:16.0f} {batch_rate / peer_rate:8.1f}x"
            f" {agree:6d}/{n:<5d} {fast:10d} {correct:8d} {load:5.1f}"
        )
    print(f"\n{'share':8} {'math_verify CPU ms/answer':>26} {'mathgym CPU ms/answer (incl. helpers)':>38} {'ratio':>6}")
    for share, peer_ms, ours_ms in cpu_rows:
        print(f"{share:8} {peer_ms:26.3f} {ours_ms:38.3f} {peer_ms / ours_ms:5.1f}x")
    for completion, gold, peer in disagreements[:10]:
        print(f"DISAGREE gold={gold!r} math_verify={bool(peer)} completion=...{completion[-60:]!r}")
    print(f"verdict disagreements: {len(disagreements)} of {len(samples)}")


if __name__ == "__main__":
    main()
