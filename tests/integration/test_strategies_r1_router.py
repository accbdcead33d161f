"""R1-Router: step control flow, recoveries, and a replay of the released Step-GRPO trajectories
(the prompts we send must be the ones the released model was trained on)."""

from __future__ import annotations

import json

import pytest
from tests.unit.test_strategies_support import KeywordSource, make_context

from routerag.corpus.datasets import DataNotFoundError, data_root
from routerag.llm.scripted import ScriptedModel
from routerag.runtime.base import StrategyContext
from routerag.sources.sourceset import SourceSet
from routerag.strategies.prompts import R1_ROUTER_FINAL_SYSTEM, R1_ROUTER_STEP_ANSWER_SYSTEM
from routerag.strategies.r1_router import R1Router, R1RouterParams

Q = "Who is the mother of the director of film Polish-Russian War?"


def ret(sub: str, retriever: str = "Text Retriever") -> str:
    return f"<think>\nnext hop\n</think>\n<sub-question>{sub}</sub-question>\n<ret>\n{retriever}\n</ret>"


def test_steps_then_final_answer():
    ctx, model, sources = make_context(
        [ret("who directed Polish-Russian War?"), "<think>x</think><answer>Xawery Zulawski</answer>",
         ret("who is the mother of Xawery Zulawski?"), "<answer>Malgorzata Braunek</answer>",
         ret("None", "None"), "<think>so</think><answer> Malgorzata Braunek </answer>"],
        names=("passage",),
    )
    trace = R1Router(ctx).run(Q)
    assert trace.error is None and trace.answer == "Malgorzata Braunek"
    assert [s.kind for s in trace.steps] == ["search", "answer", "search", "answer", "decompose", "answer"]
    assert [c.purpose for c in trace.model_calls] == ["decompose", "answer"] * 3
    assert sources["passage"].queries == ["who directed Polish-Russian War?", "who is the mother of Xawery Zulawski?"]
    assert trace.steps[0].route.reason == "<ret> Text Retriever" and trace.steps[0].reasoning == "next hop"
    assert [s.answer for s in trace.steps if s.kind == "answer"] == ["Xawery Zulawski", "Malgorzata Braunek", "Malgorzata Braunek"]
    # the unmounted Table Retriever is not offered
    assert "Choose 1 retriever from: Text Retriever." in model.calls[0].messages[0].content
    assert model.calls[1].messages[0].content == R1_ROUTER_STEP_ANSWER_SYSTEM
    assert model.calls[1].messages[1].content.startswith("According to the related information searched, `ter` means")
    assert "ter-0: Polish-Russian War (film) Polish-Russian War is a 2009" in model.calls[1].messages[1].content
    assert model.calls[2].messages[1].content.endswith("Sub-question1: who directed Polish-Russian War?\nAnswer1: Xawery Zulawski\n")
    assert model.calls[-1].messages[0].content == R1_ROUTER_FINAL_SYSTEM
    # one prompt/model segment pair per call
    assert [s.kind for s in trace.segments] == ["prompt", "model"] * 6


def test_step_limit_and_recoveries():
    ctx, model, sources = make_context(
        ["no tags at all", "Xawery Zulawski",  # first step: the question itself; answer without tags
         ret("who is his mother?", "Web Search"), "<answer>Malgorzata</answer>",  # unknown retriever
         ret("third?"), "<answer></answer>",  # empty answer
         "<answer>Malgorzata Braunek</answer>"],
        names=("passage", "table"),
    )
    trace = R1Router(ctx, R1RouterParams(max_steps=3)).run(Q)
    assert trace.error is None and len(model.calls) == 7 and trace.answer == "Malgorzata Braunek"
    search = trace.search_steps
    assert search[0].query == Q and search[0].format_error == "missing_sub_question; missing_retriever"
    assert search[1].sources == ["passage"] and search[1].format_error == "unknown_retriever:Web Search"
    answers = [s for s in trace.steps if s.kind == "answer"]
    assert answers[0].answer == "Xawery Zulawski" and answers[0].format_error == "missing_answer_tag"
    assert answers[2].format_error == "empty_answer"
    assert trace.format_errors == 4


def test_missing_sub_question_after_the_first_step_stops():
    ctx, model, _ = make_context([ret("who directed it?"), "<answer>X</answer>", "I am done.", "<answer>X</answer>"], names=("passage",))
    trace = R1Router(ctx).run(Q)
    assert [s.kind for s in trace.steps] == ["search", "answer", "decompose", "answer"]
    assert trace.steps[2].format_error == "missing_sub_question" and trace.answer == "X"


ECHO = "[Exactly ONE single-hop question one time. If no further information is needed to answer the origin question, write 'None'.]"


