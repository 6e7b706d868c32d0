"""A small multi-turn verifiers (v1) environment written for the tests: guess a number from 1 to 20.
The package exports its taskset and its env (``vf.Env``) together, so verifiers' loader pairs them
by the taskset id (``verifiers-fixture-game`` with ``tests/`` on the path). The env's ``run`` is the
user: each guess gets "higher" / "lower" back; the env records ``solved`` (1 when guessed) and the
task's rubric adds ``efficiency`` (fewer guesses, more). Tasks have no answer field: a broken
scorer here is always the reply's fault.
"""

from __future__ import annotations

import verifiers.v1 as vf


class GuessData(vf.TaskData):
    secret: int


class GuessTask(vf.Task[GuessData]):
    @vf.reward(weight=0.0)
    async def efficiency(self, trace: vf.Trace) -> float:
        return 1.0 / max(1, trace.num_turns)


class GuessConfig(vf.TasksetConfig):
    num_tasks: int = 4


class GuessTaskset(vf.Taskset[GuessTask, GuessConfig]):
    def load(self) -> list[GuessTask]:
        return [GuessTask(GuessData(name=f"guess#{i}", prompt="Guess my number from 1 to 20. Reply with one number.",
                                    secret=(7 * i + 3) % 20 + 1), self.config.task)
                for i in range(self.config.num_tasks)]


class GuessEnvConfig(vf.EnvConfig):
    player: vf.AgentConfig = vf.AgentConfig()


class GuessEnv(vf.Env[GuessEnvConfig]):
    async def run(self, task, agents):
        solved = 0.0
        async with agents.player.interaction(task) as interaction:
            segment = await interaction.turn()
            while not segment.terminated:
                try:
                    guess = int(segment.last_reply)
                except ValueError:
                    segment = await interaction.turn("That is not a number. Guess again.")
                    continue
                if guess == task.data.secret:
                    solved = 1.0
                    break
                segment = await interaction.turn("higher" if guess < task.data.secret else "lower")
        interaction.trace.record_reward("solved", solved)


__all__ = ["GuessEnv", "GuessTaskset"]
