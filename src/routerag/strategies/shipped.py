"""Which strategy runs with which shipped policy: the rule that a strategy on a bundled base applies
the policy adapter trained in its own episode, unless told otherwise.

The adapters themselves are stored and unpacked by the model layer (``llm.config.policy_dir``,
``bundled_policy_path``); this module only says which one belongs to which strategy and base, so
that the model layer names no strategy."""

from __future__ import annotations

import csv

from routerag.llm.config import BUNDLED_POLICY, DEFAULT_MODEL, POLICY_PREFIX, ModelConfig, PolicyName, policy_dir
from routerag.llm.policy_card import DATASET_NAMES, CardLine, PolicyCard

LARGER_BASE = "bundled:qwen2.5-coder-1.5b"
"""The larger bundled base, which has a RouteRAG policy of its own."""

ROUTERAG_POLICIES: dict[str, str] = {
    DEFAULT_MODEL: BUNDLED_POLICY,
    LARGER_BASE: "routerag-sft-outcome-qwen2.5-coder-1.5b",
}
"""The shipped RouteRAG policy of each bundled base model (``bundled:`` name -> ``data/policies/<name>``)."""

GRAPHRAG_R1_POLICY = "graphrag-r1-sft-qwen2.5-coder-0.5b"
"""The shipped GraphRAG-R1 policy for the bundled 0.5B (its stage 1: the supervised cold start)."""

SHIPPED_POLICIES: dict[str, dict[str, str]] = {
    "routerag": ROUTERAG_POLICIES,
    "graphrag-r1": {DEFAULT_MODEL: GRAPHRAG_R1_POLICY},
}
"""The shipped policies by the strategy whose episode they were trained in, then by bundled base:
that strategy on that base applies its policy unless told otherwise (``--untrained``)."""


def shipped_policy_for(strategy: str, model: str | None) -> str | None:
    """The name of the policy shipped for ``strategy`` on the bundled base ``model``, or None."""
    return SHIPPED_POLICIES.get(strategy, {}).get(model or "")


def with_default_policy(config: ModelConfig, strategy: str) -> ModelConfig:
    """``config`` with the policy adapter shipped for ``strategy`` on its base when it runs a bundled
    model that has one through llama.cpp and names no adapter of its own; else unchanged. The policy
    is named (``policy:NAME``): its adapter is unpacked when the model is built, not here."""
    resolved = config.resolved()
    policy = shipped_policy_for(strategy, resolved.model)
    if config.lora_path is not None or resolved.backend != "llamacpp" or policy is None:
        return config
    return config.model_copy(update={"lora_path": PolicyName(POLICY_PREFIX + policy)})


def policy_card(model: str | ModelConfig, strategy: str = "routerag") -> PolicyCard | None:
    """The card of the policy shipped for ``strategy`` on a bundled base (``bundled:qwen2.5-coder-0.5b``),
    read from the comparisons table beside its adapter; None when it has none or its table is missing."""
    base = model.resolved().model if isinstance(model, ModelConfig) else model
    name = shipped_policy_for(strategy, base)
    if name is None:
        return None
    table = policy_dir(name) / "eval_comparisons.csv"
    if not table.is_file():
        return None
    with table.open(newline="") as fh:
        rows = [r for r in csv.DictReader(fh)
                if r["Questions"] == "open" and r["Metric"] == "EM" and r["Baseline"].startswith("vanilla")]
    order = list(DATASET_NAMES)
    rows.sort(key=lambda r: order.index(r["Dataset"]) if r["Dataset"] in order else len(order))
    lines = [CardLine(dataset=r["Dataset"], n=int(r["n"]), baseline=float(r["Baseline score"]), system=float(r["System score"]),
                      delta=float(r["Δ"]), ci=r["95% CI"], sign_p=float(r["p (sign test)"])) for r in rows]
    return PolicyCard(name=name, base=base or "", lines=lines)
