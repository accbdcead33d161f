"""``EvalConfig``: a :class:`~routerag.run.config.RunConfig` (everything that decides the answers)
plus what only an evaluation needs — the sample size, the report label, the answer metrics and
an optional judge model. Runtime knobs that do not change answers (output folder, concurrency,
progress bar) are command options, not configuration, and stay out of the run's fingerprint.

Names are checked against their registries and the strategy's ``params`` against its ``Params``
when the configuration is validated (``load_config``), before any index or model is built."""

from __future__ import annotations

from typing import Annotated, Self

from pydantic import Field

from routerag.eval.metrics import DEFAULT_METRICS, METRICS
from routerag.llm.config import ModelConfig
from routerag.llm.environment import ModelEnvironment
from routerag.registry import RegisteredName
from routerag.run.config import RunConfig


class EvalConfig(RunConfig):
    limit: int | None = Field(200, ge=1, description="evenly spaced questions to evaluate; None: all")
    label: str | None = Field(None, description="the row name in report tables (default: the strategy)")
    metrics: list[Annotated[str, RegisteredName(METRICS, unknown_name=True)]] = Field(default_factory=lambda: list(DEFAULT_METRICS), description="registered answer metrics")
    judge_model: ModelConfig | None = Field(None, description="adds the 'judge' metric (LLM-as-judge) with this model")

    def with_environment(self, environment: ModelEnvironment) -> Self:
        """A copy whose model and judge model configurations have the environment applied."""
        judge = self.judge_model.with_environment(environment) if self.judge_model is not None else None
        return super().with_environment(environment).model_copy(update={"judge_model": judge})
