"""The run assembler: one :class:`~routerag.run.config.RunConfig` (dataset, strategy and its
params, model, index settings) and one way from a strategy choice to what it runs on — the
resolved strategy, the dataset, its index bundle (built once, cached under ``cache_dir("indexes")``),
the sources mounted over it and the model (``run.assemble``). ``ask``, ``demo``, evaluation and the
service's requests assemble their runs here, and training data and router labels mount their
sources here; :class:`~routerag.eval.config.EvalConfig` extends the configuration with what only
an evaluation needs (sample size, metrics, judge)."""

from routerag.run.config import RunConfig

__all__ = ["RunConfig"]
