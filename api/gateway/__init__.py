"""`charter gateway`: an MCP proxy that has Charter decide every tool call (docs/operations.md)."""
