"""Training routing policies: the RouteRAG rollout environment (``env``), the reward registry and
stage schedules (``rewards``), TRL recipes (``recipes``: routerag-two-stage, graphrag-r1,
r1-router-step), golden trajectories and the train/eval overlap check (``golden``), and the verl
export (``export_verl``). ``env`` and ``rewards`` import no trainer library; ``recipes`` imports
TRL, transformers and peft inside its functions. See ``docs/training.md``."""
