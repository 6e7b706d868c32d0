"""A sandbox job sees an allow-list view of the filesystem.

The runtime (interpreter, standard library, site-packages) read-only, a private scratch
dir and private /tmp, /var/tmp, /dev/shm, a minimal /dev: nothing else. No repository
checkout, no ``.git``, no data set, no home dirs, no /etc secrets, no shared writable dir.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from pathlib import Path

import gymnasium as gym
import pytest

import mathgym
from mathgym.rewards.base import Status
from mathgym.rewards.sandbox import CodeSandbox, SandboxLimits

REPO = Path(mathgym.__file__).resolve().parents[1]
PRIVATE = ("/tmp", "/var/tmp", "/dev/shm")
#: Where a job whose tests run in the judge gets the working dir it shares with it; not root, every
#: job may write there too (the worker's uid); emptied after each job, as the private dirs are fresh.
WORKSPACE = "/.mathgym-workspace"
LIMITS = SandboxLimits(cpu_seconds=20, wall_seconds=30, max_processes=64)

# Reads every path it is given and reports what it could see: the listing, a read, a stat.
PROBE = """
import json, os
seen = {}
for path in json.loads(%r):
    found = {}
    try:
        found["listed"] = sorted(os.listdir(path))
    except OSError:
        pass
    try:
        with open(path, "rb") as handle:
            found["read"] = len(handle.read(100))
    except OSError:
        pass
    if os.path.lexists(path):
        found["exists"] = True
    seen[path] = found
print(json.dumps(seen))
"""

# Walks everything the job can see and tries to create a file in every directory.
WRITABLE = """
import json, os
writable, dirs = [], 0
for top, subdirs, files in os.walk("/", onerror=lambda err: None):
    if top in ("/proc", "/sys"):
        subdirs[:] = []
        continue
    dirs += 1
    name = os.path.join(top, ".mathgym-probe-%d" % os.getpid())
    try:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError:
        continue
    os.close(fd)
    os.unlink(name)
    writable.append(top)
