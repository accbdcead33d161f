"""The ``routerag`` command line (Typer)."""
