"""A golden trajectory's answer is in its observations, or not, or is not a span (yes/no)."""

from __future__ import annotations

import pytest

from routerag.trace import Segment
from routerag.train.golden.schema import GoldenTrajectory
from routerag.train.golden.support import answer_support, keep_supported, support_stats

pytestmark = pytest.mark.unit


def trajectory(answers: list[str], observations: list[str], source: str = "hotpotqa") -> GoldenTrajectory:
    segments = [Segment(kind="prompt", text="Q: who?")]
    for obs in observations:
        segments += [Segment(kind="model", text="<|begin_of_query|> the Eiffel Tower <|end_of_query|>"),
                     Segment(kind="observation", text=obs)]
    segments.append(Segment(kind="model", text=f"<answer> {answers[0]} </answer>"))
    return GoldenTrajectory(qid="q", dataset="d", question="who?", answers=answers, source=source, segments=segments)


def test_supported_when_an_alias_is_in_an_observation_on_word_boundaries() -> None:
    assert answer_support(trajectory(["Gustave Eiffel"], ["It was built by the company of GUSTAVE EIFFEL."])) == "supported"
    assert answer_support(trajectory(["Paris", "the City of Light"], ["A view of the city of light"])) == "supported"
    # inside another word is not the answer; nor is the answer only in the model's own turns
    assert answer_support(trajectory(["Paris"], ["Parisian cafés"])) == "unsupported"
    assert answer_support(trajectory(["the Eiffel Tower"], ["unrelated"])) == "unsupported"


def test_yes_no_answers_are_not_spans_and_are_kept() -> None:
    rows = [trajectory(["yes"], ["nothing"]), trajectory(["Rome"], ["nothing"], source="musique"),
            trajectory(["Rome"], ["Rome is the capital"], source="musique")]
    assert [answer_support(r) for r in rows] == ["not_a_span", "unsupported", "supported"]
    assert [r.answers[0] for r in keep_supported(rows)] == ["yes", "Rome"]
    assert support_stats(rows).by_source == {"hotpotqa": {"not_a_span": 1}, "musique": {"supported": 1, "unsupported": 1}}
