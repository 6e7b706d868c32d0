"""Helper process of the math verifier: runs math-verify with its own timeouts disabled.

Run as a script (``python -I _math_worker.py``), never imported by mathgym. The parent
owns the deadline: when this process does not answer in time (a hostile expression that
sympy cannot finish, even inside C code), the parent kills it and starts another. So
nothing here needs SIGALRM, and the caller may be in any thread. This is the one place
where model text reaches a parser that builds sympy expressions (math-verify's
``parse``); the grep test ``tests/rewards/test_math_differential.py`` keeps it so.

Protocol: one JSON line per request ``{"gold": str, "answer": str}``, where ``answer`` is
the whole completion. Both are read with math-verify's default extraction, gold first:
``verify(parse(gold), parse(answer))``. A gold that math-verify cannot read as written is
read once more as LaTeX (``$gold$``) and the reply says so (``gold_as_latex``). One JSON
line per reply ``{"verdict": bool, "gold_parsed": bool, "answer_parsed": bool,
"extracted": str | None, "gold_as_latex": bool}`` or ``{"error": str}``.
"""

import json
import logging
import sys

_GOLD_CACHE_SIZE = 256
#: Pairs verified before the helper says it is ready (see ``main``).
_WARM_UP = (
    ("124", "$1m4$"), ("12", "$[1,2]$"), ("8", "$2^{3}$"), ("24", "$4!$"), ("3", "$1 + 2 = 3$"), ("12", "12.3.4"),
    ("$x+1$", "$1+x$"), ("\\frac{1}{2}", "$0.5$"),
)


def main() -> None:
    logging.disable(logging.CRITICAL)  # math-verify warns once that timeouts are off: we own them
    from math_verify import parse, verify

    golds: dict[str, tuple[list, bool]] = {}

    def parse_gold(text: str) -> tuple[list, bool]:
        if text not in golds:
            if len(golds) >= _GOLD_CACHE_SIZE:
                golds.clear()
            parsed, as_latex = parse(text, parsing_timeout=None), False
            if not parsed:
                parsed, as_latex = parse(f"${text}$", parsing_timeout=None), True
            golds[text] = (parsed, as_latex)
        return golds[text]

    # Warm the parser's and sympy's caches before saying ready: the first answer of a shape (a product
    # with a symbol, an interval, a power, a factorial, an equation) otherwise costs a timed request
    # 10-150 ms more than the next one does.
    for gold, answer in _WARM_UP:
        verify(parse(gold, parsing_timeout=None), parse(answer, parsing_timeout=None), timeout_seconds=None)
    out = sys.stdout
    out.write(json.dumps({"ready": True}) + "\n")
    out.flush()
    for line in sys.stdin:
        try:
            request = json.loads(line)
            gold, as_latex = parse_gold(request["gold"])
            answer = parse(request["answer"], parsing_timeout=None)
            verdict = bool(gold) and bool(answer) and bool(verify(gold, answer, timeout_seconds=None))
            extracted = str(answer[-1])[:200] if answer else None  # the text math-verify read
            parsed = any(not isinstance(item, str) for item in answer)  # else only math-verify's fallback text
            reply = {"verdict": verdict, "gold_parsed": bool(gold), "answer_parsed": parsed}
            reply.update(extracted=extracted, gold_as_latex=as_latex)
        except Exception as err:  # noqa: BLE001 - reported to the parent as an infra error
            reply = {"error": f"{type(err).__name__}: {err}"[:500]}
        out.write(json.dumps(reply) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
