"""The front door: the one place where a request becomes work, with routerag's defaults applied
once. Every CLI command calls these functions and builds no strategy, index, model or trainer
itself; the service, one layer below, uses the same strategy resolution (``strategies.resolve``):

* :func:`ask` / :func:`open_asker` (``api.asking``): one question (or a few, over one loaded
  strategy) -> :class:`~routerag.trace.Trace`; :func:`answer` and :func:`strategy_factory`
  (``strategies.resolve``) are the service's (its own model pool and mounted sources);
* :func:`evaluate` (``api.evaluating``): a fingerprinted, resumable run -> :class:`EvaluateResult`;
* :func:`build_index` (``api.indexing``): a corpus -> an index directory -> :class:`IndexResult`;
* :func:`serve` / :func:`serve_retrieval` (``api.serving``): the ask service / the retrieval API;
* :func:`train` (``api.training``): a recipe -> :class:`~routerag.train.recipes.TrainRunSummary`
  (and the verl / LoRA exports);
* ``api.routing``: the learned router's labels, training and manifest; ``api.runs``: reports over
  stored runs and their compression (imported from their modules);
* :func:`resolve_strategy` (``api.strategies``, over ``strategies.resolve``'s, below the front
  door so that the run assembler and the service use it too): strategy + params + model -> a
  ready strategy.

The defaults, and who gets them:

* **The model environment** (``ROUTERAG_MODEL``, ``ROUTERAG_BASE_URL``, ``ROUTERAG_BACKEND``):
  read here (:func:`model_environment`, ``api.environment``) and nowhere below, and applied to
  every model configuration the front door takes (``ask``/``open_asker``, ``evaluate``, ``serve``,
  ``resolve_strategy``; the MCP server at its start), filling only what the configuration leaves
  unset (``ModelConfig.with_environment``); ``ModelConfig.resolved`` reads no environment.
* **The shipped policy** (``shipped_policy=True``): a strategy with a shipped policy (``routerag``
  on the 0.5B, the default, or the 1.5B; ``graphrag-r1`` on the 0.5B) through llama.cpp, with no
  adapter named, runs with the policy adapter shipped for it in ``data/policies``
  (``strategies.shipped.SHIPPED_POLICIES``). ``ask``, ``demo`` and the service ask for it
  (``--untrained`` opts out); ``evaluate`` does not: an evaluation runs exactly what its
  configuration names, so that the untrained baseline stays measurable and every stored run's
  fingerprint still matches (``docs/results/runs/*-routerag`` are that baseline; the ``sft-*``
  runs name the adapter in their configuration).
* **Parameters**: validated by the strategy's own ``Params`` model. A JSON body (the service) is
  validated strictly — unknown names, ``true`` for an integer, ``"3"`` for a number are refused —;
  a YAML configuration or ``--set`` overrides (eval, ask) the way pydantic converts them. A
  strategy that runs others (``adaptive``) gets them resolved the same way.
* **Index components** for an index built on the fly by ``ask``/``demo``:
  :data:`INTERACTIVE_COMPONENTS` (``evaluate`` keeps ``EvalConfig.components``, part of its
  fingerprint); ``build_index``: dense and BM25 unless named.
* **Concurrency**: one model instance per model configuration, each with its backend's
  concurrency (``ModelConfig.resolved``); a long-running service keeps them in a
  :class:`~routerag.llm.pool.ModelPool`.
* **Run directories**: ``evaluate`` writes to ``runs/<dataset>-<strategy>-<n>`` unless told
  (:func:`default_run_dir`); the service stores its runs in the same format under its data folder.

Errors: what the front door refuses derives from :class:`~routerag.errors.RouteragError` (the CLI
prints it as one line); anything else is a bug.

Nothing heavy is imported here: each name is loaded from its module on first use (and the modules
import their heavy dependencies inside the functions).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "INTERACTIVE_COMPONENTS": "asking", "ResolvedStrategy": "strategies.resolve",
    "StrategyParamsError": "strategies.resolve", "resolve_strategy": "strategies", "model_environment": "environment",
    "AskParams": "asking", "Asker": "asking", "ask": "asking", "open_asker": "asking",
    "answer": "strategies.resolve", "strategy_factory": "strategies.resolve",
    "EvaluateParams": "evaluating", "EvaluateResult": "evaluating", "evaluate": "evaluating",
    "default_run_dir": "evaluating",
    "IndexParams": "indexing", "IndexResult": "indexing", "build_index": "indexing", "index_documents": "indexing",
    "IndexRequestError": "indexing", "VerifyResult": "indexing", "verify_index": "indexing",
    "ServeParams": "serving", "serve": "serving", "serve_retrieval": "serving", "ServeRequestError": "serving",
    "train": "training", "TrainRequestError": "training", "build_golden": "training",
}

__all__ = [
    "AskParams", "Asker", "EvaluateParams", "EvaluateResult", "INTERACTIVE_COMPONENTS", "IndexParams",
    "IndexRequestError", "IndexResult", "ResolvedStrategy", "ServeParams", "ServeRequestError",
    "StrategyParamsError", "TrainRequestError", "answer", "ask", "build_golden", "build_index", "default_run_dir",
    "evaluate", "index_documents", "model_environment", "open_asker", "resolve_strategy", "serve", "serve_retrieval",
    "strategy_factory", "train", "VerifyResult", "verify_index",
]

if TYPE_CHECKING:
    from routerag.api.asking import INTERACTIVE_COMPONENTS, Asker, AskParams, ask, open_asker
    from routerag.api.environment import model_environment
    from routerag.api.evaluating import EvaluateParams, EvaluateResult, default_run_dir, evaluate
    from routerag.api.indexing import IndexParams, IndexRequestError, IndexResult, VerifyResult, build_index, index_documents, verify_index
    from routerag.api.serving import ServeParams, ServeRequestError, serve, serve_retrieval
    from routerag.api.strategies import resolve_strategy
    from routerag.api.training import TrainRequestError, build_golden, train
    from routerag.strategies.resolve import ResolvedStrategy, StrategyParamsError, answer, strategy_factory


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'routerag.api' has no attribute {name!r}")
    package = "routerag" if "." in module else "routerag.api"  # "strategies.resolve" lives below the front door
    return getattr(importlib.import_module(f"{package}.{module}"), name)
