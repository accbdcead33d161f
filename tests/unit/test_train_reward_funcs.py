"""The TRL reward functions of a schedule compute the batch's rewards once and return the same
weighted values as scoring each reward on its own."""

from __future__ import annotations

from routerag.train import grpo
from routerag.train.rewards import RewardSchedule, Stage, WeightedReward, get_reward


class _State:
    global_step = 0


def test_each_reward_is_computed_once_per_batch_and_values_are_unchanged(monkeypatch) -> None:
    traces = [grpo.Trace(question="q", strategy="routerag", answer=a).model_dump_json() for a in ("Paris", "Lyon", "paris city")]
    golds = [["Paris"], ["Paris"], ["Paris"]]
    schedule = RewardSchedule(stages=[Stage(name="s", rewards=[WeightedReward(name="em"), WeightedReward(name="f1", weight=0.5)])])
    samples = grpo.samples_from(traces, golds)
    expected = [list(get_reward("em")(samples)), [0.5 * v for v in get_reward("f1")(samples)]]

    calls: list[str] = []

    def counting(name: str):
        calls.append(name)
        return get_reward(name)

    monkeypatch.setattr(grpo, "get_reward", counting)
    logged: dict[str, float] = {}
    funcs = grpo.make_reward_funcs(schedule)
    got = [f(["p"] * 3, ["c"] * 3, trainer_state=_State(), log_metric=logged.__setitem__, trace=traces, answers=golds) for f in funcs]
    assert got == expected
    # once each for the batch, logging included (before: em, f1 for logging, em again, f1 again); the
    # last "em" is batch_stats' own EM statistic, logged by the first function
    assert calls == ["em", "f1", "em"]
    assert logged["raw/em"] == sum(expected[0]) / 3
    funcs[0](["p"] * 3, ["c"] * 3, trainer_state=_State(), trace=list(traces), answers=golds)  # a new batch
    assert calls[3:] == ["em", "f1"]
