"""Terminal-bench and Harbor task directories, read, and their images built where nothing can be pulled.

Two layouts (as the ``terminal-bench`` and ``harbor`` packages define them)::

    terminal-bench                         Harbor
    task.yaml      instruction, timeouts   task.toml       [agent] / [verifier] timeout_sec
    Dockerfile                             instruction.md
    run-tests.sh   -> /tests/run-tests.sh  environment/Dockerfile (and its build context)
    tests/         -> /tests/ (at grading)  tests/test.sh   -> /tests/ (at grading), writes
    solution.sh                                              /logs/verifier/reward.txt
                                           solution/solve.sh

A task's image: its Dockerfile built with no pull and no network. A ``FROM`` image not present
locally is replaced by the local base image it maps to (:data:`DEFAULT_BASE_IMAGES`, fnmatch
patterns); a ``FROM`` nothing maps, or a build that fails (a ``RUN`` that needs the network), makes
the task ``unverifiable`` with the reason.
"""

from __future__ import annotations

import fnmatch
import hashlib
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from mathgym.errors import DatasetError
from mathgym.rewards.sandbox.container import ContainerError, ContainerRuntime
from mathgym.rewards.sandbox.container_image import BASE_IMAGE

TaskFormat = Literal["terminal-bench", "harbor"]
#: ``FROM`` images (fnmatch patterns) → the local image built instead; the base has Debian, Python 3 and pytest.
DEFAULT_BASE_IMAGES: Mapping[str, str] = {
    "ubuntu:*": BASE_IMAGE, "debian:*": BASE_IMAGE, "python:*": BASE_IMAGE, "ghcr.io/laude-institute/t-bench/*": BASE_IMAGE,
}
#: The built-in sample tasks (one of each format).
SAMPLE_TASKS = Path(__file__).resolve().parents[2] / "samples" / "terminal_tasks"
_FROM = re.compile(r"^(\s*FROM\s+)((?:--\S+\s+)*)(\S+)(.*)$", re.IGNORECASE | re.MULTILINE)
_WORKDIR = re.compile(r"^\s*WORKDIR\s+(\S+)\s*$", re.IGNORECASE | re.MULTILINE)


@dataclass(frozen=True)
class TerminalTask:
    """One task directory, read.

    Attributes:
        task_id: The directory's name.
        root: The directory.
        format: ``"terminal-bench"`` or ``"harbor"``.
        instruction: What the agent is asked to do.
        dockerfile: The task's Dockerfile (``None``: the base image as it is).
        context: The Dockerfile's build context.
        tests: Files copied to ``/tests`` at grading (the test scripts with them).
        test_command: What runs the tests in the container.
        solution: The reference solution script's text (``None``: none).
        test_seconds: Time limit of the tests.
        workdir: The image's working directory (its last ``WORKDIR``; ``/app`` by default).
    """

    task_id: str
    root: Path
    format: TaskFormat
    instruction: str
    dockerfile: Path | None
    context: Path
    tests: tuple[tuple[Path, str], ...]
    test_command: str
    solution: str | None
    test_seconds: float
    workdir: str


def read_tasks(path: str | Path) -> list[TerminalTask]:
    """The task of directory ``path``, or the tasks of its subdirectories (sorted by name).

    Raises:
        DatasetError: ``path`` holds no task of either format.
    """
    folder = Path(path)
    if _format_of(folder):
        return [read_task(folder)]
    tasks = [read_task(d) for d in sorted(folder.iterdir()) if d.is_dir() and _format_of(d)] if folder.is_dir() else []
    if not tasks:
        raise DatasetError(f"{folder} holds no terminal-bench (task.yaml) or Harbor (task.toml + instruction.md) task directory.")
    return tasks


def _format_of(folder: Path) -> TaskFormat | None:
    if (folder / "task.yaml").is_file():
        return "terminal-bench"
    if (folder / "task.toml").is_file() and (folder / "instruction.md").is_file():
        return "harbor"
    return None


def read_task(folder: Path) -> TerminalTask:
    """Read one task directory of either format."""
    kind = _format_of(folder)
    if kind == "terminal-bench":
        return _read_terminal_bench(folder)
    if kind == "harbor":
        return _read_harbor(folder)
    raise DatasetError(f"{folder} is not a terminal-bench or Harbor task directory.")


def _read_terminal_bench(folder: Path) -> TerminalTask:
    import yaml  # noqa: PLC0415 - a dependency of mathgym

    config = yaml.safe_load((folder / "task.yaml").read_text()) or {}
    if not isinstance(config, dict) or not isinstance(config.get("instruction"), str):
        raise DatasetError(f"{folder / 'task.yaml'} has no instruction.")
    run_tests = folder / "run-tests.sh"
    if not run_tests.is_file():
        raise DatasetError(f"{folder} has no run-tests.sh.")
    tests = [(run_tests, "/tests/run-tests.sh"), *_tree(folder / "tests", "/tests")]
    dockerfile = folder / "Dockerfile"
    solution = folder / "solution.sh"
    return TerminalTask(
        folder.name, folder, "terminal-bench", config["instruction"].strip(), dockerfile if dockerfile.is_file() else None, folder,
        tuple(tests), "bash /tests/run-tests.sh", solution.read_text() if solution.is_file() else None,
        float(config.get("max_test_timeout_sec", 60.0)), _workdir(dockerfile),
    )


