"""Agentic repository envs: RepoRepair-v0 (a generated project in the sandbox) and Terminal-v0 (a task in a container)."""
