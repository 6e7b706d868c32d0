"""mathgym's built-in environments and their registration."""

from __future__ import annotations

import gymnasium as gym

from mathgym.catalogue import GENERATED, EnvFacts
from mathgym.registry import register_alias, register_env

#: The gymnasium id of the client of ``mathgym serve`` (:mod:`mathgym.envs.served.remote`).
REMOTE_ENV_ID = "mathgym/Remote-v0"

#: (id, entry point, one-line description, catalogue facts) of every built-in env.
BUILTIN_ENVS: tuple[tuple[str, str, str, EnvFacts], ...] = (
    ("MathReason-v0", "mathgym.envs.math.math_reason:MathReasonEnv", "Single-turn math: answer in \\boxed{}, verified (generator levels 0-4, GSM8K/MATH data).",
     EnvFacts("math", "single", (0, 1, 2, 3, 4), "difficulty", licence=f"{GENERATED}; GSM8K, MATH data sets (MIT)")),
    ("Countdown-v0", "mathgym.envs.math.countdown:CountdownEnv", "Single-turn: reach a target with given numbers and + - * / (guaranteed solvable; 3-6 numbers).",
     EnvFacts("math", "single", (3, 4, 5, 6), "num_numbers")),
    ("GuessNumber-v0", "mathgym.envs.games.guess_number:GuessNumberEnv", "Multi-turn game: find a secret integer from higher/lower feedback.",
     EnvFacts("games", "multi")),
    ("Sokoban-v0", "mathgym.envs.games.sokoban:SokobanEnv", "Multi-turn game: push boxes onto targets in a text grid (generated levels, BFS-verified solvable).",
     EnvFacts("games", "multi", (5, 6, 7, 8, 9), "size")),
    ("FrozenLakeText-v0", "mathgym.envs.games.frozen_lake:FrozenLakeEnv", "Multi-turn game: text front end over gymnasium's FrozenLake-v1 (random valid maps).",
     EnvFacts("games", "multi")),
    ("CodeSandbox-v0", "mathgym.envs.coding.code:CodeSandboxEnv", "Single-turn: write a Python function graded by hidden tests in the sandbox (built-in 48 tasks, HumanEval, MBPP/HumanEval JSONL).",
     EnvFacts("code", "single", (0, 1, 2, 3), "level", licence=f"{GENERATED}; HumanEval (MIT), MBPP (CC BY 4.0) from files")),
    ("CodeRepair-v0", "mathgym.envs.coding.code:CodeRepairEnv", "Multi-turn: submit code, read the failing tests' output, fix it within max_turns.",
     EnvFacts("code", "multi", (0, 1, 2, 3), "level", licence=f"{GENERATED}; HumanEval (MIT), MBPP (CC BY 4.0) from files")),
    ("RepoRepair-v0", "mathgym.envs.repo.repo_repair:RepoRepairEnv", "Multi-turn agentic: fix injected bugs in a generated Python repo with run/read/write/patch/test commands in the sandbox; hidden tests grade.",
     EnvFacts("swe", "multi", (0, 1, 2), "level", ("shell", "read", "write", "patch", "test"))),
    ("MathTool-v0", "mathgym.envs.math.math_tool:MathToolEnv", "Multi-turn math with a Python tool (<python>...</python> runs in the sandbox); \\boxed{} answer ends it.",
     EnvFacts("math", "multi", (0, 1, 2, 3, 4), "difficulty", ("python",), f"{GENERATED}; GSM8K, MATH data sets (MIT)")),
    ("MathStep-v0", "mathgym.envs.math.math_step:MathStepEnv", "Multi-turn math, one reasoning step per turn; pluggable process reward (default: outcome on the last step).",
     EnvFacts("math", "multi", (0, 1, 2, 3, 4), "difficulty", licence=f"{GENERATED}; GSM8K, MATH data sets (MIT)")),
    ("ReasoningGym-v0", "mathgym.envs.interop.reasoning_gym_env:ReasoningGymEnv", "Any reasoning-gym task (task=NAME), scored by its score_answer; needs mathgym[reasoning-gym].",
     EnvFacts("reasoning", "single", licence="reasoning-gym's generators (Apache-2.0)", extra="reasoning-gym")),
    ("Wordle-v0", "mathgym.envs.games.wordle:WordleEnv", "Multi-turn game: find a secret English word from G/Y/_ letter feedback (SCOWL words, 4-6 letters).",
     EnvFacts("games", "multi", (0, 1, 2, 3, 4), "difficulty", licence="SCOWL word lists (permissive; samples/LICENSE-scowl.txt)")),
    ("Mastermind-v0", "mathgym.envs.games.mastermind:MastermindEnv", "Multi-turn game: break a secret digit code from right-place / wrong-place counts.",
     EnvFacts("games", "multi", (0, 1, 2, 3, 4), "difficulty")),
    ("Minesweeper-v0", "mathgym.envs.games.minesweeper:MinesweeperEnv", "Multi-turn game: open every safe cell (boards solvable by logic from the given opening).",
     EnvFacts("games", "multi", (0, 1, 2, 3, 4), "difficulty")),
    ("Game2048-v0", "mathgym.envs.games.game2048:Game2048Env", "Multi-turn game: slide and merge tiles to reach a target tile (seeded spawns).",
     EnvFacts("games", "multi", (0, 1, 2, 3, 4), "difficulty")),
    ("Hanoi-v0", "mathgym.envs.games.hanoi:HanoiEnv", "Multi-turn game: Tower of Hanoi from a seeded position (optimal expert).",
     EnvFacts("games", "multi", (0, 1, 2, 3, 4), "difficulty")),
    ("Hangman-v0", "mathgym.envs.games.hangman:HangmanEnv", "Multi-turn game: find a secret word letter by letter before the lives run out.",
     EnvFacts("games", "multi", (0, 1, 2, 3, 4), "difficulty", licence="SCOWL word lists (permissive; samples/LICENSE-scowl.txt)")),
    ("SQLQuery-v0", "mathgym.envs.sql.sql_query:SQLQueryEnv", "Multi-turn: answer a question about a SQLite database with one SQL query; read-only queries first (generated levels 0-3, or Spider / BIRD data with dataset= and db_dir=).",
     EnvFacts("sql", "multi", (0, 1, 2, 3), "difficulty", ("sql",), f"{GENERATED}; Spider, BIRD data sets (CC BY-SA 4.0)")),
    ("InstructionFollow-v0", "mathgym.envs.writing.instruction_follow:InstructionFollowEnv", "Single-turn: a writing request with verifiable constraints (IFEval families); reward = share met.",
     EnvFacts("instructions", "single", (1, 2, 3, 4, 5), "difficulty", licence=f"{GENERATED}; IFEval data set (Apache-2.0)")),
    ("MultiTask-v0", "mathgym.envs.multi_task:MultiTaskEnv", "Weighted mixture of env ids (envs={id: weight}); info['source_env'] names the source.",
     EnvFacts("mixture", "multi", licence="those of its envs")),
    ("OpenQA-v0", "mathgym.envs.writing.open_qa:OpenQAEnv", "Single-turn: open-ended questions graded against reference answers by an LLM judge (judge_url + judge_model, or judge=); 50 built-in questions.",
     EnvFacts("qa", "single", licence="50 questions written for mathgym (Apache-2.0)")),
    ("MCPTools-v0", "mathgym.envs.tools.mcp_tools:MCPToolsEnv", "Multi-turn math with tools from any MCP server (server= a stdio command or an http URL); \\boxed{} answer ends it; needs mathgym[mcp].",
     EnvFacts("math", "multi", (0, 1, 2, 3, 4), "difficulty", ("mcp",), f"{GENERATED}; GSM8K, MATH data sets (MIT)", "mcp")),
    ("Terminal-v0", "mathgym.envs.repo.terminal:TerminalEnv", "Multi-turn agentic: a terminal-bench or Harbor task directory in a container (podman or docker, no network), RepoRepair's commands; the task's tests grade.",
     EnvFacts("swe", "multi", tools=("shell", "read", "write", "patch"), licence="sample tasks written for mathgym (Apache-2.0); tasks=DIR: theirs")),
)


