"""Tests of the code sandbox (``mathgym/rewards/sandbox/``): its API, its containment, the trusted judge and plan, the codec.

Some of them run again as a non-root user in CI (``.ci/run``).
"""
