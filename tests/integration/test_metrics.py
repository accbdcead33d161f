"""Answer metrics against hand-checked values, including the cases where the reference scripts
disagree (see docs/concepts/metrics.md)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from routerag.corpus.normalize import normalize_answer
from routerag.eval.cost import trace_cost
from routerag.eval.metrics import (
    METRICS,
    LLMJudge,
    NoGoldAnswerError,
    cover_em,
    exact_match,
    f1_recall,
    parse_judgement,
    score_answer,
    semantic_similarity,
    token_f1,
    token_precision,
    token_scores,
)
from routerag.eval.routing import first_decision, mode_usage_by_turn, routing_outcome, search_step_sources
from routerag.llm.scripted import ScriptedModel
from routerag.registry import UnknownNameError
from routerag.trace import Hit, ModelCall, Route, Step, Trace


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("The  Eiffel-Tower!", "eiffeltower"),  # punctuation deleted, not spaced (SQuAD)
        ("A Tale of Two Cities", "tale of two cities"),
        ("anthem", "anthem"),  # articles only as whole words
        ("1,000 km", "1000 km"),
        ("Pete\u2019s", "petes"),  # curly apostrophe: SQuAD's ASCII list would keep it
        ("1939\u20131945", "19391945"),  # en dash behaves like "-"
        ("\uff21\uff22\uff23", "abc"),  # full-width letters (NFKC)
        ("Z\u00fcrich", "z\u00fcrich"),  # accents kept
        ("The", ""),
        ("  $5 + tax  ", "5 tax"),  # ASCII symbols of string.punctuation go too
    ],
)
def test_normalize_answer(raw: str, expected: str) -> None:
    assert normalize_answer(raw) == expected


def test_exact_match_over_aliases() -> None:
    assert exact_match("JFK", ["John F. Kennedy", "jfk"]) == 1.0
    assert exact_match("the J.F.K.", ["JFK"]) == 1.0
    assert exact_match("Kennedy", ["John F. Kennedy"]) == 0.0
    assert exact_match("Paris", "paris") == 1.0  # a single string is one gold


def test_token_f1_hand_checked() -> None:
    # pred "cat sat on mat" (4) vs gold "cat on mat" (3): overlap 3, P=3/4, R=1 -> 6/7
    assert token_f1("The cat sat on the mat", ["cat on mat"]) == pytest.approx(6 / 7)
    # multiset overlap: "paris paris" vs "paris" -> overlap 1, P=1/2, R=1 -> 2/3
    assert token_f1("Paris Paris", ["Paris"]) == pytest.approx(2 / 3)
    assert token_f1("London", ["Paris"]) == 0.0
    # max over aliases
    assert token_f1("Port of Spain", ["Trinidad", "Port of Spain, Trinidad"]) == pytest.approx(2 * 1 * 0.75 / 1.75)
    assert token_precision("Port of Spain, Trinidad", ["Port of Spain"]) == pytest.approx(3 / 4)


def test_yes_no_special_case_in_f1_only() -> None:
    # HotpotQA / 2Wiki / FlashRAG: a yes/no/noanswer side that differs scores 0 (SQuAD would give 2/3)
    assert token_f1("no idea", ["no"]) == 0.0
    assert token_scores("no idea", "no", special_case_yes_no=False).f1 == pytest.approx(2 / 3)
    assert token_f1("yes", ["yes sir"]) == 0.0
    assert token_f1("Yes.", ["yes"]) == 1.0
    # F1-recall is deliberately lenient: the gold "no" is in the prediction
    assert f1_recall("no idea", ["no"]) == 1.0


def test_empty_answers() -> None:
    # both sides normalise to nothing: SQuAD 2.0 gives 1 (HotpotQA 0); we follow SQuAD 2.0
    assert token_f1("the", ["An"]) == 1.0
    assert exact_match("the", ["An"]) == 1.0
    assert token_f1("", ["Paris"]) == 0.0
    assert cover_em("", ["the"]) == 1.0
    assert cover_em("Paris", ["the"]) == 0.0  # an empty gold does not cover everything
    with pytest.raises(NoGoldAnswerError):
        token_f1("Paris", [])


def test_cover_em_matches_whole_tokens() -> None:
    assert cover_em("He was born in Port of Spain, Trinidad.", ["Port of Spain"]) == 1.0
    assert cover_em("born in 1990", ["1"]) == 0.0  # FlashRAG's substring test would say 1
    assert cover_em("It is the Spain of ports", ["Port of Spain"]) == 0.0


def test_f1_recall() -> None:
    assert f1_recall("Port of Spain, Trinidad", ["Port of Spain"]) == 1.0
    assert f1_recall("Port", ["Port of Spain"]) == pytest.approx(1 / 3)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=30), st.lists(st.text(max_size=30), min_size=1, max_size=3))
def test_metric_properties(prediction: str, golds: list[str]) -> None:
    scores = score_answer(prediction, golds, ["em", "f1", "cover_em", "f1_recall", "precision"])
    assert all(0.0 <= v <= 1.0 for v in scores.values())
    if scores["em"] == 1.0:
        assert scores["f1"] == 1.0 and scores["cover_em"] == 1.0 and scores["f1_recall"] == 1.0
    assert normalize_answer(normalize_answer(prediction)) == normalize_answer(prediction)


def test_registry_lists_valid_names() -> None:
    assert {"em", "f1", "cover_em", "f1_recall", "semantic"} <= set(METRICS.names())
    with pytest.raises(UnknownNameError, match="valid: .*cover_em.*em.*f1"):
        METRICS.get("bleu")


class _TableEmbedder:
    """Test double: fixed vectors per text."""

    identity = "table"
    dim = 2

    def __init__(self, table: dict[str, list[float]]) -> None:
        self.table = table

    def encode(self, texts, *, is_query=False):
        return np.array([self.table[t] for t in texts], dtype=np.float32)


def test_semantic_similarity_with_given_embedder() -> None:
    emb = _TableEmbedder({"a": [1.0, 0.0], "b": [0.6, 0.8], "c": [0.0, 3.0]})
    assert semantic_similarity("a", ["b", "c"], emb) == pytest.approx(0.6)
    assert semantic_similarity("c", ["b"], emb) == pytest.approx(0.8)  # vectors are re-normalised
    assert semantic_similarity("  ", ["b"], emb) == 0.0


@pytest.mark.integration  # loads the bundled embedder
def test_semantic_similarity_bundled_embedder() -> None:
    same = semantic_similarity("Port of Spain", ["Port of Spain"])
    near = semantic_similarity("the capital city of France", ["Paris"])
    far = semantic_similarity("a recipe for banana bread", ["Paris"])
    assert same == pytest.approx(1.0, abs=1e-4)
    assert near > far


@pytest.mark.parametrize(
    ("reply", "verdict"),
    [
        ("Yes", True),
        ("**No**.", False),
        ("Not correct.", False),
        ("incorrect", False),
        ("The predicted answer is correct.", True),
        ("Yes or no: no", False),
        ("<think>it says yes somewhere</think>\nNo", False),
        ("True", True),
        ("The prediction is not right", False),
        ("", None),
        ("maybe", None),
    ],
)
def test_parse_judgement(reply: str, verdict: bool | None) -> None:
    assert parse_judgement(reply) is verdict


def test_llm_judge_through_chat_model() -> None:
    model = ScriptedModel(["Yes.", "I cannot tell"])
    judge = LLMJudge(model)
    first = judge.judge("Capital of France?", "Paris", ["Paris"])
    assert first.score == 1.0 and first.call.purpose == "judge" and first.call.prompt_tokens > 0
    assert "Paris" in model.calls[0].messages[0].content
    assert judge.judge("Capital of France?", "Lyon", ["Paris"]).score is None


def _hit(mode: str, source: str) -> Hit:
    return Hit(doc_id="d", title="t", text="x", score=1.0, source=source, mode=mode, rank=1)


def _trace() -> Trace:
    return Trace(
        question="q",
        strategy="s",
        latency_ms=120.0,
        steps=[
            Step(index=0, kind="route", route=Route(choice="law"), model_calls=[ModelCall(purpose="route", prompt_tokens=10, completion_tokens=2)]),
            Step(index=1, kind="search", sources=["law"], hits=[_hit("passage", "law")], retrieval_ms=5.0),
            Step(index=2, kind="format_error", format_error="no tag", model_calls=[ModelCall(purpose="policy", prompt_tokens=30, completion_tokens=7, latency_ms=50)]),
            Step(index=3, kind="search", sources=["law", "med"], hits=[], retrieval_ms=7.5),
        ],
        answer="x",
    )


def test_trace_cost() -> None:
    cost = trace_cost(_trace())
    assert cost.retrieval_turns == 2 and cost.retrieval_calls == 3
    assert cost.calls_by_source == {"law": 2, "med": 1}
    assert cost.calls_by_mode == {"law": 1, "med": 1, "passage": 1}  # hit modes, else the named sources
    assert cost.prompt_tokens == 40 and cost.completion_tokens == 9 and cost.total_tokens == 49
    assert cost.retrieval_ms == pytest.approx(12.5) and cost.latency_ms == 120.0
    assert cost.format_errors == 1 and cost.model_calls == 2


def test_routing() -> None:
    trace = _trace()
    assert first_decision(trace) == ["law"]
    assert routing_outcome(trace, "Law").correct
    wrong = routing_outcome(trace, "med")
    assert wrong is not None and not wrong.correct and wrong.gold_used
    assert routing_outcome(trace, None) is None
    assert mode_usage_by_turn([search_step_sources(trace), [["med"]]]) == {1: {"law": 1, "med": 1}, 2: {"law": 1, "med": 1}}
