"""RouteRAG (PilotRAG; Guo et al., 2025, Algorithm 1): one policy interleaves reasoning with
searches whose mode it chooses by tags inside ``<search>``: ``[passage]`` (dense), ``[graph]``
(graph retrieval) or ``[graph][passage]`` (hybrid), up to a budget of B retrieval calls.

The ablation presets (``routerag-passage``, ``-graph``, ``-hybrid``, ``-random``) keep the
prompt and override the chosen mode, as the paper's single-mode and random-routing rows do.
"""

from __future__ import annotations

import copy
import random
from functools import partial
from typing import ClassVar, Literal

from pydantic import BaseModel, Field, create_model, model_validator

from routerag.config import OMIT_AT_DEFAULT
from routerag.episode.engine import EpisodeRules, EpisodeSetup
from routerag.llm.base import GenerationParams, Message
from routerag.protocol.routerag_tags import (
    COMBINED_MODE,
    DEFAULT_MODE_COST,
    MODE_TAGS,
    MODES,
    SEARCH_R1,
    UNLISTED_PRICE,
    Mode,
    ParsedAction,
    information_block,
    render_tags,
    resolve_modes,
    routerag_grammar,
    split_mode_tags,
)
from routerag.routing import RouterModel
from routerag.runtime.parsing import clean_query
from routerag.strategies.agentic import SearchPlan, TagStrategy
from routerag.strategies.prompts import FORCE_ANSWER, INVALID_ACTION, routerag_prompt
from routerag.trace import Route


class RouteRAGEpisodeParams(BaseModel):
    """The retrieval budget and modes of one RouteRAG episode: the leading fields of
    :class:`RouteRAGParams` (pydantic puts a base's fields first, in their stored order)."""

    k: int = Field(default=3, ge=1, le=50, description="documents per retrieval call (RouteRAG release: retriever.topk=3)")
    max_turns: int = Field(default=4, ge=0, le=32, description="retrieval budget B; invalid turns count too (RouteRAG release: max_turns=4)")
    allowed_modes: list[Mode] = Field(default_factory=lambda: list(MODES), min_length=1,
                                      description="modes that may be searched; others are replaced by default_mode")
    default_mode: Mode = Field(default="passage", description="mode of a search without a usable tag")

    @model_validator(mode="after")
    def _default_allowed(self) -> "RouteRAGEpisodeParams":
        if self.default_mode not in self.allowed_modes:
            self.default_mode = self.allowed_modes[0]
        return self


class RouteRAGParams(RouteRAGEpisodeParams):
    random_routing: bool = Field(default=False, description="replace the chosen mode by a seeded random allowed one")
    seed: int = Field(default=0, description="seed of random routing (combined with the question)")
    max_tokens_per_turn: int = Field(default=512, ge=1, le=8192)
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    few_shot: bool = Field(default=False, description="add a worked example to the prompt")
    grammar: bool = Field(default=False, description="constrain each turn with a GBNF grammar (llama.cpp)")
    max_query_chars: int = Field(default=300, ge=16, le=2000)
    mode_sources: dict[str, str] = Field(
        default_factory=lambda: {str(m): str(m) for m in MODES}, description="mounted source serving each mode"
    )
    mode_router: Literal["policy", "learned"] = Field(
        default="policy",
        description="who chooses a search's mode: the policy's tags, or the learned router (routerag.routing) over "
        "the allowed modes - the policy writes the query, the router chooses where it goes",
        json_schema_extra=OMIT_AT_DEFAULT,  # added after runs were stored; "policy" is the old behaviour
    )
    mode_router_model: RouterModel | None = Field(
        default=None, description="learned mode router: a shipped router's name or a model folder (default: the "
        "shipped one whose labels cover the allowed modes)", json_schema_extra=OMIT_AT_DEFAULT,
    )
    mode_router_margin: float = Field(
        default=0.0, ge=0.0, le=1.0, description="learned mode router: the cheapest mode whose predicted success is "
        "within this margin of the best", json_schema_extra=OMIT_AT_DEFAULT,
    )
    # the episode rules that training set before evaluation could (added after runs were stored; the
    # defaults keep the old behaviour), so that a policy is evaluated under the rules it was trained with
    mode_cost: dict[str, float] = Field(
        default_factory=lambda: dict(DEFAULT_MODE_COST), json_schema_extra=OMIT_AT_DEFAULT,
        description="deterministic cost of one retrieval call per mode (graph dearer than passage), recorded as "
        "Step.retrieval_cost; modes it does not list cost 1",
    )
    prompt_template: str | None = Field(
        default=None, json_schema_extra=OMIT_AT_DEFAULT,
        description="user prompt as a str.format template with {question}; None = RouteRAG's released prompt",
    )
    assistant_prefix: str = Field(
        default="", json_schema_extra=OMIT_AT_DEFAULT,
        description="text placed at the start of the assistant turn (prompt side, e.g. '<think>'); parsed with the first turn",
    )
    strict_modes: bool = Field(
        default=False, json_schema_extra=OMIT_AT_DEFAULT,
        description="a search without a known mode tag is an invalid action (no retrieval) instead of going to default_mode; "
        "keeps malformed tags from being rewarded",
    )
    reader: Literal["policy", "top_hit_title"] = Field(
        default="policy", json_schema_extra=OMIT_AT_DEFAULT,
        description="who answers when the budget is spent: the policy (forced '<answer>' turn) or, for routing-only "
        "diagnostics, the title of the last search's first hit",
    )

    def user_prompt(self, question: str) -> str:
        """The user message of an episode (before any chat template)."""
        if self.prompt_template:
            return self.prompt_template.format(question=question)
        return routerag_prompt(question, few_shot=self.few_shot)

    def fingerprint_inputs(self) -> dict[str, str]:
        """The learned mode router's weights, when it chooses the modes."""
        if self.mode_router != "learned":
            return {}
        from routerag.routing.learned import model_fingerprint

        return {"mode_router_model": model_fingerprint(self.mode_router_model, list(self.allowed_modes))}

    @model_validator(mode="after")
    def _mode_sources_cover(self) -> "RouteRAGParams":
        missing = [m for m in self.allowed_modes if m not in self.mode_sources]
        if missing:
            raise ValueError(f"mode_sources has no source for {missing}")
        return self


