"""Test files as code tasks: pytest files importing the code under test from ``solution``
(KodCode) and unittest files (BigCodeBench), each test run with the set-up pytest would give it,
on the trusted side with the test. Nothing here executes code: parsing uses :mod:`ast` only.
"""

from __future__ import annotations

import ast
import copy
import functools
import importlib.util
import re
from collections.abc import Callable, Sequence

from mathgym.envs.coding.code_records import CodeTask, literal, prompt_prefix, record_id, statement
from mathgym.errors import DatasetError
from mathgym.rewards.sandbox.trusted_judge import CAPTURE_FACTORY, RUNNER, TMP_PATH_FACTORY, TMPDIR_FACTORY

def imports_solution(test: str) -> bool:
    """Whether a test file imports the code under test from a module ``solution`` (KodCode's pytest files)."""
    return re.search(r"^\s*(from\s+solution\s+import|import\s+solution\b)", test, re.MULTILINE) is not None


def pytest_task(row: dict, default_id: str) -> CodeTask:
    """A :class:`CodeTask` from a record whose ``test`` is a pytest file importing the code under test
    from a module ``solution`` (KodCode: ``question``, ``solution``, ``test``, ``test_info``).

    Each test function (``def test_*()``, and ``test_*`` methods of ``Test*`` classes) is one test,
    run after the file's other statements; the names imported from ``solution`` are the program's
    own (``as`` aliases bound to them), and ``@pytest.mark.parametrize`` with literal values gives
    one test per case. The set-up pytest would run goes with each test: autouse fixtures (a
    ``yield`` one finished after the test), a ``unittest.TestCase``'s ``setUpClass`` / ``setUp`` /
    ``tearDown`` / ``tearDownClass`` and cleanups, a plain class's ``setup_class`` /
    ``setup_method`` / ``teardown_method`` / ``teardown_class``; a test marked skip or xfail is
    left out, and one that skips itself passes; the file's own named fixtures (``@pytest.fixture``,
    a ``yield`` one finished after the test) are made for each test that asks for them, once per
    test, as pytest does; ``capsys`` / ``capfd`` give what the program's calls printed;
    ``tmp_path`` / ``tmpdir`` a fresh dir the program can read and write too. A test that needs
    another fixture (``monkeypatch``, ``request``, a parametrized fixture) cannot run outside pytest, and a
    file patching modules with ``unittest.mock`` would patch the test's
    process, not the program's: the task is then ``unverifiable`` (:attr:`CodeTask.unverifiable`),
    not graded on the rest.

    Raises:
        DatasetError: No statement, a test file that does not parse, or no test function.
    """
    tests, unjudged, imported = test_file_tests(row["test"], "pytest")
    if not tests and not unjudged:
        raise DatasetError("the pytest file holds no test function (def test_...)")
    info = row.get("test_info")
    declared = [item.get("function_name") for item in info if isinstance(item, dict)] if isinstance(info, list) else []
    entry = next((name for name in [*declared, *imported] if isinstance(name, str) and name.isidentifier() and name != "*"), "")
    text = statement(row).strip()
    shown = f"{text}\n\nWrite Python code that defines `{entry}` (tests import it from your solution)." if entry else text
    reason = f"{unjudged[0]}; pytest is not run here" if unjudged else None
    return CodeTask(record_id(row, default_id), shown, entry, tests, row.get("solution", "") or "", unverifiable=reason)


