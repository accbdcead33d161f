"""HTTP services: the ask service (``app``) and the retrieval API (``retrieval_app``) with its
Search-R1 adapter. What they share with the MCP server (listen settings, the request guard,
running an app with uvicorn) is in :mod:`routerag.edge`. Import the submodules; nothing heavy is
loaded here."""
