"""routerag inside the tools its users already run: an MCP server (``routerag mcp``), and
retrievers for LangChain and LlamaIndex. Each module imports its framework inside its functions
(the ``integrations`` extra)."""
