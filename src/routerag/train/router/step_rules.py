"""Keyword rules for R1-Router's knowledge-base decision fitted on the training steps only
(:func:`routerag.train.router.keyword_fit.fit_rules`, no model): each decompose-and-route step of
``r1router-steps-train`` is one labelled question whose prompt is the text the rules match, and a
choice "finds" it when the choice is the step's gold knowledge base (or ``None``, stop).

The fit refuses data holding a step of a held-out trajectory of the fixed split
(:mod:`routerag.corpus.r1router_split`): such rules would be scored on steps they were fitted on.
``scripts/fit_r1router_rules.py`` writes the fitted rules as a rules file.
"""

from __future__ import annotations

from collections.abc import Sequence

from routerag.corpus.r1router_split import split_ids, trajectory_id
from routerag.corpus.schema import Question
from routerag.routing.errors import RoutingError
from routerag.routing.keyword_rules import KeywordRules
from routerag.strategies.prompts import R1_ROUTER_GUIDELINES
from routerag.strategies.step_routing import STOP
from routerag.train.router.keyword_fit import KeywordSettings, fit_rules
from routerag.train.router.outcomes import ChoiceOutcome, QuestionOutcome

STEP_CHOICES: tuple[str, ...] = (*R1_ROUTER_GUIDELINES, STOP)
"""The step decision's choices: R1-Router's three knowledge bases and stop."""


def check_no_heldout(questions: Sequence[Question]) -> None:
    """A :class:`RoutingError` naming the held-out trajectories among ``questions``' steps."""
    heldout = set(split_ids("heldout"))
    seen = sorted({trajectory_id(int(q.metadata["trajectory"])) for q in questions if "trajectory" in q.metadata} & heldout)
    untagged = [q.qid for q in questions if "trajectory" not in q.metadata]
    if untagged:
        raise RoutingError(f"steps {untagged[:3]} name no trajectory: the fit cannot check they are not held out")
    if seen:
        raise RoutingError(f"the fit data hold steps of {len(seen)} held-out trajectories ({', '.join(seen[:3])}, ...): "
                           "fit on r1router-steps-train only")


def step_outcomes(questions: Sequence[Question], choices: Sequence[str] = STEP_CHOICES) -> list[QuestionOutcome]:
    """Each step as a labelled question: a choice is right when it is the step's gold."""
    out = []
    for i, q in enumerate(questions):
        if q.gold_source not in choices:
            raise RoutingError(f"step {q.qid}: gold {q.gold_source!r} is not among the choices {', '.join(choices)}")
        found = {c: ChoiceOutcome(found=c == q.gold_source, ms=0.0, tokens=0) for c in choices}
        out.append(QuestionOutcome(position=i, qid=q.qid, question=q.question, golds=list(q.answers), choices=found,
                                   every=ChoiceOutcome(found=True, ms=0.0, tokens=0)))
    return out


def fit_step_rules(questions: Sequence[Question], settings: KeywordSettings | None = None) -> KeywordRules:
    """The keyword rules of the training steps ``questions`` (refused when one is held out)."""
    check_no_heldout(questions)
    return fit_rules(step_outcomes(questions), STEP_CHOICES, settings or KeywordSettings())
