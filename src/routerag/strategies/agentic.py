"""The multi-turn tag-protocol loop shared by RouteRAG and GraphRAG-R1 (Search-R1 style), over a
chat model: a thin user of the episode engine (:mod:`routerag.episode.engine`), which owns the
protocol's rules (budget, unclosed tags, invalid actions, the forced answer, segments).

One growing assistant turn: generate until a closing action tag; a search appends the rendered
evidence (an ``observation`` segment) and the model continues; an answer ends the episode. An
output with no action gets the invalid-action observation and spends one unit of the budget,
as searches do. When the budget is spent, a forced final call with ``<answer>`` pre-filled
records the answer. The strategy supplies the prompt, the tags, how a search is planned
(which sources, which ``k``) and how evidence is rendered.
"""

from __future__ import annotations

from dataclasses import dataclass

from routerag.episode.engine import EpisodeRules, Planner, SearchPlan, StepObserver, run_episode
from routerag.episode.ports import ChatPolicy
from routerag.llm.base import GenerationParams, Message
from routerag.runtime.base import StrategyContext
from routerag.runtime.loop import Render
from routerag.runtime.parsing import TagProtocol
from routerag.trace import Trace

__all__ = ["Planner", "SearchPlan", "TagLoop"]


@dataclass(frozen=True)
class TagLoop:
    """One strategy's instance of the loop."""

    protocol: TagProtocol
    generation: GenerationParams  # its ``stop`` is set per turn by the engine
    budget: int  # searches (and invalid turns) before the forced answer
    plan: Planner
    render: Render
    invalid_message: str
    force_answer: str  # observation ending with the answer-open tag

    def rules(self) -> EpisodeRules:
        return EpisodeRules(protocol=self.protocol, budget=self.budget, plan=self.plan, render=self.render,
                            invalid_message=self.invalid_message, force_answer=self.force_answer)

    def run(self, ctx: StrategyContext, trace: Trace, messages: list[Message], on_step: StepObserver | None = None) -> None:
        run_episode(ctx, trace, ChatPolicy(ctx, messages, self.generation), self.rules(), on_step)