#: Old id → new id. An old id still makes its env, with a DeprecationWarning; ``mathgym envs`` lists only the new.
DEPRECATED_ALIASES: dict[str, str] = {
    # gymnasium took "FrozenLake-v0" for an old version of its own FrozenLake-v1 and warned it was out of date.
    "FrozenLake-v0": "FrozenLakeText-v0",
}


def register_builtin_envs() -> None:
    """Register every built-in env with gymnasium (idempotent).

    The envs check the order of calls themselves (``step`` before ``reset`` raises
    :class:`~mathgym.errors.ResetNeededError`, which is also gymnasium's ``ResetNeeded``), so
    gymnasium's ``OrderEnforcing`` wrapper is left off.
    """
    for env_id, entry_point, description, *facts in BUILTIN_ENVS:
        register_env(env_id, entry_point, description, order_enforce=False, facts=facts[0] if facts else None)
    for old, new in DEPRECATED_ALIASES.items():
        register_alias(old, new)
    # A client of an env served by `mathgym serve`: a gymnasium id only (not in the catalogue, whose
    # every entry is contract-checked locally), e.g. gym.make(REMOTE_ENV_ID, url=..., env_id=...).
    if REMOTE_ENV_ID not in gym.registry:
        gym.register(REMOTE_ENV_ID, "mathgym.envs.served.remote:make_remote_env", disable_env_checker=True, order_enforce=False)
    from mathgym.envs.interop.reasoning_gym_tasks import register_reasoning_gym_envs  # noqa: PLC0415 - ids only, no reasoning-gym import

    register_reasoning_gym_envs()
    from mathgym.envs.multiagent import register_two_player_envs  # noqa: PLC0415 - ids only, no textarena import

    register_two_player_envs()
    from mathgym.envs.interop.textarena_single import register_textarena_single_player_envs  # noqa: PLC0415 - ids only, no textarena import

    register_textarena_single_player_envs()
    from mathgym.envs.interop.interop_ids import register_interop_envs  # noqa: PLC0415 - ids only, no openenv / verifiers import

    register_interop_envs()
