"""Action protocols spoken between a policy and routerag: :mod:`routerag.protocol.routerag_tags`
(RouteRAG / Search-R1 tags). Dependency-free (pydantic and the ``Hit`` type only)."""
