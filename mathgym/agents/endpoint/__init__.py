"""The policy behind an OpenAI-compatible endpoint: agent programs' calls become token-faithful episodes.

- :mod:`~mathgym.agents.endpoint.server`: :class:`PolicyEndpoint`, the Chat Completions server (aiohttp),
  its concurrent calls sampled as one batch;
- :mod:`~mathgym.agents.endpoint.recorder`: each call's prompt and completion tokens and log-probs, by run;
- :mod:`~mathgym.agents.endpoint.openai_messages`: OpenAI messages to the chat template's, and back.

The episodes are built, and agent programs driven, in :mod:`mathgym.algos.agent_runs`. See docs/agent-endpoint.md.
"""

from mathgym.agents.endpoint.recorder import CallRecord, Recorder, RunRecord, Sample
from mathgym.agents.endpoint.server import RUN_HEADER, PolicyEndpoint

__all__ = ["RUN_HEADER", "CallRecord", "PolicyEndpoint", "Recorder", "RunRecord", "Sample"]
