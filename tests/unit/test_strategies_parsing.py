"""The action parser: every protocol error case has its defined recovery, and it never raises."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from routerag.runtime.parsing import (
    R1_SEARCHER,
    clean_answer,
    clean_query,
    extract_tag,
    match_name,
    parse_action,
    resolve_modes,
    split_mode_tags,
    tagged_answer,
)


def test_well_formed_search_and_answer():
    a = parse_action("<think> need X </think>\n<search> [graph] who is X </search>")
    assert (a.kind, a.query, a.reasoning, a.errors, a.closed) == ("search", "[graph] who is X", "need X", [], True)
    assert a.end == len("<think> need X </think>\n<search> [graph] who is X </search>")
    b = parse_action("<think>ok</think><answer> Paris </answer>")
    assert (b.kind, b.answer, b.errors) == ("answer", "Paris", [])


def test_unclosed_search_at_eos_is_a_search():
    a = parse_action("<think>t</think> <search> [passage] capital of France")
    assert a.kind == "search" and a.query == "[passage] capital of France"
    assert a.errors == ["unclosed_search"] and not a.closed


def test_unclosed_answer_is_the_answer():
    a = parse_action("<answer> Paris")
    assert (a.kind, a.answer, a.errors, a.closed) == ("answer", "Paris", ["unclosed_answer"], False)


def test_two_actions_first_opened_wins():
    a = parse_action("<search> [passage] q1 <answer> Paris </answer>")
    assert a.kind == "search" and a.query == "[passage] q1"
    assert a.errors == ["unclosed_search", "multiple_actions"]
    assert a.end == len("<search> [passage] q1 ")
    b = parse_action("<answer> Paris <search> q </search>")
    assert b.kind == "answer" and b.answer == "Paris" and "multiple_actions" in b.errors


def test_no_action_and_empty_answer():
    assert parse_action("I think the answer is Paris.").errors == ["no_action"]
    assert parse_action("").kind == "none"
    empty = parse_action("<answer>  </answer>")
    assert empty.kind == "none" and empty.errors == ["empty_answer"]


def test_tags_are_case_insensitive_and_protocol_specific():
    assert parse_action("<SEARCH> x </SEARCH>").query == "x"
    a = parse_action("<think>k</think><|begin_of_query|> Paris France<|end_of_query|>", R1_SEARCHER)
    assert (a.kind, a.query) == ("search", "Paris France")
    assert parse_action("<search> x </search>", R1_SEARCHER).kind == "none"


@pytest.mark.parametrize(
    "query, tags, rest",
    [
        ("[graph][passage] capital of France", ["graph", "passage"], "capital of France"),
        (" [ Passage ]  capital", ["passage"], "capital"),
        ("capital of France [graph]", ["graph"], "capital of France"),
        ("the [1] footnote", [], "the [1] footnote"),
        ("[bm25] x", ["bm25"], "x"),
        ("[passage]", ["passage"], ""),
    ],
)
def test_split_mode_tags(query, tags, rest):
    assert split_mode_tags(query) == (tags, rest)


def test_resolve_modes():
    known = ["passage", "graph", "hybrid"]
    assert resolve_modes(["graph", "passage"], known, "passage", combined="hybrid").mode == "hybrid"
    assert resolve_modes(["passage", "passage"], known, "graph", combined="hybrid").mode == "passage"
    missing = resolve_modes([], known, "passage")
    assert (missing.mode, missing.errors) == ("passage", ["missing_mode"])
    unknown = resolve_modes(["bm25"], known, "graph")
    assert (unknown.mode, unknown.errors) == ("graph", ["unknown_mode:bm25"])
    mixed = resolve_modes(["web", "graph"], known, "passage", combined="hybrid")
    assert (mixed.mode, mixed.errors) == ("graph", ["unknown_mode:web"])


def test_clean_query():
    assert clean_query("  a \n b ", "q", 100) == ("a b", [])
    assert clean_query("  ", "the question", 100) == ("the question", ["empty_query"])
    assert clean_query(" and ", "the question", 100) == ("the question", ["trivial_query"])
    assert clean_query("...", "the question", 100) == ("the question", ["trivial_query"])
    assert clean_query("Paris", "q", 100) == ("Paris", [])
    long, errors = clean_query("word " * 100, "q", 50)
    assert errors == ["long_query"] and len(long) <= 50 and long.endswith("word")


def test_answers_and_names():
    assert clean_answer("Answer: \"Paris\"\nmore") == "Paris"
    assert clean_answer("<answer> Paris </answer>") == "Paris"
    assert tagged_answer("<think>x</think><answer>\nfrank wisbar\n</answer>") == ("frank wisbar", [])
    assert tagged_answer("<think>x</think> Paris") == ("Paris", ["missing_answer_tag"])
    assert extract_tag("<ret>\nText Retriever\n</ret>", "<ret>", "</ret>") == "\nText Retriever\n"
    assert extract_tag("no tag", "<ret>", "</ret>") is None
    names = ["Text Retriever", "Text Image Retriever", "Table Retriever"]
    assert match_name(" text retriever ", names) == "Text Retriever"
    assert match_name("the Text Image Retriever.", names) == "Text Image Retriever"
    assert match_name("web", names) is None


_PIECES = st.sampled_from(list("ab <>/[]\n") + ["<search>", "</search>", "<answer>", "</answer>", "[graph]", "<think>"])


@settings(max_examples=300, deadline=None)
@given(st.lists(_PIECES, max_size=30).map("".join))
def test_parser_never_raises_and_stays_in_bounds(text):
    action = parse_action(text)
    assert 0 <= action.end <= len(text)
    assert action.kind in {"search", "answer", "none"}
    if action.kind == "answer":
        assert action.answer.strip()
    if action.kind == "none":
        assert action.errors
    tags, rest = split_mode_tags(action.query)
    assert isinstance(tags, list) and isinstance(rest, str)


def test_copies_instruction_is_about_the_prompts_placeholders_only():
    from routerag.runtime.parsing import clean_query, copies_instruction

    placeholder = ['search query (only list keywords, such as "keyword_1 keyword_2 ...")']
    assert copies_instruction('search query (only list keywords, such as "keyword', placeholder)  # cut at a stop
    assert copies_instruction('  SEARCH QUERY (only list keywords,\n such as "keyword_1 keyword_2 ...")  ', placeholder)
    assert not copies_instruction("search query", placeholder)  # too short to tell
    assert not copies_instruction("Polish-Russian War director", placeholder)
    assert clean_query("search query (only list keywords, such as x", "the question", 300, placeholder) == (
        "the question", ["copied_instruction"])
    assert clean_query("search query (only list keywords, such as x", "the question", 300) == (
        "search query (only list keywords, such as x", [])  # no instructions given: kept
