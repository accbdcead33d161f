"""verl reward functions: RouteRAG's two stages over the agent loop's episode records, against
hand-computed values (the charges the environment recorded, batch-centred p95 normalisation of
routerag.train.rewards)."""

from __future__ import annotations

import pytest

from routerag.train.verl.agent_loop import EpisodeRecord, StepRecord
from routerag.train.verl.reward import compute_score, compute_score_batch, episode_record

PRICE = {"passage": 1.0, "graph": 3.0, "hybrid": 4.0}


def search(mode: str) -> StepRecord:
    return StepRecord(kind="search", choice=mode, mode=mode, sources=[mode], retrieval_cost=PRICE[mode], retrieval_ms=5.0)


def record(answer: str, *steps: StepRecord, finished: str = "answer", answer_error: str | None = None) -> dict:
    final = StepRecord(kind="answer", forced=finished != "answer", format_error=answer_error)
    rec = EpisodeRecord(strategy="routerag", answer=answer, finished=finished, steps=[*steps, final])  # type: ignore[arg-type]
    return {"question": "What is the capital of France?", "routerag_episode": rec.model_dump(mode="json")}


GT = {"target": ["Paris"]}
# A: correct after one passage search (cost 1); B: correct after graph then passage (3 + 1 = 4);
# C: wrong after one hybrid search (4); D: correct without searching (0)
A = record("Paris", search("passage"))
B = record("paris", search("graph"), search("passage"))
C = record("Lyon", search("hybrid"))
D = record("Paris.")
TEXT = ["(decoded text: not read)"] * 4


def test_stage_two_is_batch_centred_and_p95_normalised():
    out = compute_score_batch(["hotpotqa"] * 4, TEXT, [GT] * 4, [A, B, C, D], reward="accuracy_efficiency")
    # costs [1, 4, 4, 0]; p95 (linear) = 4, T = p95 / cap = 8; scaled t = [0.125, 0.5, 0.5, 0]; mean 0.28125
    assert [o["retrieval_cost"] for o in out] == [1.0, 4.0, 4.0, 0.0]
    assert [o["retrieval_turns"] for o in out] == [1.0, 2.0, 1.0, 0.0]
    assert [o["acc"] for o in out] == [1.0, 1.0, 0.0, 1.0]
    assert [o["score"] for o in out] == pytest.approx([1.15625, 0.78125, 0.0, 1.28125])


def test_stage_two_parameters_and_cost_signals():
    # cost = retrieval turns [1, 2, 1, 0]: sorted [0, 1, 1, 2], p95 = 1 + 0.85 * (2 - 1) = 1.85, T = 3.7,
    # t = [1/3.7, 0.5 (2/3.7 capped), 1/3.7, 0], mean = (2/3.7 + 0.5) / 4
    out = compute_score_batch(["x"] * 4, TEXT, [GT] * 4, [A, B, C, D], reward="accuracy_efficiency", params={"cost": "turns"})
    mean = (2 / 3.7 + 0.5) / 4
    assert [o["score"] for o in out] == pytest.approx([1 + mean - 1 / 3.7, 1 + mean - 0.5, 0.0, 1 + mean])
    # fixed T = 10 on mode costs: t = [0.1, 0.4, 0.4, 0], mean 0.225; wrong answers get -1
    out = compute_score_batch(["x"] * 4, TEXT, [GT] * 4, [A, B, C, D], reward="accuracy_efficiency",
                              params={"normaliser": "fixed", "T": 10.0, "wrong": -1.0})
    assert [o["score"] for o in out] == pytest.approx([1.125, 0.825, -1.0, 1.225])
    # a price table in the reward's params prices the recorded modes instead of the recorded charges
    out = compute_score_batch(["x"] * 2, TEXT[:2], [GT] * 2, [A, C], reward="accuracy_efficiency",
                              params={"mode_cost": {"passage": 2.0, "graph": 5.0, "hybrid": 6.0}})
    assert [o["retrieval_cost"] for o in out] == [2.0, 6.0]
    # measured wall time is recorded too
    out = compute_score_batch(["x"] * 2, TEXT[:2], [GT] * 2, [B, D], reward="accuracy_efficiency", params={"cost": "wall_ms"})
    assert [o["retrieval_cost"] for o in out] == [10.0, 0.0]


def test_stage_one_is_exact_match_per_sample_and_in_batch():
    assert [o["score"] for o in compute_score_batch(["x"] * 4, TEXT, [GT] * 4, [A, B, C, D], reward="em")] == [1.0, 1.0, 0.0, 1.0]
    assert compute_score("x", "", GT, B)["score"] == 1.0  # default reward: em
    assert compute_score("x", "", {"target": ["Lyon", "Lyons"]}, C)["score"] == 1.0
    assert compute_score("x", "", GT, record(""))["score"] == 0.0
    assert compute_score("x", "", GT, record("Paris France"), reward="f1")["score"] == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="compute_score_batch"):
        compute_score("x", "", GT, A, reward="accuracy_efficiency")
    with pytest.raises(ValueError):
        compute_score_batch(["x"], TEXT[:1], [GT], [A], reward="em", unknown_key=1)


def test_format_and_graphrag_rewards_read_the_recorded_protocol_errors():
    clean = record("Paris", search("passage"))
    invalid = record("Paris", StepRecord(kind="format_error", format_error="no_action"), search("passage"))
    forced = record("Paris", search("passage"), finished="forced", answer_error="no_answer_within_budget")
    out = compute_score_batch(["x"] * 3, TEXT[:3], [GT] * 3, [clean, invalid, forced], reward="format")
    assert [o["score"] for o in out] == [0.5, 0.0, 0.0]
    # GraphRAG-R1: searches routed to an evidence mix (no mode), PRA and CAF with the paper's constants
    mix = StepRecord(kind="search", choice="passage+triples", sources=["passage", "triples"])
    g = record("Paris", mix, mix, mix)
    assert compute_score("x", "", GT, g, reward="pra")["score"] == pytest.approx(1.5)  # 3 * R0, k = 1
    assert compute_score("x", "", GT, g, reward="caf")["score"] == pytest.approx(2 * 2.718281828 ** -0.3)


def test_a_row_without_the_agent_loops_record_is_refused():
    with pytest.raises(ValueError, match="routerag agent loop"):
        compute_score("x", "<answer> Paris </answer>", GT, {"question": "q"})
    nested = {"question": "q", "extra_fields": {"routerag_episode": A["routerag_episode"]}}
    assert episode_record(nested).answer == "Paris"
