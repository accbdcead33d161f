"""RouteRAG control flow with a scripted model: the protocol, every malformed-output recovery,
the budget, the ablation presets, seeded random routing, trace totals and segments."""

from __future__ import annotations

import time

import pytest

from routerag.llm.scripted import ScriptedModel
from routerag.runtime.base import StrategyContext
from routerag.sources.sourceset import SourceSet
from routerag.strategies import STRATEGIES
from routerag.strategies.prompts import FORCE_ANSWER, INVALID_ACTION
from routerag.strategies.routerag import RouteRAG, RouteRAGParams
from routerag.trace import ForcedAnswer
from test_strategies_support import KeywordSource, make_context

Q = "Who is the mother of the director of film Polish-Russian War?"


def run(outputs, params=None, name="routerag", question=Q):
    ctx, model, sources = make_context(outputs)
    trace = STRATEGIES.get(name)(ctx, params).run(question)
    return trace, model, sources


def test_two_searches_then_answer():
    trace, model, sources = run([
        "<think> director first </think>\n<search> [passage] director of Polish-Russian War </search>",
        "<think> now his mother </think>\n<search> [graph] Xawery Zulawski mother </search>",
        "<think> found </think>\n<answer> Malgorzata Braunek </answer>",
    ])
    assert trace.error is None and trace.answer == "Malgorzata Braunek"
    assert [s.kind for s in trace.steps] == ["search", "search", "answer"]
    assert [s.sources for s in trace.search_steps] == [["passage"], ["graph"]]
    assert [len(s.hits) for s in trace.search_steps] == [3, 3]  # k=3
    assert trace.steps[0].reasoning == "director first"
    assert sources["passage"].queries == ["director of Polish-Russian War"]
    assert sources["graph"].queries == ["Xawery Zulawski mother"]
    assert trace.format_errors == 0 and trace.retrieval_turns == 2
    # one growing assistant turn, continued after each observation
    assert [c.continue_final for c in model.calls] == [False, True, True]
    assert all(c.params.stop == ["</search>", "</answer>"] for c in model.calls)
    second = model.calls[1].messages[-1]
    assert second.role == "assistant" and second.content.endswith("</information>\n\n")
    assert "<information>Doc 1(Title: Polish-Russian War (film))" in second.content
    assert trace.steps[0].observation in second.content


def test_graph_passage_tags_route_to_hybrid():
    trace, _, sources = run(["<search> [graph][passage] Xawery Zulawski </search>", "<answer> x </answer>"])
    assert trace.search_steps[0].sources == ["hybrid"]
    assert sources["hybrid"].queries == ["Xawery Zulawski"] and not sources["passage"].queries


def test_unclosed_search_at_eos_is_searched_and_closed_in_the_transcript():
    trace, model, _ = run(["<think> t </think> <search> [passage] capital of France", "<answer> Paris </answer>"])
    step = trace.steps[0]
    assert step.kind == "search" and step.query == "capital of France" and step.format_error == "unclosed_search"
    assert "capital of France</search>\n\n<information>" in model.calls[1].messages[-1].content
    assert [s.kind for s in trace.segments[1:4]] == ["model", "observation", "model"]
    assert trace.segments[2].text.startswith("</search>")


def test_unclosed_answer_is_accepted():
    trace, _, _ = run(["<answer> Paris"])
    assert trace.answer == "Paris" and trace.steps[0].format_error == "unclosed_answer"


def test_search_and_answer_in_one_turn_keeps_the_first_action():
    trace, model, _ = run(["<search> [passage] capital of France <answer> Lyonnesse </answer>", "<answer> Paris </answer>"])
    assert trace.answer == "Paris"
    assert trace.steps[0].format_error == "unclosed_search; multiple_actions"
    assert "Lyonnesse" not in model.calls[1].messages[-1].content  # dropped after the first action
    assert "Lyonnesse" in trace.steps[0].raw_output  # but kept verbatim in the step


def test_empty_query_searches_the_question():
    trace, _, sources = run(["<search> [graph] </search>", "<answer> x </answer>"])
    assert trace.steps[0].query == Q and "empty_query" in trace.steps[0].format_error
    assert sources["graph"].queries == [Q]


def test_over_long_query_is_cut():
    trace, _, _ = run([f"<search> [passage] {'capital ' * 100}</search>", "<answer> x </answer>"],
                      RouteRAGParams(max_query_chars=40))
    step = trace.steps[0]
    assert len(step.query) <= 40 and step.format_error == "long_query"


