"""routerag from the tools its users already run (the ``integrations`` extra): LangChain and
LlamaIndex retrievers (``integrations.langchain``, ``integrations.llamaindex``) and an MCP server.
Each module imports its framework when it is imported; importing ``routerag`` imports none of them."""
