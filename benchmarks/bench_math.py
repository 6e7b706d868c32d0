"""Math verifier: mathgym's MathVerifier (strict and lenient) vs math-verify itself, one run, one table.

The pairs come from :func:`tests.rewards.math_corpus.generate_corpus` (seeded; integers
and decimals in every notation, fractions, percentages, currency and units, LaTeX
expressions, radicals, sets and tuples, several boxes, intervals, inequalities,
equations, matrices, text in boxes, GSM8K ``####``, "the answer is", answers with no
marker, an empty last box; right and wrong answers of each kind). Both sides check the
same (gold, completion) pairs:

* peer: ``verify(parse(gold), parse(completion))`` in the main thread with math-verify's
  default extraction and (SIGALRM) timeouts: how the library is used directly, and the
  ground truth of the agreement columns;
* mathgym: ``MathVerifier(answer_extraction=mode).score_batch(completions, golds)``
  (marker gate in strict mode, in-process fast path, math-verify in ``--workers`` helper
  processes for the rest).

The numeric share is the categories of plain numbers written plainly after a marker
(``NUMERIC_CATEGORIES``). Each share is timed in blocks, the three sides taking turns to
go first, so that they see the same background load on average; all sides first warm up
on other pairs.

Usage: ``python benchmarks/bench_math.py [--n 5000] [--seed 0] [--workers 2] [--blocks 10] [--numeric-repeat 5]``;
``--quick`` for a small run (300 pairs) that checks the script works.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import sys
import time
from collections import Counter
from pathlib import Path

from mathgym.rewards import MathVerifier, Status
from record import write_record  # benchmarks/record.py (the script's own directory is on sys.path)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the corpus is test data: tests/rewards/math_corpus.py
from tests.rewards.math_corpus import CATEGORIES, NUMERIC_CATEGORIES, Pair, generate_corpus  # noqa: E402

MODES = ("strict", "lenient")


def _measure(pairs: list[Pair], verifiers: dict[str, MathVerifier], parse, verify, blocks: int, repeat: int = 1) -> dict:
    """Seconds and verdicts of math-verify and of each mode on ``pairs``, interleaved by block.

    Each block is checked ``repeat`` times by every side (seconds are per pass): the numeric
    share takes mathgym milliseconds, too little to time once on a busy machine.
    """
    seconds = Counter()
    verdicts: dict[str, list] = {"math_verify": [], **{mode: [] for mode in verifiers}}
    size = max(1, -(-len(pairs) // blocks))
    for block, start in enumerate(range(0, len(pairs), size)):
        chunk = pairs[start : start + size]
        golds, texts = [p.gold for p in chunk], [p.completion for p in chunk]
        sides = ["math_verify", *verifiers]
        sides = sides[block % len(sides) :] + sides[: block % len(sides)]
        for side in sides:
            begin = time.perf_counter()
            for _ in range(repeat):
                if side == "math_verify":
                    out = [bool(verify(parse(g), parse(c))) for g, c in zip(golds, texts)]
                else:
                    out = verifiers[side].score_batch(texts, golds)
            seconds[side] += (time.perf_counter() - begin) / repeat
            verdicts[side] += out
    return {"seconds": seconds, "verdicts": verdicts}


def _summary_rows(share: str, pairs: list[Pair], measured: dict) -> list[tuple]:
    truth = measured["verdicts"]["math_verify"]
    peer_rate = len(pairs) / measured["seconds"]["math_verify"]
    rows = []
    for mode in MODES:
        results = measured["verdicts"][mode]
        same = sum((r.status == Status.CORRECT) == t for r, t in zip(results, truth))
        marked = [(r, t) for p, r, t in zip(pairs, results, truth) if p.marker not in (None, "empty_box")]
        same_marked = sum((r.status == Status.CORRECT) == t for r, t in marked)
        fast = sum(r.details.get("path") == "exact" for r in results)
        rate = len(pairs) / measured["seconds"][mode]
        rows.append((mode, share, len(pairs), peer_rate, rate, rate / peer_rate, same, same_marked, len(marked), fast))
    return rows


def _category_rows(pairs: list[Pair], verdicts: dict[str, list]) -> list[tuple]:
    rows = []
    for category in CATEGORIES:
        idx = [i for i, p in enumerate(pairs) if p.category == category]
        truth = [verdicts["math_verify"][i] for i in idx]
        lenient = sum((verdicts["lenient"][i].status == Status.CORRECT) == verdicts["math_verify"][i] for i in idx)
        marked = [i for i in idx if pairs[i].marker not in (None, "empty_box")]
        strict = sum((verdicts["strict"][i].status == Status.CORRECT) == verdicts["math_verify"][i] for i in marked)
        refused = sum(verdicts["strict"][i].status in (Status.UNPARSEABLE, Status.FORMAT_ERROR) for i in idx if i not in set(marked))
        fast = sum(verdicts["lenient"][i].details.get("path") == "exact" for i in idx)
        rows.append((category, len(idx), sum(truth), lenient, strict, len(marked), refused, fast))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=5000, help="pairs from the generated corpus")
    parser.add_argument("--seed", type=int, default=0, help="corpus seed")
    parser.add_argument("--workers", type=int, default=2, help="math-verify helper processes of mathgym")
    parser.add_argument("--blocks", type=int, default=10, help="blocks per share, each side taking turns to go first")
    parser.add_argument("--warmup", type=int, default=300, help="pairs (another seed) run through every side first, untimed")
    parser.add_argument("--numeric-repeat", type=int, default=5, help="passes over each block of the numeric share, per side")
    parser.add_argument("--quick", action="store_true", help="a small run to check the script: --n 300 --blocks 2 --warmup 50")
    parser.add_argument("--record", default="", help="write the figures to benchmarks/results/NAME.json (see benchmarks/record.py)")
    args = parser.parse_args()
    if args.quick:
        args.n, args.blocks, args.warmup = 300, 2, 50
    logging.disable(logging.WARNING)  # math-verify logs each timeout; none is expected here
    from math_verify import parse, verify

    pairs = generate_corpus(args.n, args.seed)
    verifiers = {mode: MathVerifier(answer_extraction=mode, workers=args.workers, timeout=30) for mode in MODES}
    verifiers["strict"].warm_up()  # one pool serves both modes (same workers): started once, untimed
    warm = generate_corpus(args.warmup, args.seed + 1)
    _measure(warm, verifiers, parse, verify, 1)
    numeric = [p for p in pairs if p.category in NUMERIC_CATEGORIES]
    other = [p for p in pairs if p.category not in NUMERIC_CATEGORIES]
    rows, verdicts = [], {side: [None] * len(pairs) for side in ("math_verify", *MODES)}
    for share, subset in (("numeric", numeric), ("other", other)):
        measured = _measure(subset, verifiers, parse, verify, args.blocks, args.numeric_repeat if share == "numeric" else 1)
        rows += _summary_rows(share, subset, measured)
        positions = [i for i, p in enumerate(pairs) if (p.category in NUMERIC_CATEGORIES) == (share == "numeric")]
        for side, out in measured["verdicts"].items():
            for i, verdict in zip(positions, out):
                verdicts[side][i] = verdict
    all_rows = _summary_rows("all", pairs, {"seconds": _total_seconds(rows), "verdicts": verdicts})
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; python {platform.python_version()}")
    print(f"corpus: {len(pairs)} pairs (seed {args.seed}), numeric share {len(numeric)} ({100 * len(numeric) / len(pairs):.0f}%)\n")
    print("| mode | share | pairs | math-verify answers/s | mathgym answers/s | mathgym / math-verify | same verdict | same verdict where marked | fast path |")
    print("|---|---|---|---|---|---|---|---|---|")
    for mode, share, n, peer, ours, ratio, same, same_marked, marked, fast in sorted(rows + all_rows, key=lambda r: (MODES.index(r[0]), r[1])):
        print(f"| {mode} | {share} | {n} | {peer:,.0f} | {ours:,.0f} | **{ratio:.1f}x** | {same} / {n} | {same_marked} / {marked} | {fast} |")
    print("\n| category | pairs | math-verify says right | lenient same verdict | strict same verdict (marked) | strict refused (no marker / empty last box) | fast path |")
    print("|---|---|---|---|---|---|---|")
    for category, n, right, lenient, strict, marked, refused, fast in _category_rows(pairs, verdicts):
        print(f"| {category} | {n} | {right} | {lenient} / {n} | {strict} / {marked} | {refused} / {n - marked} | {fast} |")
    if args.record:
        write_record(args.record, {
            "pairs": len(pairs), "numeric_pairs": len(numeric), "numeric_share_pct": round(100 * len(numeric) / len(pairs)),
            "rows": [
                {"mode": mode, "share": share, "pairs": n, "math_verify_per_s": round(peer), "mathgym_per_s": round(ours),
                 "ratio": round(ratio, 1), "same_verdict": same, "same_verdict_marked": same_marked, "marked": marked, "fast_path": fast}
                for mode, share, n, peer, ours, ratio, same, same_marked, marked, fast in rows + all_rows
            ],
            "categories": [
                {"category": category, "pairs": n, "math_verify_right": right, "lenient_same": lenient, "strict_same": strict,
                 "marked": marked, "strict_refused": refused, "fast_path": fast}
                for category, n, right, lenient, strict, marked, refused, fast in _category_rows(pairs, verdicts)
            ],
        })
    shown = 0
    for pair, truth, strict, lenient in zip(pairs, verdicts["math_verify"], verdicts["strict"], verdicts["lenient"]):
        marked = pair.marker not in (None, "empty_box")
        if shown < 10 and ((lenient.status == Status.CORRECT) != truth or (marked and (strict.status == Status.CORRECT) != truth)):
            print(f"DISAGREE math_verify={truth} strict={strict.status} lenient={lenient.status} {pair}")
            shown += 1


def _total_seconds(rows: list[tuple]) -> Counter:
    """Seconds per side over both shares, recovered from the shares' rates."""
    seconds = Counter()
    for mode, _, n, peer, ours, *_ in rows:
        seconds[mode] += n / ours
        if mode == MODES[0]:
            seconds["math_verify"] += n / peer
    return seconds


if __name__ == "__main__":
    main()
