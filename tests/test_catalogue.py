"""The catalogue: each env's own facts, the filters of `mathgym envs`, expected scores from the
records, and docs/catalogue.md kept in step with the registry."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import mathgym
from mathgym.catalogue import EnvFacts, EnvFilter, expected_scores, matches
from mathgym.catalogue_page import facts_of
from mathgym.cli import main
from mathgym.errors import ConfigError
from mathgym.registry import _CATALOGUE, env_sources, register_env

REPO = Path(__file__).resolve().parents[1]


def test_every_env_mathgym_registers_declares_its_facts():
    own = [env_id for env_id, source in env_sources().items() if source == "mathgym"]
    assert [env_id for env_id in own if facts_of(env_id) is None] == []


def test_facts_are_checked_when_declared():
    with pytest.raises(ConfigError, match="turns"):
        EnvFacts("math", "several")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="domain"):
        EnvFacts("Math Problems", "single")
    with pytest.raises(ConfigError, match="level_option"):
        EnvFacts("math", "single", levels=(0, 1))
    assert EnvFacts("math", "single", (0, 1, 2, 3, 4), "difficulty").levels_text() == "difficulty 0-4"
    assert EnvFacts("games", "multi", (0, 2), "size").levels_text() == "size 0, 2"


def test_filters_keep_what_each_asks_for():
    tool_env = EnvFacts("math", "multi", (0, 1), "difficulty", ("python",))
    assert matches(tool_env, EnvFilter(domain="math", multi_turn=True, tools=True, extra="none", levels=True))
    assert not matches(tool_env, EnvFilter(multi_turn=False))
    assert not matches(tool_env, EnvFilter(tools=False))
    assert not matches(tool_env, EnvFilter(extra="mcp"))
    assert not matches(EnvFacts("math", "single"), EnvFilter(levels=True))
    assert matches(None, EnvFilter()) and not matches(None, EnvFilter(domain="math"))


def test_a_class_declares_facts_and_the_registration_overrides_them():
    from mathgym.envs.games.guess_number import GuessNumberEnv

    class Declared(GuessNumberEnv):
        catalogue_facts = EnvFacts("games", "multi", tools=("hint",))

    import gymnasium as gym

    try:
        register_env("Declared-v0", Declared, "a plugin's env", source="a-plugin")
        assert facts_of("Declared-v0") == Declared.catalogue_facts
        register_env("Overridden-v0", Declared, "the same class", source="a-plugin", facts=EnvFacts("reasoning", "single"))
        assert facts_of("Overridden-v0").domain == "reasoning"
    finally:
        for env_id in ("Declared-v0", "Overridden-v0"):
            _CATALOGUE.pop(env_id, None)
            gym.registry.pop(env_id, None)


def test_cli_filters_the_catalogue(capsys):
    assert main(["envs", "--domain", "math", "--multi-turn", "--tools", "--extra", "none", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows and {row["id"] for row in rows} >= {"MathTool-v0"}
    for row in rows:
        facts = row["facts"]
        assert facts["domain"] == "math" and facts["turns"] == "multi" and facts["tools"] and facts["extra"] is None
    assert main(["envs", "--single-turn", "--domain", "swe"]) == 0
    assert "No env matches" in capsys.readouterr().out
    assert main(["envs", "--extra", "reasoning-gym", "--levels"]) == 0
    out = capsys.readouterr().out
    assert "ReasoningGym/" not in out  # their levels depend on reasoning-gym's curriculum: not declared
    assert main(["envs", "--domain", "games"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:4] == ["id", "domain", "turns", "levels"]
    assert any(line.startswith("Hanoi-v0 ") and " games " in line and "difficulty 0-4" in line for line in lines)


def test_expected_scores_come_from_the_records(tmp_path):
    (tmp_path / "expert_scores.json").write_text(json.dumps({"results": {"envs": {
        "A-v0": {"mean_reward": 0.75, "solved": 0.5}, "B-v0": {"skipped": "needs a judge"},
    }}}))
    (tmp_path / "env_learning.json").write_text(json.dumps({"results": {"envs": {
        "A-v0": {"env_kwargs": {"difficulty": 0}, "tiny": {"pass_at_1_after": 0.25}},
        "C-v0": {"tiny": {"does_not_fit": True}, "tiny_sizes": {"median_tokens": 900, "positions": 512}},
    }}}))
    scores = expected_scores(tmp_path)
    assert (scores["A-v0"].expert, scores["A-v0"].expert_solved, scores["A-v0"].tiny) == (0.75, 0.5, 0.25)
    assert scores["A-v0"].tiny_note == "difficulty=0"
    assert scores["B-v0"].expert is None
    assert scores["C-v0"].tiny is None and "900 tokens > 512 positions" in scores["C-v0"].tiny_note
    assert expected_scores(tmp_path / "missing") == {}


def test_docs_catalogue_page_is_up_to_date():
    from mathgym.catalogue_page import PAGE, catalogue_page

    page = catalogue_page()
    assert PAGE.read_text() == page, "docs/catalogue.md is stale: run `python -m mathgym.catalogue_page`"
    own = [env_id for env_id, source in env_sources().items() if source == "mathgym"]
    assert all(f"`{env_id}`" in page for env_id in own)


def test_page_check_fails_on_a_stale_page(tmp_path):
    stale = tmp_path / "catalogue.md"
    stale.write_text("# an old catalogue\n")
    run = subprocess.run([sys.executable, "-m", "mathgym.catalogue_page", "--check", "--output", str(stale)],
                         capture_output=True, text=True, cwd=REPO, timeout=120)
    assert run.returncode == 1 and "stale" in run.stderr
    assert mathgym.list_envs()  # the registry the page came from is the one imported here
