#!/bin/bash
# Harbor's convention: the reward goes to /logs/verifier/reward.txt.
cd /app
if python3 -m pytest /tests/test_sum.py -q -p no:cacheprovider; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
