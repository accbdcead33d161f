"""verl reward functions: RouteRAG's two stages over decoded trajectories, against hand-computed
values (costs counted from the text, batch-centred p95 normalisation of routerag.train.rewards)."""

from __future__ import annotations

import pytest

from routerag.strategies.prompts import FORCE_ANSWER, INVALID_ACTION
from routerag.train.verl.reward import compute_score, compute_score_batch, trace_of_response


def info(title: str) -> str:
    return f"\n\n<information>Doc 1(Title: {title}) some text\n</information>\n\n"


GT = {"target": ["Paris"]}
# A: correct after one passage search (cost 1); B: correct after graph then passage (3 + 1 = 4);
# C: wrong after one hybrid search (4); D: correct without searching (0)
A = "<think> a </think>\n<search> [passage] capital of France </search>" + info("Paris") + "<answer> Paris </answer>"
B = ("<search> [graph] France capital </search>" + info("France") + "<search> [passage] Paris </search>" + info("Paris")
     + "<answer> paris </answer>")
C = "<search> [graph][passage] capital </search>" + info("Lyon") + "<answer> Lyon </answer>"
D = "<think> I know it </think>\n<answer> Paris. </answer>"


def test_stage_two_is_batch_centred_and_p95_normalised():
    out = compute_score_batch(["hotpotqa"] * 4, [A, B, C, D], [GT] * 4, [{"question": "What is the capital of France?"}] * 4,
                              reward="accuracy_efficiency")
    # costs [1, 4, 4, 0]; p95 (linear) = 4, T = p95 / cap = 8; scaled t = [0.125, 0.5, 0.5, 0]; mean 0.28125
    assert [o["retrieval_cost"] for o in out] == [1.0, 4.0, 4.0, 0.0]
    assert [o["retrieval_turns"] for o in out] == [1.0, 2.0, 1.0, 0.0]
    assert [o["acc"] for o in out] == [1.0, 1.0, 0.0, 1.0]
    assert [o["score"] for o in out] == pytest.approx([1.15625, 0.78125, 0.0, 1.28125])


def test_stage_two_parameters_and_cost_signals():
    # cost = retrieval turns [1, 2, 1, 0]: sorted [0, 1, 1, 2], p95 = 1 + 0.85 * (2 - 1) = 1.85, T = 3.7,
    # t = [1/3.7, 0.5 (2/3.7 capped), 1/3.7, 0], mean = (2/3.7 + 0.5) / 4
    out = compute_score_batch(["x"] * 4, [A, B, C, D], [GT] * 4, None, reward="accuracy_efficiency", params={"cost": "turns"})
    mean = (2 / 3.7 + 0.5) / 4
    assert [o["score"] for o in out] == pytest.approx([1 + mean - 1 / 3.7, 1 + mean - 0.5, 0.0, 1 + mean])
    # fixed T = 10 on mode costs: t = [0.1, 0.4, 0.4, 0], mean 0.225; wrong answers get -1
    out = compute_score_batch(["x"] * 4, [A, B, C, D], [GT] * 4, None, reward="accuracy_efficiency",
                              params={"normaliser": "fixed", "T": 10.0, "wrong": -1.0})
    assert [o["score"] for o in out] == pytest.approx([1.125, 0.825, -1.0, 1.225])
    # the agent loop's env prices the modes
    out = compute_score_batch(["x"] * 2, [A, C], [GT] * 2, None, reward="accuracy_efficiency",
                              env={"mode_cost": {"passage": 2.0, "graph": 5.0, "hybrid": 6.0}})
    assert [o["retrieval_cost"] for o in out] == [2.0, 6.0]


def test_stage_one_is_exact_match_per_sample_and_in_batch():
    assert [o["score"] for o in compute_score_batch(["x"] * 4, [A, B, C, D], [GT] * 4, None, reward="em")] == [1.0, 1.0, 0.0, 1.0]
    assert compute_score("x", B, GT, {})["score"] == 1.0  # default reward: em
    assert compute_score("x", C, {"target": ["Lyon", "Lyons"]}, None)["score"] == 1.0
    assert compute_score("x", "no tags at all", GT)["score"] == 0.0
    assert compute_score("x", "<answer> Paris France </answer>", GT, reward="f1")["score"] == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="compute_score_batch"):
        compute_score("x", A, GT, reward="accuracy_efficiency")
    with pytest.raises(ValueError):
        compute_score_batch(["x"], [A], [GT], None, reward="em", unknown_key=1)


def test_costs_are_counted_from_the_trajectory():
    # an invalid turn (no action, or a search the env refused) gets no <information>: not a retrieval
    text = ("<search> [graph] France </search>" + INVALID_ACTION + "<search> [passage] Paris </search>" + info("Paris")
            + "<search> [wiki] Paris again </search>" + info("Paris") + FORCE_ANSWER + " Paris </answer>")
    trace = trace_of_response(text, "What is the capital of France?")
    assert [s.route.mode for s in trace.search_steps if s.route] == ["passage", "passage"]  # unknown tag -> default mode
    assert [s.retrieval_cost for s in trace.search_steps] == [1.0, 1.0] and trace.answer == "Paris"
    # restricted modes are forced to the default, as the agent loop's router does
    restricted = trace_of_response(C, "q", env=None)
    assert restricted.search_steps[0].route is not None and restricted.search_steps[0].route.mode == "hybrid"
    from routerag.train.env import EnvConfig

    only_passage = trace_of_response(C, "q", EnvConfig(allowed_modes=["passage"], mode_sources={"passage": "dense"}))
    assert only_passage.search_steps[0].route is not None and only_passage.search_steps[0].route.mode == "passage" and only_passage.search_steps[0].sources == ["dense"]
    # the answer the budget cut (no closing tag) still counts; the chat prompt before the assistant turn is dropped
    assert trace_of_response("user text <answer> q </answer><|im_start|>assistant\n" + FORCE_ANSWER + " Rome").answer == "Rome"
