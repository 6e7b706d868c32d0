"""The ids of envs that come from other RL-env formats (OpenEnv, verifiers): ids only, no import
of those packages, so ``import mathgym`` stays fast and works without them."""

from __future__ import annotations

from mathgym.catalogue import EnvFacts
from mathgym.registry import register_env

#: (id, entry point, one-line description) of each format's env.
INTEROP_ENVS: tuple[tuple[str, str, str], ...] = (
    ("Verifiers-v0", "mathgym.envs.interop.verifiers_env:VerifiersEnv",
     "A verifiers (v1) environment (env= a taskset id or object): its tasks, its multi-turn protocol, its rubric's reward; needs mathgym[verifiers]."),
    ("OpenEnv-v0", "mathgym.envs.interop.openenv_env:OpenEnvEnv",
     "Any OpenEnv environment (env= 'module:Class' in process, or a served env's URL) as a text env; needs mathgym[openenv]."),
    ("NeMoGym-v0", "mathgym.envs.interop.nemo_gym_env:NeMoGymEnv",
     "A NeMo-Gym resources server (server_url=, or resources_server= started with a Python >= 3.12 that has nemo-gym) and its JSONL task set; /verify rewards, tools multi-turn."),
)

#: Catalogue facts of each format's env: what it plays (tasks, turns, licence) is the wrapped env's.
INTEROP_FACTS: dict[str, EnvFacts] = {
    "OpenEnv-v0": EnvFacts("interop", "multi", licence="the OpenEnv env's own", extra="openenv"),
    "Verifiers-v0": EnvFacts("interop", "multi", licence="the verifiers taskset's own", extra="verifiers"),
    "NeMoGym-v0": EnvFacts("interop", "multi", licence="the NeMo-Gym task set's own", extra="nemo-gym"),
}


def register_interop_envs() -> None:
    """Register the ids of :data:`INTEROP_ENVS` (idempotent)."""
    for env_id, entry_point, description in INTEROP_ENVS:
        register_env(env_id, entry_point, description, order_enforce=False, facts=INTEROP_FACTS.get(env_id))
