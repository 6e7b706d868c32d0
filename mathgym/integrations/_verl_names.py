"""What verl's data rows (:mod:`mathgym.integrations.verl`) and the agent loop registered with verl
(:mod:`mathgym.integrations._verl_loop`) both name, without importing verl."""

#: The name the agent loop is registered under in verl, and each data row's ``agent_name``.
AGENT_NAME = "mathgym"
