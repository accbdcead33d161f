"""The RouteRAG episode's shared parameters keep each subclass's stored field order (fingerprints
and config.resolved.yaml serialize fields in declaration order)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from routerag.strategies.routerag import RouteRAGEpisodeParams, RouteRAGParams
from routerag.train.env import EnvConfig

SHARED = ["k", "max_turns", "allowed_modes", "default_mode"]


def test_both_start_with_the_shared_fields_in_their_stored_order() -> None:
    assert list(RouteRAGEpisodeParams.model_fields) == SHARED
    assert list(RouteRAGParams.model_fields)[:6] == [*SHARED, "random_routing", "seed"]
    assert list(EnvConfig.model_fields)[:6] == [*SHARED, "mode_sources", "mode_cost"]
    assert list(EnvConfig().model_dump())[:5] == [*SHARED, "mode_sources"]


def test_default_mode_repair_and_the_mode_sources_check_hold_in_both() -> None:
    for cls in (RouteRAGParams, EnvConfig):
        assert cls(allowed_modes=["graph"]).default_mode == "graph"
        with pytest.raises(ValidationError):
            cls(allowed_modes=["graph"], mode_sources={"passage": "passage"})
    with pytest.raises(ValidationError):
        EnvConfig(unknown=1)  # type: ignore[call-arg]