def _read_harbor(folder: Path) -> TerminalTask:
    config = _toml(folder / "task.toml")
    test_script = folder / "tests" / "test.sh"
    if not test_script.is_file():
        raise DatasetError(f"{folder} has no tests/test.sh.")
    dockerfile = folder / "environment" / "Dockerfile"
    solution = folder / "solution" / "solve.sh"
    verifier = config.get("verifier") if isinstance(config.get("verifier"), dict) else {}
    return TerminalTask(
        folder.name, folder, "harbor", (folder / "instruction.md").read_text().strip(), dockerfile if dockerfile.is_file() else None,
        folder / "environment", tuple(_tree(folder / "tests", "/tests")), "mkdir -p /logs/verifier && bash /tests/test.sh",
        solution.read_text() if solution.is_file() else None, float(verifier.get("timeout_sec", 60.0)), _workdir(dockerfile),
    )


def _toml(path: Path) -> dict:
    try:
        import tomllib  # noqa: PLC0415 - Python 3.11+
    except ImportError:  # Python 3.10: the timeouts are all that is read; their defaults serve
        return {}
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as err:
        raise DatasetError(f"{path}: {err}") from None


def _tree(folder: Path, target: str) -> list[tuple[Path, str]]:
    """Every file under ``folder`` and where it goes under ``target`` in the container."""
    if not folder.is_dir():
        return []
    return [(f, f"{target}/{f.relative_to(folder).as_posix()}") for f in sorted(folder.rglob("*")) if f.is_file()]


def _workdir(dockerfile: Path) -> str:
    found = _WORKDIR.findall(dockerfile.read_text()) if dockerfile.is_file() else []
    return found[-1] if found and found[-1].startswith("/") else "/app"


@dataclass(frozen=True)
class TaskImage:
    """A task's image, or why there is none (``image is None``: the task is unverifiable here)."""

    image: str | None
    reason: str = ""


def task_image(runtime: ContainerRuntime, task: TerminalTask, base_images: Mapping[str, str] = DEFAULT_BASE_IMAGES) -> TaskImage:
    """Build (or find, built before) ``task``'s image with no pull and no network."""
    if task.dockerfile is None:
        return TaskImage(BASE_IMAGE) if runtime.has_image(BASE_IMAGE) else TaskImage(None, f"no Dockerfile and no base image {BASE_IMAGE}")
    text, why = _mapped_dockerfile(runtime, task.dockerfile.read_text(), base_images)
    if why:
        return TaskImage(None, why)
    digest = hashlib.sha256(text.encode())
    for path in sorted(p for p in task.context.rglob("*") if p.is_file()):
        digest.update(path.relative_to(task.context).as_posix().encode() + b"\0" + path.read_bytes())
    tag = f"localhost/mathgym-task/{re.sub(r'[^a-z0-9_.-]', '-', task.task_id.lower())}:{digest.hexdigest()[:16]}"
    if runtime.has_image(tag):
        return TaskImage(tag)
    with tempfile.NamedTemporaryFile("w", suffix=".Dockerfile") as handle:
        handle.write(text)
        handle.flush()
        flags = ["--pull=never", "--network=none"] if runtime.name == "podman" else ["--pull=false", "--network=none"]
        try:
            built = runtime.call("build", *flags, "-f", handle.name, "-t", tag, str(task.context), timeout=900)
        except ContainerError as err:
            return TaskImage(None, str(err))
    if built.returncode != 0:
        tail = built.stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
        return TaskImage(None, "its image does not build here without the network: " + " | ".join(tail)[-400:])
    return TaskImage(tag)


def _mapped_dockerfile(runtime: ContainerRuntime, text: str, base_images: Mapping[str, str]) -> tuple[str, str]:
    """``text`` with each ``FROM`` that is not present locally replaced by its mapped base; or why it cannot be."""
    stages: set[str] = set()
    problems: list[str] = []

    def replace(match: re.Match[str]) -> str:
        image, rest = match.group(3), match.group(4)
        alias = re.search(r"\bAS\s+(\S+)", rest, re.IGNORECASE)
        mapped = image
        if image.lower() not in stages and image.lower() != "scratch" and not runtime.has_image(image):
            mapped = next((local for pattern, local in base_images.items() if fnmatch.fnmatch(image, pattern)), "")
            if not mapped:
                problems.append(f"FROM {image} cannot be pulled here and no local base image maps it (base_images)")
        if alias:
            stages.add(alias.group(1).lower())
        return f"{match.group(1)}{match.group(2)}{mapped or image}{rest}"

    mapped_text = _FROM.sub(replace, text)
    return mapped_text, "; ".join(problems)