def test_unknown_and_missing_mode_fall_back_to_the_default():
    trace, _, _ = run(["<search> [web] capital </search>", "<search> capital </search>", "<answer> x </answer>"])
    assert [s.sources for s in trace.search_steps] == [["passage"], ["passage"]]
    assert trace.steps[0].format_error == "unknown_mode:web"
    assert trace.steps[1].format_error == "missing_mode"
    assert trace.format_errors == 2


def test_no_action_gets_the_invalid_message_and_spends_budget():
    trace, model, _ = run(["I am not sure.", "<answer> Paris </answer>"], RouteRAGParams(max_turns=2))
    assert [s.kind for s in trace.steps] == ["format_error", "answer"]
    assert trace.steps[0].format_error == "no_action" and trace.steps[0].observation == INVALID_ACTION
    assert model.calls[1].messages[-1].content == "I am not sure." + INVALID_ACTION
    # a model that never acts: budget of invalid turns, then the forced answer
    trace, model, _ = run(["hmm", "hmm", "Paris</answer>"], RouteRAGParams(max_turns=2))
    assert [s.kind for s in trace.steps] == ["format_error", "format_error", "answer"]
    assert trace.answer == "Paris" and len(model.calls) == 3


def test_budget_exhaustion_forces_an_answer():
    searches = [f"<search> [passage] q{i} </search>" for i in range(4)]
    trace, model, _ = run([*searches, " Paris </answer>"])
    assert trace.retrieval_turns == 4 and len(model.calls) == 5
    last = trace.steps[-1]
    assert last.kind == "answer" and last.answer == "Paris" and trace.answer == "Paris"
    assert last.format_error == "no_answer_within_budget" and last.forced == ForcedAnswer(reader="policy")
    assert last.model_calls[0].purpose == "answer"
    assert model.calls[-1].params.stop == ["</answer>"]
    assert model.calls[-1].messages[-1].content.endswith(FORCE_ANSWER)


def test_text_after_the_budget_without_tags_is_the_answer():
    trace, _, _ = run(["Paris is the capital\nof France"], RouteRAGParams(max_turns=0))
    assert trace.answer == "Paris is the capital"
    assert trace.steps[0].format_error == "no_answer_within_budget; unclosed_answer"


@pytest.mark.parametrize("name, expected", [
    ("routerag-passage", "passage"), ("routerag-graph", "graph"), ("routerag-hybrid", "hybrid"),
])
def test_ablation_presets_force_the_mode(name, expected):
    outputs = ["<search> [passage] a </search>", "<search> [graph] b </search>",
               "<search> [graph][passage] c </search>", "<answer> x </answer>"]
    trace, _, _ = run(outputs, name=name)
    assert trace.strategy == name
    assert [s.sources for s in trace.search_steps] == [[expected]] * 3
    assert trace.params["allowed_modes"] == [expected]


def test_presets_keep_their_mode_when_other_params_are_given():
    trace, _, _ = run(["<search> [passage] a </search>", "<answer> x </answer>"], RouteRAGParams(k=1), name="routerag-graph")
    assert trace.search_steps[0].sources == ["graph"] and len(trace.search_steps[0].hits) == 1


def _random_modes(seed: int, question: str = Q) -> list[str]:
    outputs = [f"<search> [passage] q{i} </search>" for i in range(4)] + ["Paris</answer>"]
    trace, _, _ = run(outputs, {"seed": seed}, name="routerag-random", question=question)
    return [s.sources[0] for s in trace.search_steps]


def test_random_routing_is_seeded():
    assert _random_modes(1) == _random_modes(1)
    draws = {tuple(_random_modes(seed)) for seed in range(8)}
    assert len(draws) > 1
    assert {m for d in draws for m in d} <= {"passage", "graph", "hybrid"}


def test_grammar_and_few_shot_reach_the_model():
    _, model, _ = run(["<answer> x </answer>"], RouteRAGParams(grammar=True, few_shot=True))
    call = model.calls[0]
    assert '"[graph][passage]"' in call.params.grammar and "root ::=" in call.params.grammar
    assert "Here is an example" in call.messages[0].content
    _, model, _ = run(["<answer> x </answer>"], {"grammar": True}, name="routerag-passage")
    assert '"[passage]"' in model.calls[0].params.grammar and "[graph]" not in model.calls[0].params.grammar
    _, model, _ = run(["<answer> x </answer>"])
    assert model.calls[0].params.grammar is None and "Here is an example" not in model.calls[0].messages[0].content


