"""Self-play GRPO on a two-player game: the evaluation against the game's fixed expert, step by step.

The policy plays both seats of the game (``--self-play``, :mod:`mathgym.algos.self_play`); every
``--eval-every`` steps it plays ``--eval-tasks`` greedy games against the env's expert
(``gym.make(GAME)``, seats alternating), and the table prints its win rate (``eval/pass@1``: a won
game is ``correct``), its mean reward (win +1, draw 0, loss or illegal move -1), and the share of self-play
games a forfeit (an illegal move) ended.

    python benchmarks/self_play.py                          # TicTacToe-v0, the untrained tiny model
    python benchmarks/self_play.py --record self_play       # also write benchmarks/results/self_play.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from record import write_record  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="TicTacToe-v0", help="a two-player game id")
    parser.add_argument("--env-kwargs", default="{}", help="the versus env's options (JSON), e.g. the expert's opponent_randomness")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--eval-every", type=int, default=10)
    parser.add_argument("--eval-tasks", type=int, default=40)
    parser.add_argument("--num-tasks", type=int, default=8)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=4)
    parser.add_argument("--learning-rate", type=float, default=3e-3)
    parser.add_argument("--pool", type=int, default=2, help="self_play_pool: earlier snapshots as opponents")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--record", default="", help="write benchmarks/results/NAME.json")
    args = parser.parse_args()

    from mathgym.agents.tiny import tiny_model_path
    from mathgym.algos.grpo import GRPOConfig, GRPOTrainer

    run_dir = Path(tempfile.mkdtemp(prefix="self-play-")) / "run"
    config = GRPOConfig(
        env=args.game, env_kwargs=json.loads(args.env_kwargs), model=str(tiny_model_path()), warm_start_steps=0,
        self_play=True, self_play_pool=args.pool, self_play_pool_every=5, num_tasks=args.num_tasks,
        group_size=args.group_size, steps=args.steps, learning_rate=args.learning_rate, lr_schedule="constant",
        dynamic_sampling=False, max_new_tokens=args.max_new_tokens, max_episode_tokens=768, eval_every=args.eval_every,
        eval_tasks=args.eval_tasks, seed=args.seed, progress=False, run_dir=str(run_dir), save_every=0, log_samples=0,
    )
    start = time.perf_counter()
    trainer = GRPOTrainer(config)
    trainer.train()
    seconds = time.perf_counter() - start
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    curve = [r for r in rows if "eval/pass@1" in r]
    print(f"{'step':>5} {'win rate':>9} {'reward':>7}")
    for r in curve:
        print(f"{r['step']:>5} {r['eval/pass@1']:>9.1%} {r['eval/reward']:>7.2f}")
    trained = [r for r in rows if "rollout/forfeits" in r]
    print(f"self-play forfeits: {trained[0]['rollout/forfeits']:.0%} (step 1) -> {trained[-1]['rollout/forfeits']:.0%} "
          f"(step {trained[-1]['step']}); {seconds:.0f}s")
    if args.record:
        results = {
            "game": args.game, "env_kwargs": json.loads(args.env_kwargs), "model": "tiny (untrained)", "steps": args.steps,
            "num_tasks": args.num_tasks, "group_size": args.group_size, "pool": args.pool, "seconds": round(seconds, 1),
            "curve": [{"step": r["step"], "win_rate": round(r["eval/pass@1"], 4), "reward": round(r["eval/reward"], 4)} for r in curve],
            "self_play_forfeits": [round(r["rollout/forfeits"], 4) for r in trained],
        }
        write_record(args.record, results)


if __name__ == "__main__":
    main()
