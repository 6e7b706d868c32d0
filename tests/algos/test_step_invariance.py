"""Every algorithm's training step is pinned: two steps from a fixed seed end at the same parameters
(and log the same metrics) as the reference digests in ``tests/data/step_invariance.json``.

The digests were written by the code before the trainers were recomposed (issue 49); a change to a
trainer's structure must leave them as they are. A change that means to alter what a step computes
regenerates them, and says so in its commit::

    .venv/bin/python tests/algos/test_step_invariance.py --update

Each case runs ``train()`` for two steps on a 2-layer width-32 model (CPU, one thread) and digests
the last checkpoint's tensors (weights, a value head or reward model, the optimizer's moments): per
tensor its sum, its absolute sum and its projection on fixed random weights.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

if __name__ == "__main__":  # run as a script (--update): the repository root on the path, as pytest puts it
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import gymnasium as gym  # noqa: E402

from mathgym.algos.checkpoint import latest_checkpoint, load_checkpoint  # noqa: E402
from mathgym.algos.registry import get_algorithm  # noqa: E402
from mathgym.core import Judgement, Task, TextEnv  # noqa: E402
from mathgym.rewards.base import Status  # noqa: E402
from tests.chat_fixtures import build_chat_model  # noqa: E402
from tests.trainkit import build_small_model, write_step_labels  # noqa: E402

FIXTURE = Path(__file__).parents[1] / "data" / "step_invariance.json"
ENV_ID = "mathgym-tests/Invariance-v0"
#: Relative tolerance of a digest (against the tensor's absolute sum) and of a metric.
RTOL = 1e-6
METRIC_RTOL, METRIC_ATOL = 1e-5, 1e-6


class VarietyEnv(TextEnv):
    """Reward 1 when the character codes of a reply add up to an even number (about half a random
    model's replies: most groups carry a signal, some do not); ``max_turns`` turns, the env answering ``more``."""

    def __init__(self, max_turns: int = 1, render_mode: str | None = None):
        super().__init__(max_turns=max_turns, max_length=256, system_prompt="", render_mode=render_mode)

    def _sample_task(self, options: Any) -> Task:
        n = int(self.np_random.integers(1, 50))
        return Task(f"variety-{n}", f"Say {n}.", str(n))

    def _judge(self, action: str) -> Judgement:
        good = sum(map(ord, action)) % 2 == 0
        done = self.turn >= self.max_turns
        return Judgement(float(good), Status.CORRECT if good else Status.WRONG, done, observation="more", correct=good)


def register_env() -> str:
    if ENV_ID not in gym.registry:
        gym.register(ENV_ID, entry_point=VarietyEnv)
    return ENV_ID


def build_inputs(root: Path) -> dict[str, str]:
    """The models and data files the cases read, built deterministically under ``root``."""
    from mathgym.agents.tiny import build_tiny_model

    root.mkdir(parents=True, exist_ok=True)
    teacher = root / "teacher"
    if not (teacher / "config.json").is_file():
        model, tokenizer = build_tiny_model(seed=1, hidden_size=32, num_layers=2)
        with torch.no_grad():  # a confident teacher, far from the student
            model.model.norm.weight.mul_(12.0)
        model.save_pretrained(teacher)
        tokenizer.save_pretrained(teacher)
    demos = root / "demos.jsonl"
    demos.write_text("".join(json.dumps({"prompt": f"{i} + {i}?", "completion": f"{2 * i}"}) + "\n" for i in range(8)))
    prefs = root / "prefs.jsonl"
    prefs.write_text("".join(json.dumps({
        "prompt": f"What is {i} + 3?", "chosen": f"the answer is {i + 3}", "rejected": f"maybe {i * 7 % 10}",
    }) + "\n" for i in range(8)))
    return {
        "small": str(build_small_model(root / "small")),
        "chat": str(build_chat_model("chatml", root / "chat")),
        "teacher": str(teacher),
        "demos": str(demos),
        "prefs": str(prefs),
        "labels": str(write_step_labels(root / "labels.jsonl", range(8))),
    }


COMMON = dict(
    steps=2, seed=0, learning_rate=1e-2, warmup_steps=0, eval_tasks=0, save_every=0, log_samples=0, progress=False,
    device="cpu", threads=1,
)
ROLLOUTS = dict(env=ENV_ID, model="{small}", num_tasks=2, group_size=3, max_new_tokens=6)

#: case -> (algorithm, options; "{name}" is an input of :func:`build_inputs`).
CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "grpo": ("grpo", ROLLOUTS),
    "grpo-kl-iterations": ("grpo", {**ROLLOUTS, "num_iterations": 2, "beta": 0.1, "grad_accum_steps": 2}),
    "grpo-dynamic-curriculum": ("grpo", {**ROLLOUTS, "dynamic_sampling": True, "curriculum": "pass_rate_band"}),
    "grpo-overlap": ("grpo", {**ROLLOUTS, "off_policy_steps": 1}),
    "ppo": ("ppo", {**ROLLOUTS, "group_size": 2, "env_kwargs": {"max_turns": 2}, "ppo_epochs": 2, "num_minibatches": 2,
                    "kl_coef": 0.1}),
    "dpo-online": ("dpo", {**ROLLOUTS, "epochs_per_batch": 2}),
    "dpo-offline": ("dpo", {"model": "{small}", "preference_file": "{prefs}", "pairs_per_step": 4}),
    "sft": ("sft", {"model": "{small}", "data": "{demos}", "batch_size": 4, "grad_accum_steps": 2}),
    "rm": ("rm", {"model": "{chat}", "preference_file": "{prefs}", "pairs_per_step": 4}),
    "rm-online": ("rm", {**ROLLOUTS, "model": "{chat}", "max_new_tokens": 4}),
    "prm": ("prm", {"model": "{chat}", "data": "{labels}", "batch_size": 4}),
    "distill": ("distill", {**ROLLOUTS, "teacher": "{teacher}", "group_size": 2, "top_k": 8}),
    "onpolicy-distill": ("onpolicy-distill", {**ROLLOUTS, "teacher": "{teacher}"}),
}


