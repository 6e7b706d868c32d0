"""Tests of mathgym.agents: the policy, chat formatting, fast decoding, the endpoint, reward models."""
