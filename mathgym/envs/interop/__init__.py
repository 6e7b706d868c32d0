"""Envs from other RL-env formats: OpenEnv, verifiers, NeMo-Gym, reasoning-gym and TextArena's single-player games."""
