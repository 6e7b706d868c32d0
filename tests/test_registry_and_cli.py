"""Registration, plugins, import without torch, and the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import mathgym
from mathgym.cli import main
from mathgym.errors import UnknownEnvError

REPO = Path(__file__).resolve().parents[1]


def _python(code: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120, env=env)


def test_namespaced_make_works_in_a_fresh_interpreter():
    result = _python("""
        import gymnasium as gym
        env = gym.make("mathgym:MathReason-v0")
        print(env.reset(seed=0)[0].splitlines()[0])
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("What is")


def test_import_and_make_work_without_torch():
    result = _python("""
        import sys
        sys.modules["torch"] = None   # any `import torch` now raises ImportError
        sys.modules["transformers"] = None
        import gymnasium as gym, mathgym
        env = gym.make("MathReason-v0")
        env.reset(seed=0)                      # "What is 85 + 63?"
        print(env.step("\\\\boxed{1}")[4]["status"])
        env.reset(seed=0)
        print(env.step("\\\\boxed{148}")[4]["status"])
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["wrong", "correct"]  # the verifier runs without torch


def test_importing_mathgym_does_not_load_heavy_modules():
    result = _python("import sys, mathgym; print(sorted(m for m in ('torch', 'transformers', 'datasets') if m in sys.modules))")
    assert result.stdout.strip() == "[]", result.stdout + result.stderr


def test_unknown_id_suggests_close_names():
    with pytest.raises(UnknownEnvError, match="Did you mean: MathReason-v0"):
        mathgym.resolve_env_id("MathReson-v0")


def test_cli_envs_and_check(capsys):
    assert main(["envs"]) == 0
    assert "MathReason-v0" in capsys.readouterr().out
    assert main(["check", "MathReason-v0"]) == 0
    out = capsys.readouterr().out
    assert "6 passed, 0 failed" in out
    assert main(["check", "MathReasn-v0"]) == 2


def test_cli_envs_wraps_listings_between_words():
    """A long plugin id narrows the listing column: lines still break between words (never inside
    ``mathgym[reasoning-gym]``), and an env without a listing prints none."""
    result = _python("""
        import mathgym
        import mathgym.envs.interop.reasoning_gym_env as rg
        from mathgym.cli import main
        from mathgym.registry import register_env

        rg.available_tasks = lambda: []  # as without reasoning-gym installed: the listing is the install hint
        register_env("some-plugin/" + "a" * 36 + "-v0", "mathgym.envs.games.guess_number:GuessNumberEnv", "a plugin env with a long id")
        main(["envs"])
        print("HINT=" + rg.ReasoningGymEnv.catalogue_listing())
    """)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    hint = lines[-1].removeprefix("HINT=")
    start = next(i for i, line in enumerate(lines) if line.startswith("ReasoningGym-v0 ")) + 1
    listing = lines[start:start + next(i for i, line in enumerate(lines[start:]) if not line.startswith(" "))]
    assert listing and listing[0].split() == hint.split()[:len(listing[0].split())]
    assert " ".join(" ".join(listing).split()) == hint, listing
    assert not any(line.strip() == "None" for line in lines)


def test_cli_play_reads_actions_from_stdin():
    result = subprocess.run(
        [sys.executable, "-m", "mathgym.cli", "play", "MathReason-v0", "--seed", "0"],
        input="\\boxed{148}\n", capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "What is 85 + 63?" in result.stdout and "status correct" in result.stdout


def _install_plugin(target: Path) -> dict:
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--target", str(target), str(REPO / "examples" / "plugin_env")],
        check=True, capture_output=True, timeout=300,
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(target), env.get("PYTHONPATH", "")])
    return env


def test_plugin_example_is_found_and_made(tmp_path):
    env = _install_plugin(tmp_path / "site")
    result = _python("""
        import gymnasium as gym, mathgym
        print(mathgym.list_envs()["ReverseWord-v0"])
        env = gym.make("ReverseWord-v0")
        env.reset(options={"task_index": 0})
        print(env.step("muisanmyg")[1])
        from mathgym.checks import run_checks
        print(all(r.passed for r in run_checks("ReverseWord-v0")))
    """, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() [-2:] == ["1.0", "True"]
    listing = subprocess.run([sys.executable, "-m", "mathgym.cli", "envs"], capture_output=True, text=True, env=env, timeout=120)
    assert "ReverseWord-v0" in listing.stdout and "[plugin: mathgym-plugin-example]" in listing.stdout


def test_broken_plugin_warns_and_does_not_break_import(tmp_path):
    dist = tmp_path / "broken_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[mathgym.envs]\nbroken = no_such_module_xyz:register\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(REPO), os.environ.get("PYTHONPATH", "")]))
    result = _python("""
        import warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import mathgym
        print(chr(10).join(str(w.message) for w in caught))
        print("MathReason-v0" in mathgym.list_envs())
    """, env=env)
    assert result.returncode == 0, result.stderr
    assert "plugin 'broken'" in result.stdout and "no_such_module_xyz" in result.stdout
    assert result.stdout.strip().endswith("True")


def test_a_plugin_that_fails_to_import_is_reported_against_the_plugin(tmp_path):
    dist = tmp_path / "failing_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: failing-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[mathgym.envs]\nfailing = failing_plugin_xyz:register\n")
    (tmp_path / "failing_plugin_xyz.py").write_text("import math\n\nraise RuntimeError('the plugin is broken')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(REPO), os.environ.get("PYTHONPATH", "")]))
    result = _python("""
        import warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import mathgym
        for w in caught:
            print(w.filename, w.lineno, w.message, sep=" | ")
    """, env=env)
    assert result.returncode == 0, result.stderr
    line = next(line for line in result.stdout.splitlines() if "failing" in line)
    filename, lineno, message = line.split(" | ")
    assert filename == str(tmp_path / "failing_plugin_xyz.py") and lineno == "3", line  # not mathgym/__init__.py
    assert "plugin 'failing'" in message and "the plugin is broken" in message and "failing-plugin" in message


def test_check_references_grades_each_tasks_own_reference(tmp_path, capsys):
    """`mathgym check ENV -o dataset=... --references`: every task's reference answer graded by the
    env; a broken one is listed with why (and the exit code is 1), an unverifiable one apart,
    one without a reference counted."""
    import json

    rows = [
        {"task_id": "ok", "prompt": "def add(a, b):\n", "entry_point": "add", "canonical_solution": "    return a + b\n",
         "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n"},
        {"task_id": "broken", "prompt": "def add(a, b):\n", "entry_point": "add", "canonical_solution": "    return a - b\n",
         "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n"},
        {"question": "Print the sum.", "input_output": json.dumps({"inputs": ["1 2\n"], "outputs": ["3\n"]})},  # no reference
    ]
    path = tmp_path / "code.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert main(["check", "CodeSandbox-v0", "-o", f"dataset={path}", "--references"]) == 1
    out = capsys.readouterr().out
    assert "references: 3 tasks; 1 solved by their own reference, 1 not, 0 unverifiable, 1 without a reference" in out
    assert "[FAIL] broken: wrong (AssertionError" in out
    assert main(["check", "Countdown-v0", "--references", "5"]) == 0
    assert "references: 5 tasks; 5 solved by their own reference, 0 not" in capsys.readouterr().out
