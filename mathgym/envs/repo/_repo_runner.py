"""The visible-test runner of RepoRepair-v0: runs INSIDE the sandbox, never imported.

Shipped into each job beside the workspace and started by the harness (``python
../runner.py`` from the workspace). It imports every ``tests/test_*.py``, calls each
``test_*`` function and prints one line per test, then a summary. For a failing
``assert f(args) == expected`` whose parts are literals, it shows the call, what it
returned and what was expected. Exit status 0 when every test passed, 1 otherwise.
Standard library only.
"""

import ast
import importlib.util
import os
import sys
import traceback

MAX_TESTS = 200


def _describe_failure(path, line, module):
    """``f(args) returned X, expected Y`` for the assert at ``line`` of ``path``, else its source."""
    try:
        with open(path, encoding="utf-8") as handle:
            source = handle.read()
        tree = ast.parse(source)
    except (OSError, SyntaxError, ValueError):
        return ""
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert) and node.lineno <= line <= (node.end_lineno or node.lineno):
            text = ast.get_source_segment(source, node) or ""
            test = node.test
            if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
                return text
            call, expected_node = test.left, test.comparators[0]
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and not call.keywords):
                return text
            try:
                args = [ast.literal_eval(arg) for arg in call.args]
                expected = ast.literal_eval(expected_node)
            except (ValueError, TypeError, SyntaxError, RecursionError):
                return text
            function = getattr(module, call.func.id, None)
            if function is None:
                return text
            try:
                got = "returned " + repr(function(*args))
            except Exception as err:  # noqa: BLE001 - the code under test failing is the report
                got = f"raised {type(err).__name__}: {err}"
            shown = ", ".join(repr(arg) for arg in args)
            return f"{call.func.id}({shown}) {got}, expected {expected!r}"
    return ""


def _load(path):
    name = "tests_" + os.path.basename(path)[:-3]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main():
    sys.path.insert(0, os.getcwd())
    folder = "tests"
    names = sorted(n for n in os.listdir(folder) if n.startswith("test_") and n.endswith(".py")) if os.path.isdir(folder) else []
    passed = failed = 0
    for name in names:
        path = os.path.join(folder, name)
        try:
            module = _load(path)
        except BaseException as err:  # noqa: BLE001 - a module that does not import fails as a whole
            failed += 1
            last = traceback.format_exception(type(err), err, err.__traceback__)[-3:]
            print(f"ERROR {path}: could not import\n" + "".join(last).rstrip())
            continue
        for test_name in sorted(n for n in vars(module) if n.startswith("test_") and callable(getattr(module, n))):
            if passed + failed >= MAX_TESTS:
                break
            try:
                getattr(module, test_name)()
            except BaseException as err:  # noqa: BLE001 - SystemExit in a test is a failure too
                failed += 1
                frames = [f for f in traceback.extract_tb(err.__traceback__) if os.path.abspath(f.filename) == os.path.abspath(path)]
                detail = _describe_failure(path, frames[-1].lineno, module) if frames and isinstance(err, AssertionError) else ""
                if not detail:
                    detail = "".join(traceback.format_exception(type(err), err, err.__traceback__)[-2:]).rstrip()
                print(f"FAILED {path}::{test_name}: {detail}")
            else:
                passed += 1
                print(f"PASSED {path}::{test_name}")
    print(f"== {passed} passed, {failed} failed ==")
    sys.exit(0 if failed == 0 and passed > 0 else 1)


if __name__ == "__main__":
    main()
