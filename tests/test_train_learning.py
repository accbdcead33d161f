"""GRPO learns the toy routing task (slow: a few minutes on 2 CPU cores; run with -m slow)."""

from __future__ import annotations

import pytest

pytest.importorskip("trl")


@pytest.mark.slow
@pytest.mark.xfail(reason="open: on CPU the TRL-integrated GRPO run stays at chance (~0.5) within 30 steps, while the "
                   "exact policy gradient on the same cold-started model learns the routing in ~15 steps; see docs/training.md",
                   strict=False)
def test_grpo_learns_to_route(tmp_path):
    from routerag.train.recipes import read_metrics
    from routerag.train.toy import run_toy_learning

    result = run_toy_learning(tmp_path, sft_steps=100, grpo_steps=30)
    assert result["before"]["format"] == 1.0  # the cold start teaches the action format
    rewards = [r["reward"] for r in read_metrics(result["metrics"]) if "reward" in r]
    first, last = sum(rewards[:6]) / 6, sum(rewards[-6:]) / 6
    assert last >= first + 0.25, rewards
    assert result["after"]["routing_accuracy"] >= 0.8 and result["after"]["em"] > result["before"]["em"]
