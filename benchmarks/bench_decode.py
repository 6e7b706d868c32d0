"""The native sampler's decoding step: the lean step (mathgym/agents/fast/lean_decode.py) vs the
model's own forward, on the same prompts, seeds and weights, alternating, in one run.

Three ways: the lean step as the sampler takes it (a small model's weights joined, see
``LeanStep.joined_weights``), the lean step calling every module (``unjoined``), and the model's
own forward.

    python benchmarks/bench_decode.py --device cpu --record decode_cpu
    python benchmarks/bench_decode.py --device cuda --dtype bfloat16 float32 --record decode_cuda

Models: the tiny model's architecture (random weights: its samples run long) and a random model of
Qwen2-0.5B's shape (24 layers, width 896, 14 query heads over 2 key/value heads; the tiny model's
vocabulary). Each sample's seed is fixed, so the two ways draw the same samples wherever their
logits agree to the bit; ``same`` counts them.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from mathgym.agents import backends
from mathgym.agents.fast.lean_decode import LeanStep, lean_step
from mathgym.agents.policy import LLMPolicy, SamplingParams
from mathgym.agents.tiny import build_tiny_model

sys.path.insert(0, str(Path(__file__).resolve().parent))
from record import write_record  # noqa: E402

TEXTS = ("What is 12 + 30? Let us think.", "Name a prime and more", "Count to ten:", "Hello there")


def build(shape: str, path: Path) -> Path:
    """Save a random model of ``shape`` (``tiny`` or ``qwen2-0.5b``) with the tiny tokenizer at ``path``."""
    model, tokenizer = build_tiny_model(seed=0)
    if shape == "qwen2-0.5b":
        from transformers import Qwen2Config, Qwen2ForCausalLM

        torch.manual_seed(0)
        model = Qwen2ForCausalLM(Qwen2Config(
            vocab_size=len(tokenizer), hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
            num_key_value_heads=2, max_position_embeddings=4096, tie_word_embeddings=True, bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
        ))
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


WAYS = ("lean", "unjoined", "forward")
_JOINED_WEIGHTS = LeanStep.joined_weights


def timed(policy: LLMPolicy, prompts: list[list[int]], tokens: int, way: str) -> tuple[float, list]:
    backends.lean_step = (lambda model: None) if way == "forward" else lean_step
    LeanStep.joined_weights = (lambda self: None) if way == "unjoined" else _JOINED_WEIGHTS
    sync = torch.cuda.synchronize if policy.device.type == "cuda" else (lambda: None)
    sync()
    start = time.perf_counter()
    out = policy.generate(prompts, SamplingParams(max_new_tokens=tokens), seeds=list(range(len(prompts))))
    sync()
    return time.perf_counter() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", nargs="+", default=["float32"])
    parser.add_argument("--shapes", nargs="+", default=["tiny", "qwen2-0.5b"], choices=["tiny", "qwen2-0.5b"])
    parser.add_argument("--samples", type=int, default=16, help="samples of each of the 4 prompts")
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each way, alternating; the median is kept")
    parser.add_argument("--threads", type=int, default=0, help="torch threads on the CPU (0: torch's default)")
    parser.add_argument("--record", default="", help="write benchmarks/results/NAME.json")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    rows, recorded = [], {"samples": 4 * args.samples, "max_new_tokens": args.max_new_tokens, "device": args.device}
    with tempfile.TemporaryDirectory(prefix="bench-decode-") as tmp:
        for shape in args.shapes:
            path = build(shape, Path(tmp) / shape)
            for dtype in args.dtype:
                policy = LLMPolicy.from_pretrained(str(path), device=args.device, dtype=dtype)
                if lean_step(policy.model) is None:
                    raise SystemExit(f"{shape} {dtype}: the lean step refused the model")
                prompts = [policy.chat.encode(t) for t in TEXTS for _ in range(args.samples)]
                times: dict[str, list[float]] = {way: [] for way in WAYS}
                outs = {}
                for _ in range(args.repeat):
                    for way in WAYS:
                        seconds, outs[way] = timed(policy, prompts, args.max_new_tokens, way)
                        times[way].append(seconds)
                ours, unjoined, theirs = (statistics.median(times[way]) for way in WAYS)
                same = sum(a.token_ids == b.token_ids for a, b in zip(outs["lean"], outs["forward"]))
                mean_tokens = statistics.mean(len(g.token_ids) for g in outs["forward"])
                joined = lean_step(policy.model).joined_weights() is not None
                rows.append((shape, dtype, joined, ours, unjoined, theirs, same, len(prompts), mean_tokens))
                key = f"{shape}_{dtype}"
                recorded[f"{key}_lean_s"], recorded[f"{key}_model_forward_s"] = round(ours, 3), round(theirs, 3)
                recorded[f"{key}_unjoined_s"], recorded[f"{key}_joined"] = round(unjoined, 3), joined
                recorded[f"{key}_ratio"] = round(theirs / ours, 2)
                recorded[f"{key}_unjoined_ratio"] = round(theirs / unjoined, 2)
                recorded[f"{key}_same_samples"] = same
                recorded[f"{key}_mean_tokens"] = round(mean_tokens, 1)
    backends.lean_step, LeanStep.joined_weights = lean_step, _JOINED_WEIGHTS
    print(f"\n{4 * args.samples} samples, up to {args.max_new_tokens} tokens, on {args.device}, median of {args.repeat}\n")
    print("| model | dtype | weights joined | lean step s | unjoined s | model's forward s | forward / lean | forward / unjoined | same samples | mean tokens |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for shape, dtype, joined, ours, unjoined, theirs, same, count, mean_tokens in rows:
        print(f"| {shape} | {dtype} | {'yes' if joined else 'no'} | {ours:.3f} | {unjoined:.3f} | {theirs:.3f} | {theirs / ours:.2f}x | "
              f"{theirs / unjoined:.2f}x | {same}/{count} | {mean_tokens:.1f} |")
    if args.record:
        write_record(args.record, recorded)


if __name__ == "__main__":
    main()
