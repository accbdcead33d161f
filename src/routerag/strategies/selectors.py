"""Evidence selectors: order the candidate hits of several sources and keep ``keep_k``.

Scores of different sources are not comparable (a cosine similarity, a BM25 score and a PPR mass
live on different scales), which is why there is more than one selector:

* ``score`` — raw score, descending;
* ``norm_score`` — min-max normalised within each source (a source's best hit scores 1);
* ``routing_weighted`` — normalised score x ``preferred_weight`` for the routed source and
  x ``other_weight`` for the others;
* ``rrf`` — reciprocal rank fusion of the per-source rankings, ``sum 1 / (rrf_k + rank)``
  (ties: best rank reached, then ``doc_id``);
* ``llm`` — an LLM judge picks the relevant candidates by number; unusable output falls back to
  ``score`` and is recorded as a format error.

Ties are broken by the hit's rank within its source, then by input order (sources in the order
they were searched), so every selector is deterministic. Plugins register more with
``SELECTORS.register(name, fn)``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from pydantic import BaseModel, Field

from routerag.jsontext import extract_json
from routerag.llm.base import GenerationParams, Message
from routerag.registry import Registry, callables_taking
from routerag.runtime.base import StrategyContext
from routerag.runtime.loop import call_model, generated_text
from routerag.sources.fusion import rrf
from routerag.strategies.adaptive_cap import best_first, group_by_source
from routerag.trace import Hit, ModelCall


class SelectionRequest(BaseModel):
    query: str
    hits: list[Hit]
    keep_k: int = Field(ge=1)
    preferred_source: str | None = None
    preferred_weight: float = 1.5
    other_weight: float = 1.0
    rrf_k: int = Field(default=60, ge=1)
    judge_passage_chars: int = Field(default=400, ge=20)


@dataclass
class SelectionResult:
    hits: list[Hit]  # kept, best first
    model_calls: list[ModelCall]
    raw_output: str = ""
    format_error: str | None = None  # the judge's reply was unusable
    fallback: str | None = None  # why the score order was used instead of the judge's pick


Selector = Callable[[SelectionRequest, StrategyContext], SelectionResult]

SELECTORS: Registry[Selector] = Registry("selector", callables_taking("SelectionRequest", "StrategyContext"))


def _ordered(hits: list[Hit], value: Callable[[int, Hit], float]) -> list[Hit]:
    """Hits by ``value`` descending; ties by rank, then input position."""
    keyed = [(-value(i, h), h.rank, i, h) for i, h in enumerate(hits)]
    return [h for *_, h in sorted(keyed, key=lambda t: t[:3])]


def _dedupe(hits: list[Hit]) -> list[Hit]:
    """Keep the first (best-ordered) copy of a document found by several sources."""
    seen: set[str] = set()
    out = []
    for hit in hits:
        if hit.doc_id not in seen:
            seen.add(hit.doc_id)
            out.append(hit)
    return out


def normalised_scores(hits: list[Hit]) -> list[float]:
    """Min-max normalised score of each hit within its own source; a source whose hits all score
    the same (or that has one hit) gives them 1.0."""
    bounds = {}
    for source, group in group_by_source(hits).items():
        scores = [h.score for h in group]
        bounds[source] = (min(scores), max(scores))
    out = []
    for hit in hits:
        low, high = bounds[hit.source]
        out.append(1.0 if high - low <= 1e-12 else (hit.score - low) / (high - low))
    return out


@SELECTORS.register("score")
def select_by_score(request: SelectionRequest, context: StrategyContext) -> SelectionResult:
    ordered = _ordered(request.hits, lambda i, h: h.score)
    return SelectionResult(hits=_dedupe(ordered)[: request.keep_k], model_calls=[])


@SELECTORS.register("norm_score")
def select_by_norm_score(request: SelectionRequest, context: StrategyContext) -> SelectionResult:
    norm = normalised_scores(request.hits)
    ordered = _ordered(request.hits, lambda i, h: norm[i])
    return SelectionResult(hits=_dedupe(ordered)[: request.keep_k], model_calls=[])


@SELECTORS.register("routing_weighted")
def select_routing_weighted(request: SelectionRequest, context: StrategyContext) -> SelectionResult:
    norm = normalised_scores(request.hits)

    def weighted(i: int, hit: Hit) -> float:
        weight = request.preferred_weight if hit.source == request.preferred_source else request.other_weight
        return norm[i] * weight

    ordered = _ordered(request.hits, weighted)
    return SelectionResult(hits=_dedupe(ordered)[: request.keep_k], model_calls=[])


@SELECTORS.register("rrf")
def select_by_rrf(request: SelectionRequest, context: StrategyContext) -> SelectionResult:
    """Each source's hits best first form one ranked list; :func:`routerag.sources.fusion.rrf`
    fuses them by ``doc_id`` (a document found by two sources sums both contributions; the kept
    hit carries the fused score and ``metadata["rrf_ranks"]``)."""
    lists = [best_first(group) for group in group_by_source(request.hits).values()]
    return SelectionResult(hits=rrf(lists, k=request.rrf_k, top=request.keep_k), model_calls=[])


# ---------------------------------------------------------------- the LLM judge

JUDGE_SYSTEM = "You judge which retrieved passages help answer a question."

_INTEGER = re.compile(r"\d+")


def judge_messages(request: SelectionRequest, candidates: list[Hit]) -> list[Message]:
    lines = []
    for number, hit in enumerate(candidates, start=1):
        text = " ".join(hit.text.split())[: request.judge_passage_chars]
        lines.append(f"[{number}] ({hit.source}) {hit.title}: {text}")
    user = (
        f"Question: {request.query}\n\nPassages:\n" + "\n".join(lines) + "\n\n"
        f"List the numbers of the passages that help answer the question, most useful first, "
        f'at most {request.keep_k}. Reply with JSON only: {{"relevant": [numbers]}}'
    )
    return [Message(role="system", content=JUDGE_SYSTEM), Message(role="user", content=user)]


def parse_judge(text: str, n: int) -> list[int] | None:
    """0-based indices the judge picked (valid, deduplicated, in its order); ``None`` if the reply
    names no passage in 1..n."""
    value = extract_json(text)
    if isinstance(value, dict):
        value = next((v for v in value.values() if isinstance(v, list)), None)
    numbers: list[int] = []
    if isinstance(value, list):
        for item in value:
            try:
                numbers.append(int(str(item).strip().strip("[]")))
            except ValueError:
                continue
    else:
        numbers = [int(m) for m in _INTEGER.findall(text)]
    picked: list[int] = []
    for number in numbers:
        if 1 <= number <= n and number - 1 not in picked:
            picked.append(number - 1)
    if isinstance(value, list) and not value:
        return []  # an explicit "none is relevant"
    return picked or None


JUDGE_PARAMS = GenerationParams(max_tokens=64, temperature=0.0, stop=["}"])


@SELECTORS.register("llm")
def select_by_llm(request: SelectionRequest, context: StrategyContext) -> SelectionResult:
    candidates = _dedupe(_ordered(request.hits, lambda i, h: h.score))
    if not candidates:
        return SelectionResult(hits=[], model_calls=[])
    response, call = call_model(context, judge_messages(request, candidates), JUDGE_PARAMS, "judge")
    text = generated_text(response)
    picked = parse_judge(text, len(candidates))
    if not picked:
        by_score = select_by_score(request, context).hits
        if picked == []:
            return SelectionResult(by_score, [call], text, fallback="the judge kept no passage; kept by score")
        error = "judge reply names no passage number; kept by score"
        return SelectionResult(by_score, [call], text, format_error=error, fallback=error)
    return SelectionResult(
        hits=[candidates[i] for i in picked][: request.keep_k], model_calls=[call], raw_output=text
    )
