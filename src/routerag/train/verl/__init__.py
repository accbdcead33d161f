"""verl glue for RouteRAG: an agent loop (``agent_loop``) and a batch reward (``reward``).

Nothing here imports verl at module level: the turn logic is :class:`routerag.train.env.RouteRAGEnv`
and the reward is :mod:`routerag.train.rewards`; only ``agent_loop.RouteRAGAgentLoop`` (the class
verl instantiates) imports verl, lazily, when it is first looked up. See docs/guides/training-gpu.md.
"""
