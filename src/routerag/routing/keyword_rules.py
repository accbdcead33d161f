"""The keyword router's rules as data: ordered ``{pattern, choice}`` rules and a default (what
an operator's rules file holds, what the no-model rule fit writes). The router that applies them
is :mod:`routerag.routing.keyword`."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from routerag.routing.errors import RoutingError


class KeywordRule(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pattern: str = Field(min_length=1, description="a regular expression, matched case-insensitively anywhere in the query")
    choice: str = Field(min_length=1, description="the mode, source or strategy label it sends to")


class KeywordRules(BaseModel):
    """The keyword router's params: ``rules`` in order (the first match decides) and ``default``."""

    model_config = ConfigDict(extra="forbid")

    rules: list[KeywordRule] = Field(default_factory=list)
    default: str = Field(min_length=1, description="the choice when no rule matches")

    def targets(self) -> list[str]:
        """Every choice the rules can send to (the default last), each once."""
        return list(dict.fromkeys([*(r.choice for r in self.rules), self.default]))

    def check_choices(self, choices: Sequence[str]) -> None:
        """A :class:`RoutingError` when a rule or the default sends to a choice not in ``choices``."""
        unknown = [c for c in self.targets() if c not in choices]
        if unknown:
            raise RoutingError(f"keyword rules send to {', '.join(map(repr, unknown))}, not among the choices "
                               f"{', '.join(choices) or '(none)'}")
