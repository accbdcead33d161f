"""The no-model rules for R1-Router's knowledge-base decision: the shipped rules files route the
held-out step prompts' forms, ``router: keyword`` in ``r1-router-step`` and ``r1-router``, and the
rules fitted on the training steps never see a held-out step."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError
from tests.unit.test_strategies_support import make_context

from routerag.corpus.datasets import load_dataset
from routerag.corpus.r1router_split import split_ids
from routerag.corpus.schema import Question
from routerag.eval.routing import routing_outcome
from routerag.routing.errors import RoutingError
from routerag.routing.keyword import KeywordRouter, load_rules
from routerag.strategies.r1_router import R1Router, R1RouterParams
from routerag.strategies.r1_router_step import R1RouterStep, R1RouterStepParams
from routerag.train.router.step_rules import check_no_heldout, fit_step_rules

RULES = Path(__file__).resolve().parents[2] / "src" / "routerag" / "data" / "rules"
MARKERS, STOP3, FITTED, TEXT_TABLE = (RULES / f"r1router-{n}.yaml" for n in ("markers", "markers-stop3", "fitted", "text-table"))

# the held-out step prompts' forms (r1router-steps-heldout): the first and a later step of an
# image question, a table question, and a text question's first and third step
IMAGE_FIRST = "Origin question: What is the location of this bridge?\n<image>"
IMAGE_LATER = ("Origin question: What is the location of this bridge?\nSub-question1: what is the name of the bridge in "
               "the image?\nAnswer1:  \nthe name of the bridge in the image is st. johns bridge. \n\n<image>")
TABLE = "Origin question: How many states are listed for Wayne County on the Appalachian Regional Commission's list?"
TABLE_THIRD = TABLE + "\nSub-question1: how many states?\nAnswer1: 1\nSub-question2: how many states are listed?\nAnswer2: 1"
TEXT_FIRST = "Origin question: Where was the place of death of Anna Gordy Gaye's husband?"
TEXT_THIRD = (TEXT_FIRST + "\nSub-question1: what is the name of anna gordy gaye's husband?\nAnswer1: marvin gaye\n"
              "Sub-question2: where did marvin gaye die?\nAnswer2: los angeles")
IMAGE_THIRD = IMAGE_LATER.replace("\n\n<image>", "\nSub-question2: where is st. johns bridge?\nAnswer2: portland\n<image>")


@pytest.mark.parametrize("prompt, markers, stop3", [
    (IMAGE_FIRST, "Text Image Retriever", "Text Image Retriever"),
    (IMAGE_LATER, "Text Retriever", "Text Retriever"),
    (IMAGE_THIRD, "Text Retriever", "Text Retriever"),  # the stop rule is a text question's only
    (TABLE, "Table Retriever", "Table Retriever"),
    (TABLE_THIRD, "Table Retriever", "Table Retriever"),
    (TEXT_FIRST, "Text Retriever", "Text Retriever"),
    (TEXT_THIRD, "Text Retriever", "None"),
])
def test_the_shipped_rules_route_the_step_prompts_forms(prompt, markers, stop3):
    assert KeywordRouter(load_rules(MARKERS)).decide(prompt) == markers
    assert KeywordRouter(load_rules(STOP3)).decide(prompt) == stop3


@pytest.mark.parametrize("prompt, choice", [
    (TABLE, "Table Retriever"), (TABLE_THIRD, "Table Retriever"), (TEXT_FIRST, "Text Retriever"), (TEXT_THIRD, "None"),
])
def test_the_text_table_rules_route_like_the_marker_rules_without_an_image_choice(prompt, choice):
    rules = load_rules(TEXT_TABLE)
    rules.check_choices(["Text Retriever", "Table Retriever", "None"])  # a text + table pipeline takes it
    with pytest.raises(RoutingError, match="Text Image Retriever"):
        load_rules(STOP3).check_choices(["Text Retriever", "Table Retriever", "None"])
    assert KeywordRouter(rules).decide(prompt) == KeywordRouter(load_rules(STOP3)).decide(prompt) == choice


def test_table_words_count_in_the_origin_question_only():
    # "number" in a sub-question or an answer of a text question is no table marker
    prompt = TEXT_FIRST + "\nSub-question1: what is the number of his house?\nAnswer1: 12"
    assert KeywordRouter(load_rules(MARKERS)).decide(prompt) == "Text Retriever"


def _step(prompt: str, gold: str, rules: Path = STOP3):
    ctx, model, _ = make_context([], names=())
    params = R1RouterStepParams(router="keyword", router_rules=str(rules))
    trace = R1RouterStep(ctx, params).run(Question(qid="s", question=prompt, answers=["x"], gold_source=gold))
    return trace, model, routing_outcome(trace, gold)


def test_r1_router_step_with_the_keyword_router_routes_without_a_model():
    trace, model, outcome = _step(IMAGE_FIRST, "Text Image Retriever")
    assert trace.error is None and model.calls == [] and outcome.correct
    step = trace.steps[0]
    assert step.route.chosen_by == "keyword" and step.route.reason.startswith("keyword rule 1 ")
    assert step.query is None and trace.answer == ""  # a rule writes no sub-question
    trace, model, outcome = _step(TEXT_THIRD, "None")
    assert outcome.correct and trace.answer == "None" and model.calls == []


def test_the_keyword_router_needs_rules_naming_offered_choices(tmp_path):
    with pytest.raises(ValidationError, match="router=keyword needs router_rules"):
        R1RouterStepParams(router="keyword")
    with pytest.raises(ValidationError, match="unknown router .no-such-router.; valid: .*keyword"):
        R1RouterStepParams(router="no-such-router")
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules: [{pattern: x, choice: Code Retriever}]\ndefault: Text Retriever\n")
    trace, _, _ = _step("x", "Text Retriever", rules)
    assert trace.error and "Code Retriever" in trace.error
    assert R1RouterStepParams().router == "policy"  # the default: the policy's <ret>


def test_r1_router_takes_the_rules_knowledge_base_and_stop(tmp_path):
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules:\n  - {pattern: '\\nsub-question1:', choice: 'None'}\n"
                     "  - {pattern: '^origin question:[^\\n]*how many', choice: Table Retriever}\ndefault: Text Retriever\n")
    ret = "<think>x</think>\n<sub-question>how many goals?</sub-question>\n<ret>Text Retriever</ret>"
    ctx, model, sources = make_context([ret, "<answer>9</answer>", "<answer>9</answer>"], names=("passage", "table"))
    trace = R1Router(ctx, R1RouterParams(router="keyword", router_rules=str(rules))).run("How many goals did Marcelo score?")
    assert trace.error is None and trace.answer == "9"
    search = trace.search_steps
    assert len(search) == 1 and search[0].sources == ["table"]  # the rule's, not the model's <ret>
    assert search[0].route.chosen_by == "keyword" and search[0].format_error is None
    assert sources["table"].queries == ["how many goals?"] and sources["passage"].queries == []
    # the rule stops at the second step: no decompose call for it, then the final answer
    assert [c.purpose for c in trace.model_calls] == ["decompose", "answer", "answer"]
    assert trace.steps[2].kind == "route" and trace.steps[2].route.choice == "None"


def _heldout_step() -> Question:
    index = int(split_ids("heldout")[0].rsplit("-", 1)[1])
    return Question(qid=f"r1router-steps-{index}-0", question=TEXT_FIRST, answers=["x"], gold_source="Text Retriever",
                    metadata={"trajectory": index, "step": 0})


def test_the_fit_refuses_a_held_out_step():
    train = int(split_ids("train")[0].rsplit("-", 1)[1])
    ok = Question(qid="t", question=TABLE, answers=["x"], gold_source="Table Retriever", metadata={"trajectory": train})
    check_no_heldout([ok])
    with pytest.raises(RoutingError, match="held-out trajectories"):
        fit_step_rules([ok, _heldout_step()])
    with pytest.raises(RoutingError, match="name no trajectory"):
        check_no_heldout([ok.model_copy(update={"metadata": {}})])


def test_the_shipped_fitted_rules_are_the_training_steps_fit(shared):
    if not (shared / "r1router" / "stepgrpo_valid.jsonl").is_file():
        pytest.skip("R1-Router's released trajectories are not in the shared data")
    steps = load_dataset("r1router-steps-train").questions
    assert not {q.metadata["trajectory"] for q in steps} & {int(i.rsplit("-", 1)[1]) for i in split_ids("heldout")}
    assert fit_step_rules(steps) == load_rules(FITTED)


def test_r1_router_over_text_and_tables_takes_the_text_table_rules():
    """Over a text and a table source only (no image knowledge base), the text + table rules route each
    step without a model's <ret>: a table question's sub-question goes to the tables."""
    ret = "<think>x</think>\n<sub-question>how many medals?</sub-question>\n<ret>Text Retriever</ret>"
    ctx, _, sources = make_context([ret, "<answer>4</answer>", ret, "<answer>4</answer>", ret, "<answer>4</answer>",
                                    "<answer>4</answer>"], names=("text", "tables"))
    params = R1RouterParams(router="keyword", router_rules=str(TEXT_TABLE),
                            retrievers={"Text Retriever": "text", "Table Retriever": "tables"})
    trace = R1Router(ctx, params).run("How many medals did Norway win in 1994?")
    assert trace.error is None, trace.error
    assert trace.search_steps and all(s.sources == ["tables"] for s in trace.search_steps)
    assert sources["tables"].queries and sources["text"].queries == []
