"""The network edge both front doors share, the service (``routerag serve``) and the MCP server
(``routerag mcp``): where they listen (``settings``: :class:`~routerag.edge.settings.ListenSettings`),
the request guard (``guard``), uvicorn's connection limits (``connections``) and running an app
(``serving``), the admission bounds (``admission``), the cancellation of a run whose client has
gone (``cancel``) and the ask path both answer questions through (``asks``: prepare, check, answer;
its progress events ``events``, its refusal ``refusals``). It sits below ``server`` so that
``integrations`` need not import the service."""
