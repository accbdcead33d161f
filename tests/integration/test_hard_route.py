"""DeepSieve hard routing: one source per sub-query, chosen before retrieval; reflection may switch."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from routerag.llm.base import GenerationParams, Message
from routerag.llm.scripted import ScriptedModel
from routerag.routing.source_routing import ROUTE_SYSTEM
from routerag.runtime.base import StrategyContext
from routerag.sources.base import QueryResult
from routerag.sources.sourceset import SourceSet
from routerag.strategies.decompose import DECOMPOSE_SYSTEM
from routerag.strategies.fusion_answer import FUSE_SYSTEM
from routerag.strategies.hard_route import HardRoute, HardRouteParams
from routerag.strategies.reflection import REFLECT_SYSTEM
from routerag.strategies.subanswer import ANSWER_SYSTEM
from routerag.trace import Hit


class KeywordSource:
    """Returns its documents that share a word with the query (score = shared words)."""

    def __init__(self, name: str, docs: dict[str, str], profile: str) -> None:
        self.name, self.mode, self.profile = name, "keyword", profile
        self.docs = docs
        self.queries: list[str] = []

    def search(self, queries: Sequence[str], k: int) -> list[QueryResult]:
        self.queries.extend(queries)
        out = []
        for q in queries:
            words = set(q.lower().rstrip("?").split())
            scored = sorted(
                ((len(words & set(t.lower().split())), d, t) for d, t in self.docs.items()), key=lambda x: (-x[0], x[1])
            )
            hits = [
                Hit(doc_id=d, title=d, text=t, score=float(s), source=self.name, mode="keyword", rank=i + 1)
                for i, (s, d, t) in enumerate([x for x in scored if x[0] > 0][:k])
            ]
            out.append(QueryResult(query=q, source=self.name, hits=hits, latency_ms=0.1))
        return out


FILMS = KeywordSource("films", {"f1": "inception was directed by christopher nolan"}, "films and who made them")
PEOPLE = KeywordSource("people", {"p1": "christopher nolan was born on 30 july 1970"}, "biographies of people")


def responder(messages: list[Message], params: GenerationParams, continue_final: bool) -> str:
    system, prompt = messages[0].content, messages[-1].content
    if system == DECOMPOSE_SYSTEM:
        return json.dumps([
            {"id": "q1", "query": "Who directed Inception?"},
            {"id": "q2", "query": "When was #1 born?", "depends_on": ["q1"]},
        ])
    if system == ROUTE_SYSTEM:
        query = prompt.split("Query: ")[1].split("\n")[0]
        # deliberately wrong for the second hop, so reflection has to switch source
        return json.dumps({"source": "films", "reason": f"routing {query}"})
    if system == ANSWER_SYSTEM:
        if "inception was directed by christopher nolan" in prompt and "Question: Who directed" in prompt:
            return json.dumps({"answer": "Christopher Nolan", "reason": "f1", "success": 1})
        if "born on 30 july 1970" in prompt:
            return json.dumps({"answer": "30 July 1970", "reason": "p1", "success": 1})
        return json.dumps({"answer": "", "reason": "not in these passages", "success": 0})
    if system == REFLECT_SYSTEM:
        assert 'on source "films"' in prompt and "not in these passages" in prompt
        return json.dumps({"query": "Christopher Nolan born", "source": "people", "reason": "biographies"})
    if system == FUSE_SYSTEM:
        return json.dumps({"answer": "30 July 1970", "reason": "q2"})
    raise AssertionError(f"unexpected prompt {system!r}")


def test_hard_route_searches_only_the_chosen_source_and_reflects_to_switch():
    films = KeywordSource("films", FILMS.docs, FILMS.profile)
    people = KeywordSource("people", PEOPLE.docs, PEOPLE.profile)
    model = ScriptedModel(responder)
    trace = HardRoute(StrategyContext(model=model, sources=SourceSet([films, people])), HardRouteParams(top_k=3)).run(
        "When was the director of Inception born?"
    )
    assert trace.error is None, trace.error
    assert [s.kind for s in trace.steps] == [
        "decompose",
        "route", "search", "answer",  # q1 -> films, found
        "route", "search", "answer", "reflect", "search", "answer",  # q2 -> films (wrong), reflect -> people
        "fuse",
    ]
    for step in trace.search_steps:
        assert len(step.sources) == 1 and {h.source for h in step.hits} <= set(step.sources)
    assert films.queries == ["Who directed Inception?", "When was Christopher Nolan born?"]
    assert people.queries == ["Christopher Nolan born"]
    assert trace.retrieval_calls_by_source() == {"films": 2, "people": 1}
    routes = [s for s in trace.steps if s.kind == "route"]
    assert [r.subquery.preferred_source for r in routes] == ["films", "films"]
    assert routes[1].route.reason == "routing When was Christopher Nolan born?"
    assert trace.answer == "30 July 1970" == trace.fallback_answer
    assert "select" not in [s.kind for s in trace.steps]


def test_hard_route_stops_after_max_reflections_with_fallback_answer():
    def stubborn(messages: list[Message], params: GenerationParams, continue_final: bool) -> str:
        system = messages[0].content
        if system == ROUTE_SYSTEM:
            return "people"
        if system == ANSWER_SYSTEM:
            return json.dumps({"answer": "maybe Nolan", "reason": "a guess", "success": 0})
        if system == REFLECT_SYSTEM:
            return "```json\n{'query': 'Nolan', 'source': 'nowhere'}\n```"
        return "{}"

    trace = HardRoute(
        StrategyContext(model=ScriptedModel(stubborn), sources=SourceSet([FILMS, PEOPLE])),
        {"decomposition": False, "max_reflections": 1},
    ).run("Who is Nolan?")
    kinds = [s.kind for s in trace.steps]
    assert kinds == ["decompose", "route", "search", "answer", "reflect", "search", "answer", "fuse"]
    reflect = trace.steps[4]
    assert reflect.format_error and reflect.decision() == ["films"]  # unknown source -> first untried
    assert trace.search_steps[1].sources == ["films"]
    assert trace.answer == "maybe Nolan" == trace.fallback_answer  # fusion gave "{}" -> last hop
    assert trace.format_errors >= 3  # bare route, reflection source, empty fusion


@pytest.mark.data
def test_misrouted_real_questions_recover_by_reflection(tmp_path):
    """Real law-med passages under real BM25: the router always picks the wrong source; the
    answerer succeeds only when the question's own gold passage is shown; reflection switches."""
    from routerag.corpus.datasets import load_dataset
    from routerag.eval.routing import routing_outcome
    from routerag.index.bm25 import BM25Index
    from routerag.index.docstore import DocStore
    from routerag.index.settings import IndexSettings
    from routerag.sources.bm25 import BM25Source

    data = load_dataset("law-med")
    sources, titles = [], {}
    for name, spec in data.sources.items():
        store = DocStore(spec.docs[:20])
        sources.append(BM25Source(BM25Index.build(store, tmp_path / name, IndexSettings()), store, name=name, profile=spec.profile))
        titles.update({d.doc_id: d.title for d in spec.docs})
    questions = [data.questions[1], data.questions[201]]
    wrong = {q.question[:100]: ("med" if q.gold_source == "law" else "law") for q in questions}
    gold_titles = {q.question[:100]: titles[q.supporting_doc_ids[0]] for q in questions}

    def respond(messages: list[Message], params: GenerationParams, continue_final: bool) -> str:
        system, prompt = messages[0].content, messages[-1].content
        if system == ROUTE_SYSTEM:
            return json.dumps({"source": wrong[prompt.split("Query: ", 1)[1][:100]]})
        if system == ANSWER_SYSTEM:
            key = prompt.split("Question: ")[-1][:100]
            found = f") {gold_titles[key]}\n" in prompt
            return json.dumps({"answer": "gold" if found else "", "reason": "checked", "success": int(found)})
        if system == REFLECT_SYSTEM:
            assert "failed: checked" in prompt
            return '{"source": "the other one"}'  # no query, unknown source -> first untried source
        return '{"answer": ""}'

    strategy = HardRoute(
        StrategyContext(model=ScriptedModel(respond), sources=SourceSet(sources)),
        HardRouteParams(decomposition=False, top_k=2, max_reflections=1),
    )
    for question in questions:
        trace = strategy.run(question)
        assert trace.error is None, trace.error
        outcome = routing_outcome(trace, question.gold_source)
        assert not outcome.correct and outcome.gold_used  # wrong first, gold after reflection
        assert [s.sources for s in trace.search_steps] == [[wrong[question.question[:100]]], [question.gold_source]]
        assert trace.answer == "gold" == trace.fallback_answer


