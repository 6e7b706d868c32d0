"""TRL's GRPOTrainer on a multi-turn mathgym env, on a CPU, in seconds (the embedded tiny model).

    python examples/integrations/trl_grpo.py                      # rollout_func, GuessNumber-v0
    python examples/integrations/trl_grpo.py --env MathReason-v0  # any env id works
"""

from __future__ import annotations

import argparse
import os
import tempfile

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402

from mathgym.agents.tiny import tiny_model_path  # noqa: E402
from mathgym.integrations import trl as mg  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="GuessNumber-v0")
    parser.add_argument("--steps", type=int, default=2)
    args = parser.parse_args()

    path = str(tiny_model_path())  # swap in any chat model (hub id or directory)
    env = mg.TRLEnv(args.env, max_turns=5)
    trainer = GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(path),
        processing_class=AutoTokenizer.from_pretrained(path),
        args=GRPOConfig(output_dir=tempfile.mkdtemp(), per_device_train_batch_size=4, num_generations=2,
                        max_completion_length=16, max_steps=args.steps, logging_steps=1, report_to=[],
                        use_cpu=True, save_strategy="no"),
        train_dataset=env.dataset(64),
        rollout_func=env.rollout_func,
        reward_funcs=env.reward_funcs,
    )
    trainer.train()
    for row in trainer.state.log_history[:-1]:
        print({k: row[k] for k in ("rewards/env_reward/mean", "rollout/env_turns", "rollout/correct") if k in row})


if __name__ == "__main__":
    main()
