"""Write verl parquet files for a mathgym env (rows with agent_name=mathgym; needs verl + pandas).

    python examples/integrations/verl_data.py --env GuessNumber-v0 --out data/guess
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from mathgym.integrations.verl import verl_rows

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--env", default="GuessNumber-v0")
parser.add_argument("--out", default="data/mathgym")
parser.add_argument("--train", type=int, default=10_000)
parser.add_argument("--test", type=int, default=500)
args = parser.parse_args()
out = Path(args.out)
out.mkdir(parents=True, exist_ok=True)
pd.DataFrame(verl_rows(args.env, args.train)).to_parquet(out / "train.parquet")
pd.DataFrame(verl_rows(args.env, args.test, start_seed=10**6)).to_parquet(out / "test.parquet")
print(f"wrote {out}/train.parquet and {out}/test.parquet")