def test_file_tests(source: str, kind: str) -> tuple[tuple[tuple[str, str], ...], list[str], list[str]]:
    """The tests of a pytest or unittest file (``kind`` names it in errors), as :func:`pytest_task`
    describes them; why some cannot run here (a fixture needed by name; patches with
    ``unittest.mock``, which would change the test's process, never the program's); the names it
    imports from ``solution``.

    Raises:
        DatasetError: The file does not parse, or imports the module ``solution`` whole.
    """
    try:
        module = ast.parse(source)
    except SyntaxError as err:
        raise DatasetError(f"the {kind} file does not parse ({err.msg}, line {err.lineno})") from None
    preamble, aliases, imported, autouse = [], [], [], []
    functions, classes, autouse_nodes = [], [], []
    named: dict[str, ast.FunctionDef] = {}
    unjudged: list[str] = []
    for node in module.body:
        if isinstance(node, ast.ImportFrom) and node.module == "solution":
            for name in node.names:
                imported.append(name.name)
                if name.asname and name.asname != name.name:
                    aliases.append(f"{name.asname} = {name.name}")
        elif isinstance(node, ast.Import) and any(name.name == "solution" for name in node.names):
            raise DatasetError(f"the {kind} file imports the module solution itself; only 'from solution import ...' is read")
        elif isinstance(node, ast.FunctionDef) and _is_autouse(node):
            autouse_nodes.append(node)
            autouse.append(node.name)
            preamble.append(_without_fixture_decorator(node))
        elif isinstance(node, ast.FunctionDef) and _fixture_name(node):
            named[_fixture_name(node) or node.name] = node
            preamble.append(_without_fixture_decorator(node))
        elif isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
            functions.append(node)
        elif isinstance(node, ast.ClassDef) and (node.name.startswith("Test") or _is_test_case(node)):
            classes.append(node)
        elif not _runs_as_main(node):
            preamble.append(ast.get_source_segment(source, node) or "")
    providers = _providers(named)
    for node in autouse_nodes:
        problem = _unfillable(node, 0, list(providers))
        if problem:
            unjudged.append(f"the autouse fixture {problem}")
    setup = "\n".join([*preamble, *aliases])
    fixtures = f"[{', '.join(autouse)}]"
    table = "{" + ", ".join(f"{name!r}: {provider}" for name, provider in providers.items()) + "}"
    tests: list[tuple[str, str]] = []
    for node in functions:
        head = f"{setup}\n{ast.get_source_segment(source, node)}\n"  # from ``def``: the decorators are not in it
        runs = _pytest_calls(node, lambda case, asks, head=head, name=node.name: head + (
            f"{RUNNER}(None, {name}, {_keywords(case)}, {fixtures}, (), {table})\n" if autouse or asks
            else f"{name}({', '.join(f'{key}={value}' for key, value in case.items())})\n"), providers=providers)
        if isinstance(runs, str):
            unjudged.append(runs)
        else:
            tests += runs
    for owner in classes:
        definition, class_fixtures, problems, own = _class_source(owner, providers)
        unjudged += problems
        for method in (n for n in owner.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test") and not _fixture_name(n)):
            runs = _pytest_calls(method, lambda case, asks, name=method.name, own=own: (
                f"{setup}\n{definition}\n{RUNNER}({owner.name}, {name!r}, {_keywords(case)}, {fixtures}, {class_fixtures!r}, {table}, {own!r})\n"),
                label=f"{owner.name}.{method.name}", bound=1, providers={**providers, **own})
            if isinstance(runs, str):
                unjudged.append(runs)
            else:
                tests += runs
    if _MOCKS.search(source):  # ahead of any other reason: a @patch decorator's argument reads as a fixture
        unjudged.insert(0, "the tests patch modules with unittest.mock, which would change the test's process, never the sandboxed program's")
    return tuple(tests), unjudged, imported


#: An import of ``unittest.mock`` (or the ``mock`` package) in a test file.
_MOCKS = re.compile(r"^\s*(from\s+unittest\s+import\s+.*\bmock\b|from\s+unittest\.mock\s+import|import\s+unittest\.mock|import\s+mock\b|from\s+mock\s+import)", re.MULTILINE)


def unittest_task(row: dict, default_id: str) -> CodeTask:
    """A :class:`CodeTask` from a BigCodeBench record: ``complete_prompt`` (imports, signature and
    docstring), ``instruct_prompt`` (the same task in words, shown when present),
    ``canonical_solution`` (the body continuing ``complete_prompt``), ``entry_point`` and ``test``,
    a unittest file calling the function. Each test method is one test, run with its class's
    set-up (:func:`test_file_tests`). The libraries a task names (``libs``) must be installed
    where the sandbox runs: a task naming one that is not is ``unverifiable`` (every answer,
    the reference's too, would fail on the import), with the library's name.

    Raises:
        DatasetError: The file does not parse, or holds no test.
    """
    entry = row["entry_point"]
    if not (isinstance(entry, str) and entry.isidentifier()):
        raise DatasetError(f"entry_point {str(entry)[:40]!r} is not a Python name")
    tests, unjudged, _ = test_file_tests(row["test"], "unittest")
    if not tests and not unjudged:
        raise DatasetError("the unittest file holds no test (a test_ method of a TestCase)")
    complete, instruct = str(row.get("complete_prompt") or ""), str(row.get("instruct_prompt") or "")
    shown = instruct.strip() or f"Complete the Python function below.\n\n```python\n{complete.strip()}\n```"
    missing = [name for name in _libraries(row.get("libs")) if not _installed(name)]
    reason = unjudged[0] if unjudged else (f"it needs {', '.join(missing)}, not installed here" if missing else None)
    return CodeTask(
        record_id(row, default_id), shown, entry, tests, complete + str(row.get("canonical_solution") or ""),
        prefix=prompt_prefix(complete, entry), completion_base=complete, unverifiable=reason,
    )


def _libraries(value: object) -> list[str]:
    """The module names of BigCodeBench's ``libs`` (a list, or the text of one)."""
    if isinstance(value, str):
        try:
            value = ast.literal_eval(value)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return []
    names = value if isinstance(value, (list, tuple)) else []
    return [name for name in names if isinstance(name, str) and all(part.isidentifier() for part in name.split("."))]


@functools.lru_cache(maxsize=1024)
def _installed(name: str) -> bool:
    """Whether the top module of ``name`` can be imported here (found, not imported)."""
    try:
        return importlib.util.find_spec(name.split(".")[0]) is not None
    except (ImportError, ValueError):
        return False


def _is_test_case(node: ast.ClassDef) -> bool:
    """A class deriving from ``unittest.TestCase`` (or ``TestCase``) by name."""
    return any(ast.unparse(base).split(".")[-1] == "TestCase" for base in node.bases)


def _decorator_name(decorator: ast.expr) -> str:
    return ast.unparse(decorator.func if isinstance(decorator, ast.Call) else decorator)


def _is_autouse(node: ast.FunctionDef) -> bool:
    """``@pytest.fixture(autouse=True)`` (or ``@fixture(autouse=True)``)."""
    return any(
        isinstance(d, ast.Call) and _decorator_name(d).split(".")[-1] == "fixture"
        and any(k.arg == "autouse" and isinstance(k.value, ast.Constant) and k.value.value is True for k in d.keywords)
        for d in node.decorator_list
    )


def _without_fixture_decorator(node: ast.FunctionDef) -> str:
    """A fixture function's source without its ``fixture`` decorator (called by the runner instead)."""
    plain = copy.deepcopy(node)
    plain.decorator_list = [d for d in plain.decorator_list if _decorator_name(d).split(".")[-1] != "fixture"]
    return ast.unparse(plain)


def _unfillable(node: ast.FunctionDef, bound: int, given: Sequence[str] = ()) -> str | None:
    """``"name needs the pytest fixture(s) ..."`` for a function whose parameters after the first
    ``bound`` (``self``) are neither ``given`` (parametrized) nor defaulted; ``None`` when none is left."""
    positional = node.args.args[bound:]
    defaulted = {a.arg for a in positional[len(positional) - len(node.args.defaults):]} if node.args.defaults else set()
    defaulted |= {a.arg for a, default in zip(node.args.kwonlyargs, node.args.kw_defaults) if default is not None}
    missing = [a.arg for a in [*positional, *node.args.kwonlyargs] if a.arg not in given and a.arg not in defaulted]
    return f"{node.name} needs the pytest fixture(s) {', '.join(missing)}" if missing else None


def _keywords(case: dict[str, str]) -> str:
    """A test's arguments (their sources, by name) as the source of a dict of keyword arguments."""
    return "{" + ", ".join(f"{key!r}: {value}" for key, value in case.items()) + "}"


def _class_source(owner: ast.ClassDef, providers: dict[str, str] | None = None) -> tuple[str, list[str], list[str], dict[str, str]]:
    """A test class's source with its fixture methods made plain methods; the names of its autouse
    ones; why a fixture cannot run (one that asks for a fixture nothing provides); its named ones
    that can, by the name tests ask for them (``name=``), with their methods' names."""
    plain = copy.deepcopy(owner)
    fixtures, problems, named = [], [], {}
    methods = [node for node in plain.body if isinstance(node, ast.FunctionDef)]
    asked = {(_fixture_name(node) or node.name): node for node in methods if not _is_autouse(node) and _fixture_name(node)}
    given = dict(providers or {})
    while ready := {name: node for name, node in asked.items() if name not in named and _unfillable(node, 1, [*given, *named]) is None}:
        named |= {name: node.name for name, node in ready.items()}
    for i, node in enumerate(plain.body):
        if not isinstance(node, ast.FunctionDef):
            continue
        if _is_autouse(node):
            fixtures.append(node.name)
            problem = _unfillable(node, 1, [*given, *named])
            if problem:
                problems.append(f"the autouse fixture {owner.name}.{problem}")
        if _is_autouse(node) or _fixture_name(node):
            plain.body[i] = ast.parse(_without_fixture_decorator(node)).body[0]
    return ast.unparse(plain), fixtures, problems, named


def _runs_as_main(node: ast.stmt) -> bool:
    """``if __name__ == "__main__": ...`` (a test file calling ``pytest.main()``): left out."""
    return isinstance(node, ast.If) and "__name__" in ast.unparse(node.test) and "__main__" in ast.unparse(node.test)


#: pytest's fixtures of what the code prints, which the judge stands in for (:class:`~mathgym.rewards.sandbox.trusted_judge.Capture`).
CAPTURE_FIXTURES = ("capsys", "capfd")


def _builtin_fixtures() -> dict[str, str]:
    """pytest's own fixtures the judge stands in for, by the name of its factory there: ``capsys`` /
    ``capfd`` (what the program's calls print), ``tmp_path`` / ``tmpdir`` (a fresh dir in the job's
    working dir, which the program shares; ``tmpdir`` only where pytest's path type imports)."""
    fixtures = {**dict.fromkeys(CAPTURE_FIXTURES, CAPTURE_FACTORY), "tmp_path": TMP_PATH_FACTORY}
    try:
        from _pytest._py.path import LocalPath  # noqa: F401, PLC0415 - only whether it imports
    except ImportError:
        return fixtures
    return {**fixtures, "tmpdir": TMPDIR_FACTORY}


def _fixture_name(node: ast.FunctionDef) -> str | None:
    """The name tests ask for a module-level ``@pytest.fixture`` by (its ``name=``, else the function's);
    ``None`` for a function that is not one, and for one with ``params`` (a test per value, not read here)."""
    for decorator in node.decorator_list:
        if _decorator_name(decorator).split(".")[-1] != "fixture":
            continue
        keywords = {k.arg: k.value for k in decorator.keywords} if isinstance(decorator, ast.Call) else {}
        if "params" in keywords:
            return None
        alias = keywords.get("name")
        return alias.value if isinstance(alias, ast.Constant) and isinstance(alias.value, str) else node.name
    return None


def _providers(named: dict[str, ast.FunctionDef]) -> dict[str, str]:
    """Every fixture a test of the file may ask for, by name, with what provides it in the judge: pytest's
    own ones (:func:`_builtin_fixtures`) and the file's named fixtures whose own parameters are all
    provided (a fixture asking for ``request``, or for one in a loop, is not)."""
    providers, pending = _builtin_fixtures(), dict(named)
    while True:
        ready = {name: node for name, node in pending.items() if _unfillable(node, 0, list(providers)) is None}
        if not ready:
            return providers
        for name, node in ready.items():
            providers[name] = node.name
            del pending[name]

#: Marks under which pytest does not count a test (never run, or expected to fail).
_NOT_COUNTED = ("mark.skip", "mark.skipif", "mark.xfail", "unittest.skip", "unittest.skipIf", "unittest.skipUnless", "unittest.expectedFailure")


def _pytest_calls(
    node: ast.FunctionDef, call: Callable[[dict[str, str], bool], str], label: str = "", bound: int = 0, providers: dict[str, str] | None = None,
) -> list[tuple[str, str]] | str:
    """The runs of one test function or method (``bound`` parameters filled already: ``self``):
    ``(label, source)`` for one call, or one per ``parametrize`` case with literal values, each
    source made by ``call`` from the case's arguments by name (their sources: a literal, or the
    judge's stand-in for ``capsys`` / ``capfd``); none for a test marked skip or xfail; or why it
    cannot run outside pytest (a parameter nothing fills, another fixture)."""
    label = label or node.name
    if any(_decorator_name(d).endswith(_NOT_COUNTED) or _decorator_name(d) in ("skip", "expectedFailure") for d in node.decorator_list):
        return []
    cases: list[dict[str, object]] = [{}]
    for decorator in node.decorator_list:
        if not (isinstance(decorator, ast.Call) and _decorator_name(decorator).endswith("mark.parametrize")):
            continue
        try:
            names, values = ast.literal_eval(decorator.args[0]), ast.literal_eval(decorator.args[1])
        except (ValueError, SyntaxError, TypeError, IndexError, MemoryError, RecursionError):
            return f"{node.name} is parametrized with values that are not literals"
        names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
        rows = [value if len(names) > 1 else (value,) for value in values]
        cases = [{**case, **dict(zip(names, values_of))} for case in cases for values_of in rows]
    problem = _unfillable(node, bound, [*cases[0], *(providers or {})])
    if problem:
        return problem
    asks = _unfillable(node, bound, list(cases[0])) is not None  # some parameter is a fixture: the runner provides it
    sources = [{key: literal(value) for key, value in case.items()} for case in cases]
    return [(label if len(cases) == 1 else f"{label}[{index}]", call(case, asks)) for index, case in enumerate(sources)]
