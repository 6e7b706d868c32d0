"""Terminal-v0 and the container runtime: terminal-bench / Harbor task directories read, images
built on the local base, real container runs where podman or docker works (skipped with the reason
where none does), and the infrastructure statuses where a task cannot run."""

from __future__ import annotations

import shutil
from pathlib import Path

import gymnasium as gym
import pytest

import mathgym  # noqa: F401
from mathgym.envs.repo import terminal
from mathgym.envs.repo.terminal import harbor_reward, pytest_reward
from mathgym.envs.repo.terminal_tasks import SAMPLE_TASKS, _mapped_dockerfile, read_tasks
from mathgym.errors import DatasetError
from mathgym.rewards.base import Status
from mathgym.rewards.sandbox.container import Container, ContainerRuntime, RuntimeProbe, find_runtime
from mathgym.rewards.sandbox.container_image import BASE_IMAGE

PROBE = find_runtime(BASE_IMAGE)
needs_runtime = pytest.mark.skipif(
    PROBE.runtime is None, reason=f"no container runtime runs {BASE_IMAGE} here: {PROBE.reason}"
)


def test_both_layouts_are_read():
    tasks = {t.task_id: t for t in read_tasks(SAMPLE_TASKS)}
    hello, fix = tasks["hello-file"], tasks["fix-sum"]
    assert hello.format == "terminal-bench" and "greeting.txt" in hello.instruction and hello.workdir == "/app"
    assert ("/tests/run-tests.sh" in [target for _, target in hello.tests]) and hello.test_command == "bash /tests/run-tests.sh"
    assert fix.format == "harbor" and fix.context.name == "environment" and fix.test_seconds == 60.0
    assert [t.task_id for t in read_tasks(SAMPLE_TASKS / "fix-sum")] == ["fix-sum"]
    with pytest.raises(DatasetError, match="no terminal-bench"):
        read_tasks(SAMPLE_TASKS / "fix-sum" / "tests")


def test_pytest_summary_and_harbor_reward_are_parsed_with_bounds():
    summary = "noise\nPASSED ../tests/t.py::test_a\nFAILED ../tests/t.py::test_b - assert 0\nSKIPPED t.py::test_c\n"
    assert pytest_reward(summary, partial_credit=False) == (0.0, {"tests": 3, "tests_passed": 2})
    assert pytest_reward(summary, partial_credit=True)[0] == pytest.approx(2 / 3)
    assert pytest_reward("PASSED t.py::test_a\nPASSED t.py::test_b", False)[0] == 1.0
    assert pytest_reward("no summary at all", False)[0] == 0.0  # no test run is no pass
    assert [harbor_reward(t) for t in ("1\n", "0.25", '{"reward": 3}', "NaN", "yes", "", "true")] == [1.0, 0.25, 1.0, 0.0, 0.0, 0.0, 0.0]


class _NoImages(ContainerRuntime):
    def has_image(self, image: str) -> bool:
        return False


def test_a_from_is_mapped_to_the_local_base_or_named_as_the_reason():
    runtime = _NoImages("podman", "/bin/false")
    text, why = _mapped_dockerfile(runtime, "FROM python:3.13-slim AS build\nRUN true\nFROM build\nWORKDIR /app\n", {"python:*": BASE_IMAGE})
    assert why == "" and text.splitlines()[0] == f"FROM {BASE_IMAGE} AS build" and "FROM build" in text
    _, why = _mapped_dockerfile(runtime, "FROM registry.example/only:1\n", {"python:*": BASE_IMAGE})
    assert "FROM registry.example/only:1 cannot be pulled here" in why


def test_without_a_runtime_a_command_ends_the_episode_as_a_sandbox_error(monkeypatch):
    monkeypatch.setattr(terminal, "_working_runtime", lambda name: RuntimeProbe(None, "podman: not installed"))
    env = gym.make("Terminal-v0")
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step("<run>ls</run>")
    assert (reward, terminated, truncated, info["status"]) == (0.0, True, False, Status.SANDBOX_ERROR)
    assert "podman: not installed" in info["why"] and info["correct"] is False
    env.reset(seed=0)
    assert env.step("no command here")[4]["status"] == Status.FORMAT_ERROR  # the agent's own mistakes need no container


@needs_runtime
def test_a_task_whose_base_cannot_be_pulled_is_unverifiable(tmp_path):
    task = tmp_path / "pulls"
    (task / "tests").mkdir(parents=True)
    (task / "task.yaml").write_text("instruction: do it\ndifficulty: easy\n")
    (task / "Dockerfile").write_text("FROM registry.example/only:1\nWORKDIR /app\n")
    (task / "run-tests.sh").write_text("true\n")
    env = gym.make("Terminal-v0", tasks=str(task))
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step("<run>ls</run>")
    assert (reward, terminated, info["status"]) == (0.0, True, Status.UNVERIFIABLE)
    assert "registry.example/only:1" in info["why"]


@needs_runtime
@pytest.mark.parametrize("index", [0, 1])
def test_the_reference_solution_passes_and_the_untouched_task_fails(index):
    env = gym.make("Terminal-v0")
    env.reset(options={"task_index": index})
    _, reward, terminated, _, info = env.step("<submit/>")
    assert (reward, terminated, info["status"]) == (0.0, True, Status.WRONG)
    env.reset(options={"task_index": index})
    first = env.step(env.unwrapped.expert_action())
    assert first[4]["status"] == Status.IN_PROGRESS and "[exit code 0]" in first[0]
    _, reward, terminated, _, info = env.step(env.unwrapped.expert_action())
    assert (reward, terminated, info["status"], info["correct"]) == (1.0, True, Status.CORRECT, True)
    env.close()


@needs_runtime
def test_commands_read_write_patch_and_the_container_is_removed():
    env = gym.make("Terminal-v0", command_seconds=2.0)
    env.reset(options={"task_index": 1})
    base = env.unwrapped
    assert "Wrote notes/a.txt" in env.step('<write path="notes/a.txt">one\n</write>')[0]
    assert "Patch applied: notes/a.txt" in env.step("<patch>--- a/notes/a.txt\n+++ b/notes/a.txt\n@@ -1 +1 @@\n-one\n+two\n</patch>")[0]
    assert env.step("<read>notes/a.txt</read>")[0].startswith("two\n")
    assert env.step("<read>missing.txt</read>")[4]["status"] == Status.FORMAT_ERROR
    assert "[stopped after 2 s]" in env.step("<run>sleep 30</run>")[0]
    name = base._box.name
    env.close()
    assert base._box is None
    assert PROBE.runtime.call("container", "exists", name).returncode != 0


@needs_runtime
def test_the_container_has_no_network_and_bounded_processes():
    with Container.start(PROBE.runtime, BASE_IMAGE) as box:
        net = box.exec("python3 -c 'import socket; socket.create_connection((\"1.1.1.1\", 80), timeout=2)'")
        assert net.exit_code != 0 and "unreachable" in net.output.lower()
        forks = box.exec("for i in $(seq 600); do sleep 5 & done 2>&1 | tail -1; echo done", timeout=10)
        assert "fork" in forks.output.lower() or "resource" in forks.output.lower()
        flood = box.exec("yes | head -c 5000000", output_cap=300)
        assert len(flood.output) < 400 and "cut" in flood.output


def test_missing_runtime_is_explained():
    probe = find_runtime(BASE_IMAGE, preferred="docker") if shutil.which("docker") is None else RuntimeProbe(None, "docker: not installed")
    assert probe.runtime is None and "docker" in probe.reason
    assert Path(SAMPLE_TASKS / "README.md").is_file()
