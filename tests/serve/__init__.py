"""Tests of the servers: ``mathgym serve`` (mathgym.serve) and ``mathgym mcp-serve`` (mathgym.mcp_server)."""
