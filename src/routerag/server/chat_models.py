"""The models the OpenAI-compatible face offers (:mod:`routerag.server.openai_api`): every
registered strategy whose optional dependencies are installed and whose defaults this service can
run, under its own name, and ``routerag-1.5b`` — the routerag strategy on the bundled 1.5B with its
shipped policy — where the service runs the bundled 0.5B through llama.cpp without an adapter of
its own and the 1.5B's packages are installed. A model name is prepared as ``/v1/ask`` prepares a
strategy, every token limit of its params lowered to the request's cap. Preparing reads files (and
may import a strategy's module): :meth:`~routerag.server.service.Service.prepare` calls
:meth:`ChatModels.prepare` in a worker thread, as it prepares an ask; call :meth:`ChatModels.names`
in one too. A name that is no model is refused with :class:`UnknownModelError`."""

from __future__ import annotations

import time
from dataclasses import replace

from routerag.edge.asks import Preparation, Prepared, StrategyConfig
from routerag.errors import RouteragError
from routerag.llm.config import DEFAULT_MODEL, MissingPolicyError, ModelConfig, bundled_policy_path
from routerag.run.assemble import StrategyRequestError
from routerag.server.upload_parse import UploadRejected
from routerag.strategies import STRATEGIES
from routerag.strategies.resolve import StrategyParamsError
from routerag.strategies.shipped import LARGER_BASE, ROUTERAG_POLICIES, with_default_policy

__all__ = ["LARGER_BASE", "LARGER_MODEL", "ChatModels", "UnknownModelError", "larger_policy_model", "strategy_available"]

LARGER_MODEL = "routerag-1.5b"


class UnknownModelError(RouteragError):
    """A model name this service does not answer with."""

    def __init__(self, name: str) -> None:
        super().__init__(f"the model {name!r} does not exist on this service (GET /v1/models lists them)")


def larger_policy_model(model_config: ModelConfig | None) -> ModelConfig | None:
    """The configuration that answers ``routerag-1.5b``: the service's own with the bundled 1.5B as
    its base, when the service runs the bundled 0.5B through llama.cpp without an adapter of its
    own and the 1.5B's packages and shipped policy are installed; else None."""
    if model_config is None or model_config.lora_path is not None:
        return None
    try:
        resolved = model_config.resolved()
    except ValueError:
        return None
    if resolved.backend != "llamacpp" or resolved.model != DEFAULT_MODEL:
        return None
    from routerag.llm.bundled import BundledModelError, bundled_spec, find_parts

    try:
        find_parts(bundled_spec(LARGER_BASE))
        bundled_policy_path(ROUTERAG_POLICIES[LARGER_BASE])
    except (BundledModelError, MissingPolicyError):
        return None
    return model_config.model_copy(update={"model": LARGER_BASE})


def strategy_available(name: str) -> bool:
    try:
        STRATEGIES.get(name)
    except ImportError:  # an optional dependency is missing
        return False
    return True


class ChatModels:
    """The model names of a service over ``model_config``, listed as created at ``started``."""

    def __init__(self, model_config: ModelConfig | None, preparation: Preparation) -> None:
        self.started = int(time.time())
        self.larger = larger_policy_model(model_config)
        self._prepare = preparation

    def prepare(self, name: str, config: StrategyConfig, token_cap: int | None) -> Prepared:
        """Model ``name`` with the request's ``config`` (its params and sources; the strategy is the
        name's), every token limit above ``token_cap`` lowered to it. A refusal:
        :class:`UnknownModelError`, or of the params or sources :class:`StrategyRequestError` or
        :class:`UploadRejected`."""
        strategy = "routerag" if name == LARGER_MODEL and self.larger is not None else name
        if strategy not in STRATEGIES.names() or not strategy_available(strategy):
            raise UnknownModelError(name)
        config = config.model_copy(update={"strategy": strategy})
        prepared = self._prepare(config)
        lowered = {key: token_cap for key, value in prepared.strategy.token_limits().items()
                   if token_cap is not None and value > token_cap}
        if lowered:  # validated again with the lower limits
            prepared = self._prepare(config.model_copy(update={"params": {**config.params, **lowered}}))
        if strategy != name:  # the larger base with its own shipped policy, from the service's model pool
            assert self.larger is not None
            prepared = replace(prepared, strategy=replace(prepared.strategy, model=with_default_policy(self.larger, strategy)))
        return prepared

    def names(self) -> list[str]:
        names = [name for name in STRATEGIES.names() if strategy_available(name) and self._listed(name)]
        return names + ([LARGER_MODEL] if self.larger is not None else [])

    def _listed(self, name: str) -> bool:
        try:
            self._prepare(StrategyConfig(strategy=name))
        except (StrategyRequestError, UploadRejected, StrategyParamsError):
            return False  # its defaults need something this service lacks
        return True
