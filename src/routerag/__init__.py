"""routerag: adaptive, learned query routing for retrieval-augmented generation."""

__version__ = "0.1.0"
