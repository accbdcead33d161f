"""Training routing policies: the RouteRAG rollout environment (``env``), the reward registry and
stage schedules (``rewards``), TRL recipes (``recipes``: routerag-two-stage, graphrag-r1,
r1-router-step), golden trajectories and the train/eval overlap check (``golden``), the verl
export (``export_verl``) and verl agent loop / batch reward (``verl``, verl imported only by the
class verl instantiates). ``env`` and ``rewards`` import no trainer library; ``recipes`` imports
TRL, transformers and peft inside its functions. See ``docs/guides/training-cpu.md``."""
