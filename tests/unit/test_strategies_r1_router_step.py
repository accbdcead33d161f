"""r1-router-step: one decompose-and-route step scored against R1-Router's gold trajectories."""

from __future__ import annotations

import json

import pytest

from routerag.corpus.loaders import CorpusFormatError, detect_question_format, load_questions
from routerag.corpus.schema import Question
from routerag.eval.routing import routing_outcome
from routerag.strategies import STRATEGIES
from routerag.strategies.prompts import R1_ROUTER_GUIDELINES, r1_router_ret_system
from routerag.strategies.r1_router_step import R1RouterStep, R1RouterStepParams
from test_strategies_support import make_context

HISTORY = "Origin question: When was the director of film Strangler Of The Swamp born?\nSub-question1: who directed it?\nAnswer1: frank wisbar\n"


def _step(output: str, gold: str = "Text Retriever"):
    ctx, model, sources = make_context([output], names=())
    q = Question(qid="s1", question=HISTORY, answers=["when was frank wisbar born?"], gold_source=gold)
    trace = STRATEGIES.get("r1-router-step")(ctx).run(q)
    return trace, model, routing_outcome(trace, gold)


def test_a_step_routes_and_writes_the_sub_question_with_the_released_prompt():
    trace, model, outcome = _step("<think>need the birth date</think>\n<sub-question>When was Frank Wisbar born?</sub-question>\n<ret>Text Retriever</ret>")
    assert trace.error is None and trace.answer == "When was Frank Wisbar born?"
    assert [s.kind for s in trace.steps] == ["route"] and trace.steps[0].decision() == ["Text Retriever"]
    assert outcome.correct and outcome.chosen == ["Text Retriever"]
    assert model.calls[0].messages[0].content == r1_router_ret_system(R1_ROUTER_GUIDELINES)
    assert model.calls[0].messages[1].content == HISTORY  # the gold history, verbatim
    assert trace.retrieval_turns == 0  # nothing is retrieved


def test_a_wrong_retriever_and_the_stop_decision():
    _, _, outcome = _step("<sub-question>GDP?</sub-question><ret>table retriever</ret>")
    assert outcome.chosen == ["Table Retriever"] and not outcome.correct
    trace, _, outcome = _step("<think>done</think><sub-question>None</sub-question><ret>None</ret>", gold="None")
    assert trace.answer == "None" and outcome.correct and trace.steps[0].format_error is None


@pytest.mark.parametrize(
    "output, error",
    [
        ("<think>no tags at all</think>", "missing_sub_question"),
        ("<sub-question>[Exactly ONE single-hop question one time.]</sub-question><ret>Text Retriever</ret>", "copied_instruction"),
        ("<sub-question>Who?</sub-question><ret>Search Engine</ret>", "unknown_retriever"),
        ("<sub-question>Who?</sub-question>", "missing_retriever"),
    ],
)
def test_broken_output_is_a_format_error_and_no_routing_decision(output, error):
    # r1-router would fall back to the first retriever; scored as routing that fallback would be
    # "correct" whenever the gold is the Text Retriever
    trace, _, outcome = _step(output, gold="None")
    assert error in (trace.steps[0].format_error or "")
    assert trace.answer != "None"  # a broken output never matches a gold "stop"
    assert trace.steps[0].decision() == [] and outcome.chosen == [] and not outcome.correct


def test_retrievers_outside_the_prompt_need_a_guideline():
    ctx, _, _ = make_context(["<sub-question>x</sub-question><ret>Code Retriever</ret>"], names=())
    trace = R1RouterStep(ctx, R1RouterStepParams(retrievers=["Text Retriever", "Code Retriever"])).run("q")
    assert trace.error and "guideline" in trace.error
    ctx, _, _ = make_context(["<sub-question>x</sub-question><ret>Code Retriever</ret>"], names=())
    params = R1RouterStepParams(retrievers=["Text Retriever", "Code Retriever"], guidelines={"Code Retriever": "for source code"})
    assert R1RouterStep(ctx, params).run("q").steps[0].decision() == ["Code Retriever"]


def _write(tmp_path, records) -> str:
    path = tmp_path / "traj.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def test_trajectory_file_gives_one_question_per_retrieval_step(tmp_path):
    record = {"images": [], "steps": [
        {"step_type": "ret", "system": "s", "problem": "Origin question: Q?\n", "answer": {"query": "who  directed X? ", "retriever": ["text retriever"]}},
        {"step_type": "ans", "system": "s", "problem": "evidence", "answer": "Frank"},
        {"step_type": "ret", "system": "s", "problem": "Origin question: Q?\nSub-question1: ...", "answer": {"query": "None", "retriever": []}},
        {"step_type": "ans", "system": "s", "problem": "final", "answer": ["1899"]},
    ]}
    path = _write(tmp_path, [record])
    assert detect_question_format(path) == "r1router-steps"
    qs = load_questions(path, dataset="traj")
    assert [(q.qid, q.answers, q.gold_source) for q in qs] == [
        ("traj-0-0", ["who directed X?"], "Text Retriever"),
        ("traj-0-2", ["None"], "None"),
    ]


def test_a_malformed_trajectory_names_its_line_and_step(tmp_path):
    bad = {"images": [], "steps": [{"step_type": "ret", "system": "s", "problem": "p", "answer": "not an object"}]}
    with pytest.raises(CorpusFormatError, match=r"line 2.*step 0"):
        load_questions(_write(tmp_path, [{"images": [], "steps": []}, bad]), "r1router-steps", dataset="t")
