"""``RunConfig``: what decides a strategy's answers over a dataset — the dataset, the strategy and
its params, the model, the index settings and components, the mounted modes. Filled from YAML +
``--set`` overrides (``load_config``); names are checked against their registries and ``params``
against the strategy's ``Params`` at load, before any index or model is built."""

from __future__ import annotations

from typing import Annotated, Any, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from routerag.config import validation_reasons
from routerag.index.component import COMPONENTS
from routerag.index.settings import IndexSettings
from routerag.llm.config import ModelConfig
from routerag.llm.environment import ModelEnvironment
from routerag.registry import RegisteredName
from routerag.strategies import STRATEGIES


class RunConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    dataset: str = Field("demo", description="a registered dataset (2wiki, musique, hotpotqa, law-med, ...) or file:<path>")
    strategy: Annotated[str, RegisteredName(STRATEGIES, unknown_name=True)] = Field("vanilla", description="a registered strategy (routerag, graphrag-r1, r1-router, realroute, ...)")
    params: dict[str, Any] = Field(default_factory=dict, description="the strategy's parameters (validated by its Params)")
    model: ModelConfig = Field(default_factory=ModelConfig)
    index: IndexSettings = Field(default_factory=IndexSettings)
    components: list[Annotated[str, RegisteredName(COMPONENTS, unknown_name=True)]] = Field(default_factory=lambda: ["dense", "bm25"], description="index components built over the corpus")
    modes: list[str] | None = Field(None, description="source modes to mount (default: every mode the index serves)")
    source_mode: str = Field("passage", description="multi-source datasets: the mode each named source is served with")

    def with_environment(self, environment: ModelEnvironment) -> Self:
        """A copy whose model configuration has the environment applied (``ModelConfig.with_environment``)."""
        return self.model_copy(update={"model": self.model.with_environment(environment)})

    @model_validator(mode="after")
    def _check_params(self) -> RunConfig:
        """``params`` must validate against the strategy's ``Params`` (pydantic's conversions, as
        ``resolve_strategy`` applies to YAML/``--set`` values); kept as written, so the resolved
        configuration a run stores is unchanged. A strategy whose optional dependency is missing
        is left to ``resolve_strategy`` to report."""
        try:
            cls = STRATEGIES.get(self.strategy)
        except ImportError:
            return self
        try:
            cls.Params.model_validate(self.params)
        except ValidationError as exc:
            raise ValueError(f"invalid params for strategy {self.strategy!r}: {validation_reasons(exc)}") from None
        return self
