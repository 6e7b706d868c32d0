"""A small verifiers (v1) taskset written for the tests: single-turn sums, on verifiers' own base
classes (``vf.TaskData``, ``vf.Task`` with a ``@vf.reward`` rubric, ``vf.Taskset``). Its id, for
verifiers' loader, is the module's name (``verifiers-fixture`` with ``tests/`` on the path);
``tests.verifiers_fixture:SumTaskset`` names it from the repository's root.

``scorer_fails`` breaks the rubric on purpose: ``"on_word"`` raises when the reply says CRASH (a
reply the policy chooses), ``"always"`` raises whatever the reply (a broken scorer).
"""

from __future__ import annotations

from typing import Literal

import verifiers.v1 as vf


class SumData(vf.TaskData):
    answer: str
    """The reference answer."""
    scorer_fails: str = "never"


class SumTask(vf.Task[SumData]):
    @vf.reward(weight=1.0)
    async def exact(self, trace: vf.Trace) -> float:
        if self.data.scorer_fails == "always" or (self.data.scorer_fails == "on_word" and "CRASH" in trace.last_reply):
            raise RuntimeError("the scorer broke")
        return float(trace.last_reply.split()[-1:] == [self.data.answer])

    @vf.metric
    async def reply_chars(self, trace: vf.Trace) -> float:
        return float(len(trace.last_reply))


class SumConfig(vf.TasksetConfig):
    num_tasks: int = 5
    """How many sums."""
    scorer_fails: Literal["never", "on_word", "always"] = "never"


class SumTaskset(vf.Taskset[SumTask, SumConfig]):
    def load(self) -> list[SumTask]:
        return [
            SumTask(SumData(id=f"sum-{i}", prompt=f"What is {i} + {2 * i + 1}? End with the number.",
                            system_prompt="Answer briefly.", answer=str(3 * i + 1), scorer_fails=self.config.scorer_fails),
                    self.config.task)
            for i in range(self.config.num_tasks)
        ]


__all__ = ["SumTaskset"]