class _ToyEmbedder:
    """Bag-of-words test double of a sentence embedder over a fixed vocabulary."""

    identity, dim = "toy", 6
    vocab = ["court", "contract", "judge", "patient", "drug", "symptoms"]

    def encode(self, texts, *, is_query=False):
        import numpy as np

        return np.array([[float(w in t.lower()) for w in self.vocab] for t in texts])


def test_embedding_router_picks_the_closest_profile_whatever_the_order():
    from routerag.routing.source_routing import embedding_route

    law, med = "court decisions, contract disputes, how a judge ruled", "patient symptoms, drug treatments"
    query = "A patient with these symptoms takes which drug?"
    for profiles in ({"law": law, "med": med}, {"med": med, "law": law}):
        decision, sims = embedding_route(query, profiles, _ToyEmbedder())
        assert decision.source == "med" and sims["med"] > sims["law"] and decision.format_error is None
        assert "profile similarity" in decision.reason


def test_hard_route_with_the_embedding_router_makes_no_routing_call(monkeypatch):
    import routerag.index.embedder as embedder_module

    monkeypatch.setattr(embedder_module, "build_embedder", lambda config=None: _ToyEmbedder())
    films = KeywordSource("films", FILMS.docs, "court judge")  # profiles in the toy vocabulary
    people = KeywordSource("people", PEOPLE.docs, "patient drug")
    model = ScriptedModel(responder)
    params = HardRouteParams(top_k=3, router="profile-embedding", decomposition=False, max_reflections=0)
    trace = HardRoute(StrategyContext(model=model, sources=SourceSet([films, people])), params).run("Which drug helps this patient?")
    route = next(s for s in trace.steps if s.kind == "route")
    assert route.decision() == ["people"] and route.model_calls == [] and route.route.chosen_by == "profile-embedding"
    assert all(c.messages[0].content != ROUTE_SYSTEM for c in model.calls)
    assert people.queries and not films.queries


