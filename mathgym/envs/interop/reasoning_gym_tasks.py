"""Every reasoning-gym task as its own env id: ``ReasoningGym/<task>-v0``.

The ids are registered from the list shipped here (:data:`REASONING_GYM_TASKS`), so
``import mathgym`` stays fast and works without reasoning-gym installed; a test checks the list
against the installed package (``python -m mathgym.envs.interop.reasoning_gym_tasks`` prints the list
of the installed version). Each id makes a :class:`ReasoningGymTaskEnv`: ``ReasoningGym-v0``
with its ``task`` fixed, plus ``difficulty``, a level of the task's own reasoning-gym curriculum.
``composite`` (a mixture that needs a config of other tasks) has no id of its own: use
``ReasoningGym-v0`` with ``task="composite"`` or ``MultiTask-v0``.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import random
from collections.abc import Mapping
from typing import Any

from mathgym.catalogue import EnvFacts
from mathgym.envs.interop.reasoning_gym_env import DEFAULT_SYSTEM_PROMPT, ReasoningGymEnv, _reasoning_gym
from mathgym.errors import ConfigError
from mathgym.registry import register_env
from mathgym.spaces import DEFAULT_MAX_LENGTH

#: Env id of task ``task``.
ID_FORMAT = "ReasoningGym/{task}-v0"
#: Tasks without an id of their own (see the module docstring).
WITHOUT_ID = frozenset({"composite"})

#: (task, reasoning-gym category) of every task of reasoning-gym 0.1.25, but ``composite``.
REASONING_GYM_TASKS: tuple[tuple[str, str], ...] = (
    ("ab", "algorithmic"),
    ("acre", "induction"),
    ("advanced_geometry", "geometry"),
    ("aiw", "logic"),
    ("arc_1d", "arc"),
    ("arc_agi", "arc"),
    ("base_conversion", "algorithmic"),
    ("basic_arithmetic", "arithmetic"),
    ("bf", "code"),
    ("binary_alternation", "algorithmic"),
    ("binary_matrix", "algorithmic"),
    ("bitwise_arithmetic", "arithmetic"),
    ("boxnet", "games"),
    ("caesar_cipher", "algorithmic"),
    ("calendar_arithmetic", "arithmetic"),
    ("chain_sum", "arithmetic"),
    ("circuit_logic", "logic"),
    ("codeio", "code"),
    ("coin_flip", "probability"),
    ("color_cube_rotation", "cognition"),
    ("complex_arithmetic", "algebra"),
    ("count_bits", "arithmetic"),
    ("count_primes", "algorithmic"),
    ("countdown", "games"),
    ("course_schedule", "graphs"),
    ("cryptarithm", "algorithmic"),
    ("decimal_arithmetic", "arithmetic"),
    ("decimal_chain_sum", "arithmetic"),
    ("dice", "arithmetic"),
    ("emoji_mystery", "games"),
    ("family_relationships", "graphs"),
    ("figlet_font", "cognition"),
    ("fraction_simplification", "arithmetic"),
    ("futoshiki", "games"),
    ("game_of_life", "algorithmic"),
    ("game_of_life_halting", "algorithmic"),
    ("gcd", "arithmetic"),
    ("graph_color", "algorithmic"),
    ("group_anagrams", "algorithmic"),
    ("gsm_symbolic", "arithmetic"),
    ("intermediate_integration", "algebra"),
    ("isomorphic_strings", "algorithmic"),
    ("jugs", "algorithmic"),
    ("kakurasu", "games"),
    ("knight_swap", "games"),
    ("knights_knaves", "logic"),
    ("largest_island", "graphs"),
    ("lcm", "arithmetic"),
    ("leg_counting", "arithmetic"),
    ("letter_counting", "algorithmic"),
    ("letter_jumble", "algorithmic"),
    ("list_functions", "induction"),
    ("mahjong_puzzle", "games"),
    ("manipulate_matrix", "algorithmic"),
    ("maze", "games"),
    ("mini_sudoku", "games"),
    ("modulo_grid", "cognition"),
    ("n_queens", "games"),
    ("needle_haystack", "cognition"),
    ("number_filtering", "algorithmic"),
    ("number_format", "arithmetic"),
    ("number_sequence", "cognition"),
    ("number_sorting", "algorithmic"),
    ("palindrome_generation", "algorithmic"),
    ("palindrome_partitioning", "algorithmic"),
    ("path_star", "graphs"),
    ("polynomial_equations", "algebra"),
    ("polynomial_multiplication", "algebra"),
    ("pool_matrix", "algorithmic"),
    ("power_function", "arithmetic"),
    ("prime_factorization", "arithmetic"),
    ("products", "arithmetic"),
    ("propositional_logic", "logic"),
    ("puzzle24", "games"),
    ("quantum_lock", "graphs"),
    ("ransom_note", "algorithmic"),
    ("rearc", "arc"),
    ("rectangle_count", "cognition"),
    ("rotate_matrix", "algorithmic"),
    ("rotten_oranges", "algorithmic"),
    ("rubiks_cube", "cognition"),
    ("rush_hour", "games"),
    ("self_reference", "logic"),
    ("sentence_reordering", "algorithmic"),
    ("shortest_path", "graphs"),
    ("simple_equations", "algebra"),
    ("simple_geometry", "geometry"),
    ("simple_integration", "algebra"),
    ("sokoban", "games"),
    ("spell_backward", "algorithmic"),
    ("spiral_matrix", "algorithmic"),
    ("string_insertion", "algorithmic"),
    ("string_manipulation", "algorithmic"),
    ("string_splitting", "algorithmic"),
    ("string_synthesis", "algorithmic"),
    ("sudoku", "games"),
    ("survo", "games"),
    ("syllogism", "logic"),
    ("time_intervals", "arithmetic"),
    ("tower_of_hanoi", "games"),
    ("tsumego", "games"),
    ("word_ladder", "algorithmic"),
    ("word_sequence_reversal", "algorithmic"),
    ("word_sorting", "algorithmic"),
    ("zebra_puzzles", "logic"),
)


def task_env_id(task: str) -> str:
    """``"gcd"`` → ``"ReasoningGym/gcd-v0"``."""
    return ID_FORMAT.format(task=task)


def curriculum_levels(task: str) -> int:
    """Number of difficulty levels of ``task``'s reasoning-gym curriculum (0 when it has none)."""
    from reasoning_gym.factory import CURRICULA

    if task not in CURRICULA:
        return 0
    attributes = _curriculum(task).attributes.values()
    return max((len(a.levels) for a in attributes), default=1)


