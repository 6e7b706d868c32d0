"""Adapters that let other trainers use mathgym envs, one module per library.

Each module imports its own third-party library and is imported only when used
(nothing else in mathgym imports them), so ``import mathgym`` never needs them:

- :mod:`mathgym.integrations.trl`: TRL's ``GRPOTrainer`` (``rollout_func``, ``environment_factory``).
- :mod:`mathgym.integrations.verl`: verl's agent loop (``AgentLoopBase``) and custom reward function.
- :mod:`mathgym.integrations.openrlhf`: OpenRLHF's ``--agent_func_path`` agent and reward function.
- :mod:`mathgym.integrations.sb3`: Stable-Baselines3, through a token-level MDP wrapper.
- :mod:`mathgym.integrations.ray`: the Ray executor (env steps and reward scoring on Ray actors).
"""
