"""The code sandbox: untrusted Python runs in a contained child process, never in the caller.

Use it through :class:`CodeSandbox` (or the process-wide :func:`default_sandbox`); see
``docs/rewards.md`` for what a job sees and ``docs/sandbox-internals.md`` for the map of its
processes and pipes. The files of this folder say which side of the trust boundary they are on:

- ``trusted_caller.py``: the API in the caller's process (jobs out, replies decoded and judged).
- ``trusted_plan.py``: assert tests turned into plain calls; their outputs compared here.
- ``trusted_worker.py``: the warm worker (its own process, stand-alone): forks one child per job
  and the judge host, and reads only what the children write on their pipes.
- ``trusted_judge.py``: the judge process, which runs a task's tests and calls the program's
  functions across the boundary.
- ``codec.py``: shared and pure: how values cross, and the bounds on what comes back.
- ``containment.py``: what a forked child does to itself before any untrusted code runs.
- ``untrusted_child.py``: what runs in the contained child: the program, its calls, the call server.
"""

from mathgym.rewards.base import Status
from mathgym.rewards.sandbox.trusted_caller import (
    NOT_RUN,
    SPANS,
    CodeSandbox,
    ExecutionResult,
    SandboxLimits,
    TestCase,
    TestOutcome,
    checked_files,
    default_hidden_paths,
    default_sandbox,
)

__all__ = [
    "NOT_RUN",
    "SPANS",
    "CodeSandbox",
    "ExecutionResult",
    "SandboxLimits",
    "Status",
    "TestCase",
    "TestOutcome",
    "checked_files",
    "default_hidden_paths",
    "default_sandbox",
]
