"""Reward workers: pure-Python scorers usable inside envs and on their own."""

from mathgym.rewards.base import INFRA_STATUSES, RewardResult, Status
from mathgym.rewards.extract import boxed_contents, extract_answer, last_boxed
from mathgym.rewards.math import MathVerifier, parse_number

__all__ = ["INFRA_STATUSES", "MathVerifier", "RewardResult", "Status", "boxed_contents", "extract_answer", "last_boxed", "parse_number"]
