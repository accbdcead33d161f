"""The multi-turn tag-protocol strategies (Search-R1 style: RouteRAG, GraphRAG-R1) over a chat
model: thin users of the episode engine (:mod:`routerag.episode.engine`), which owns the
protocol's rules (budget, unclosed tags, invalid actions, the forced answer, segments).

One growing assistant turn: generate until a closing action tag; a search appends the rendered
evidence (an ``observation`` segment) and the model continues; an answer ends the episode. An
output with no action gets the invalid-action observation and spends one unit of the budget,
as searches do. When the budget is spent, a forced final call with ``<answer>`` pre-filled
records the answer.

A :class:`TagStrategy` states its whole episode as one function of its Params and the question,
:meth:`TagStrategy.episode` (the rules: tags, planner, renderer, messages, budget; the prompt;
the generation settings). Evaluation runs it over a chat model here; the training environment
(:mod:`routerag.train.env`) looks the strategy up by name (:func:`tag_strategy`) and runs the
same episode over token ids, so a policy is trained and evaluated under the same rules.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel

from routerag.episode.engine import EpisodeRules, EpisodeSetup, Planner, SearchPlan, StepObserver, run_episode
from routerag.episode.ports import ChatPolicy
from routerag.runtime.base import STRATEGIES, StrategyContext
from routerag.runtime.loop import LoopStrategy
from routerag.trace import Trace

__all__ = ["EpisodeRules", "EpisodeSetup", "Planner", "SearchPlan", "TagStrategy", "run_tag_episode", "tag_strategy"]


def run_tag_episode(ctx: StrategyContext, trace: Trace, setup: EpisodeSetup, on_step: StepObserver | None = None) -> None:
    """Run one tag-protocol episode over the context's chat model."""
    policy = ChatPolicy(ctx, setup.messages, setup.generation, prefix=setup.rules.prefix)
    run_episode(ctx, trace, policy, setup.rules, on_step)


class TagStrategy(LoopStrategy):
    """A strategy that runs one tag-protocol episode on the engine, fixed by its Params."""

    Params: ClassVar[type[BaseModel]]

    @classmethod
    def episode(cls, params: Any, question: str) -> EpisodeSetup:  # pragma: no cover - abstract
        """The episode's rules, prompt messages and generation settings for ``question``."""
        raise NotImplementedError

    @classmethod
    def search_sources(cls, params: Any) -> list[str]:  # pragma: no cover - abstract
        """The mounted sources this strategy's searches may query under ``params``."""
        raise NotImplementedError

    def execute(self, trace: Trace) -> None:
        run_tag_episode(self.context, trace, self.episode(self.params, trace.question))


def tag_strategy(name: str) -> type[TagStrategy]:
    """The registered strategy ``name``, which must run on the episode engine (a training
    environment can only run those)."""
    cls = STRATEGIES.get(name)
    if not (isinstance(cls, type) and issubclass(cls, TagStrategy)):
        raise ValueError(f"strategy {name!r} is not a tag-protocol strategy on the episode engine; "
                         f"tag strategies: {', '.join(tag_strategy_names())}")
    return cls


def tag_strategy_names() -> list[str]:
    """The registered strategies that run on the episode engine (imports each strategy module)."""
    names = []
    for name in STRATEGIES.names():
        try:
            cls = STRATEGIES.get(name)
        except ImportError:  # a strategy whose optional dependency is missing is not listed
            continue
        if isinstance(cls, type) and issubclass(cls, TagStrategy):
            names.append(name)
    return names
