"""Rewards: hand-computed values for every registered reward, schedules, degenerate batches."""

from __future__ import annotations

import math

import pytest

from routerag.trace import ForcedAnswer, Hit, Route, Segment, Step, Trace
from routerag.train.rewards import (
    REWARDS,
    AccuracyEfficiencyParams,
    RewardSample,
    RewardSchedule,
    Stage,
    WeightedReward,
    followed_protocol,
    get_reward,
    pra_value,
    scaled_costs,
    trajectory_cost,
    two_stage_schedule,
)


def make_trace(answer: str, modes: list[str] = (), *, ms: float = 10.0, forced: bool = False, error: str | None = None) -> Trace:
    steps = [
        Step(index=i, kind="search", query="q", sources=[m], retrieval_ms=ms, route=Route(choice=m, mode=m),
             hits=[Hit(doc_id="d", title="t", text="x", score=1.0, source=m, mode=m, rank=1)])
        for i, m in enumerate(modes)
    ]
    steps.append(Step(index=len(steps), kind="answer", answer=answer, format_error=error, forced=ForcedAnswer() if forced else None))
    return Trace(question="Q?", strategy="routerag", steps=steps, answer=answer)


def sample(answer: str, golds=("Paris",), modes=(), **kw) -> RewardSample:
    return RewardSample(trace=make_trace(answer, list(modes), **kw), golds=list(golds))


def test_registered_names():
    assert {"em", "f1", "format", "accuracy_efficiency", "pra", "caf", "r1_router_step"} <= set(REWARDS.names())
    assert get_reward("accuracy_efficiency").batch_level


def test_em_f1_and_format():
    batch = [sample("Paris"), sample("the paris."), sample("Lyon"), sample("")]
    assert get_reward("em")(batch) == [1.0, 1.0, 0.0, 0.0]
    f1 = get_reward("f1")([sample("Paris France")])[0]
    assert f1 == pytest.approx(2 * 0.5 * 1.0 / 1.5)
    fmt = get_reward("format")([sample("Paris"), sample("Paris", forced=True), sample("Paris", error="unclosed_answer")])
    assert fmt == [0.5, 0.0, 0.0]
    assert get_reward("format")([sample("Paris")], {"score": 1.0, "penalty": -2.0}) == [1.0]


def test_trajectory_cost_signals():
    t = make_trace("x", ["passage", "graph", "hybrid"], ms=5.0)
    assert trajectory_cost(t, "turns") == 3
    assert trajectory_cost(t, "wall_ms") == 15.0
    assert trajectory_cost(t, "mode_cost", {"passage": 1, "graph": 3, "hybrid": 4}) == 8.0
    assert trajectory_cost(t, "mode_cost", {}) == 3.0  # unknown modes cost 1


def test_accuracy_efficiency_hand_computed():
    # costs (per-mode: passage 1, graph 3): 1, 3, 4, 0 ; p95 of [1,3,4,0] = 3.85 ; T = 3.85/0.5 = 7.7
    prices = {"passage": 1.0, "graph": 3.0}
    batch = [
        sample("Paris", modes=["passage"]),
        sample("Paris", modes=["graph"]),
        sample("Lyon", modes=["passage", "graph"]),
        sample("Paris", modes=[]),
    ]
    params = {"cost": "mode_cost", "mode_cost": prices}
    T = 3.85 / 0.5
    scaled = [1 / T, 3 / T, 0.5, 0.0]  # 4/T = 0.519 is clipped at 0.5
    t_avg = sum(scaled) / 4
    expected = [1 + t_avg - scaled[0], 1 + t_avg - scaled[1], 0.0, 1 + t_avg - scaled[3]]
    got = get_reward("accuracy_efficiency")(batch, params)
    assert got == pytest.approx(expected)
    # the cheaper correct trajectory is rewarded more; the batch mean is the baseline (not the group)
    assert got[3] > got[0] > got[1]


def test_accuracy_efficiency_fixed_T_and_degenerate():
    batch = [sample("Paris", modes=["passage"]), sample("Paris", modes=["graph", "graph"])]
    got = get_reward("accuracy_efficiency")(batch, {"normaliser": "fixed", "T": 10.0, "cap": 1.0, "mode_cost": {"passage": 1, "graph": 3}})
    # scaled 0.1 and 0.6, mean 0.35
    assert got == pytest.approx([1.25, 0.75])
    # nobody retrieved: p95 = 0 -> no efficiency term, no division by zero
    assert get_reward("accuracy_efficiency")([sample("Paris"), sample("Lyon")]) == [1.0, 0.0]
    assert get_reward("accuracy_efficiency")([]) == []
    assert scaled_costs([0.0, 0.0], AccuracyEfficiencyParams()) == [0.0, 0.0]
    # one sample: its own mean -> exactly 1 when correct
    assert get_reward("accuracy_efficiency")([sample("Paris", modes=["graph"])]) == [1.0]


