"""Helper process of the math verifier: runs math-verify with its own timeouts disabled.

Run as a script (``python -I _math_worker.py``), never imported by mathgym. The parent
owns the deadline: when this process does not answer in time (a hostile expression that
sympy cannot finish, even inside C code), the parent kills it and starts another. So
nothing here needs SIGALRM, and the caller may be in any thread.

Protocol: one JSON line per request ``{"gold": str, "answer": str}``; one JSON line per
reply ``{"verdict": bool, "gold_parsed": bool, "answer_parsed": bool}`` or ``{"error": str}``.
"""

import json
import logging
import sys


def main() -> None:
    logging.disable(logging.CRITICAL)  # math-verify warns once that timeouts are off: we own them
    from math_verify import parse, verify

    parse("$1$", parsing_timeout=None)  # warm the parser's caches before saying ready
    out = sys.stdout
    out.write(json.dumps({"ready": True}) + "\n")
    out.flush()
    for line in sys.stdin:
        try:
            request = json.loads(line)
            gold = parse(request["gold"], parsing_timeout=None)
            if request["answer"] == request["gold"]:
                answer = gold  # parsing is deterministic and verify(x, x) holds: skip both
                verdict = bool(gold)
            else:
                answer = parse(request["answer"], parsing_timeout=None)
                verdict = bool(gold) and bool(answer) and bool(verify(gold, answer, timeout_seconds=None))
            reply = {"verdict": verdict, "gold_parsed": bool(gold), "answer_parsed": bool(answer)}
        except Exception as err:  # noqa: BLE001 - reported to the parent as an infra error
            reply = {"error": f"{type(err).__name__}: {err}"[:500]}
        out.write(json.dumps(reply) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
