"""Tests of mathgym.envs: each env family, its tasks and data readers."""
