"""The run assembler: one :class:`~routerag.run.config.RunConfig` (dataset, strategy and its
params, model, index settings) and one way from it to what a strategy runs on — the dataset, its
index bundle (built once, cached under ``cache_dir("indexes")``), the sources mounted over it and
the model (``run.assemble``). ``ask``, ``demo``, training data, router labels and evaluation all
assemble their runs here; :class:`~routerag.eval.config.EvalConfig` extends the configuration with
what only an evaluation needs (sample size, metrics, judge)."""

from routerag.run.config import RunConfig

__all__ = ["RunConfig"]
