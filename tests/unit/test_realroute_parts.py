"""Unit tests of the retrieve-then-verify building blocks: JSON recovery, decomposition and
binding, routing replies, the Adaptive Cap, the selectors, sub-answers, reflection and fusion."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from routerag.jsontext import extract_json
from routerag.llm.scripted import ScriptedModel
from routerag.routing.source_routing import match_source, parse_route
from routerag.runtime.base import StrategyContext
from routerag.sources.sourceset import SourceSet
from routerag.strategies.adaptive_cap import CapQuota, apply_cap
from routerag.strategies.decompose import SubQuery, bind, execution_order, parse_plan
from routerag.strategies.fusion_answer import Hop, last_hop_answer, parse_fusion
from routerag.strategies.reflection import Attempt, parse_reflection, render_history
from routerag.strategies.selectors import SELECTORS, SelectionRequest, normalised_scores, parse_judge
from routerag.strategies.subanswer import SubAnswer, parse_subanswer
from routerag.trace import Hit


def hit(doc: str, source: str, score: float, rank: int) -> Hit:
    return Hit(doc_id=doc, title=doc, text=f"text of {doc}", score=score, source=source, mode="test", rank=rank)


def ctx(model=None) -> StrategyContext:
    return StrategyContext(model=model or ScriptedModel([]), sources=SourceSet())


def ids(hits: list[Hit]) -> list[str]:
    return [h.doc_id for h in hits]


# ---------------------------------------------------------------- JSON recovery


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"a": 1}', {"a": 1}),
        ('```json\n{"a": 1}\n```', {"a": 1}),
        ("Sure! Here it is: {'a': 1} hope this helps", {"a": 1}),
        ('<think>maybe {"a": 0}?</think>{"a": 2,}', {"a": 2}),
        ('[{"id": "q1"}] trailing', [{"id": "q1"}]),
        ('{"a": "brace } inside"}', {"a": "brace } inside"}),
        ("no json at all", None),
        ('{"a": ', None),
    ],
)
def test_extract_json(text, expected):
    assert extract_json(text) == expected


# ---------------------------------------------------------------- decomposition


def test_parse_plan_reads_list_and_wrapped_forms():
    text = '{"subqueries": [{"id": "q1", "query": "Who directed Inception?"}, "When was {q1} born?"]}'
    plan = parse_plan(text, "When was the director of Inception born?", max_subqueries=4)
    assert [s.id for s in plan.subqueries] == ["q1", "q2"]
    assert plan.subqueries[1].depends_on == ["q1"]  # implied by the placeholder
    assert plan.format_error is None


@pytest.mark.parametrize("text", ["I cannot do that.", "[]", '[{"id": "q1"}]', '{"foo": 3}'])
def test_parse_plan_falls_back_to_the_question(text):
    plan = parse_plan(text, "Who is X?", max_subqueries=4)
    assert [s.query for s in plan.subqueries] == ["Who is X?"]
    assert plan.format_error


def test_parse_plan_truncates_and_renames_duplicates():
    text = '[{"id": "a", "query": "step one"}, {"id": "a", "query": "step two"}, {"query": "step three"}]'
    plan = parse_plan(text, "Which step comes first?", max_subqueries=2)
    assert [s.id for s in plan.subqueries] == ["a", "q2"]
    assert "repeats" in plan.format_error and "kept the first 2" in plan.format_error


def test_bind_substitutes_every_placeholder_style():
    ids_ = ["q1", "q2", "q3"]
    values = {"q1": "Christopher Nolan", "q2": "London"}
    sq = SubQuery(id="q3", query="Did {q1} ({{q1}}, [q1], #1) live in {city} or [unknown]?", variables={"city": "q2"})
    assert bind(sq, values, ids_) == (
        "Did Christopher Nolan (Christopher Nolan, Christopher Nolan, Christopher Nolan) live in London or [unknown]?"
    )


def test_bind_leaves_unbound_placeholders():
    sq = SubQuery(id="q2", query="When was {q1} born?")
    assert bind(sq, {}, ["q1", "q2"]) == "When was {q1} born?"


def test_deepsieve_variable_list_is_accepted():
    text = (
        '{"subqueries": [{"id": "q1", "query": "Where was X born?", "depends_on": [], "variables": []},'
        ' {"id": "q2", "query": "What country is [birthplace] in?", "depends_on": ["q1"],'
        ' "variables": [{"name": "birthplace", "source_query": "q1"}]}]}'
    )
    plan = parse_plan(text, "In which country was X born?", 4)
    assert bind(plan.subqueries[1], {"q1": "Lyon"}, ["q1", "q2"]) == "What country is Lyon in?"


def test_execution_order_is_topological_and_stable():
    sqs = [
        SubQuery(id="q1", query="needs q3", depends_on=["q3"]),
        SubQuery(id="q2", query="free"),
        SubQuery(id="q3", query="free too", depends_on=["nope"]),
    ]
    order, note = execution_order(sqs)
    assert [s.id for s in order] == ["q2", "q3", "q1"]
    assert "unknown nope" in note


def test_execution_order_breaks_cycles_in_plan_order():
    sqs = [SubQuery(id="a", query="x", depends_on=["b"]), SubQuery(id="b", query="y", depends_on=["a"])]
    order, note = execution_order(sqs)
    assert [s.id for s in order] == ["a", "b"] and "cycle" in note


# ---------------------------------------------------------------- routing replies


def test_parse_route_variants():
    names = ["law", "med"]
    assert parse_route('{"source": "med", "reason": "a patient"}', names).source == "med"
    assert parse_route('{"source": "MED"}', names).format_error is None
    bare = parse_route("I would pick law here, not med.", names)
    assert bare.source == "law" and bare.format_error
    bad = parse_route("no idea", names, avoid=["law"])
    assert bad.source == "med" and "fell back" in bad.format_error


def test_match_source_needs_whole_words():
    assert match_source("global knowledge", ["local", "global"]) == "global"
    assert match_source("glocal", ["local", "global"]) is None


# ---------------------------------------------------------------- the Adaptive Cap


def test_adaptive_cap_quotas_are_exact():
    hits = [hit(f"a{i}", "a", 1.0 - i / 10, i + 1) for i in range(8)]
    hits += [hit(f"b{i}", "b", 9.0 - i, i + 1) for i in range(8)]
    hits += [hit(f"c{i}", "c", 0.5, i + 1) for i in range(8)]
    kept = apply_cap(hits, "a", CapQuota(preferred_cap=5, other_cap=2))
    assert ids(kept) == ["a0", "a1", "a2", "a3", "a4", "b0", "b1", "c0", "c1"]
    none_preferred = apply_cap(hits, None, CapQuota(preferred_cap=5, other_cap=2))
    assert [h.source for h in none_preferred].count("a") == 2


def test_adaptive_cap_takes_the_best_even_if_unsorted():
    hits = [hit("low", "a", 0.1, 3), hit("high", "a", 0.9, 1), hit("mid", "a", 0.5, 2)]
    assert ids(apply_cap(hits, "a", CapQuota(preferred_cap=2, other_cap=0))) == ["high", "mid"]
    assert apply_cap(hits, "b", CapQuota(preferred_cap=2, other_cap=0)) == []


# ---------------------------------------------------------------- selectors


def select(name: str, hits: list[Hit], keep_k: int = 10, **kw) -> list[str]:
    request = SelectionRequest(query="q", hits=hits, keep_k=keep_k, **kw)
    return ids(SELECTORS.get(name)(request, ctx()).hits)


# source a: cosine-like scores; source b: BM25-like scores on another scale
MIXED = [hit("a1", "a", 0.9, 1), hit("a2", "a", 0.5, 2), hit("a3", "a", 0.1, 3), hit("b1", "b", 20.0, 1), hit("b2", "b", 15.0, 2), hit("b3", "b", 10.0, 3)]


def test_score_selector_uses_raw_scores():
    assert select("score", MIXED) == ["b1", "b2", "b3", "a1", "a2", "a3"]
    assert select("score", MIXED, keep_k=2) == ["b1", "b2"]


def test_norm_score_selector_interleaves_sources():
    assert normalised_scores(MIXED) == pytest.approx([1.0, 0.5, 0.0, 1.0, 0.5, 0.0])
    # equal normalised scores: rank, then input order (a before b)
    assert select("norm_score", MIXED) == ["a1", "b1", "a2", "b2", "a3", "b3"]


def test_routing_weighted_prefers_the_routed_source():
    assert select("routing_weighted", MIXED, preferred_source="b") == ["b1", "a1", "b2", "a2", "a3", "b3"]  # 0 x weight ties: input order
    # weights can also demote the preferred source below the others
    assert select("routing_weighted", MIXED, preferred_source="b", preferred_weight=0.1)[:2] == ["a1", "a2"]


def test_rrf_selector_fuses_ranks_and_sums_duplicates():
    shared_a = hit("s", "a", 0.2, 2)
    shared_b = hit("s", "b", 3.0, 3)
    shared_b = shared_b.model_copy(update={"text": shared_a.text})
    hits = [hit("a1", "a", 0.9, 1), shared_a, hit("b1", "b", 9.0, 1), hit("b2", "b", 5.0, 2), shared_b]
    # s: 1/62 + 1/63 beats every single-list item; a1 and b1 tie at 1/61 -> doc_id
    request = SelectionRequest(query="q", hits=hits, keep_k=3)
    kept = SELECTORS.get("rrf")(request, ctx()).hits
    assert ids(kept) == ["s", "a1", "b1"]
    assert kept[0].score == pytest.approx(1 / 62 + 1 / 63) and kept[0].metadata["rrf_ranks"] == [2, 3]


def test_selectors_handle_one_source_and_ties():
    one = [hit("x", "a", 0.5, 2), hit("y", "a", 0.5, 1), hit("z", "a", 0.7, 3)]
    for name in ("score", "norm_score", "routing_weighted", "rrf"):
        assert select(name, one, preferred_source="a") == ["z", "y", "x"], name
    assert select("score", []) == []


def test_llm_judge_picks_by_number():
    model = ScriptedModel(['{"relevant": [3, 1, 3, 99]}'])
    request = SelectionRequest(query="q", hits=MIXED, keep_k=5)
    selection = SELECTORS.get("llm")(request, ctx(model))
    # candidates are shown in score order: b1, b2, b3, a1, a2, a3
    assert ids(selection.hits) == ["b3", "b1"]
    assert selection.format_error is None and len(selection.model_calls) == 1
    assert "[3] (b) b3" in model.calls[0].messages[-1].content


@pytest.mark.parametrize("reply", ["I think they are all great", '{"relevant": ["zero"]}', "[0, 42]"])
def test_llm_judge_bad_output_falls_back_to_score(reply):
    request = SelectionRequest(query="q", hits=MIXED, keep_k=2)
    selection = SELECTORS.get("llm")(request, ctx(ScriptedModel([reply])))
    assert ids(selection.hits) == ["b1", "b2"]
    assert selection.format_error and selection.fallback


def test_parse_judge_forms():
    assert parse_judge("2, 1", 3) == [1, 0]
    assert parse_judge('{"relevant": []}', 3) == []
    assert parse_judge("[5]", 3) is None


# ---------------------------------------------------------------- answers, reflection, fusion


@pytest.mark.parametrize(
    "text, answer, success, error",
    [
        ('{"answer": "Paris", "reason": "p1", "success": 1}', "Paris", True, False),
        ('{"answer": "Paris", "reason": "p1", "success": "false"}', "Paris", False, False),
        ('{"answer": "", "reason": "nothing", "success": 1}', "", False, False),
        ('{"answer": "Paris"}', "Paris", True, False),
        ("Paris", "Paris", False, True),
        ("", "", False, True),
    ],
)
def test_parse_subanswer(text, answer, success, error):
    sub, err = parse_subanswer(text)
    assert (sub.answer, sub.success, err is not None) == (answer, success, error)


def test_reflection_parse_and_fallbacks():
    attempts = [Attempt(query="who made X", source="law", answer=SubAnswer(reason="no info"))]
    good = parse_reflection('{"query": "creator of X", "source": "med", "reason": "r"}', attempts, ["law", "med"])
    assert (good.query, good.source, good.format_error) == ("creator of X", "med", None)
    bad = parse_reflection("try harder", attempts, ["law", "med"])
    assert (bad.query, bad.source) == ("who made X", "med") and bad.format_error
    partial = parse_reflection('{"source": "nowhere"}', attempts, ["law", "med"])
    assert partial.source == "med" and "unknown source" in partial.format_error
    assert 'query "who made X" on source "law"' in render_history(attempts)


def test_fusion_and_last_hop_fallback():
    hops = [
        Hop(id="q1", query="a", answer=SubAnswer(answer="Nolan", success=True)),
        Hop(id="q2", query="b", answer=SubAnswer(answer="", success=False)),
    ]
    assert last_hop_answer(hops) == "Nolan"
    assert parse_fusion('{"answer": "1970"}', "Nolan").answer == "1970"
    for reply in ("garbage", '{"answer": ""}'):
        fused = parse_fusion(reply, "Nolan")
        assert fused.answer == "Nolan" and fused.used_fallback and fused.format_error


# ---------------------------------------------------------------- properties

random_hits = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 5), st.floats(-5, 5, allow_nan=False)), max_size=30
).map(
    lambda rows: [hit(f"{src}{i}", src, score, rank) for i, (src, rank, score) in enumerate(rows, start=1)]
)


@settings(max_examples=60, deadline=None)
@given(random_hits, st.sampled_from(["a", "b", "z"]), st.integers(0, 6), st.integers(0, 6))
def test_cap_keeps_exactly_the_quota_of_each_sources_best(hits, preferred, pcap, ocap):
    kept = apply_cap(hits, preferred, CapQuota(preferred_cap=pcap, other_cap=ocap))
    for source in {h.source for h in hits}:
        mine = [h for h in hits if h.source == source]
        quota = pcap if source == preferred else ocap
        chosen = [h for h in kept if h.source == source]
        assert len(chosen) == min(quota, len(mine))
        if chosen and len(chosen) < len(mine):
            left_out = [h for h in mine if h not in chosen]
            assert min(h.score for h in chosen) >= max(h.score for h in left_out)


@settings(max_examples=40, deadline=None)
@given(random_hits, st.integers(1, 12), st.sampled_from(["score", "norm_score", "routing_weighted", "rrf"]))
def test_selectors_keep_a_duplicate_free_subset_of_size_keep_k(hits, keep_k, name):
    kept = SELECTORS.get(name)(SelectionRequest(query="q", hits=hits, keep_k=keep_k, preferred_source="a"), ctx()).hits
    assert len(kept) == min(keep_k, len({h.doc_id for h in hits}))
    assert len({h.doc_id for h in kept}) == len(kept)
    assert {h.doc_id for h in kept} <= {h.doc_id for h in hits}


def test_a_plan_unrelated_to_the_question_is_rejected():
    copied = '[{"id": "q1", "query": "Who directed <film>?"}, {"id": "q2", "query": "When was {q1} born?"}]'
    plan = parse_plan(copied, "Which drug treats a urinary tract infection in pregnancy?", 4)
    assert [s.query for s in plan.subqueries] == ["Which drug treats a urinary tract infection in pregnancy?"]
    assert "copies the prompt's example" in plan.format_error
    unrelated = '[{"id": "q1", "query": "Who painted the Mona Lisa?"}]'
    assert "share no word" in parse_plan(unrelated, "Which drug treats a urinary tract infection in pregnancy?", 4).format_error


def test_a_plan_that_copies_the_example_is_rejected_even_when_it_shares_words():
    # law-med: "When was ... born?" shares "born" with a birth question; the copied "<film>" step gives it away
    question = "When was the director of Titanic born?"
    copied = '[{"id": "q1", "query": "Who directed <film>?"}, {"id": "q2", "query": "When was {q1} born?", "depends_on": ["q1"]}]'
    plan = parse_plan(copied, question, 4)
    assert [s.query for s in plan.subqueries] == [question] and "copies the prompt's example" in plan.format_error
    own = '[{"id": "q1", "query": "Who directed Titanic?"}, {"id": "q2", "query": "When was {q1} born?", "depends_on": ["q1"]}]'
    assert [s.query for s in parse_plan(own, question, 4).subqueries] == ["Who directed Titanic?", "When was {q1} born?"]
    # CaseHOLD questions carry "<HOLDING>": a copied "<film>" is still a copy, "<HOLDING>" itself is not
    holding = "In the following case, what is the correct legal holding? ... the court (<HOLDING>) ..."
    assert "copies the prompt's example" in parse_plan(copied, holding, 4).format_error
    assert parse_plan('[{"id": "q1", "query": "What is the <HOLDING> of the court?"}]', holding, 4).format_error is None
    # a question that itself has angle brackets is not mistaken for a copy
    html = "What does the <table> tag define in HTML?"
    assert parse_plan('[{"id": "q1", "query": "What does the <table> tag define?"}]', html, 4).format_error is None


def test_replies_cut_short_are_recovered_field_by_field():
    # observed with the bundled 0.5B model: JSON cut off by the generation limit
    cut = '{"answer": "Ciprofloxacin", "reason": "The passage says \\"take it\\" for the def'
    sub, err = parse_subanswer(cut)
    assert (sub.answer, sub.success) == ("Ciprofloxacin", False) and "recovered" in err
    route = parse_route('{"source": "law", "med": "Ciprofloxacin", "reason": "used for infecti', ["law", "med"])
    assert route.source == "law" and route.reason == "used for infecti" and "recovered" in route.format_error
    fused = parse_fusion("{'answer': '1970', 'reason': 'q2 says", "fallback")
    assert fused.answer == "1970" and not fused.used_fallback and fused.format_error
    attempts = [Attempt(query="q", source="law", answer=SubAnswer())]
    reflection = parse_reflection('{"query": "better q", "source": "med", "reason": "the', attempts, ["law", "med"])
    assert (reflection.query, reflection.source) == ("better q", "med") and "broken JSON" in reflection.format_error


def test_route_prompt_wordings():
    from routerag.routing.source_routing import parse_route, route_messages

    profiles = {"law": "court cases", "med": "clinical questions"}
    inline = route_messages("What treats asthma?", profiles)[1].content  # the default, what the runs used
    assert inline.endswith('Reply with JSON only: {"source": one of "law", "med", "reason": "<one sentence>"}')
    choice = route_messages("What treats asthma?", profiles, prompt="choice")[1].content
    skeleton = choice.rsplit("Reply with JSON only:", 1)[1]
    assert '"law" or "med"?' in choice and "law" not in skeleton and "med" not in skeleton
    # the copy the inline wording invites: the first name as the source, the next as a key
    assert parse_route('{"source": "law", "med": "Salbutamol", "reason": "x"}', list(profiles)).source == "law"
