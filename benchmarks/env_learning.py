"""What ``mathgym train`` learns on the easiest level of each agentic env (SQL, repo repair, games).

For each env, at its easiest level (``difficulty=0`` or ``level=0``, whichever option it takes):

1. The embedded tiny model's default path, ``mathgym train --env ID`` (an SFT warm start on the
   env's expert demonstrations, then GRPO), when the env's demonstrations fit the model: the
   median of 16 expert transcripts, in the model's tokens, must fit its positions
   (``max_position_embeddings`` of its config; the record also says how many of the 16 fit and
   the longest). An env whose transcripts do not fit is reported as "does not fit", with the numbers.
2. Where the tiny model does not fit, or its run fails or does not raise the held-out pass@1,
   a fixture chat model: a random 2-layer Qwen2 with 2,048
   positions, a byte-level BPE tokenizer trained with ``tokenizers`` on the env's own text and a
   ChatML chat template, saved with ``save_pretrained`` and given to ``mathgym train --model PATH``
   as a hub model would be: ``--algo sft`` on the expert's demonstrations (the warm start), then
   GRPO from the SFT model.

Each run prints its per-step curve (the rollouts' mean reward; the held-out greedy pass@1 and mean reward every
``--eval-every`` steps) and the script ends with a table: env, model, held-out pass@1 before →
after, steps, wall time. Every run gets a fresh ``MATHGYM_CACHE``, so warm starts are built and
timed too. Time it on an idle machine::

    python benchmarks/env_learning.py --record env_learning     # every env (long: run it on an idle machine)
    python benchmarks/env_learning.py --quick --env Hanoi-v0    # a smoke run of one env (a minute or two)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from record import write_record  # noqa: E402

#: Options that set an env's level, in the order looked for; the easiest level is 0.
LEVEL_OPTIONS = ("difficulty", "level")
#: Positions of the fixture chat model (room for the longest multi-turn transcripts).
FIXTURE_POSITIONS = 2048


def default_envs() -> list[str]:
    """SQLQuery-v0, RepoRepair-v0, InstructionFollow-v0 and every registered game."""
    import gymnasium as gym

    import mathgym  # noqa: F401  (registers the envs)

    games = sorted(spec.id for spec in gym.registry.values() if str(spec.entry_point).startswith("mathgym.envs.games"))
    return ["SQLQuery-v0", "RepoRepair-v0", "InstructionFollow-v0", *games]


def easiest_kwargs(env_id: str) -> dict[str, Any]:
    """``{level option: 0}`` for the first of :data:`LEVEL_OPTIONS` the env takes (``{}``: none)."""
    from mathgym.registry import env_options

    options = env_options(env_id) or []
    return next(({name: 0} for name in LEVEL_OPTIONS if name in options), {})


def demonstration_sizes(env_id: str, kwargs: dict[str, Any], model: str) -> dict[str, int]:
    """Of 16 expert transcripts: the longest in characters and in ``model``'s tokens, the median in
    tokens, how many fit the model's positions, the longest expert turn in tokens; and the positions. The env gets the options a run of ``model``
    gives it (those saved with the model, e.g. the tiny model's empty system prompt, under ``kwargs``)."""
    from transformers import AutoConfig, AutoTokenizer

    from mathgym.agents.settings import run_env_kwargs
    from mathgym.algos.sft import env_demonstrations

    tokenizer = AutoTokenizer.from_pretrained(model)
    chats = env_demonstrations(env_id, run_env_kwargs(env_id, model, kwargs), 16)
    tokens = [len(tokenizer(tokenizer.apply_chat_template(c, tokenize=False), add_special_tokens=False).input_ids) for c in chats]
    turns = [len(tokenizer(m["content"], add_special_tokens=False).input_ids) for c in chats for m in c if m["role"] == "assistant"]
    positions = int(AutoConfig.from_pretrained(model).max_position_embeddings)
    return {
        "longest_tokens": max(tokens),
        "median_tokens": sorted(tokens)[len(tokens) // 2],
        "fitting": f"{sum(t <= positions for t in tokens)}/{len(tokens)}",
        "longest_chars": max(sum(len(m["content"]) for m in c) for c in chats),
        "longest_turn_tokens": max(turns),
        "positions": positions,
    }


def train(args: list[str], run_dir: Path, cache: Path, label: str) -> dict[str, Any]:
    """One ``mathgym train`` run; its curve (printed as it is read back) and wall time."""
    command = [sys.executable, "-m", "mathgym", "train", "--progress", "false", "--run-dir", str(run_dir), *args]
    print(f"$ {' '.join(command)}", flush=True)
    start = time.perf_counter()
    done = subprocess.run(command, env={**os.environ, "MATHGYM_CACHE": str(cache)}, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        sys.stderr.write(done.stdout[-2000:] + done.stderr[-4000:])
        return {"error": f"mathgym train exited with {done.returncode}", "wall_s": round(wall, 1)}
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    evals = [r for r in rows if "eval/pass@1" in r]
    curve = []
    for row in rows:
        point = {"step": row.get("step")}
        for key, name in (("rollout/reward", "reward"), ("loss/sft", "sft_loss"), ("eval/pass@1", "pass_at_1"),
                          ("eval/reward", "eval_reward")):
            if key in row:
                point[name] = round(float(row[key]), 4)
        if len(point) > 1:
            curve.append(point)
            print(f"  {label} step {point['step']:>4}: " + ", ".join(f"{k} {v}" for k, v in point.items() if k != "step"), flush=True)
    return {
        "args": " ".join(args),
        "steps": sum(1 for r in rows if "rollout/reward" in r or "loss/sft" in r),
        "wall_s": round(wall, 1),
        "pass_at_1_before": evals[0]["eval/pass@1"] if evals else None,
        "pass_at_1_after": evals[-1]["eval/pass@1"] if evals else None,
        # the held-out greedy episodes' mean reward (partial credit, e.g. the share of hidden tests passed)
        "eval_reward_before": round(evals[0]["eval/reward"], 4) if evals and "eval/reward" in evals[0] else None,
        "eval_reward_after": round(evals[-1]["eval/reward"], 4) if evals and "eval/reward" in evals[-1] else None,
        "curve": curve,
    }


def build_fixture_model(env_id: str, kwargs: dict[str, Any], path: Path, seed: int = 0) -> Path:
    """A random Qwen2 chat model whose BPE tokenizer is trained on ``env_id``'s text, saved at ``path``."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    from mathgym.algos.sft import env_demonstrations

    special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    text = [m["content"] for chat in env_demonstrations(env_id, kwargs, 200, seed=50_000) for m in chat]
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    core.train_from_iterator(text, trainer=trainers.BpeTrainer(
        vocab_size=2000, special_tokens=special, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                        additional_special_tokens=["<|im_start|>"])
    # ChatML: every message as <|im_start|>role\n...<|im_end|>\n; the assistant's turn ends with <|im_end|> (EOS).
    tokenizer.chat_template = (
        "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
    )
    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    config = Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=FIXTURE_POSITIONS, tie_word_embeddings=True,
        eos_token_id=eos, pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id, model.generation_config.pad_token_id = eos, tokenizer.pad_token_id
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def budget(args: argparse.Namespace) -> dict[str, int]:
    if args.quick:
        return {"warm": 10, "sft": 10, "steps": 3, "eval_tasks": 4, "eval_every": 0, "num_tasks": 2, "group": 4}
    return {"warm": args.warm_start_steps, "sft": args.sft_steps, "steps": args.steps, "eval_tasks": args.eval_tasks,
            "eval_every": args.eval_every, "num_tasks": 8, "group": 8}


def run_env(env_id: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    from mathgym.agents.tiny import tiny_model_path

    b = budget(args)
    kwargs = easiest_kwargs(env_id)
    cache = work / "cache"
    common = ["--env", env_id, "--env-kwargs", json.dumps(kwargs), "--eval-tasks", str(b["eval_tasks"]),
              "--eval-every", str(b["eval_every"]), "--num-tasks", str(b["num_tasks"]), "--group-size", str(b["group"])]
    result: dict[str, Any] = {"env_kwargs": kwargs}
    tiny = demonstration_sizes(env_id, kwargs, str(tiny_model_path(0)))
    result["tiny_sizes"] = tiny
    name = env_id.replace("/", "_")
    if tiny["median_tokens"] <= tiny["positions"] and args.skip_tiny:
        print(f"{env_id}: the tiny model's run is skipped (--skip-tiny): the fixture model only", flush=True)
        result["tiny"] = {"skipped": True}
    elif tiny["median_tokens"] <= tiny["positions"]:
        new_tokens = max(32, tiny["longest_turn_tokens"] + 8)
        result["tiny"] = train([*common, "--steps", str(b["steps"]), "--warm-start-steps", str(b["warm"]), "--lr-schedule", "constant",
                                "--max-new-tokens", str(new_tokens), "--max-episode-tokens", str(tiny["positions"])],
                               work / f"{name}-tiny", cache, f"{env_id} tiny")
        run = result["tiny"]
        if "error" not in run and run["pass_at_1_after"] > run["pass_at_1_before"]:
            return result
        print(f"{env_id}: the tiny model gained nothing ({run.get('error') or 'pass@1 did not rise'}): the fixture model next", flush=True)
    else:
        print(f"{env_id}: does not fit the tiny model: its expert transcripts are {tiny['median_tokens']} tokens (median; "
              f"longest {tiny['longest_tokens']} tokens, {tiny['longest_chars']} characters), the model has "
              f"{tiny['positions']} positions", flush=True)
        result["tiny"] = {"does_not_fit": True}
    fixture = build_fixture_model(env_id, kwargs, work / f"{name}-fixture-model")
    sizes = demonstration_sizes(env_id, kwargs, str(fixture))
    result["fixture_sizes"] = sizes
    generation = ["--max-new-tokens", str(sizes["longest_turn_tokens"] + 16), "--max-episode-tokens", str(sizes["positions"])]
    sft = train([*common, *generation, "--algo", "sft", "--model", str(fixture), "--steps", str(b["sft"]), "--learning-rate", "3e-3",
                 "--num-demonstrations", str(min(1024, max(64, b["sft"] * 16))), "--batch-size", "16"],
                work / f"{name}-sft", cache, f"{env_id} fixture SFT")
    result["fixture_sft"] = sft
    if "error" in sft:
        return result
    result["fixture_grpo"] = train([*common, *generation, "--model", str(work / f"{name}-sft" / "final"), "--steps", str(b["steps"]),
                                    "--learning-rate", "1e-4", "--lr-schedule", "constant"], work / f"{name}-grpo", cache, f"{env_id} fixture GRPO")
    return result


def table(results: dict[str, dict[str, Any]]) -> str:
    def cell(run: dict[str, Any]) -> str:
        if run.get("pass_at_1_before") is None:
            return run.get("error", "-")
        return f"{run['pass_at_1_before']:.1%} → {run['pass_at_1_after']:.1%}"

    lines = ["| env | model | held-out pass@1 before → after | steps | wall (s) |", "|---|---|---|---|---|"]
    for env_id, r in results.items():
        tiny = r.get("tiny", {})
        if tiny.get("does_not_fit"):
            s = r["tiny_sizes"]
            lines.append(f"| {env_id} | tiny | does not fit: transcripts of {s['median_tokens']} tokens (median) > "
                         f"{s['positions']} positions | - | - |")
        elif tiny.get("skipped"):
            lines.append(f"| {env_id} | tiny | not run (--skip-tiny) | - | - |")
        elif tiny:
            lines.append(f"| {env_id} | tiny (warm start + GRPO) | {cell(tiny)} | {tiny.get('steps', '-')} | {tiny['wall_s']} |")
        for key, model in (("fixture_sft", "fixture SFT (random → SFT)"), ("fixture_grpo", "fixture GRPO (SFT → GRPO)")):
            if key in r:
                lines.append(f"| {env_id} | {model} | {cell(r[key])} | {r[key].get('steps', '-')} | {r[key]['wall_s']} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", action="append", default=[], metavar="ID", help="run this env only (repeatable; default: all)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: a few steps and evaluation tasks")
    parser.add_argument("--steps", type=int, default=60, help="GRPO steps (the recorded runs' 60; mathgym train's own default is 200)")
    parser.add_argument("--warm-start-steps", type=int, default=400, help="the tiny model's warm-start SFT steps")
    parser.add_argument("--sft-steps", type=int, default=300, help="SFT steps of the fixture model's warm start")
    parser.add_argument("--eval-tasks", type=int, default=50, help="held-out tasks of each evaluation")
    parser.add_argument("--eval-every", type=int, default=10, help="held-out evaluation every N steps (the curve)")
    parser.add_argument("--record", default="", help="write benchmarks/results/NAME.json (after each env, so a long run keeps what it measured)")
    parser.add_argument("--skip-tiny", action="store_true",
                        help="run the fixture model only, even where the transcripts fit the tiny model (the record says it was skipped)")
    parser.add_argument("--keep-others", action="store_true",
                        help="keep the envs of an existing --record that this run does not measure (one record built by several runs)")
    args = parser.parse_args()
    envs = args.env or default_envs()
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="mathgym-env-learning-") as tmp:
        for env_id in envs:
            results[env_id] = {**run_env(env_id, args, Path(tmp)), "budget": budget(args)}
            if args.record:  # the others read just now: another run may have recorded its envs meanwhile
                kept = read_record(args.record).get("envs", {}) if args.keep_others else {}
                others = {k: v for k, v in kept.items() if k not in envs}
                write_record(args.record, {"envs": {**others, **results}})
    print(table(results))


def read_record(name: str) -> dict[str, Any]:
    """The results of the record ``name`` (empty when there is none yet)."""
    path = Path(__file__).parent / "results" / f"{name}.json"
    return json.loads(path.read_text())["results"] if path.exists() else {}


if __name__ == "__main__":
    main()
