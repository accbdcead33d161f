"""GraphRAG-R1: the R1-Searcher tags, the evidence mixes over passage + triples sources."""

from __future__ import annotations

import pytest

from routerag.strategies.graphrag_r1 import GraphRAGR1, GraphRAGR1Params
from routerag.strategies.prompts import GRAPHRAG_R1_INVALID
from routerag.trace import ForcedAnswer
from test_strategies_support import make_context

Q = "Who is the mother of the director of film Polish-Russian War?"
NAMES = ("passage", "triples")


def run(outputs, **params):
    ctx, model, sources = make_context(outputs, names=NAMES)
    return GraphRAGR1(ctx, GraphRAGR1Params(**params)).run(Q), model, sources


@pytest.mark.parametrize("mix, n_text, n_graph", [
    ("text5", 4, 0), ("text3+graph10", 3, 4), ("text1+graph10", 1, 4), ("graph20", 0, 4),
])
def test_evidence_mixes(mix, n_text, n_graph):
    # the in-test sources hold 4 documents, so k above 4 returns 4
    trace, model, sources = run(
        ["<think> who directed </think><|begin_of_query|> Polish-Russian War director<|end_of_query|>",
         "<think> done </think><answer> Malgorzata Braunek </answer>"],
        evidence=mix,
    )
    assert trace.error is None and trace.answer == "Malgorzata Braunek"
    step = trace.search_steps[0]
    assert [h.source for h in step.hits].count("passage") == n_text
    assert [h.source for h in step.hits].count("triples") == n_graph
    assert step.sources == [n for n, k in (("passage", n_text), ("triples", n_graph)) if k]
    assert step.route.reason == f"evidence mix {mix}"
    shown = model.calls[1].messages[-1].content
    assert shown.endswith("<|end_of_documents|>\n\n") and "<|begin_of_documents|>" in shown
    assert ("Facts:\n(1) " in shown) == (n_graph > 0) and ("Passages:\nDoc 1(Title:" in shown) == (n_text > 0)
    assert model.calls[0].params.stop == ["<|end_of_query|>", "</answer>"]
    assert [m.role for m in model.calls[0].messages] == ["system", "user"]
    assert "<|begin_of_query|>" in model.calls[0].messages[0].content


def test_malformed_outputs_and_budget():
    trace, model, sources = run(
        ["<search> wrong tags </search>",  # Search-R1 tags are not this protocol's
         "<|begin_of_query|> Xawery Zulawski",  # unclosed at EOS
         "Paris</answer>"],
        max_turns=2,
    )
    assert [s.kind for s in trace.steps] == ["format_error", "search", "answer"]
    assert trace.steps[0].observation == GRAPHRAG_R1_INVALID
    assert trace.steps[1].format_error == "unclosed_search" and trace.steps[1].query == "Xawery Zulawski"
    assert "Xawery Zulawski<|end_of_query|>" in model.calls[2].messages[-1].content
    assert trace.answer == "Paris" and trace.steps[2].forced == ForcedAnswer(reader="policy")
    assert sources["passage"].queries == sources["triples"].queries == ["Xawery Zulawski"]
    assert "".join(s.text for s in trace.segments).endswith("<answer>Paris</answer>")


def test_a_query_copying_the_prompts_placeholder_searches_the_question():
    # what the untrained 0.5B wrote in 26 of 94 searches on 2Wiki + MuSiQue
    trace, model, sources = run(
        ['<|begin_of_query|> search query (only list keywords, such as "keyword_1 keyword_2 ...")<|end_of_query|>',
         "<answer> Malgorzata Braunek </answer>"],
    )
    step = trace.search_steps[0]
    assert step.query == Q and step.format_error == "copied_instruction"
    assert sources["passage"].queries == [Q] and trace.answer == "Malgorzata Braunek"
