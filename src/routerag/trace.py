"""The Trace: one type produced by every strategy and consumed by evaluation, training and the UI.

A :class:`Step` has typed optional records for what some step kinds decide — :class:`Route`
(which source or mode, chosen by whom and why), :class:`Selection` (which hits were kept),
:class:`ForcedAnswer`, :class:`SubQueryRef` and a decomposition's ``plan`` — and, per source it
searched, what that source reported (:data:`SourceDetails`, one record per kind of source: a
graph retrieval's seeds and PPR nodes, ...). Every field is typed: there is no free-form
``metadata``. The JSON schema of :class:`Trace` is published by the server (``GET /v1/schema/trace``)
and is the only thing the web UI may read (tests/unit/test_trace_schema.py checks ``web/js``).

Traces stored before these records (no ``schema_version``) are read by
:func:`routerag.trace_layout.upgrade_trace`, which maps the old layout into the new fields; a
stored step's ``metadata`` (the free-form extras steps had until these fields) is mapped by
:func:`routerag.trace_layout.upgrade_step_extras` into the fields that kept its meaning.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from routerag.trace_layout import SCHEMA_VERSION, upgrade_source_details, upgrade_step_extras, upgrade_trace

__all__ = ["SCHEMA_VERSION", "ForcedAnswer", "GraphFact", "GraphNode", "GraphRetrieval", "GraphSeed", "Hit",
           "HybridRetrieval", "ModelCall", "PlannedSubQuery", "RecognitionFilter", "RemoteRetrieval", "Route", "RunErrorKind",
           "Segment", "Selection", "SourceDetails", "Step", "StepKind", "SubQueryRef", "Trace", "read_source_details",
           "trace_json_schema"]

log = logging.getLogger(__name__)

class Hit(BaseModel):
    """One retrieved passage (or graph node, table row, ...) as a source returned it."""

    doc_id: str
    title: str
    text: str
    score: float
    source: str  # the mounted source that returned it ("passage", "graph", "law", ...)
    mode: str  # the retrieval kind that scored it ("passage", "bm25", "graph", "hybrid", ...)
    rank: int  # 1-based rank within its result list
    metadata: dict[str, Any] = Field(default_factory=dict)  # e.g. triples, PPR seeds


StepKind = Literal[
    "think",  # reasoning only
    "search",  # a retrieval call the policy asked for
    "route",  # a routing decision made before retrieval (hard-route, Adaptive Cap)
    "decompose",  # question decomposition
    "select",  # evidence selection (score / rrf / llm judge)
    "answer",  # an intermediate or final answer
    "reflect",  # reflection after a failure
    "fuse",  # answer fusion
    "format_error",  # the model broke the protocol; ``format_error`` says how and what recovery was applied
]


class ModelCall(BaseModel):
    """One call to a chat model, accounted for in the trace."""

    purpose: str  # "policy", "decompose", "route", "judge", "answer", "fuse", "reflect", ...
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: float = 0.0
    cached: bool = False


# ---------------------------------------------------------------- what a source reported


class GraphFact(BaseModel):
    """A knowledge-graph fact that matched the query."""

    triple: list[str]  # subject, relation, object
    score: float  # cosine of the query with the fact
    weight: float  # its min-max normalised score: the reset weight it gives its entities


class GraphSeed(BaseModel):
    """An entity the personalized PageRank started from."""

    node: str
    weight: float  # its reset weight


class GraphNode(BaseModel):
    """A node among the top PPR mass."""

    node: str  # an entity name, or a passage's doc id
    kind: str  # "entity" or "passage"
    score: float  # its PPR score


class RecognitionFilter(BaseModel):
    """The recognition-memory filter over the candidate facts (a chat model keeps the relevant ones)."""

    before: int  # candidate facts
    after: int  # facts kept
    error: str | None = None  # why its reply was not usable (then every candidate is kept)
    call: ModelCall | None = None


class GraphRetrieval(BaseModel):
    """What a graph source (HippoRAG 2) reported for one query: facts -> seed entities -> PPR."""

    kind: Literal["graph"] = "graph"
    fallback: str | None = None  # "dense": no fact matched, the hits are the dense passage ranking
    facts: list[GraphFact] = Field(default_factory=list)
    seeds: list[GraphSeed] = Field(default_factory=list)
    top_nodes: list[GraphNode] = Field(default_factory=list)
    recognition: RecognitionFilter | None = None


class HybridRetrieval(BaseModel):
    """What a hybrid source reported: its graph half's retrieval (the dense half reports nothing)."""

    kind: Literal["hybrid"] = "hybrid"
    graph: GraphRetrieval