def _curriculum(task: str) -> Any:
    _reasoning_gym()
    from reasoning_gym.factory import create_curriculum

    return create_curriculum(task)


def curriculum_config(task: str, level: int) -> dict[str, Any]:
    """The options of ``task``'s config at curriculum level ``level``: every attribute at that
    level, or at its highest when it has fewer (values as reasoning-gym makes them)."""
    levels = curriculum_levels(task)
    if isinstance(level, bool) or not isinstance(level, int) or not levels or not 0 <= level < levels:
        what = f"choose an integer from 0 to {levels - 1}" if levels else "this task has no curriculum: leave it unset"
        raise ConfigError(f"difficulty={level!r} is not allowed for reasoning-gym task {task!r}; {what}.")
    curriculum = _curriculum(task)
    curriculum.set_global_level(level)
    config = curriculum.generate_configuration({"seed": 0, "size": 1})
    return {f.name: getattr(config, f.name) for f in dataclasses.fields(config) if f.name not in ("seed", "size")}


@functools.lru_cache(maxsize=32)
def _level_dataset(task: str, level: int, seed: int, size: int, overrides_json: str) -> Any:
    options = {**curriculum_config(task, level), **json.loads(overrides_json)}
    return _reasoning_gym().create_dataset(task, seed=seed, size=size, **options)


class SeededItems:
    """A reasoning-gym data set whose items are drawn with Python's global ``random`` seeded by
    the item (and restored after): a few generators (``list_functions``) use the global generator,
    which made the same item differ from one call to the next."""

    def __init__(self, dataset: Any, seed: int):
        self._dataset, self._seed = dataset, seed

    def __getitem__(self, index: int) -> Any:
        state = random.getstate()
        random.seed(f"{self._seed}:{index}")
        try:
            return self._dataset[index]
        finally:
            random.setstate(state)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("_dataset", "_seed"):
            raise AttributeError(name)
        return getattr(self._dataset, name)


