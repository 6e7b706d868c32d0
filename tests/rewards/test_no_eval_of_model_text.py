"""No ``eval``/``exec``/``sympify``/``parse_expr`` on model text anywhere in mathgym outside the guarded helpers.

Model text reaches a parser that builds sympy expressions (math-verify, which calls
``parse_expr`` and latex2sympy) only in ``mathgym/rewards/_math_worker.py``: a helper
process with a scrubbed environment whose deadline the parent enforces. Python source
from a model runs only in the code sandbox's child (``sandbox/untrusted_child.py``, forked by
``sandbox/trusted_worker.py``); a task's test code (the data set's) runs in the judge
(``sandbox/trusted_judge.py``), never the model's. (The tests' generated corpus, whose ground
truth runs math-verify in a pool of spawned processes, lies outside the package:
``tests/rewards/math_corpus.py``.)
A new call anywhere else fails this test: route it through a guarded helper instead.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import mathgym

ROOT = Path(mathgym.__file__).parent
FORBIDDEN_CALLS = {"eval", "exec", "sympify", "parse_expr"}
#: Plain-text spellings, for a grep that also sees calls hidden from the AST walk (strings, getattr).
GREP = re.compile(r"(?<![\w.])(?:eval|exec|sympify|parse_expr)\s*\(|\bsympy\.(?:sympify|parse_expr|S)\s*\(")
ALLOWED_CALLS = {
    "rewards/sandbox/untrusted_child.py": {"exec", "eval"},  # this IS the sandboxed child (code and test inputs run there)
    # The judge runs a task's own test code (the data set's, never the model's) in a process of its
    # own beside the sandbox; the model's functions are proxies that forward calls into the sandbox.
    "rewards/sandbox/trusted_judge.py": {"exec"},
    # Container.exec: a shell command run inside the task's container (`podman exec`), not Python's exec.
    "rewards/sandbox/container.py": {"exec"},
}
#: Modules that may import a text-to-expression parser (sympy, math-verify, latex2sympy2).
PARSER_IMPORTS_ALLOWED = {"rewards/_math_worker.py"}
PARSERS = ("sympy", "math_verify", "latex2sympy2_extended")


def _sources() -> list[tuple[str, str]]:
    return [(str(path.relative_to(ROOT)), path.read_text()) for path in sorted(ROOT.rglob("*.py"))]


def forbidden_calls(source: str) -> set[str]:
    """Names of forbidden functions called in ``source`` (method calls such as ``model.eval()`` aside)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in FORBIDDEN_CALLS:
                found.add(func.id)
            elif isinstance(func, ast.Attribute) and func.attr in {"sympify", "parse_expr"}:
                found.add(func.attr)
    found |= {m.group().split("(")[0].strip().split(".")[-1] for m in GREP.finditer(source)}
    return found


def parser_imports(source: str) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module.split(".")[0])
    return names & set(PARSERS)


def test_the_scan_sees_what_it_looks_for():
    assert forbidden_calls("x = eval(text)") == {"eval"}
    assert forbidden_calls("import sympy\nsympy.sympify(text)") == {"sympify"}
    assert forbidden_calls("from sympy.parsing.sympy_parser import parse_expr\nparse_expr(t)") == {"parse_expr"}
    assert forbidden_calls("model.eval()\npolicy.model.eval()") == set()
    assert parser_imports("from math_verify import parse") == {"math_verify"}


def test_no_eval_exec_sympify_or_parse_expr_outside_the_guarded_helpers():
    offenders = {}
    for name, source in _sources():
        calls = forbidden_calls(source) - ALLOWED_CALLS.get(name, set())
        if calls:
            offenders[name] = sorted(calls)
    assert not offenders, offenders


def test_text_to_expression_parsers_are_imported_only_by_the_guarded_helpers():
    offenders = {}
    for name, source in _sources():
        found = parser_imports(source)
        if found and name not in PARSER_IMPORTS_ALLOWED:
            offenders[name] = sorted(found)
    assert not offenders, offenders