@pytest.mark.data
def test_embedding_router_on_law_med_profiles_with_the_bundled_embedder():
    """The real embedder on the released law-med profiles and two real-style questions."""
    import pytest

    from routerag.corpus.datasets import DataNotFoundError, load_dataset
    from routerag.routing.source_routing import embedding_route

    try:
        data = load_dataset("law-med")
    except DataNotFoundError:
        pytest.skip("shared benchmark data not available")
    profiles = {name: spec.profile for name, spec in data.sources.items()}
    med_q = "A 45-year-old woman presents with fever and a productive cough. Which antibiotic is most appropriate?"
    law_q = "The court held that the contract was unenforceable because the defendant lacked capacity. Which holding applies?"
    assert embedding_route(med_q, profiles)[0].source == "med"
    assert embedding_route(law_q, profiles)[0].source == "law"


def test_embedding_router_encodes_the_profiles_once_per_source_set():
    from routerag.routing.source_routing import embedding_route

    class Counting(_ToyEmbedder):
        def __init__(self):
            self.batches = []

        def encode(self, texts, *, is_query=False):
            self.batches.append((list(texts), is_query))
            return super().encode(texts, is_query=is_query)

    embedder = Counting()
    profiles = {"law": "court judge", "med": "patient drug"}
    for query in ("which drug?", "which court?", "which judge?"):
        embedding_route(query, profiles, embedder)
    assert [b for b in embedder.batches if not b[1]] == [(["court judge", "patient drug"], False)]
    assert sum(1 for b in embedder.batches if b[1]) == 3
