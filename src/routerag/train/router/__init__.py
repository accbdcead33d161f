"""Training the learned router (``routing.learned``): route labels from retrieval outcomes
(``labels``), strategy labels from stored evaluation runs (``strategy_labels``) and the fit
itself (``fit``). Routing with a trained router needs none of this (``routerag.routing``)."""
