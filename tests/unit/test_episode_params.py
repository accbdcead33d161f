"""The tag strategies' episode params: RouteRAG's keep their stored field order (fingerprints
and config.resolved.yaml serialize fields in declaration order), the rules training added are
params left out of fingerprints at their defaults, and the rollout environment's config is a
strategy name plus that strategy's params (its flat form of older configs still loads)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from routerag.config import fingerprint_dump
from routerag.strategies.graphrag_r1 import GraphRAGR1Params
from routerag.strategies.routerag import RouteRAGEpisodeParams, RouteRAGParams
from routerag.train.env import EnvConfig

SHARED = ["k", "max_turns", "allowed_modes", "default_mode"]
TRAINING_RULES = ["mode_cost", "prompt_template", "assistant_prefix", "strict_modes", "reader"]


def test_routerag_params_keep_their_stored_order_and_the_new_rules_come_last() -> None:
    assert list(RouteRAGEpisodeParams.model_fields) == SHARED
    assert list(RouteRAGParams.model_fields)[:6] == [*SHARED, "random_routing", "seed"]
    assert list(RouteRAGParams.model_fields)[-len(TRAINING_RULES):] == TRAINING_RULES


def test_the_rules_training_added_leave_stored_fingerprints_alone() -> None:
    for cls, fields in ((RouteRAGParams, TRAINING_RULES), (GraphRAGR1Params, ["assistant_prefix", "reader"])):
        dumped = fingerprint_dump(cls())
        assert not set(fields) & set(dumped)
    changed = fingerprint_dump(RouteRAGParams(strict_modes=True, assistant_prefix="<think>"))
    assert changed["strict_modes"] is True and changed["assistant_prefix"] == "<think>"


def test_env_config_is_a_strategy_and_its_params() -> None:
    flat = EnvConfig(k=2, max_turns=3, allowed_modes=["graph"], max_observation_tokens=100)
    assert flat.strategy == "routerag" and (flat.params["k"], flat.params["max_turns"], flat.params["allowed_modes"]) == (2, 3, ["graph"])
    assert flat == EnvConfig(params={"k": 2, "max_turns": 3, "allowed_modes": ["graph"]}, max_observation_tokens=100)
    assert flat.params == RouteRAGParams(k=2, max_turns=3, allowed_modes=["graph"]).model_dump(mode="json")  # every param
    dumped = flat.model_dump()  # flat, as configs were written before the strategy was named
    assert dumped["strategy"] == "routerag" and dumped["k"] == 2 and dumped["max_observation_tokens"] == 100 and "params" not in dumped
    params = flat.params_as(RouteRAGParams)
    assert params.default_mode == "graph"  # the strategy's own repair
    assert EnvConfig.model_validate(flat.model_dump()) == flat  # the resolved config reloads
    assert EnvConfig.model_validate({**flat.model_dump(), "k": 5}).params["k"] == 5  # a flat key overrides
    g = EnvConfig(strategy="graphrag-r1", params={"evidence": "text5"})
    assert g.strategy_params() == GraphRAGR1Params(evidence="text5")
    with pytest.raises(ValueError, match="RouteRAGParams"):
        g.params_as(RouteRAGParams)


def test_env_config_refuses_what_the_strategy_refuses() -> None:
    with pytest.raises(ValidationError, match="no params"):
        EnvConfig(unknown=1)  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match="mode_sources"):
        EnvConfig(allowed_modes=["graph"], mode_sources={"passage": "passage"})
    with pytest.raises(ValidationError, match="tag-protocol"):
        EnvConfig(strategy="vanilla")
    with pytest.raises(ValidationError, match="unknown strategy"):
        EnvConfig(strategy="no-such-strategy")
    with pytest.raises(ValidationError, match="no params"):
        EnvConfig(strategy="graphrag-r1", params={"allowed_modes": ["graph"]})
