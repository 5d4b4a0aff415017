"""`charter import mcp`: an MCP server's tool list as a Charter toolset declaration."""
