"""Which Python binding runs llama.cpp for the ``llamacpp`` backend.

Two bindings are registered, each imported only when chosen:

* ``xllamacpp``: a prebuilt wheel (AVX2, installs in seconds); the default when installed
  (the ``local`` extra installs it);
* ``llama-cpp-python``: compiled at install time; also the one training rollouts use, since they
  need the raw logits of every step (:class:`routerag.train.generation.LlamaCppSampler`);
* ``xllamacpp-process``: xllamacpp in a child process (:mod:`routerag.llm.xllamacpp_process`),
  whose model build never holds this process's GIL; never chosen by ``auto``: the ask service
  (``routerag serve``) asks for it where ``auto`` would give ``xllamacpp`` (:func:`for_service`).

``ROUTERAG_LLAMA_BINDING`` names one; unset (or ``auto``) takes the first installed in the order
above. Both classes take the same arguments and answer the same way (the comparison on the same
prompts: ``benchmarks/bench_llama_bindings.py``, docs/experiments/2026-11-29-llama-bindings.md).
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any

from routerag.llm.base import ModelError
from routerag.registry import Registry, classes_with

ENV = "ROUTERAG_LLAMA_BINDING"

BINDINGS: Registry[Any] = Registry("llama.cpp binding", classes_with())
BINDINGS.register("xllamacpp", "routerag.llm.xllamacpp_backend:XLlamaCppModel")
BINDINGS.register("llama-cpp-python", "routerag.llm.llamacpp:LlamaCppModel")
BINDINGS.register("xllamacpp-process", "routerag.llm.xllamacpp_process:XLlamaCppProcessModel")

# the import name each binding needs, in the order ``auto`` tries them
MODULES: dict[str, str] = {"xllamacpp": "xllamacpp", "llama-cpp-python": "llama_cpp"}


def installed() -> list[str]:
    """The registered bindings whose package is importable, in ``auto``'s order."""
    return [name for name, module in MODULES.items() if importlib.util.find_spec(module) is not None]


def choose_binding(name: str | None = None) -> str:
    """The binding to use: ``name``, else ``$ROUTERAG_LLAMA_BINDING``, else the first installed."""
    wanted = (name or os.environ.get(ENV) or "auto").strip()
    if wanted != "auto":
        return BINDINGS.validate_name(wanted)
    found = installed()
    if not found:
        raise ModelError("the llamacpp backend needs a llama.cpp binding: pip install 'routerag[local]' "
                         "(xllamacpp, prebuilt) or pip install llama-cpp-python (compiled)")
    return found[0]


def for_service(name: str | None) -> str | None:
    """The binding a long-running service builds with: ``xllamacpp-process`` where ``name`` (a
    configuration's binding; None: the environment, else ``auto``) would give ``xllamacpp``, so no
    model build holds the service's GIL; otherwise ``name`` unchanged."""
    try:
        return "xllamacpp-process" if choose_binding(name) == "xllamacpp" else name
    except (ModelError, ValueError):  # no binding installed: the build says so when it is tried
        return name


def model_class(name: str | None = None) -> Any:
    """The chat-model class of the chosen binding (``XLlamaCppModel`` or ``LlamaCppModel``)."""
    return BINDINGS.get(choose_binding(name))
