"""The RouteRAG tag protocol's one owner: what its renderers write, its parser reads back, and
every place that speaks the protocol (strategy grammar, environment, golden trajectories, toy
task, Search-R1 adapter) uses it."""

from __future__ import annotations

import pytest

from routerag.protocol.routerag_tags import (
    MODE_TAGS,
    MODES,
    SEARCH_R1,
    information_block,
    leading_mode_tags,
    mode_of_tags,
    parse_action,
    render_answer,
    render_mode_search,
    render_search,
    render_think,
    routerag_grammar,
    split_mode_tags,
)
from routerag.trace import Hit


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("query", ["who directed Polish-Russian War", "capital of France"])
def test_a_rendered_search_parses_back_to_its_query_and_mode(mode: str, query: str) -> None:
    text = render_think("I need the director.") + "\n" + render_mode_search(mode, query)
    action = parse_action(text, SEARCH_R1)
    assert action.kind == "search" and action.closed and not action.errors
    assert action.reasoning == "I need the director."
    assert action.end == len(text)
    tags, rest = split_mode_tags(action.query)
    assert rest == query
    assert mode_of_tags(tags) == mode
    assert leading_mode_tags(action.query) == (tuple(tags), query)  # the server reads the same tags


def test_render_search_with_tag_words_and_without_a_query() -> None:
    assert render_search(["graph", "passage"], "q") == "<search> [graph][passage] q </search>"
    assert render_search(["passage"], "") == "<search> [passage] </search>"
    assert render_mode_search("hybrid", "q") == "<search> [graph][passage] q </search>"
    tags, rest = split_mode_tags(parse_action(render_search(["graph"], "")).query)
    assert (tags, rest) == (["graph"], "")


@pytest.mark.parametrize("answer", ["Paris", "Małgorzata Braunek", "9 November 1989"])
def test_a_rendered_answer_parses_back(answer: str) -> None:
    text = render_think("I have the answer.") + "\n" + render_answer(answer)
    action = parse_action(text)
    assert (action.kind, action.answer, action.reasoning, action.errors) == ("answer", answer, "I have the answer.", [])


def test_the_observation_block_is_what_the_policy_is_shown() -> None:
    hits = [Hit(doc_id="1", title="Paris", text="Paris is the capital of France.", score=1.0, source="passage", mode="passage", rank=1)]
    assert information_block(hits) == "\n\n<information>Doc 1(Title: Paris) Paris is the capital of France.\n</information>\n\n"
    assert information_block([]) == "\n\n<information>No documents found.\n</information>\n\n"


def test_the_grammar_is_byte_for_byte_the_one_runs_were_made_with() -> None:
    assert routerag_grammar([MODE_TAGS[m] for m in MODES]) == "\n".join([
        "root ::= think? (search | answer)",
        'think ::= "<think>" [^<]+ "</think>" "\\n"?',
        'search ::= "<search> " tags " " text " </search>"',
        'tags ::= "[passage]" | "[graph]" | "[graph][passage]"',
        'answer ::= "<answer> " text " </answer>"',
        "text ::= [^<\\n]+",
    ])


def test_every_speaker_of_the_protocol_uses_the_one_module() -> None:
    from routerag.protocol import routerag_tags
    from routerag.runtime import parsing
    from routerag.server import searchr1_adapter
    from routerag.strategies import prompts, routerag
    from routerag.train import env

    assert parsing.parse_action is routerag_tags.parse_action
    assert parsing.split_mode_tags is routerag_tags.split_mode_tags
    assert prompts.information_block is routerag_tags.information_block
    assert prompts.routerag_grammar is routerag_tags.routerag_grammar
    assert routerag.MODE_TAGS is routerag_tags.MODE_TAGS
    assert env.parse_action is routerag_tags.parse_action
    assert searchr1_adapter.parse_mode_tags is routerag_tags.leading_mode_tags
    from routerag.episode import engine

    assert engine.parse_action is routerag_tags.parse_action  # evaluation and training parse in the engine


def test_golden_and_toy_actions_are_rendered_by_the_protocol() -> None:
    from routerag.train.golden import GoldenHop, render_routerag
    from routerag.train.toy import TOY_PREFIX, TOY_THINK_PREFIX, toy_action

    hit = Hit(doc_id="1", title="Paris", text="Paris is in France.", score=1.0, source="passage", mode="passage", rank=1)
    segments = render_routerag("Where is Paris?", [GoldenHop(think="Look it up.", mode="graph", query="Paris", evidence=[hit])], "France")
    assert [s.kind for s in segments] == ["prompt", "model", "observation", "model"]
    assert segments[1].text == "<think> Look it up. </think>\n<search> [graph] Paris </search>"
    assert segments[2].text == information_block([hit])
    assert segments[3].text == "<think> I have the answer. </think>\n<answer> France </answer>"
    assert TOY_PREFIX + toy_action("graph", "Where is Paris?", "format") == "<search> [graph] </search>"
    assert TOY_PREFIX + toy_action("passage", "Who built it?", "query") == "<search> [passage] Who built it? </search>"
    assert TOY_THINK_PREFIX + toy_action("graph", "Where is Paris?", "think") == "<think> [where] </think>\n<search> [graph] </search>"
