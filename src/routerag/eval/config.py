"""``EvalConfig``: everything that decides an evaluation's answers, from YAML + ``--set`` overrides.
Runtime knobs that do not change answers (output folder, concurrency, progress bar) are command
options, not configuration, and stay out of the run's fingerprint."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from routerag.eval.metrics import DEFAULT_METRICS
from routerag.index.settings import IndexSettings
from routerag.llm.config import ModelConfig


class EvalConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    dataset: str = Field("demo", description="a registered dataset (2wiki, musique, hotpotqa, law-med, ...) or file:<path>")
    strategy: str = Field("vanilla", description="a registered strategy (routerag, graphrag-r1, r1-router, realroute, ...)")
    limit: int | None = Field(200, ge=1, description="evenly spaced questions to evaluate; None: all")
    label: str | None = Field(None, description="the row name in report tables (default: the strategy)")
    metrics: list[str] = Field(default_factory=lambda: list(DEFAULT_METRICS), description="registered answer metrics")
    params: dict[str, Any] = Field(default_factory=dict, description="the strategy's parameters (validated by its Params)")
    model: ModelConfig = Field(default_factory=ModelConfig)
    judge_model: ModelConfig | None = Field(None, description="adds the 'judge' metric (LLM-as-judge) with this model")
    index: IndexSettings = Field(default_factory=IndexSettings)
    components: list[str] = Field(default_factory=lambda: ["dense", "bm25"], description="index components built over the corpus")
    modes: list[str] | None = Field(None, description="source modes to mount (default: every mode the index serves)")
    source_mode: str = Field("passage", description="multi-source datasets: the mode each named source is served with")
