"""The documentation site as a reader meets it: the catalogue lists mathgym's own envs (not
whatever the builder's venv has installed), long ids and code scroll instead of wrapping
mid-token, and the install instructions are ones that work (mathgym is on no package index)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "docs" / "hooks"))


def test_the_catalogue_lists_mathgym_envs_and_leaves_out_a_plugin_of_the_builders_venv():
    import mathgym
    from mathgym.registry import _CATALOGUE, register_env

    generate = pytest.importorskip("generate", reason="docs/hooks/generate.py needs mkdocs (the docs extra)")
    register_env("SomeoneElses-v0", "mathgym.envs.games.guess_number:GuessNumberEnv", "a plugin's env", source="their-plugin")
    try:
        page = generate.catalogue_page()
    finally:
        _CATALOGUE.pop("SomeoneElses-v0", None)
        import gymnasium as gym

        gym.registry.pop("SomeoneElses-v0", None)
    assert "SomeoneElses-v0" not in page
    own = [env_id for env_id, source in mathgym.registry.env_sources().items() if source == "mathgym"]
    assert all(f"`{env_id}`" in page for env_id in own)
    assert f"The {len(own)} environments that come with mathgym" in page


def test_no_page_tells_a_user_to_install_mathgym_from_a_package_index():
    bare = re.compile(r"pip install (-U )?[\"']?mathgym(\[[^\]]*\])?[\"']?(?!\s*@)(\s|$|\)|`)")
    offenders = [
        f"{path.relative_to(REPO)}:{number}: {line.strip()}"
        for path in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if bare.search(line)
    ]
    assert not offenders, "mathgym is on no package index; say how to install from the repository:\n" + "\n".join(offenders)


def test_the_built_site_lets_ids_and_code_scroll_instead_of_breaking_them(tmp_path):
    pytest.importorskip("mkdocs", reason="the docs extra (mkdocs) is not installed")
    site = tmp_path / "site"
    run = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)],
        cwd=REPO, capture_output=True, text=True, timeout=300, env={"NO_MKDOCS_2_WARNING": "1", **_env()},
    )
    assert run.returncode == 0, run.stderr[-3000:]
    catalogue = (site / "catalogue" / "index.html").read_text()
    assert "stylesheets/extra.css" in catalogue
    css = (site / "stylesheets" / "extra.css").read_text()
    assert re.search(r"td code[^{]*\{[^}]*white-space:\s*nowrap", css, re.S)
    assert re.search(r"\.md-typeset code\s*\{[^}]*word-break:\s*normal", css, re.S)
    index = (site / "index.html").read_text()
    assert "git+https://github.com/mathgym/mathgym" in index


def _env() -> dict[str, str]:
    import os

    return dict(os.environ)
