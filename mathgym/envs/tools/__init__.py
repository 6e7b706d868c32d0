"""Tool use: the tool-call formats every tool env reads, and MCPTools-v0 with its MCP client."""