class ReasoningGymTaskEnv(ReasoningGymEnv):
    """One reasoning-gym task (fixed by its id), with the task's curriculum levels as ``difficulty``.

    Everything else is ``ReasoningGym-v0``'s: the same answer extraction, scoring, statuses and
    options. ``task_config`` entries override the level's.

    Args:
        task: The reasoning-gym task (set by the id).
        difficulty: Curriculum level (0 = easiest; ``None``: the task's default config).
        size: Number of items in the generated data set.
        dataset_seed: Seed of the data set; ``reset(seed=...)`` then picks an item.
        task_config: Extra options of the task's config, over the level's.
        score_timeout: Seconds allowed to the task's scorer (``None``: in-process).
        system_prompt: System message; ``""`` for none.
        max_length: Longest observation/action in characters.
        render_mode: ``None`` or ``"ansi"``.
    """

    def __init__(
        self,
        task: str = "basic_arithmetic",
        difficulty: int | None = None,
        size: int = 1000,
        dataset_seed: int = 0,
        task_config: Mapping[str, Any] | None = None,
        score_timeout: float | None = 10.0,
        system_prompt: str | None = DEFAULT_SYSTEM_PROMPT,
        max_length: int = DEFAULT_MAX_LENGTH,
        render_mode: str | None = None,
    ):
        super().__init__(
            task=task,
            size=size,
            dataset_seed=dataset_seed,
            task_config=task_config,
            score_timeout=score_timeout,
            system_prompt=system_prompt,
            max_length=max_length,
            render_mode=render_mode,
        )
        if difficulty is not None:
            curriculum_config(task, difficulty)  # a level the task does not have is one clear error, now
        self.difficulty = difficulty

    @property
    def dataset(self) -> Any:
        """The reasoning-gym data set at the chosen curriculum level (built on first use, cached per process)."""
        if self.difficulty is None:
            return SeededItems(super().dataset, self.dataset_seed)
        try:
            return SeededItems(
                _level_dataset(self.task_name, self.difficulty, self.dataset_seed, self.size, self._config_json),
                self.dataset_seed,
            )
        except ConfigError:
            raise
        except Exception as err:  # noqa: BLE001 - reasoning-gym validates its config with asserts
            raise ConfigError(
                f"reasoning-gym could not build task {self.task_name!r} at difficulty {self.difficulty}: {err!r}"
            ) from None

    def _sample_task(self, options: Mapping[str, Any]) -> Any:
        task = super()._sample_task(options)
        if self.difficulty is None:
            return task
        return dataclasses.replace(task, task_id=f"{task.task_id}-L{self.difficulty}")

    @classmethod
    def catalogue_listing(cls) -> None:
        """Nothing: the task list is ``ReasoningGym-v0``'s."""


def register_reasoning_gym_envs() -> None:
    """Register ``ReasoningGym/<task>-v0`` for every task of :data:`REASONING_GYM_TASKS` (no import of reasoning-gym)."""
    for task, category in REASONING_GYM_TASKS:
        register_env(
            task_env_id(task),
            "mathgym.envs.interop.reasoning_gym_tasks:ReasoningGymTaskEnv",
            f"reasoning-gym {category} task {task} (single turn, difficulty = curriculum level; needs mathgym[reasoning-gym]).",
            order_enforce=False,
            kwargs={"task": task},
            facts=task_facts(category),
        )


#: reasoning-gym categories whose tasks the catalogue files under another domain than "reasoning".
CATEGORY_DOMAINS = {"arithmetic": "math", "algebra": "math", "geometry": "math", "probability": "math", "code": "code", "games": "games"}


def task_facts(category: str) -> EnvFacts:
    """The catalogue facts of a ``ReasoningGym/<task>-v0`` id of reasoning-gym category ``category``
    (its levels are the task's own curriculum's, found only with reasoning-gym installed)."""
    domain = CATEGORY_DOMAINS.get(category, "reasoning")
    return EnvFacts(domain, "single", licence="reasoning-gym's generators (Apache-2.0)", extra="reasoning-gym")


if __name__ == "__main__":  # print the list of the installed reasoning-gym, to paste above
    from reasoning_gym.factory import DATASETS

    for name in sorted(set(DATASETS) - WITHOUT_ID):
        print(f'    ("{name}", "{DATASETS[name][0].__module__.split(".")[1]}"),')
