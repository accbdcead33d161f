"""The reader of traces stored in the old layout (before ``Trace.schema_version``).

The old :class:`~routerag.trace.Step` kept routing, selection, forced answers and sub-query
references as ``metadata`` keys, plus ``routing_reason`` and ``kept_doc_ids`` fields, and a
route/reflect step's choice in ``sources``. :func:`upgrade_trace` maps a stored trace (a dict,
as read from JSON) into the typed records. Steps kept a free-form ``metadata`` until every extra
that carried meaning got a typed field: :func:`upgrade_step_extras` maps those keys of a stored
step and drops the rest; :func:`upgrade_source_details` gives a stored source report (recorded
before reports had a ``kind``) the kind its keys show. Pure dict transforms: no model is built
here, so ``routerag.trace`` validates the result.
"""

from __future__ import annotations

from typing import Any

SCHEMA_VERSION = 3  # 1 (implicit): the metadata layout; 2: typed Route/Selection/ForcedAnswer/SubQueryRef;
# 3: no step metadata (typed fields), source reports typed by kind (2 is read by upgrade_step_extras / upgrade_source_details)


def upgrade_trace(data: Any) -> Any:
    """``data`` with each step mapped from the old layout, if it is a stored trace without a
    ``schema_version``; anything else (a model instance, a new-layout dict) as it is."""
    if not isinstance(data, dict) or "schema_version" in data or not isinstance(data.get("steps"), list):
        return data
    steps = [upgrade_step(s) if isinstance(s, dict) else s for s in data["steps"]]
    return {**data, "steps": steps, "schema_version": SCHEMA_VERSION}


def upgrade_step(old: dict[str, Any]) -> dict[str, Any]:
    """One step of the old layout in the new one (a new dict; ``old`` is not changed)."""
    step = dict(old)
    meta: dict[str, Any] = dict(step.pop("metadata", None) or {})
    reason = str(step.pop("routing_reason", "") or "")
    kept_ids = [str(d) for d in step.pop("kept_doc_ids", None) or []]
    kind = step.get("kind")
    sources = [str(s) for s in step.get("sources") or []]

    details = meta.pop("sources", None)
    if isinstance(details, dict):
        step["source_details"] = details
    if "mode_cost" in meta:
        step["retrieval_cost"] = float(meta.pop("mode_cost"))
    forced = meta.pop("forced", None)
    if forced:
        step["forced"] = {"reader": str(meta.pop("reader", "policy"))}
    route = _route(kind, sources, reason, meta)
    if route is not None:
        step["route"] = route
        if kind in ("route", "reflect"):
            step["sources"] = []  # the choice is the route's; a route step searched nothing
    if kind == "select" or kept_ids:
        step["selection"] = _selection(kind, kept_ids, meta)
    if "subquery_id" in meta:
        attempt = meta.pop("attempt", None)
        step["subquery"] = {"id": str(meta.pop("subquery_id")), "attempt": None if attempt is None else int(attempt),
                            "preferred_source": meta.pop("preferred_source", None)}
    step["metadata"] = meta
    return step


def _route(kind: Any, sources: list[str], reason: str, meta: dict[str, Any]) -> dict[str, Any] | None:
    """The route record of a route/reflect step (its single source is the choice) or of a search
    step the policy routed (a routing reason or a recorded mode); keys used are taken from ``meta``."""
    if kind in ("route", "reflect"):
        if not sources:
            return None
        chosen_by = "reflection" if kind == "reflect" else str(meta.pop("router", ""))
        meta.pop("choice", None)  # Adaptive's copy of ``sources[0]``
        scores = meta.pop("scores", None) or {}
        return {"choice": sources[0], "chosen_by": chosen_by, "reason": reason, "scores": scores}
    if kind == "search" and (reason or "mode" in meta):
        scores = meta.pop("router_scores", None) or {}
        router = meta.pop("router", None)
        return {"choice": "+".join(sources), "mode": meta.pop("mode", None), "chosen_by": str(router or ""),
                "reason": reason, "scores": scores, "proposed": meta.pop("policy_mode", None)}
    return None


def _selection(kind: Any, kept_ids: list[str], meta: dict[str, Any]) -> dict[str, Any]:
    """The selection record: a select step's selector, candidates and kept hits (their sources
    from the old ``kept`` keys ``"source:doc_id"``), or an answer step's evidence ids."""
    if kind != "select":
        return {"kept": kept_ids}
    keys = [str(k) for k in meta.pop("kept", None) or []]
    meta.pop("kept_by_source", None)  # derived from the kept hits' sources
    aligned = len(keys) == len(kept_ids) and all(key.endswith(f":{doc}") for key, doc in zip(keys, kept_ids))
    kept_sources = [key[: len(key) - len(doc) - 1] for key, doc in zip(keys, kept_ids)] if aligned else []
    fallback = meta.pop("fallback", None)
    candidates = meta.pop("candidates", None)
    return {"selector": meta.pop("selector", None), "candidates": None if candidates is None else int(candidates),
            "kept": kept_ids, "kept_sources": kept_sources, "fallback": None if fallback is None else str(fallback)}


GRAPH_KEYS = ("seeds", "top_nodes", "facts", "fallback", "recognition")


def upgrade_source_details(reported: dict[str, Any]) -> dict[str, Any] | None:
    """A source's report with its ``kind`` (``graph``, ``hybrid``, ``remote``): as it is when it
    has one, else the kind its keys show (stored traces); None when no known kind fits."""
    if isinstance(reported.get("kind"), str):
        return reported
    if "remote_url" in reported:
        inner = {k: v for k, v in reported.items() if k not in ("remote_url", "server_latency_ms")}
        return {"kind": "remote", "url": str(reported["remote_url"]),
                "server_latency_ms": float(reported.get("server_latency_ms") or 0.0),
                "details": upgrade_source_details(inner) if inner else None}
    graph = reported.get("graph")
    if isinstance(graph, dict):
        return {"kind": "hybrid", "graph": upgrade_source_details(graph) or {"kind": "graph"}}
    if any(key in reported for key in GRAPH_KEYS):
        return {**reported, "kind": "graph"}
    return None


def upgrade_step_extras(data: Any) -> Any:
    """A stored step (a dict) with its ``metadata`` keys that carried meaning moved into the
    typed fields that now hold them (``intermediate``, ``iteration``, a decomposition's ``plan``,
    ``subquery.success``, ``route.model``, a fusion's ``forced`` fallback); the other keys (copies
    of what other fields or the run's parameters hold) are dropped. Anything else as it is."""
    if not isinstance(data, dict) or "metadata" not in data:
        return data
    step = dict(data)
    meta = step.pop("metadata", None)
    if not isinstance(meta, dict):
        return step
    if isinstance(meta.get("intermediate"), bool):
        step.setdefault("intermediate", meta["intermediate"])
    if isinstance(meta.get("iteration"), int):
        step.setdefault("iteration", meta["iteration"])
    if isinstance(meta.get("subqueries"), list):
        step.setdefault("plan", meta["subqueries"])
    if meta.get("used_fallback") is True:
        step.setdefault("forced", {"reader": "last_hop"})
    subquery, route = step.get("subquery"), step.get("route")
    if isinstance(meta.get("success"), bool) and isinstance(subquery, dict):
        step["subquery"] = {**subquery, "success": meta["success"]}
    if isinstance(meta.get("router_model"), str) and isinstance(route, dict):
        step["route"] = {**route, "model": meta["router_model"]}
    return step
