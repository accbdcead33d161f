"""Routing a query to one source over the source profiles.

Used by RealRoute (the preferred source of the Adaptive Cap) and by hard-route (the only source
searched). Two routers:

* ``llm`` (the papers'): one model call; the model answers ``{"source": "<name>", "reason": "..."}``;
  a bare name is accepted, and output naming no source falls back to the first source not yet
  tried (a format error). Small models pick by position: the bundled 0.5B chooses the first
  listed source 80-100% of the time whichever order the sources are listed in
  (benchmarks/bench_route_prompt.py, docs/concepts/realroute.md).
* ``profile-embedding``: no model call; the source whose profile is most similar to the query
  (cosine of the bundled sentence embedder), the "semantic router" baseline. Order-invariant.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel

from routerag.jsontext import as_text, extract_json, partial_object
from routerag.llm.base import Message

if TYPE_CHECKING:
    from routerag.index.embedder import Embedder


class RouteDecision(BaseModel):
    source: str
    reason: str = ""
    format_error: str | None = None


ROUTE_SYSTEM = (
    "You are a routing assistant. Given a query and a description (profile) of each knowledge "
    "source, choose the one source most likely to hold the answer."
)


def render_profiles(profiles: Mapping[str, str]) -> str:
    return "\n".join(f'- "{name}": {profile or "(no description)"}' for name, profile in profiles.items())


ROUTE_QUERY_CHARS = 1500  # the gist is enough to route; law-med questions run to 10,000 characters


RoutePrompt = Literal["choice", "inline"]


def route_messages(query: str, profiles: Mapping[str, str], history: str = "", *, prompt: RoutePrompt = "inline") -> list[Message]:
    """The routing call's messages. ``inline`` (what realroute and hard-route use) lists the
    sources inside the JSON skeleton (``{"source": one of "law", "med", ...}``), which the bundled
    0.5B reads as keys and copies: ``{"source": "law", "med": "<an answer>"}``. ``choice`` names
    them in a sentence of their own and gives the reply's shape with a placeholder.
    benchmarks/bench_route_prompt.py compares the two in both source orders."""
    names = ", ".join(f'"{n}"' for n in profiles)
    parts = [f"Sources:\n{render_profiles(profiles)}", f"Query: {query[:ROUTE_QUERY_CHARS]}"]
    if history:
        parts.append(history)
    if prompt == "inline":
        parts.append(f'Reply with JSON only: {{"source": one of {names}, "reason": "<one sentence>"}}')
    else:
        listed = " or ".join(f'"{n}"' for n in profiles)
        parts.append(f'Which source is most likely to hold the answer: {listed}?\n'
                     f'Reply with JSON only: {{"source": "<the source name>", "reason": "<one sentence>"}}')
    return [Message(role="system", content=ROUTE_SYSTEM), Message(role="user", content="\n\n".join(parts))]


def match_source(text: str, names: Sequence[str]) -> str | None:
    """The source ``text`` names: an exact (case-insensitive) match, else the name mentioned
    earliest as a whole word, else ``None``."""
    cleaned = text.strip().strip("\"'`.").strip().lower()
    for name in names:
        if cleaned == name.lower():
            return name
    best: tuple[int, str] | None = None
    for name in names:
        found = re.search(rf"(?<![\w-]){re.escape(name.lower())}(?![\w-])", text.lower())
        if found and (best is None or found.start() < best[0]):
            best = (found.start(), name)
    return best[1] if best else None


@lru_cache(maxsize=32)
def _profile_vectors(embedder: Embedder, texts: tuple[str, ...]):
    """Unit vectors of the source profiles: fixed per source set, so encoded once, not per sub-query."""
    import numpy as np

    p = np.asarray(embedder.encode(list(texts)), dtype=np.float32)
    return p / np.maximum(np.linalg.norm(p, axis=1, keepdims=True), 1e-12)


def embedding_route(query: str, profiles: Mapping[str, str], embedder: Embedder | None = None) -> tuple[RouteDecision, dict[str, float]]:
    """The source whose profile is closest to the query (cosine of sentence embeddings; the
    bundled all-MiniLM-L6-v2 unless ``embedder`` is given), and every source's similarity. A
    source without a profile is compared by its name."""
    import numpy as np

    if not profiles:
        raise ValueError("routing needs at least one source")
    if embedder is None:
        from routerag.index.embedder import build_embedder

        embedder = build_embedder()
    names = list(profiles)
    q = np.asarray(embedder.encode([query[:ROUTE_QUERY_CHARS]], is_query=True), dtype=np.float32)[0]
    q = q / (np.linalg.norm(q) or 1.0)
    p = _profile_vectors(embedder, tuple(profiles[n] or n for n in names))
    sims = {n: round(float(v), 4) for n, v in zip(names, p @ q)}
    best = max(names, key=lambda n: sims[n])  # ties: the first listed
    reason = "profile similarity " + ", ".join(f"{n} {v:.3f}" for n, v in sims.items())
    return RouteDecision(source=best, reason=reason), sims


def parse_route(text: str, names: Sequence[str], avoid: Sequence[str] = ()) -> RouteDecision:
    """Parse the routing reply. ``avoid`` lists sources already tried, preferred by the fallback
    only (a model that deliberately repeats a source is obeyed)."""
    if not names:
        raise ValueError("routing needs at least one source")
    value = extract_json(text, want=dict)
    broken = None
    if value is None and (value := partial_object(text)) is not None:
        broken = "routing reply is broken JSON; fields recovered"
    if value is not None:
        raw_source = as_text(value.get("source") or value.get("route") or value.get("name"))
        chosen = match_source(raw_source, names) if raw_source else None
        if chosen is not None:
            return RouteDecision(source=chosen, reason=as_text(value.get("reason")), format_error=broken)
    chosen = match_source(text, names)
    if chosen is not None:
        return RouteDecision(source=chosen, reason=text.strip()[:300], format_error="routing reply was not JSON")
    fallback = next((n for n in names if n not in avoid), names[0])
    return RouteDecision(
        source=fallback,
        reason="fallback: the reply named no source",
        format_error=f"routing reply names none of {', '.join(names)}; fell back to {fallback!r}",
    )
