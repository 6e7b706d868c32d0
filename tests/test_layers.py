"""The layer table of the design, enforced: every import of the package points down (or sideways).

Every module of ``mathgym`` is parsed (its AST: imports at module level, inside functions and
under ``TYPE_CHECKING`` alike) and placed in a layer by :data:`LAYERS`; an import of a module of
a higher layer fails, naming the file and line and the chain it belongs to. Layers, lowest first:
ground (errors, spaces, the option machinery) < reward workers < environments < agents (models)
< algorithms (trainers) < integrations < CLI. No modules import each other in a circle, within a
layer too (imports in functions and under ``TYPE_CHECKING`` count: a lazy import hides a circle,
it does not break it). Besides: the layers below agents never reach torch or transformers, nothing
but an integration names an integration's library, and the config modules stay importable without
torch (``--help`` and option errors answer without it).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path

import mathgym

PACKAGE = Path(mathgym.__file__).resolve().parent
ORDER = ("ground", "reward workers", "environments", "agents", "algorithms", "integrations", "CLI")

#: Module (or package) -> layer; a module's layer is its longest listed prefix's.
LAYERS = {
    "mathgym.errors": "ground",
    "mathgym.spaces": "ground",
    "mathgym.options": "ground",
    "mathgym.untrusted": "ground",  # text and values from the model or the sandbox, made safe to show
    "mathgym.install": "ground",
    "mathgym.endpoint": "ground",  # one JSON request to a model server (judge, teacher)
    "mathgym.aio_server": "ground",  # an aiohttp app served in this thread or another (mathgym serve, the policy's endpoint)
    "mathgym.rewards": "reward workers",
    "mathgym": "environments",  # the package itself: importing it registers the envs
    "mathgym.core": "environments",
    "mathgym.registry": "environments",
    "mathgym.checks": "environments",
    "mathgym.envs": "environments",
    "mathgym.samples": "environments",
    "mathgym.agents": "agents",
    "mathgym.algos": "algorithms",
    "mathgym.config": "algorithms",  # the old import path of TrainConfig and the option machinery
    "mathgym.integrations": "integrations",
    "mathgym.cli": "CLI",
    "mathgym.train_cli": "CLI",
    "mathgym.serve": "CLI",  # `mathgym serve`: the aiohttp server of the envs
    "mathgym.__main__": "CLI",
}
TRAINING_STACK = ("torch", "transformers", "peft", "accelerate", "vllm")
INTEGRATED_LIBRARIES = ("ray", "trl", "verl", "openrlhf", "stable_baselines3")
#: Modules that must import without torch (their module-level imports never reach it).
TORCH_FREE = (
    "mathgym.options", "mathgym.agents.choices", "mathgym.agents.settings", "mathgym.agents.tiny",
    "mathgym.algos.choices", "mathgym.algos.configs", "mathgym.algos.registry", "mathgym.algos.executors",
    "mathgym.config", "mathgym.train_cli", "mathgym.cli",
)


def module_files() -> dict[str, Path]:
    """Every module of the package: dotted name -> file."""
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


MODULES = module_files()


def layer_of(module: str) -> str | None:
    """The layer of an internal module (``None``: not listed)."""
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in LAYERS:
            return LAYERS[".".join(parts[:end])]
    return None


class Import:
    """One import statement's target, where it is, and whether it runs when its module is imported."""

    def __init__(self, target: str, line: int, on_import: bool):
        self.target, self.line, self.on_import = target, line, on_import


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _targets(module: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:  # relative: from the module's package
        package = module.split(".") if MODULES[module].name == "__init__.py" else module.split(".")[:-1]
        package = package[: len(package) - node.level + 1]
        base = ".".join(package + ([base] if base else []))
    # `from pkg import sub` imports the submodule when there is one
    return [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]


@cache
def imports_of(module: str) -> tuple[Import, ...]:
    """Every import in ``module``'s source, with ``on_import`` False inside functions and ``TYPE_CHECKING``."""
    tree = ast.parse(MODULES[module].read_text(), filename=str(MODULES[module]))
    found: list[Import] = []

    def visit(node: ast.AST, runs: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found.extend(Import(t, child.lineno, runs) for t in _targets(module, child))
            child_runs = runs and not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.If) and _is_type_checking(child):
                child_runs = False
            visit(child, child_runs)

    visit(tree, True)
    return tuple(found)


def internal(target: str) -> str | None:
    """The internal module an import target names (a name imported from one counts as it)."""
    while target and target not in MODULES:
        target = target.rpartition(".")[0]
    return target or None


def parents(module: str) -> list[str]:
    """The packages Python imports before ``module`` (their ``__init__``), the package root aside:
    ``import mathgym.X`` always runs ``mathgym/__init__`` (it registers the envs); that is the
    package's face, not an import of the env layer by the code that wrote it."""
    parts = module.split(".")
    return [".".join(parts[:end]) for end in range(2, len(parts))]


def test_every_module_has_a_layer():
    assert not [m for m in MODULES if layer_of(m) is None], "add these modules to LAYERS (and to DESIGN.md's table)"


def test_no_import_points_up():
    """Every import, at any depth of the code, goes to the module's own layer or one below."""
    violations: set[str] = set()
    for module in sorted(MODULES):
        rank = ORDER.index(layer_of(module))
        for imp in imports_of(module):
            target = internal(imp.target)
            if target is None:
                continue
            for dependency in [*parents(target), target]:
                if ORDER.index(layer_of(dependency)) > rank:
                    violations.add(
                        f"{MODULES[module].relative_to(PACKAGE.parent)}:{imp.line}: {module} ({layer_of(module)}) imports "
                        f"{dependency} ({layer_of(dependency)})"
                    )
    assert not violations, "imports that point up the layer table:\n" + "\n".join(sorted(violations))


def reachable(module: str, on_import_only: bool) -> dict[str, list[str]]:
    """Every module (internal or third-party top level) ``module`` reaches, with one chain to it."""
    chains: dict[str, list[str]] = {module: [module]}
    todo = [module]
    while todo:
        current = todo.pop()
        for imp in imports_of(current):
            if on_import_only and not imp.on_import:
                continue
            target = internal(imp.target)
            for dependency in [*parents(target), target] if target else [imp.target.split(".")[0]]:
                if dependency not in chains:
                    chains[dependency] = [*chains[current], dependency]
                    if dependency in MODULES:
                        todo.append(dependency)
    return chains


def import_graph() -> dict[str, dict[str, int]]:
    """Module -> the other internal modules its code imports (at any depth, ``TYPE_CHECKING`` too),
    each with the line of its first import there."""
    graph: dict[str, dict[str, int]] = {}
    for module in sorted(MODULES):
        edges = graph.setdefault(module, {})
        for imp in imports_of(module):
            target = internal(imp.target)
            if target is not None and target != module:
                edges.setdefault(target, imp.line)
    return graph


def find_cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """One circle for each set of nodes of ``graph`` (node -> the nodes it points to) that all reach
    one another: the shortest path from the set's first node (sorted) back to it, that node at both
    ends; ``[]`` when the graph has no circle. A node pointing to itself is a circle of one.

    Example:
        >>> find_cycles({"a": ["b"], "b": ["c", "a"], "c": [], "d": ["d"]})
        [['a', 'b', 'a'], ['d', 'd']]
    """

    def reached_from(start: str) -> set[str]:  # every node one or more steps away
        seen: set[str] = set()
        todo = list(graph.get(start, ()))
        while todo:
            node = todo.pop()
            if node not in seen:
                seen.add(node)
                todo.extend(graph.get(node, ()))
        return seen

    reach = {node: reached_from(node) for node in graph}
    cycles, placed = [], set()
    for node in sorted(graph):
        if node in placed or node not in reach[node]:
            continue
        circle = {other for other in reach[node] if node in reach.get(other, ())}
        placed |= circle
        cycles.append(_shortest_path_back(graph, node, circle))
    return cycles


def _shortest_path_back(graph: Mapping[str, Iterable[str]], start: str, within: set[str]) -> list[str]:
    """The shortest path from ``start`` back to it through ``within`` (breadth first)."""
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for successor in sorted(graph.get(node, ())):
                if successor == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [*reversed(path), start]
                if successor in within and successor not in came_from:
                    came_from[successor] = node
                    following.append(successor)
        frontier = following
    raise ValueError(f"{start} is on no circle within {sorted(within)}")


def test_no_import_cycles():
    """No modules import each other in a circle (lazy imports included), whatever their layers."""
    graph = import_graph()
    found = [
        " -> ".join(cycle) + "\n    " + ", ".join(
            f"{MODULES[a].relative_to(PACKAGE.parent)}:{graph[a][b]} imports {b}" for a, b in zip(cycle, cycle[1:])
        )
        for cycle in find_cycles(graph)
    ]
    assert not found, "modules that import each other in a circle (move the names they share down):\n" + "\n".join(found)


def test_the_cycle_finder_finds_every_circle_and_only_circles():
    graph = {
        "a": ["b"], "b": ["c"], "c": ["a", "d"],  # a -> b -> c -> a
        "d": ["e"], "e": ["f", "d"], "f": ["d"],  # d <-> e, d -> e -> f -> d: one set, its shortest circle
        "g": ["a", "h"], "h": [],  # reach a circle but lie on none
        "i": ["i"],  # a module importing itself
    }
    assert find_cycles(graph) == [["a", "b", "c", "a"], ["d", "e", "d"], ["i", "i"]]
    assert find_cycles({"a": ["b", "c"], "b": ["c"], "c": [], "d": ["a"]}) == []
    assert find_cycles({}) == []


def test_the_cycle_check_sees_a_circle_closed_by_a_lazy_import(tmp_path, monkeypatch):
    """Two modules of one layer, one importing the other inside a function: still a circle."""
    folder = tmp_path / "mathgym" / "agents"
    folder.mkdir(parents=True)
    (folder / "fake_low.py").write_text("def f():\n    from mathgym.agents.fake_high import g  # lazy\n")
    (folder / "fake_high.py").write_text("from mathgym.agents import fake_low\ndef g():\n    pass\n")
    monkeypatch.setitem(MODULES, "mathgym.agents.fake_low", folder / "fake_low.py")
    monkeypatch.setitem(MODULES, "mathgym.agents.fake_high", folder / "fake_high.py")
    imports_of.cache_clear()
    try:
        graph = import_graph()
        assert graph["mathgym.agents.fake_low"] == {"mathgym.agents.fake_high": 2}
        assert ["mathgym.agents.fake_high", "mathgym.agents.fake_low", "mathgym.agents.fake_high"] in find_cycles(graph)
    finally:
        imports_of.cache_clear()


def test_the_layers_below_agents_never_reach_the_training_stack():
    """Envs, rewards and the ground stay torch-free: no chain of imports from them reaches torch."""
    found = []
    for module in sorted(MODULES):
        if ORDER.index(layer_of(module)) >= ORDER.index("agents"):
            continue
        for name, chain in reachable(module, on_import_only=False).items():
            if name in TRAINING_STACK:
                found.append(" -> ".join(chain))
    assert not found, "\n".join(found)


def test_only_an_integration_names_its_library():
    found = [
        f"{module} imports {imp.target} (line {imp.line})"
        for module in sorted(MODULES) if not module.startswith("mathgym.integrations")
        for imp in imports_of(module) if imp.target.split(".")[0] in INTEGRATED_LIBRARIES
    ]
    assert not found, "\n".join(found)


def test_configs_import_without_torch():
    """What ``mathgym train --help`` and option checks load: no chain of module-level imports reaches torch."""
    found = [
        " -> ".join(chain)
        for module in TORCH_FREE
        for name, chain in reachable(module, on_import_only=True).items() if name in TRAINING_STACK
    ]
    assert not found, "\n".join(found)


def test_the_checker_sees_imports_inside_functions_and_type_checking_blocks(tmp_path, monkeypatch):
    """The walker itself: an upward import hidden in a function, or under TYPE_CHECKING, is found."""
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from mathgym.algos.batch import RolloutBatch\n"
        "def f():\n    from ..agents import policy\n    import torch\n"
    )
    fake = tmp_path / "mathgym" / "rewards" / "fake.py"
    fake.parent.mkdir(parents=True)
    fake.write_text(source)
    monkeypatch.setitem(MODULES, "mathgym.rewards.fake", fake)
    imports_of.cache_clear()
    try:
        found = {(internal(i.target), i.on_import) for i in imports_of("mathgym.rewards.fake")}
        assert ("mathgym.algos.batch", False) in found and ("mathgym.agents.policy", False) in found
        with_torch = reachable("mathgym.rewards.fake", on_import_only=False)
        assert "torch" in with_torch and "torch" not in reachable("mathgym.rewards.fake", on_import_only=True)
    finally:
        imports_of.cache_clear()
