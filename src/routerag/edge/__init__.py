"""The network edge both front doors share, the service (``routerag serve``) and the MCP server
(``routerag mcp``): where they listen (``settings``: :class:`~routerag.edge.settings.ListenSettings`),
the request guard (``guard``), uvicorn's connection limits (``connections``) and running an app
(``serving``), the admission bounds (``admission``) and the cancellation of a run whose client has
gone (``cancel``). It sits below ``server`` so that ``integrations`` need not import the service."""