def test_a_copied_instruction_is_not_searched():
    # what the untrained 0.5B wrote for 65 of 66 sub-questions on MuSiQue: the prompt's own placeholder
    ctx, model, sources = make_context(
        [ret(ECHO), "<answer>Xawery Zulawski</answer>",  # first step: the question itself is searched
         ret(f"\n{ECHO}\n"), "<answer>Malgorzata Braunek</answer>"],  # later: no further step
        names=("passage",),
    )
    trace = R1Router(ctx).run(Q)
    assert sources["passage"].queries == [Q] and len(model.calls) == 4 and trace.answer == "Malgorzata Braunek"
    assert trace.search_steps[0].format_error == "copied_instruction"
    assert [s.kind for s in trace.steps] == ["search", "answer", "decompose", "answer"]
    assert trace.steps[2].format_error == "copied_instruction" and trace.steps[2].query is None  # no query: it stopped
    assert "Sub-question1: " + Q in model.calls[2].messages[1].content  # history shows what was searched


def test_no_mounted_retriever_is_a_trace_error():
    ctx, _, _ = make_context(["x"], names=("graph",))
    trace = R1Router(ctx).run(Q)
    assert trace.error is not None and "mounted" in trace.error and not trace.steps


def _trajectories() -> list[dict]:
    try:
        path = data_root() / "r1router" / "stepgrpo_valid.jsonl"
    except DataNotFoundError:
        pytest.skip("shared benchmark data not available")
    if not path.exists():
        pytest.skip("R1-Router trajectories not available")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r for r in rows if not r["images"]]


def _scripted_outputs(steps: list[dict]) -> list[str]:
    outputs = []
    for step in steps:
        if step["step_type"] == "ret":
            query, retriever = step["answer"]["query"], step["answer"]["retriever"][0]
            outputs.append(ret("None" if query.strip().lower() == "none" else query, retriever))
        else:
            answer = step["answer"][0] if isinstance(step["answer"], list) else step["answer"]
            outputs.append(f"<think>\nreasoning\n</think>\n<answer>{answer}</answer>")
    return outputs


@pytest.mark.data
def test_replay_of_released_trajectories_sends_the_same_prompts():
    rows = _trajectories()
    assert len(rows) >= 80
    retrievers = {"Text Retriever": "passage", "Text Image Retriever": "image", "Table Retriever": "table"}
    for row in rows:
        steps = row["steps"]
        model = ScriptedModel(_scripted_outputs(steps))
        ctx = StrategyContext(model=model, sources=SourceSet(KeywordSource(n) for n in retrievers.values()))
        question = steps[0]["problem"].removeprefix("Origin question: ").rstrip("\n")
        trace = R1Router(ctx, R1RouterParams(retrievers=retrievers, max_tokens=8192)).run(question)
        assert trace.error is None
        assert len(model.calls) == len(steps)
        for call, step in zip(model.calls, steps):
            system, user = call.messages[0].content, call.messages[1].content
            assert system.rstrip() == step["system"].lstrip('"').rstrip()  # releases differ in trailing newlines
            if step["step_type"] == "ret" or step is steps[-1]:
                assert user == step["problem"]  # history and final prompts byte for byte
            else:  # evidence differs (our corpus), the frame does not
                assert user.split(":", 1)[0] == step["problem"].split(":", 1)[0]
                assert user.rsplit("\n\n\n", 1)[1] == step["problem"].rsplit("\n\n\n", 1)[1]
        chosen = [s.sources[0] for s in trace.search_steps]
        expected = [retrievers[next(n for n in retrievers if n.lower() == s["answer"]["retriever"][0])]
                    for s in steps if s["step_type"] == "ret" and s["answer"]["query"].strip().lower() != "none"]
        assert chosen == expected


def test_bracketed_sub_questions_none_and_copied_examples():
    # seen on MuSiQue with the untrained 0.5B: "[None]" 6 times searched as a query, the prompt's
    # own example "[Find the capital and population of France]", sub-questions in placeholder brackets
    ctx, model, sources = make_context(
        [ret("[Who directed Polish-Russian War?]"), "<answer>Xawery Zulawski</answer>",
         ret("[Find the capital and population of France]"), "<answer>Xawery Zulawski</answer>"],
        names=("passage",),
    )
    trace = R1Router(ctx).run(Q)
    assert sources["passage"].queries == ["Who directed Polish-Russian War?"]
    assert trace.steps[2].kind == "decompose" and trace.steps[2].format_error == "copied_instruction"
    ctx, model, sources = make_context([ret("[None]", "[None]"), "<answer>Malgorzata Braunek</answer>"], names=("passage",))
    trace = R1Router(ctx).run(Q)
    assert sources["passage"].queries == [] and trace.steps[0].kind == "decompose" and trace.steps[0].format_error is None
    assert trace.answer == "Malgorzata Braunek"
