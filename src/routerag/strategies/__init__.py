"""Routing strategies, one module each, behind one registry."""

from routerag.strategies.base import STRATEGIES, Strategy, StrategyContext

__all__ = ["STRATEGIES", "Strategy", "StrategyContext"]