print(json.dumps({"cwd": os.getcwd(), "writable": sorted(writable), "dirs": dirs}))
"""


@pytest.fixture(scope="module")
def box():
    with CodeSandbox(LIMITS, workers=2) as sandbox:
        sandbox.warm_up()
        probe = sandbox.run("print(1)")
        if os.geteuid() == 0:  # DESIGN.md: namespaces work here as root, so the view must hold
            assert probe.details.get("fs_view") == "allow-list", probe.details
        elif probe.details.get("fs_view") != "allow-list":
            pytest.skip(f"no allow-list view on this machine: {probe.details.get('fs_view_reason')}")
        yield sandbox


@pytest.fixture
def data_file():
    """A world-readable data set file outside /tmp, the way a user keeps one beside the checkout."""
    path = REPO / f".view-test-{uuid.uuid4().hex}.jsonl"
    path.write_text(json.dumps({"question": "What is 7321 + 0?", "answer": "7321 + 0 = 7321\n#### 7321"}) + "\n")
    path.chmod(0o644)
    yield path
    path.unlink()


def _seen(box: CodeSandbox, paths: list[str]) -> dict[str, dict]:
    result = box.run(PROBE % json.dumps(paths))
    assert result.status == Status.CORRECT, result.stderr[-2000:]
    return json.loads(result.stdout)


def _runtime() -> list[str]:
    """Where the interpreter, its standard library, the venv and the site-packages live."""
    paths = [sys.prefix, sys.base_prefix, os.path.dirname(os.__file__), *(p for p in sys.path if p.endswith(("site-packages", "dist-packages")))]
    return [os.path.realpath(p) for p in paths if os.path.isdir(p)]


def _on_the_way_to_the_runtime(folder: str, names: list[str]) -> bool:
    """Whether every entry of ``folder`` is only a step on the path to a runtime dir."""
    return all(any(r == f"{folder.rstrip('/')}/{name}" or r.startswith(f"{folder.rstrip('/')}/{name}/") for r in _runtime()) for name in names)


def test_the_job_cannot_see_the_checkout_its_git_data_or_secrets(box, data_file):
    git = REPO / ".git"
    paths = [str(REPO), str(git), str(REPO / "pyproject.toml"), str(data_file), str(data_file.parent)]
    paths += [str(p) for p in (git / "objects", git / "HEAD", git / "config", git / "packed-refs") if p.exists()]
    paths += [str(p) for p in sorted((git / "objects" / "pack").glob("*.pack"))[:2]] if (git / "objects" / "pack").is_dir() else []
    paths += ["/root", "/home", "/etc", "/etc/shadow", "/etc/passwd", "/work", "/proc/1/root", "/proc/self/environ", "/mnt", "/srv", "/opt", "/run", "/run/lock", "/var/lock"]
    paths += [str(Path(mathgym.__file__).parent), str(Path(mathgym.__file__))]
    leaks = {}
    for path, found in _seen(box, paths).items():
        # A dir on the way to the runtime (``/root`` above a pyenv, the checkout above its
        # .venv) exists, and lists only that step; nothing else may be seen at all.
        if found and not ("read" not in found and _on_the_way_to_the_runtime(path, found.get("listed", []))):
            leaks[path] = found
    assert leaks == {}
    seen = _seen(box, [str(REPO)])[str(REPO)]
    assert not {"pyproject.toml", ".git", "mathgym", "tests"} & set(seen.get("listed", ()))


def test_the_job_sees_the_runtime_read_only(box):
    code = (
        "import json, subprocess, sys, os\n"
        "import numpy\n"
        "print(int(numpy.arange(4).sum()), json.dumps([1]))\n"
        "print(subprocess.run([sys.executable, '-c', 'import fractions; print(fractions.Fraction(1, 3))'], capture_output=True, text=True).stdout.strip())\n"
        "try:\n"
        "    open(os.path.join(os.path.dirname(os.__file__), 'mathgym-written.py'), 'w')\n"
        "except OSError as err:\n"
        "    print(type(err).__name__)\n"
    )
    pytest.importorskip("numpy")
    result = box.run(code)
    assert result.status == Status.CORRECT, result.stderr[-2000:]
    assert result.stdout.splitlines() == ["6 [1]", "1/3", "OSError"], result.stdout


def test_only_the_private_dirs_are_writable_and_fresh_per_job(box):
    first = box.run(WRITABLE)
    assert first.status == Status.CORRECT, (first.stderr[-2000:], first.details)
    facts = json.loads(first.stdout)
    assert facts["dirs"] > 10  # the walk did see the runtime
    # A runtime under a private dir (a venv under /tmp) has the dirs on the way to it made again in
    # each job's fresh tmpfs; not root, the job owns them (they vanish with its tmpfs, as all of it).
    steps = {p for p in facts["writable"] if any(p.startswith(d + "/") for d in PRIVATE) and sys.prefix.startswith(p + "/")}
    assert set(facts["writable"]) - steps <= {facts["cwd"], *PRIVATE, WORKSPACE}, facts["writable"]
    assert facts["cwd"] in facts["writable"] and (WORKSPACE in facts["writable"]) == (os.geteuid() != 0)
    # A job fills every dir it may write to; the next job finds each of them empty.
    dirs = [*PRIVATE, WORKSPACE] if os.geteuid() != 0 else list(PRIVATE)
    fill = "import os\nfor d in %r + [os.getcwd()]:\n    open(os.path.join(d, 'left-by-job-1'), 'w').write('x')\n" % dirs
    assert box.run(fill).status == Status.CORRECT
    # (A runtime that lives under a private dir, a venv under /tmp, is bound again in each job:
    # the dirs on the way to it are the only entries a fresh private dir then holds.)
    listing = ("import json, os, sys\nhere = os.getcwd()\nkeep = lambda p: p != here and not sys.prefix.startswith(p + '/')\n"
               "print(json.dumps([[e for e in os.listdir(d) if keep(os.path.join(d, e))] for d in %r + [here]]))")
    empty = box.run(listing % dirs)
    assert json.loads(empty.stdout) == [[]] * (len(dirs) + 1), empty.stdout


def test_math_tool_python_cannot_read_its_own_data_set(data_file):
    env = gym.make("MathTool-v0", dataset=str(data_file))
    env.reset(seed=0)
    action = f"<python>print(open({str(data_file)!r}).read())</python>"
    observation, reward, terminated, truncated, info = env.step(action)
    assert "7321 = 7321" not in observation and "####" not in observation, observation
    assert "No such file or directory" in observation or "Permission" in observation, observation


def test_without_mount_namespaces_the_block_list_is_reported(monkeypatch):
    monkeypatch.setenv("MATHGYM_SANDBOX_SIMULATE_NO_MOUNT_NAMESPACE", "1")
    with CodeSandbox(LIMITS, workers=1) as shared:
        result = shared.run("print(1)")
    assert result.details["fs_view"] == "block-list" and "unshare(CLONE_NEWNS) refused" in result.details["fs_view_reason"]


def test_a_refused_new_root_falls_back_to_the_block_list(monkeypatch):
    monkeypatch.setenv("MATHGYM_SANDBOX_SIMULATE_NO_NEW_ROOT", "1")
    with CodeSandbox(LIMITS, workers=1) as fallback:
        result = fallback.run("import os\nprint(os.path.exists(%r))" % str(REPO / "mathgym" / "__init__.py"))
    assert result.details["fs_view"] == "block-list" and "simulated" in result.details["fs_view_reason"], result.details
    if result.details["tmp"] == "private":
        assert result.details["hidden_paths"] >= 1 and result.stdout.strip() == "False"  # the block-list still holds