class ModeRouter:
    """Turns a search action into a plan: parse tags, repair the query, apply the Params'
    overrides (allowed modes, random routing, the learned router). One instance per question
    (it owns the RNG)."""

    def __init__(self, params: RouteRAGParams, question: str) -> None:
        self.params = params
        self.rng = random.Random(f"{params.seed}:{question}")  # str seeds are hashed stably
        self.learned = None
        if params.mode_router == "learned":
            from routerag.routing import RouterDeps, build_router

            self.learned = build_router("learned", RouterDeps(model=params.mode_router_model, margin=params.mode_router_margin))

    def __call__(self, action: ParsedAction, question: str) -> SearchPlan:
        p = self.params
        tags, query = split_mode_tags(action.query)
        choice = resolve_modes(tags, MODES, p.default_mode, combined=COMBINED_MODE)
        query, query_errors = clean_query(query, question, p.max_query_chars)
        mode, reason, chosen_by = choice.mode, f"policy tags {render_tags(tags) or '(none)'}", "policy"
        scores: dict[str, float] = {}
        if p.random_routing:
            mode, reason, chosen_by = self.rng.choice(p.allowed_modes), f"random routing (seed {p.seed}); policy chose {choice.mode}", "random"
        elif self.learned is not None:
            result = self.learned.route(query, {m: "" for m in p.allowed_modes})
            mode, reason, chosen_by, scores = result.choice, f"{result.reason}; policy chose {choice.mode}", self.learned.name, result.scores
        elif mode not in p.allowed_modes:
            mode, reason, chosen_by = p.default_mode, f"{choice.mode} not allowed; forced to {p.default_mode}", "default"
        source = p.mode_sources[mode]
        route = Route(choice=source, mode=mode, chosen_by=chosen_by, reason=reason, scores=scores,
                      proposed=None if chosen_by == "policy" else choice.mode)
        return SearchPlan(query=query, sources=[source], k=p.k, errors=choice.errors + query_errors, tags=tags, route=route)


class RouteRAG(TagStrategy):
    name: ClassVar[str] = "routerag"
    Params: ClassVar[type[BaseModel]] = RouteRAGParams
    params: RouteRAGParams

    @classmethod
    def episode(cls, params: RouteRAGParams, question: str) -> EpisodeSetup:
        """RouteRAG's episode: Search-R1 tags, searches planned by :class:`ModeRouter` and priced
        by ``mode_cost``, ``<information>`` observations, the released prompt."""
        p = params
        rules = EpisodeRules(
            protocol=SEARCH_R1, budget=p.max_turns, plan=ModeRouter(p, question), render=information_block,
            invalid_message=INVALID_ACTION, force_answer=FORCE_ANSWER, prefix=p.assistant_prefix,
            strict_modes=p.strict_modes, reader=p.reader, search_cost=partial(mode_price, p.mode_cost),
        )
        generation = GenerationParams(
            max_tokens=p.max_tokens_per_turn,
            temperature=p.temperature,
            grammar=routerag_grammar([MODE_TAGS[m] for m in p.allowed_modes]) if p.grammar else None,
        )
        return EpisodeSetup(rules=rules, messages=[Message(role="user", content=p.user_prompt(question))], generation=generation)

    @classmethod
    def search_sources(cls, params: RouteRAGParams) -> list[str]:
        return list(dict.fromkeys(params.mode_sources[m] for m in params.allowed_modes))


def mode_price(prices: dict[str, float], plan: SearchPlan) -> float:
    """The charge of one retrieval: its mode's price (recorded as ``Step.retrieval_cost``)."""
    if plan.mode is None:  # the mode ModeRouter chose (several modes may share a source)
        raise RuntimeError("ModeRouter returned a search plan without its mode")
    return float(prices.get(plan.mode, UNLISTED_PRICE))


# ---------------------------------------------------------------- ablation presets


def preset(name: str, class_name: str, **defaults: object) -> type[RouteRAG]:
    """A RouteRAG subclass whose Params have other defaults (explicit Params still override)."""
    fields: dict = {
        key: (RouteRAGParams.model_fields[key].annotation, Field(default_factory=partial(copy.deepcopy, value)))
        for key, value in defaults.items()
    }
    params = create_model(f"{class_name}Params", __base__=RouteRAGParams, __module__=__name__, **fields)
    return type(class_name, (RouteRAG,), {"name": name, "Params": params, "__module__": __name__})


RouteRAGPassage = preset("routerag-passage", "RouteRAGPassage", allowed_modes=["passage"])
RouteRAGGraph = preset("routerag-graph", "RouteRAGGraph", allowed_modes=["graph"])
RouteRAGHybrid = preset("routerag-hybrid", "RouteRAGHybrid", allowed_modes=["hybrid"])
RouteRAGRandom = preset("routerag-random", "RouteRAGRandom", random_routing=True)