class SlowSource(KeywordSource):
    def search(self, queries, k):
        time.sleep(0.01)
        return super().search(queries, k)


def test_trace_totals_add_up_and_segments_rebuild_the_transcript():
    outputs = ["<search> [passage] director </search>", "nothing", "<search> [graph] mother </search>",
               "<answer> Malgorzata Braunek </answer>"]
    model = ScriptedModel(outputs)
    ctx = StrategyContext(model=model, sources=SourceSet([SlowSource("passage"), SlowSource("graph"), SlowSource("hybrid")]))
    trace = RouteRAG(ctx).run(Q)
    assert trace.error is None
    calls = trace.model_calls
    assert len(calls) == len(model.calls) == 4 and all(c.purpose == "policy" for c in calls)
    assert trace.prompt_tokens == sum(c.prompt_tokens for c in calls) > 0
    assert trace.completion_tokens == sum(c.completion_tokens for c in calls) > 0
    assert trace.retrieval_turns == 2 and trace.retrieval_calls_by_source() == {"passage": 1, "graph": 1}
    assert all(s.retrieval_ms >= 10 for s in trace.search_steps)
    assert trace.retrieval_ms == pytest.approx(sum(s.retrieval_ms for s in trace.search_steps))
    assert trace.latency_ms >= trace.retrieval_ms
    # segments: prompt, then model/observation pieces that rebuild the transcript exactly
    text = "".join(s.text for s in trace.segments)
    last = model.calls[-1].messages
    assert text == last[0].content + last[-1].content + "<answer> Malgorzata Braunek </answer>"
    assert trace.segments[0].kind == "prompt" and trace.segments[0].text == last[0].content
    observations = [s.text for s in trace.segments if s.kind == "observation"]
    assert observations == [trace.steps[0].observation, INVALID_ACTION, trace.steps[2].observation]
    assert [s.kind for s in trace.segments] == ["prompt"] + ["model", "observation"] * 3 + ["model"]
    model_text = "".join(s.text for s in trace.segments if s.kind == "model")
    assert model_text == "".join(outputs)
    assert trace.summary()["retrieval_turns"] == 2


def test_exceptions_become_trace_errors():
    trace, _, _ = run(["<search> [passage] a </search>"])  # the scripted model runs out on call 2
    assert trace.error.startswith("ModelError") and trace.retrieval_turns == 1 and trace.latency_ms > 0
    assert trace.error_kind == "model"
    ctx, _, _ = make_context(["<search> [graph] a </search>"], names=("passage",))  # no graph source
    trace = RouteRAG(ctx).run(Q)
    assert trace.error.startswith("RetrievalError") and "graph" in trace.error
    assert trace.error_kind == "retrieval"
    assert trace.segments and trace.segments[0].kind == "prompt"


def test_question_objects_and_registry():
    from routerag.corpus.schema import Question

    ctx, _, _ = make_context(["<answer> x </answer>"])
    trace = RouteRAG(ctx).run(Question(qid="q7", question=Q, answers=["Malgorzata Braunek"]))
    assert trace.qid == "q7" and trace.question == Q and trace.params["k"] == 3
    for name in ["routerag", "routerag-passage", "routerag-graph", "routerag-hybrid", "routerag-random",
                 "graphrag-r1", "r1-router", "r1-router-step", "direct", "vanilla", "ircot", "iter-retgen"]:
        cls = STRATEGIES.get(name)
        assert cls.name == name and cls.Params().model_dump() is not None


def test_grammar_compiles_in_llama_cpp():
    """The GBNF grammar must parse in llama.cpp (a bad grammar crashes a real run). Skipped where
    llama-cpp-python or the bundled model is not already available (no download, no join)."""
    pytest.importorskip("llama_cpp")
    from routerag.llm.bundled import bundled_spec
    from routerag.llm.llamacpp import LlamaCppModel
    from routerag.paths import cache_dir
    from routerag.strategies.prompts import routerag_grammar

    path = cache_dir("models") / bundled_spec("bundled:qwen2.5-coder-0.5b").filename
    if not path.is_file():
        pytest.skip("bundled model not assembled in the cache")
    model = LlamaCppModel(path, n_ctx=256, n_threads=1)
    for tags in (["[passage]"], ["[passage]", "[graph]", "[graph][passage]"]):
        model._grammar(routerag_grammar(tags))  # raises ModelError when llama.cpp cannot parse it