def test_accuracy_efficiency_wall_time_signal():
    batch = [sample("Paris", modes=["passage"], ms=10.0), sample("Paris", modes=["passage"], ms=30.0)]
    got = get_reward("accuracy_efficiency")(batch, {"cost": "wall_ms"})
    p95 = 10 + 0.95 * 20  # numpy linear interpolation
    s = [min(10 * 0.5 / p95, 0.5), min(30 * 0.5 / p95, 0.5)]
    m = sum(s) / 2
    assert got == pytest.approx([1 + m - s[0], 1 + m - s[1]])


def test_pra_recursion_and_reward():
    # R_n = R_{n-1} + R0 k^(n-1), R_0 = 0 ; R0 = 0.5, k = 0.5: 0, 0.5, 0.75, 0.875
    assert [pra_value(n, 0.5, 0.5) for n in range(4)] == [0.0, 0.5, 0.75, 0.875]
    batch = [sample("x", modes=["passage"] * n) for n in range(4)]
    assert get_reward("pra")(batch, {"k": 0.5, "max_calls": None}) == pytest.approx([0.0, 0.5, 0.75, 0.875])
    assert get_reward("pra")(batch, {"R0": 1.0, "k": 0.9, "max_calls": 2}) == pytest.approx([0.0, 1.0, 1.9, 1.9])


def test_pra_defaults_are_the_papers_constants():
    # GraphRAG-R1 stage 2: R0 = 0.5, k = 1 (the plain sum n * R0), retrievals capped at 8
    batch = [sample("x", modes=["passage"] * n) for n in (0, 1, 3, 8, 10)]
    assert get_reward("pra")(batch) == pytest.approx([0.0, 0.5, 1.5, 4.0, 4.0])


def test_caf():
    batch = [sample("Paris", modes=["passage"] * 2), sample("Paris France", modes=[]), sample("Lyon", modes=["graph"])]
    got = get_reward("caf")(batch)  # the paper's a = 2, b = 0.1
    assert got == pytest.approx([2 * math.exp(-0.2), 2 * 2 / 3, 0.0])
    assert get_reward("caf")(batch, {"a": 1.0}) == pytest.approx([math.exp(-0.2), 2 / 3, 0.0])  # our earlier default
    assert get_reward("caf")(batch[:1], {"a": 2.0, "b": 0.5}) == pytest.approx([2 * math.exp(-1.0)])


def r1_sample(output: str, extra: dict, golds=()) -> RewardSample:
    trace = Trace(question="p", strategy="r1-router-step", segments=[Segment(kind="prompt", text="p"), Segment(kind="model", text=output)])
    return RewardSample(trace=trace, golds=list(golds), extra=extra)


def test_r1_router_step_reward():
    params = {"similarity": "token_f1"}
    ret_gold = {"step_type": "ret", "gold_query": "who directed the film x?", "gold_retriever": "text retriever"}
    good = "<think>\nneed director\n</think>\n<sub-question>\nwho directed the film x?\n</sub-question>\n<ret>\nText Retriever\n</ret>"
    wrong_kb = good.replace("Text Retriever", "Table Retriever")
    broken = "<sub-question>who directed the film x?"  # no closing tags, no <ret>
    got = get_reward("r1_router_step")([r1_sample(good, ret_gold), r1_sample(wrong_kb, ret_gold), r1_sample(broken, ret_gold)], params)
    assert got == pytest.approx([1.0, 0.5, 0.0])
    # hand-worked: "who produced the film x?" shares who/film/x with the gold (articles and punctuation
    # dropped): P = R = 3/4, token F1 0.75 -> 0.5 * 0.75 + 0.5 * [route] (alpha = beta = 0.5, the defaults)
    partial = good.replace("who directed the film x?", "who produced the film x?")
    partial_wrong_kb = partial.replace("Text Retriever", "Table Retriever")
    got = get_reward("r1_router_step")([r1_sample(partial, ret_gold), r1_sample(partial_wrong_kb, ret_gold)], params)
    assert got == pytest.approx([0.875, 0.375])
    assert get_reward("r1_router_step")([r1_sample(partial, ret_gold)], {**params, "w_query": 0.2, "w_route": 0.8}) == \
        pytest.approx([0.2 * 0.75 + 0.8])
    # the decision to stop: right when the gold stops (sim 1, route None), worth 0 when the gold goes on
    stop_gold = {"step_type": "ret", "gold_query": "none", "gold_retriever": "none"}
    stop = "<think>\nenough\n</think>\n<sub-question>\nNone\n</sub-question>\n<ret>\nNone\n</ret>"
    got = get_reward("r1_router_step")([r1_sample(stop, stop_gold), r1_sample(stop, ret_gold), r1_sample(good, stop_gold)], params)
    assert got == pytest.approx([1.0, 0.0, 0.0])
    ans = {"step_type": "ans", "gold_answer": "frank wisbar"}
    out = "<think> from ter-0 </think>\n<answer> The director is Frank Wisbar </answer>"
    assert get_reward("r1_router_step")([r1_sample(out, ans, ["frank wisbar"])], params) == [1.0]  # recall of the gold tokens
    final = {"step_type": "final", "gold_answer": "9 December 1899"}
    outs = ["<think> ok </think><answer> 9 December 1899 </answer>", "<think> ok </think><answer> 1900 </answer>", "9 December 1899"]
    assert get_reward("r1_router_step")([r1_sample(o, final, ["9 December 1899"]) for o in outs], params) == [1.0, 0.0, 0.0]


