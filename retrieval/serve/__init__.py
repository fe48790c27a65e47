"""lookup_knowledge for agents: the Python API and the MCP server with its transports."""