def tensor_digest(tensor: torch.Tensor) -> list[float]:
    """``[sum, absolute sum, projection on N(0, 1) weights drawn from seed 0]`` of a tensor, in float64."""
    flat = tensor.detach().reshape(-1).to(torch.float64)
    weights = torch.randn(flat.numel(), generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    return [float(flat.sum()), float(flat.abs().sum()), float((flat * weights).sum())]


def tensors_of(value: Any, prefix: str = "") -> dict[str, torch.Tensor]:
    """The floating-point tensors anywhere in ``value`` (dicts and lists), by a path of keys."""
    found: dict[str, torch.Tensor] = {}
    if isinstance(value, torch.Tensor):
        if value.is_floating_point():
            found[prefix] = value
    elif isinstance(value, dict):
        for key, item in value.items():
            found.update(tensors_of(item, f"{prefix}/{key}"))
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            found.update(tensors_of(item, f"{prefix}/{i}"))
    return found


def run_case(name: str, inputs: dict[str, str], run_dir: Path) -> dict[str, Any]:
    """Train case ``name`` for two steps in ``run_dir``; the digests of its last checkpoint and its logged metrics."""
    register_env()
    algo, options = CASES[name]
    options = {k: (v.format(**inputs) if isinstance(v, str) else v) for k, v in options.items()}
    trainer_cls, config_cls = get_algorithm(algo)
    trainer = trainer_cls(config_cls(**{**COMMON, **options, "run_dir": str(run_dir)}))
    trainer.train()
    state = load_checkpoint(latest_checkpoint(run_dir))
    tensors = {**tensors_of(state["model"], "model"), **tensors_of(state.get("extra", {}), "extra"),
               **tensors_of(state["optimizer"]["state"], "optimizer")}
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    metrics = [
        {k: v for k, v in sorted(r.items()) if isinstance(v, (int, float)) and not k.startswith("perf/") and k != "time"}
        for r in records
    ]
    return {"tensors": {k: tensor_digest(t) for k, t in sorted(tensors.items())}, "metrics": metrics}


def differences(name: str, got: dict[str, Any], want: dict[str, Any]) -> list[str]:
    """What differs between a case's digests and the reference's, beyond the tolerances."""
    out = []
    if set(got["tensors"]) != set(want["tensors"]):
        out.append(f"{name}: tensors {sorted(set(got['tensors']) ^ set(want['tensors']))[:6]} differ")
    for key in sorted(set(got["tensors"]) & set(want["tensors"])):
        g, w = got["tensors"][key], want["tensors"][key]
        scale = max(abs(w[1]), 1e-6)
        if any(abs(a - b) > RTOL * scale for a, b in zip(g, w)):
            out.append(f"{name}: {key}: {g} != {w}")
    if len(got["metrics"]) != len(want["metrics"]):
        out.append(f"{name}: {len(got['metrics'])} metric records, not {len(want['metrics'])}")
    for i, (g, w) in enumerate(zip(got["metrics"], want["metrics"])):
        if set(g) != set(w):
            out.append(f"{name}: record {i}: metrics {sorted(set(g) ^ set(w))} differ")
        for key in sorted(set(g) & set(w)):
            if g[key] != pytest.approx(w[key], rel=METRIC_RTOL, abs=METRIC_ATOL, nan_ok=True):
                out.append(f"{name}: record {i}: {key} = {g[key]}, not {w[key]}")
    return out


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    return build_inputs(tmp_path_factory.mktemp("invariance"))


@pytest.mark.parametrize("name", sorted(CASES))
def test_two_steps_end_where_they_did_before(name, inputs, tmp_path):
    reference = json.loads(FIXTURE.read_text())
    assert name in reference, f"no reference digests for {name}: regenerate them (see the module docstring)"
    problems = differences(name, run_case(name, inputs, tmp_path / "run"), reference[name])
    assert not problems, "\n".join(problems[:20])


def test_every_registered_algorithm_has_a_case():
    from mathgym.algos.registry import ALGORITHMS

    builtin = {spec for spec in ALGORITHMS if ALGORITHMS[spec].trainer.startswith("mathgym.")}
    assert builtin <= {algo for algo, _ in CASES.values()}


def main(argv: list[str]) -> None:
    """``--update``: write the reference digests of every case (or of the cases named after it)."""
    if not argv or argv[0] != "--update":
        raise SystemExit(f"usage: {sys.argv[0]} --update [CASE ...]")
    names = argv[1:] or sorted(CASES)
    reference = json.loads(FIXTURE.read_text()) if FIXTURE.is_file() else {}
    with tempfile.TemporaryDirectory() as tmp:
        inputs = build_inputs(Path(tmp) / "inputs")
        for name in names:
            reference[name] = run_case(name, inputs, Path(tmp) / name)
            print(f"{name}: {len(reference[name]['tensors'])} tensors, {len(reference[name]['metrics'])} metric records")
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    FIXTURE.write_text(json.dumps(dict(sorted(reference.items())), indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
