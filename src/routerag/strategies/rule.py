"""``rule``: the no-model, no-retrieval yardstick — the answer a question's own form gives.

* a yes/no question (:func:`~routerag.corpus.question_types.question_form`) -> ``yes``;
* a question naming two options (``..., X or Y?``, ``Between X and Y, ...``) -> one of them:
  ``option="first"`` (the default) or ``"second"``;
* any other question -> the empty answer (scores 0).

Why the first option by default: the position was fixed on training questions, never on an
evaluation set — among the choice questions of ``hotpotqa-distractor-train`` (600 train + dev)
the first named option is the gold answer 30 times, the second 26 times. On 2Wiki the second
option is gold more often (202 vs 148 of its 1,000 questions), so ``rule`` with
``option=second`` is reported beside it as the stronger variant: a learned policy's accuracy
should be read against both (docs/guides/evaluation.md).

A score of this strategy is what a system gets for free from the question's wording; a gain that
is no larger than the rule's on the same questions shows no reading of evidence.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, Field

from routerag.corpus.question_types import choice_options, question_form
from routerag.runtime.loop import LoopStrategy, add_step
from routerag.trace import Segment, Trace


class RuleParams(BaseModel):
    option: Literal["first", "second"] = Field(
        default="first", description="which named option a choice question is answered with"
    )
    yes_no: Literal["yes", "no"] = Field(default="yes", description="the answer to every yes/no question")


def rule_answer(question: str, params: RuleParams) -> tuple[str, str]:
    """(answer, the question's form)."""
    form = question_form(question)
    if form == "yes/no":
        return params.yes_no, form
    if form == "choice":
        options = choice_options(question)
        if options is not None:
            return options[0 if params.option == "first" else 1], form
    return "", form


class Rule(LoopStrategy):
    name: ClassVar[str] = "rule"
    Params: ClassVar[type[BaseModel]] = RuleParams
    retrieves: ClassVar[bool] = False
    params: RuleParams

    def execute(self, trace: Trace) -> None:
        answer, form = rule_answer(trace.question, self.params)
        trace.segments.append(Segment(kind="prompt", text=trace.question))
        trace.answer = answer
        add_step(trace, "answer", answer=answer, raw_output=answer, reasoning=f"question form: {form}")
