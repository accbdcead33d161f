"""routerag inside the tools its users already run (the ``integrations`` extra): an MCP server
(``routerag mcp``, ``integrations.mcp_server``) and retrievers for LangChain and LlamaIndex
(``integrations.langchain``, ``integrations.llamaindex``). Importing ``routerag`` or this package
imports none of those frameworks: each module imports its own when it is imported or used."""
