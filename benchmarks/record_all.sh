#!/usr/bin/env bash
# Every recorded result the docs quote (benchmarks/results/*.json), one command each, in the order
# they were last taken. Run on an otherwise idle machine from the repository root with the
# train, dev and bench extras installed; tests/test_docs_figures.py then says which page quotes
# a number that moved.
set -euo pipefail
python benchmarks/train_run.py --record train_default
python benchmarks/train_run.py --record train_ppo -- --algo ppo --steps 40 --num-tasks 16 --group-size 4 --learning-rate 1e-4 --value-learning-rate 3e-3
python benchmarks/train_run.py --record train_dpo -- --algo dpo --steps 60 --num-tasks 16 --group-size 8 --learning-rate 1e-4 --beta 0.1
python benchmarks/bench_code.py --repeat 3 --floor --ideal --cpu 3 --record code
python benchmarks/bench_math.py --record math
python benchmarks/bench_scale.py --envs 8 --rounds 16 --record scale
python benchmarks/grpo_vs_trl.py --steps 30 --threads 2 --eval-tasks 500 --seed 0 1 2 --record grpo_vs_trl
python benchmarks/grpo_vs_trl.py --steps 30 --threads 2 --eval-tasks 500 --seed 0 1 2 3 4 --record grpo_vs_trl_5seeds
python benchmarks/grpo_vs_trl.py --steps 30 --threads 2 --eval-tasks 500 --seed 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 --record grpo_vs_trl_seeds_20_39
# grpo_vs_trl_seeds_20_39_ws47: the same from a warm start built before the prefix tree; not re-takeable from a fresh cache (its record's note)
python benchmarks/toolbox.py --seed 0 1 2 3 4 --record toolbox
python benchmarks/distill.py --steps 30 --record distill
python benchmarks/bench_turns.py --record turn_cache
python benchmarks/bench_score_ahead.py --record score_ahead
python benchmarks/bench_long_answers.py --repeat 20 --record long_answers
python benchmarks/test_suite.py --record test_suite    # the README quotes it: run from a clean clone and venv
python benchmarks/warm_start_envs.py --all --first-step-only --record warm_start_envs
python benchmarks/prm_loop.py --record prm_loop    # tens of minutes
python benchmarks/bench_decode.py --device cpu --shapes tiny --repeat 5 --threads 2 --record decode_cpu
python benchmarks/warm_start_tune.py --steps 800 --schedule linear constant --order-seed 0 1 --eval-tasks 400 --record warm_start_tune    # ~20 min
python benchmarks/warm_start_tune.py --steps 800 --schedule constant linear --order-seed 0 1 2 --grpo-steps 240 --grpo-eval-every 40 --eval-tasks 400 --grpo-lr-schedule constant --record grpo_steps_tune    # ~20 min; recorded when GRPO's default rate was constant, before the option
python benchmarks/warm_start_tune.py --steps 800 --schedule constant --order-seed 3 4 --grpo-steps 240 --grpo-eval-every 40 --eval-tasks 400 --grpo-lr-schedule constant --record grpo_steps_tune_more    # ~8 min; likewise
python benchmarks/warm_start_tune.py --steps 800 --schedule constant --order-seed 0 1 2 3 4 --grpo-steps 200 --grpo-eval-every 40 --eval-tasks 400 --record grpo_steps_tune_linear    # ~17 min: GRPO's defaults as they are
# on a GPU machine: python benchmarks/bench_decode.py --device cuda --dtype bfloat16 float32 --record decode_cuda
# env_learning takes hours on 2 cores (an env at a time, --keep-others; each env's command and budget
# are in docs/benchmarks.md): python benchmarks/env_learning.py --env ID --eval-tasks 30 --eval-every 10 --record env_learning --keep-others
# the peers in their own venv: python3 -m venv /tmp/peers && /tmp/peers/bin/pip install ".[peers]"
python benchmarks/bench_peers.py --peer-python "${PEER_PYTHON:-/tmp/peers/bin/python}" --record peers
python benchmarks/grpo_vs_trl_multiturn.py --record grpo_vs_trl_multiturn    # ~6-8 min idle (estimated); the first record was taken under load
python benchmarks/endpoint.py --record endpoint    # ~1 min
python benchmarks/prm_step.py --compare-batch-size 64 --record prm_step    # ~3 min idle
python benchmarks/remote_env.py --record remote_env    # ~1 min; the first record was taken under load
