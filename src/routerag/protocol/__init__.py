"""Action protocols spoken between a policy and routerag: :mod:`routerag.protocol.routerag_tags`
(RouteRAG / Search-R1 tags) and :mod:`routerag.protocol.graphrag_r1_tags` (GraphRAG-R1 /
R1-Searcher tags). Dependency-free (pydantic and the ``Hit`` type only)."""
