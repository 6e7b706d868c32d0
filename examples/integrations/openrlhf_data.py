"""Write an OpenRLHF JSONL for a mathgym env (labels name the env task; needs openrlhf).

    python examples/integrations/openrlhf_data.py --env GuessNumber-v0 --model Qwen/Qwen2.5-0.5B-Instruct
"""

from __future__ import annotations

import argparse
import json

from mathgym.integrations.openrlhf import openrlhf_rows

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--env", default="GuessNumber-v0")
parser.add_argument("--model", required=True, help="the model being trained: its chat template renders env replies")
parser.add_argument("--n", type=int, default=10_000)
parser.add_argument("--out", default="mathgym_openrlhf.jsonl")
args = parser.parse_args()
with open(args.out, "w") as f:
    for row in openrlhf_rows(args.env, args.n, tokenizer=args.model):
        f.write(json.dumps(row) + "\n")
print(f"wrote {args.n} rows to {args.out}")
