"""RealRoute end to end with a scripted model that answers per prompt purpose: binding, Adaptive
Cap quotas, selectors in the loop, reflection, fusion fallback, and a run over real law-med
passages indexed with the real BM25 source."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence

import pytest

from routerag.llm.base import GenerationParams, Message, ModelError
from routerag.llm.scripted import ScriptedModel
from routerag.routing.source_routing import ROUTE_SYSTEM
from routerag.runtime.base import StrategyContext
from routerag.sources.base import QueryResult
from routerag.sources.sourceset import SourceSet
from routerag.strategies import STRATEGIES
from routerag.strategies.decompose import DECOMPOSE_SYSTEM
from routerag.strategies.fusion_answer import FUSE_SYSTEM
from routerag.strategies.hard_route import HardRoute
from routerag.strategies.realroute import RealRoute, RealRouteParams
from routerag.strategies.reflection import REFLECT_SYSTEM
from routerag.strategies.selectors import JUDGE_SYSTEM
from routerag.strategies.subanswer import ANSWER_SYSTEM
from routerag.trace import ForcedAnswer, Hit

PURPOSES = {
    DECOMPOSE_SYSTEM: "decompose",
    ROUTE_SYSTEM: "route",
    JUDGE_SYSTEM: "judge",
    ANSWER_SYSTEM: "answer",
    REFLECT_SYSTEM: "reflect",
    FUSE_SYSTEM: "fuse",
}


def by_purpose(**handlers: Callable[[str], str]) -> ScriptedModel:
    """A scripted model whose reply is ``handlers[purpose](user prompt)``."""

    def respond(messages: list[Message], params: GenerationParams, continue_final: bool) -> str:
        purpose = PURPOSES[messages[0].content]
        if purpose not in handlers:
            raise ModelError(f"no scripted reply for {purpose}")
        return handlers[purpose](messages[-1].content)

    return ScriptedModel(respond)


class FixedSource:
    """A source with ``n`` hits per query (scores ``top, top-1, ...``); remembers every query."""

    def __init__(self, name: str, n: int = 8, top: float = 10.0, profile: str = "") -> None:
        self.name, self.mode, self.profile = name, "test", profile or f"documents about {name}"
        self.n, self.top = n, top
        self.queries: list[str] = []

    def search(self, queries: Sequence[str], k: int) -> list[QueryResult]:
        self.queries.extend(queries)
        out = []
        for q in queries:
            hits = [
                Hit(doc_id=f"{self.name}{i}", title=f"{self.name} {i}", text=f"{self.name} passage {i} for {q}",
                    score=self.top - i, source=self.name, mode="test", rank=i + 1)
                for i in range(min(k, self.n))
            ]
            out.append(QueryResult(query=q, source=self.name, hits=hits, latency_ms=0.1))
        return out


def answer_json(answer: str, success: bool = True, reason: str = "from the passages") -> str:
    return json.dumps({"answer": answer, "reason": reason, "success": int(success)})


def run(model: ScriptedModel, sources: list, question: str = "When was the director of Inception born?", **params):
    strategy = RealRoute(StrategyContext(model=model, sources=SourceSet(sources)), RealRouteParams(**params))
    return strategy.run(question)


PLAN = json.dumps([
    {"id": "q1", "query": "Who directed Inception?"},
    {"id": "q2", "query": "When was {q1} born?", "depends_on": ["q1"]},
])


def two_hop_answers(prompt: str) -> str:
    question = prompt.split("Question: ")[-1].split("\n")[0]
    if question == "Who directed Inception?":
        return answer_json("Christopher Nolan")
    if question == "When was Christopher Nolan born?":
        return answer_json("30 July 1970")
    return answer_json("", success=False, reason=f"unexpected question {question!r}")


def test_binding_feeds_the_first_answer_into_the_second_search():
    a, b = FixedSource("films"), FixedSource("people")
    model = by_purpose(
        decompose=lambda p: PLAN,
        route=lambda p: '{"source": "people", "reason": "a person"}',
        answer=two_hop_answers,
        fuse=lambda p: '{"answer": "30 July 1970", "reason": "q2"}',
    )
    trace = run(model, [a, b])
    assert trace.error is None
    assert a.queries == b.queries == ["Who directed Inception?", "When was Christopher Nolan born?"]
    assert [s.kind for s in trace.steps] == [
        "decompose", "route", "search", "select", "answer", "route", "search", "select", "answer", "fuse"
    ]
    assert trace.answer == "30 July 1970" and trace.fallback_answer == "30 July 1970"
    assert trace.retrieval_turns == 2 and trace.retrieval_calls_by_source() == {"films": 2, "people": 2}
    # the fusion prompt carries the whole chain
    fuse_prompt = model.calls[-1].messages[-1].content
    assert "q1: Who directed Inception? -> Christopher Nolan" in fuse_prompt
    assert {c.purpose for c in trace.model_calls} == {"decompose", "route", "answer", "fuse"}
    assert trace.prompt_tokens > 0 and trace.params["selector"] == "score"


def test_adaptive_cap_quotas_hold_in_the_loop():
    sources = [FixedSource("a", top=100.0), FixedSource("b", top=1.0), FixedSource("c", top=50.0)]
    model = by_purpose(route=lambda p: '{"source": "b", "reason": "b fits"}', answer=lambda p: answer_json("x"), fuse=lambda p: '{"answer": "x"}')
    trace = run(model, sources, decomposition=False, top_k_per_source=8, preferred_cap=3, other_cap=1, keep_k=10)
    search = trace.search_steps[0]
    assert search.sources == ["a", "b", "c"] and len(search.hits) == 24
    select = next(s for s in trace.steps if s.kind == "select")
    assert select.selection.kept_by_source() == {"a": 1, "b": 3, "c": 1}
    assert select.selection.kept == ["a0", "c0", "b0", "b1", "b2"]  # raw score order
    route = next(s for s in trace.steps if s.kind == "route")
    assert route.decision() == ["b"] and route.subquery.preferred_source == "b" and route.route.reason == "b fits"
    shown = next(s for s in trace.steps if s.kind == "answer").observation
    assert shown.count("(source: b)") == 3 and shown.count("(source: a)") == 1


def test_keep_k_cuts_after_the_cap_with_the_selector_order():
    sources = [FixedSource("a", top=100.0), FixedSource("b", top=1.0)]
    model = by_purpose(route=lambda p: "b", answer=lambda p: answer_json("x"), fuse=lambda p: '{"answer": "x"}')
    trace = run(model, sources, decomposition=False, preferred_cap=5, other_cap=2, keep_k=4, selector="routing_weighted")
    select = next(s for s in trace.steps if s.kind == "select")
    # normalised: b0=1.5, a0=1.0, b1=1.125, ... -> b first, a0 second
    assert select.selection.kept == ["b0", "b1", "a0", "b2"]
    assert trace.steps[1].format_error  # "b" alone is not JSON, but was understood
    assert trace.steps[1].decision() == ["b"]


def test_without_adaptive_cap_there_is_no_routing_call():
    model = by_purpose(answer=lambda p: answer_json("x"), fuse=lambda p: '{"answer": "x"}')
    trace = run(model, [FixedSource("a"), FixedSource("b", top=5)], decomposition=False, adaptive_cap=False, keep_k=3, selector="norm_score")
    assert "route" not in [s.kind for s in trace.steps]
    assert next(s for s in trace.steps if s.kind == "select").selection.kept == ["a0", "b0", "a1"]


def test_llm_selector_bad_output_falls_back_in_the_loop():
    model = by_purpose(
        route=lambda p: '{"source": "a"}', judge=lambda p: "all of them!", answer=lambda p: answer_json("x"), fuse=lambda p: '{"answer": "x"}'
    )
    trace = run(model, [FixedSource("a"), FixedSource("b", top=20)], decomposition=False, selector="llm", keep_k=3)
    select = next(s for s in trace.steps if s.kind == "select")
    assert select.format_error and select.selection.fallback
    assert select.selection.kept == ["b0", "b1", "a0"]  # score order of the capped candidates (a: 5, b: 2)
    assert [c.purpose for c in select.model_calls] == ["judge"]


def test_reflection_retries_with_history_and_stops_at_the_max():
    a, b = FixedSource("a"), FixedSource("b")
    reflect_prompts: list[str] = []

    def reflect(prompt: str) -> str:
        reflect_prompts.append(prompt)
        n = len(reflect_prompts)
        return json.dumps({"query": f"rewrite {n}", "source": "b" if n == 1 else "a", "reason": "try elsewhere"})

    model = by_purpose(
        route=lambda p: '{"source": "a"}',
        answer=lambda p: answer_json("", success=False, reason="passages are silent"),
        reflect=reflect,
        fuse=lambda p: '{"answer": ""}',
    )
    trace = run(model, [a, b], question="Who wrote X?", decomposition=False, max_reflections=2)
    kinds = [s.kind for s in trace.steps]
    assert kinds.count("answer") == 3 and kinds.count("reflect") == 2 and kinds.count("search") == 3
    assert a.queries == ["Who wrote X?", "rewrite 1", "rewrite 2"]
    # the second reflection sees both failed attempts, with their queries and sources
    assert 'query "Who wrote X?" on source "a"' in reflect_prompts[1]
    assert 'query "rewrite 1" on source "b"' in reflect_prompts[1]
    assert "passages are silent" in reflect_prompts[1]
    reflects = [s for s in trace.steps if s.kind == "reflect"]
    assert [r.subquery.preferred_source for r in reflects] == ["b", "a"]
    searches = trace.search_steps
    assert [s.subquery.preferred_source for s in searches] == ["a", "b", "a"]
    # nothing was found: fusion is empty, the last-hop answer is empty too
    assert trace.answer == "" and trace.fallback_answer == ""


def test_reflection_stops_once_an_answer_succeeds():
    replies = iter([answer_json("", success=False), answer_json("Ada Lovelace")])
    model = by_purpose(
        route=lambda p: '{"source": "a"}',
        answer=lambda p: next(replies),
        reflect=lambda p: '{"query": "author of X", "source": "b"}',
        fuse=lambda p: '{"answer": "Ada Lovelace"}',
    )
    trace = run(model, [FixedSource("a"), FixedSource("b")], decomposition=False, max_reflections=3)
    assert [s.kind for s in trace.steps].count("answer") == 2
    assert trace.answer == "Ada Lovelace"


def test_fusion_failure_falls_back_to_the_last_hop():
    model = by_purpose(decompose=lambda p: PLAN, route=lambda p: '{"source": "a"}', answer=two_hop_answers, fuse=lambda p: "I am not sure.")
    trace = run(model, [FixedSource("a")])
    assert trace.answer == "30 July 1970" == trace.fallback_answer
    fuse = trace.steps[-1]
    assert fuse.kind == "fuse" and fuse.forced == ForcedAnswer(reader="last_hop") and fuse.format_error


def test_bad_decomposition_uses_the_question_and_single_hop_can_skip_fusion():
    model = by_purpose(decompose=lambda p: "Let me think step by step.", route=lambda p: '{"source": "a"}', answer=lambda p: answer_json("42"))
    trace = run(model, [FixedSource("a")], question="What is the answer?", fuse_single_hop=False)
    assert trace.steps[0].kind == "decompose" and trace.steps[0].format_error
    assert trace.search_steps[0].query == "What is the answer?"
    assert trace.answer == "42" and "fuse" not in [s.kind for s in trace.steps]


def test_model_failure_becomes_trace_error():
    trace = run(by_purpose(), [FixedSource("a")])
    assert trace.error and "decompose" in trace.error


def test_unknown_selector_is_rejected():
    with pytest.raises(ValueError, match="unknown selector"):
        RealRouteParams(selector="magic")


def test_registration():
    assert STRATEGIES.get("realroute") is RealRoute
    assert STRATEGIES.get("hard-route") is HardRoute


# ---------------------------------------------------------------- real passages, real BM25


@pytest.fixture(scope="module")
def law_med(tmp_path_factory, shared):
    from routerag.corpus.datasets import load_dataset
    from routerag.index.bm25 import BM25Index
    from routerag.index.docstore import DocStore
    from routerag.index.settings import IndexSettings
    from routerag.sources.bm25 import BM25Source

    data = load_dataset("law-med")
    root = tmp_path_factory.mktemp("law-med")
    sources = []
    for name, spec in data.sources.items():
        store = DocStore(spec.docs[:25])  # the first questions' gold passages are among these
        index = BM25Index.build(store, root / name, IndexSettings())
        sources.append(BM25Source(index, store, name=name, profile=spec.profile))
    questions = data.questions[:3] + data.questions[200:203]
    return sources, questions


MEDICAL = re.compile(r"\b(?:patients?|\d+-(?:year|month|week)-old|infant|symptoms?|diagnosis|physician)\b", re.IGNORECASE)


def keyword_router(prompt: str) -> str:
    query = prompt.split("Query: ", 1)[1]
    return json.dumps({"source": "med" if MEDICAL.search(query) else "law", "reason": "keywords"})


def option_picker(prompt: str) -> str:
    """Answer with the first option line of the first passage (a real model would reason)."""
    passage = prompt.split("[1] ", 1)[1]
    option = re.search(r"\(A\) (.+)", passage)
    return answer_json(option.group(1).strip() if option else "", success=bool(option))


def test_real_law_med_run(law_med):
    from routerag.eval.routing import routing_outcome

    sources, questions = law_med
    model = by_purpose(route=keyword_router, answer=option_picker, fuse=lambda p: "not json")
    strategy = RealRoute(
        StrategyContext(model=model, sources=SourceSet(sources)),
        RealRouteParams(decomposition=False, top_k_per_source=4, keep_k=4, preferred_cap=3, other_cap=1),
    )
    correct_routes = 0
    for question in questions:
        trace = strategy.run(question)
        assert trace.error is None, trace.error
        assert trace.qid == question.qid
        search = trace.search_steps[0]
        assert len(search.query) <= 2000 and set(search.sources) == {"law", "med"}
        route = next(s for s in trace.steps if s.kind == "route")
        correct_routes += routing_outcome(trace, question.gold_source).correct
        select = next(s for s in trace.steps if s.kind == "select")
        assert sum(select.selection.kept_by_source().values()) == len(select.selection.kept) <= 4
        assert select.selection.kept_by_source().get(route.route.choice, 0) <= 3
        # BM25 over the real text finds the question's own context first
        assert select.selection.kept[0] in question.supporting_doc_ids
        assert trace.answer and trace.answer == trace.fallback_answer  # fusion failed -> last hop
    assert correct_routes == len(questions)


def test_flat_json_calls_stop_after_the_object():
    chatter = '{"answer": "x", "reason": "r", "success": 1} Also, {"answer": "y"}'
    model = by_purpose(decompose=lambda p: "[]", route=lambda p: '{"source": "a"} because', answer=lambda p: chatter, fuse=lambda p: '{"answer": "x"}')
    trace = run(model, [FixedSource("a")], question="What is x?")
    stops = {PURPOSES[c.messages[0].content]: c.params.stop for c in model.calls}
    assert stops == {"decompose": [], "route": ["}"], "answer": ["}"], "fuse": ["}"]}
    answer = next(s for s in trace.steps if s.kind == "answer")
    assert answer.raw_output == '{"answer": "x", "reason": "r", "success": 1}' and answer.format_error is None
    assert trace.answer == "x"
