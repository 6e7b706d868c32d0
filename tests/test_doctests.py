"""Every ``>>>`` example in mathgym's docstrings runs and prints what it says."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import mathgym

MODULES = sorted(m.name for m in pkgutil.walk_packages(mathgym.__path__, "mathgym.") if not m.name.split(".")[-1].startswith("_"))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    try:
        module = importlib.import_module(name)
    except ImportError as err:  # an optional dependency (torch, ...) is not installed
        pytest.skip(f"{name}: {err}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} failed (run: python -m doctest -v)"


def test_the_examples_exist():
    examples = 0
    finder = doctest.DocTestFinder()
    for name in MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        examples += sum(len(t.examples) for t in finder.find(module))
    assert examples >= 50  # guards against the parametrised test above silently checking nothing
