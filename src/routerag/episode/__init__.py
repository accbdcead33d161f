"""The one episode engine of the RouteRAG tag protocol: :mod:`.engine` (the state machine) drives
a policy port (:mod:`.ports`: chat for evaluation and the server, tokens for training)."""