class RemoteRetrieval(BaseModel):
    """A source served by another routerag (``sources/remote.py``): where, and what the source there reported."""

    kind: Literal["remote"] = "remote"
    url: str
    server_latency_ms: float = 0.0  # the search's time on the server
    details: GraphRetrieval | HybridRetrieval | None = Field(default=None, discriminator="kind")


SourceDetails = Annotated[GraphRetrieval | HybridRetrieval | RemoteRetrieval, Field(discriminator="kind")]
"""What a source reported about one search, by kind of source (``Step.source_details``)."""

_SOURCE_DETAILS: dict[str, type[BaseModel]] = {"graph": GraphRetrieval, "hybrid": HybridRetrieval, "remote": RemoteRetrieval}


def read_source_details(reported: dict[str, Any]) -> GraphRetrieval | HybridRetrieval | RemoteRetrieval | None:
    """The typed record of what a source reported with a result (``QueryResult.metadata``), or
    None when it reported nothing of a known kind (a plugin source's own extras stay with its results)."""
    upgraded = upgrade_source_details(reported)
    model = _SOURCE_DETAILS.get(str(upgraded.get("kind"))) if upgraded is not None else None
    if upgraded is None or model is None:
        return None
    inner = upgraded.get("details")
    if model is RemoteRetrieval and isinstance(inner, dict):  # what the remote source reported, if of a known kind
        upgraded = {**upgraded, "details": read_source_details(inner)}
    record = model.model_validate(upgraded)
    assert isinstance(record, GraphRetrieval | HybridRetrieval | RemoteRetrieval)
    return record


class Segment(BaseModel):
    """A piece of the policy's transcript. Training masks ``observation`` (and ``prompt``) tokens
    out of the loss; only ``model`` tokens are the policy's own."""

    kind: Literal["prompt", "model", "observation"]
    text: str


class Route(BaseModel):
    """A routing decision: on a ``route`` step (a router before retrieval), a ``reflect`` step (the
    source the reflection moves to) or a ``search`` step whose policy chose where to search."""

    model_config = ConfigDict(extra="forbid")

    choice: str  # what was chosen: a mounted source, a mode's source, or (Adaptive) a strategy label
    mode: str | None = None  # the retrieval mode, for policies that route by mode (RouteRAG: passage/graph/hybrid)
    chosen_by: str = ""  # "policy", "random", "default", "params", "reflection" or a router's name; "" unknown
    reason: str = ""  # why, in words, when the strategy knows
    scores: dict[str, float] = Field(default_factory=dict)  # the router's score of every option
    proposed: str | None = None  # what the policy asked for when a router overrode it
    model: str | None = None  # the trained router model that scored the options (learned routers)