def test_schedule_switch_and_components():
    schedule = two_stage_schedule(switch_step=2, mode_cost={"passage": 1.0, "graph": 3.0})
    batch = [sample("Paris", modes=["passage"]), sample("Paris", modes=["graph"])]
    assert schedule.stage_at(1).name == "outcome" and schedule.stage_at(2).name == "outcome"
    assert schedule.stage_at(3).name == "efficiency" and schedule.stage_at(1000).name == "efficiency"
    s1 = schedule.score(batch, 1)
    assert s1.total == [1.0, 1.0] and set(s1.components) == {"em"}
    s3 = schedule.score(batch, 3)
    assert s3.total[0] > 1.0 > s3.total[1]
    assert s3.total == pytest.approx(s3.components["accuracy_efficiency"])
    mixed = RewardSchedule(stages=[Stage(name="g", rewards=[WeightedReward(name="format", weight=2.0), WeightedReward(name="em")])])
    out = mixed.score([sample("Paris"), sample("Lyon", forced=True)], 1)
    assert out.total == [2.0, 0.0] and out.components == {"format": [0.5, 0.0], "em": [1.0, 0.0]}


def test_rewards_are_silent(capsys):
    batch = [sample("Paris", modes=["passage"]), sample("Lyon")]
    for name in ["em", "f1", "format", "accuracy_efficiency", "pra", "caf"]:
        get_reward(name)(batch)
    assert capsys.readouterr().out == ""


def test_followed_protocol_requires_clean_steps():
    assert followed_protocol(make_trace("Paris", ["passage"]))
    t = make_trace("Paris", ["passage"])
    t.steps[0].format_error = "missing_mode"
    assert not followed_protocol(t)
    t.error = "boom"
    assert not followed_protocol(t)


def test_cost_of_a_trace_not_made_by_the_environment_is_priced_by_the_default_table():
    """No recorded charge (an evaluation or server trace): each search costs DEFAULT_MODE_COST's
    price of its routed mode, else the sum over the sources it queried; unlisted names cost 1."""
    from routerag.train.rewards import DEFAULT_MODE_COST, UNLISTED_PRICE

    def search(i, sources, route=None, cost=None):
        return Step(index=i, kind="search", query="q", sources=sources, route=route, retrieval_cost=cost)

    evaluated = Trace(question="Q?", strategy="vanilla", steps=[
        search(0, ["graph"]),  # no route: priced by the source it queried
        search(1, ["passage", "graph", "law"]),  # one call to three sources: three prices
        search(2, ["hybrid"], Route(choice="hybrid", mode="hybrid")),
    ])
    expected = DEFAULT_MODE_COST["graph"] + (DEFAULT_MODE_COST["passage"] + DEFAULT_MODE_COST["graph"] + UNLISTED_PRICE) + DEFAULT_MODE_COST["hybrid"]
    assert trajectory_cost(evaluated, "mode_cost") == expected == 3 + 5 + 4  # was 3.0 (every call priced 1)
    # the environment's recorded charge is what it costs, unless a table is given
    trained = Trace(question="Q?", strategy="routerag", steps=[search(0, ["graph"], Route(choice="graph", mode="graph"), cost=7.0)])
    assert trajectory_cost(trained, "mode_cost") == 7.0
    assert trajectory_cost(trained, "mode_cost", {"graph": 2.0}) == 2.0