class Selection(BaseModel):
    """Which hits were kept: by a selector (``select`` steps), or the evidence an ``answer`` step was shown."""

    model_config = ConfigDict(extra="forbid")

    selector: str | None = None  # the selector's name; None: not a selector's choice (an answer's evidence)
    candidates: int | None = None  # how many hits it chose from
    kept: list[str] = Field(default_factory=list)  # doc ids, in the order kept
    kept_sources: list[str] = Field(default_factory=list)  # the source of each kept hit ([] if not recorded)
    fallback: str | None = None  # why the selector fell back to the score order

    @model_validator(mode="after")
    def _aligned(self) -> Selection:
        if self.kept_sources and len(self.kept_sources) != len(self.kept):
            raise ValueError(f"kept_sources has {len(self.kept_sources)} entries for {len(self.kept)} kept hits")
        return self

    def kept_by_source(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for source in self.kept_sources:
            counts[source] = counts.get(source, 0) + 1
        return counts


class ForcedAnswer(BaseModel):
    """The answer did not come from the policy closing an answer on its own turn."""

    model_config = ConfigDict(extra="forbid")

    reader: str = "policy"  # "policy": generated after the forced-answer cue; "top_hit_title": the last search's top title;
    # "last_hop": a fusion's reply had no answer, the last sub-query's answer stands


class SubQueryRef(BaseModel):
    """The sub-query of a decomposed question that a step works on."""

    model_config = ConfigDict(extra="forbid")

    id: str  # the sub-query's id in the plan of the ``decompose`` step
    attempt: int | None = None  # answer steps: 0 for the first try, n after n reflections
    preferred_source: str | None = None  # where the sub-query is routed at this step (None: not routed)
    success: bool | None = None  # answer steps: whether the answer was found (False: a reflection may follow)


class PlannedSubQuery(BaseModel):
    """One sub-query of a decomposition plan (a ``decompose`` step's ``plan``)."""

    id: str  # what SubQueryRef.id refers to
    query: str  # may hold placeholders (#1) filled with earlier answers
    depends_on: list[str] = Field(default_factory=list)  # ids whose answers it needs
    variables: dict[str, str] = Field(default_factory=dict)  # placeholder name -> sub-query id


class Step(BaseModel):
    index: int
    kind: StepKind
    reasoning: str = ""
    query: str | None = None
    sources: list[str] = Field(default_factory=list)  # the sources this step searched or whose hits it used
    hits: list[Hit] = Field(default_factory=list)
    source_details: dict[str, SourceDetails] = Field(default_factory=dict)  # per source searched: what it reported, by kind
    route: Route | None = None
    selection: Selection | None = None
    forced: ForcedAnswer | None = None
    subquery: SubQueryRef | None = None
    plan: list[PlannedSubQuery] = Field(default_factory=list)  # decompose steps: the sub-queries, in execution order
    retrieval_cost: float | None = None  # the price of this search as its episode charged it (RouteRAG: mode_cost)
    observation: str = ""  # exactly what was shown to the model
    answer: str | None = None  # intermediate answer of this step, if any
    intermediate: bool = False  # answer steps: not the trace's final answer (a hop's, an iteration's, a chain's)
    iteration: int | None = None  # iterative strategies (Iter-RetGen): the round this step belongs to, from 0
    model_calls: list[ModelCall] = Field(default_factory=list)
    retrieval_ms: float = 0.0
    latency_ms: float = 0.0
    format_error: str | None = None
    raw_output: str = ""  # the model's text for this step, verbatim

    @model_validator(mode="before")
    @classmethod
    def _read_stored_extras(cls, data: Any) -> Any:
        return upgrade_step_extras(data)

    @field_validator("source_details", mode="before")
    @classmethod
    def _known_kinds(cls, details: Any) -> Any:
        """Stored records without a ``kind`` get the one their keys show; what no kind describes is left out."""
        if not isinstance(details, dict):
            return details
        out: dict[str, Any] = {}
        for name, reported in details.items():
            if isinstance(reported, dict):
                record = read_source_details(reported)
                if record is not None:
                    out[name] = record
            else:
                out[name] = reported
        return out

    @model_validator(mode="after")
    def _one_meaning_of_sources(self) -> Step:
        if self.kind in ("route", "reflect") and self.sources:
            raise ValueError(f"a {self.kind} step searches nothing: its choice goes in `route`, not `sources`")
        return self

    def decision(self) -> list[str]:
        """The sources (or strategy label) this step routed to: a route/reflect step's choice, a
        search step's sources; [] for other steps."""
        if self.kind in ("route", "reflect"):
            return [self.route.choice] if self.route is not None else []
        if self.kind == "search":
            return list(self.sources)
        return []


StepObserver = Callable[[Step], None]
"""Called with each step as it is appended to a trace (see :meth:`Trace.observe`)."""

RunErrorKind = Literal[
    "retrieval",  # a retrieval request that cannot be served (unknown source, bad query, ...)
    "model",  # a chat model backend failed
    "remote_source",  # a remote retrieval server was unreachable or failed
    "other",  # anything else (a bug)
]
"""What kind of failure ended a run (``Trace.error_kind``; :func:`routerag.runtime.failure.failure_kind`)."""


class Trace(BaseModel):
    question: str
    strategy: str
    qid: str | None = None
    steps: list[Step] = Field(default_factory=list)
    answer: str = ""
    fallback_answer: str | None = None  # e.g. RealRoute's last-hop answer when fusion fails
    segments: list[Segment] = Field(default_factory=list)  # the policy transcript, for training
    error: str | None = None  # set when the strategy raised; the run goes on
    error_kind: RunErrorKind | None = None  # the kind of that failure; None: no error, or a trace stored before the field
    latency_ms: float = 0.0
    params: dict[str, Any] = Field(default_factory=dict)  # the strategy's resolved parameters (for display/report)
    schema_version: int = SCHEMA_VERSION  # stored traces without it have the old layout (routerag.trace_layout)
    _on_step: StepObserver | None = PrivateAttr(default=None)  # not part of the record

    # ---- building ----
    def observe(self, on_step: StepObserver | None) -> None:
        """Call ``on_step(step)`` for every step :meth:`add` appends from now on (the service's
        live stream: ``StrategyContext.on_step``). The observer is not stored with the trace."""
        self._on_step = on_step

    def add(self, step: Step) -> Step:
        """Append ``step`` and tell the observer: the one place a step joins a trace. An observer
        that raises is logged and ignored (showing a step must not change the answer)."""
        self.steps.append(step)
        if self._on_step is not None:
            try:
                self._on_step(step)
            except Exception:  # noqa: BLE001 — a display concern; the run goes on
                log.exception("the step observer failed on step %d", step.index)
        return step

    @model_validator(mode="before")
    @classmethod
    def _read_old_layout(cls, data: Any) -> Any:
        return upgrade_trace(data)

    # ---- totals, derived (never stored twice) ----
    @property
    def model_calls(self) -> list[ModelCall]:
        return [c for s in self.steps for c in s.model_calls]

    @property
    def prompt_tokens(self) -> int:
        return sum(c.prompt_tokens for c in self.model_calls)

    @property
    def completion_tokens(self) -> int:
        return sum(c.completion_tokens for c in self.model_calls)

    @property
    def search_steps(self) -> list[Step]:
        return [s for s in self.steps if s.kind == "search"]

    @property
    def retrieval_turns(self) -> int:
        return len(self.search_steps)

    @property
    def retrieval_ms(self) -> float:
        return sum(s.retrieval_ms for s in self.steps)

    @property
    def model_ms(self) -> float:
        return sum(c.latency_ms for c in self.model_calls)

    @property
    def format_errors(self) -> int:
        return sum(1 for s in self.steps if s.format_error)

    def retrieval_calls_by_source(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for step in self.steps:
            if step.kind == "search":
                for name in step.sources:
                    counts[name] = counts.get(name, 0) + 1
        return counts

    def summary(self) -> dict[str, Any]:
        return {
            "answer": self.answer,
            "retrieval_turns": self.retrieval_turns,
            "retrieval_ms": round(self.retrieval_ms, 2),
            "model_ms": round(self.model_ms, 2),
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "format_errors": self.format_errors,
            "latency_ms": round(self.latency_ms, 2),
            "error": self.error,
        }


def trace_json_schema() -> dict[str, Any]:
    """The JSON schema of a serialised :class:`Trace`: what the server publishes and the UI may read."""
    return Trace.model_json_schema(mode="serialization")
