"""The ``keyword`` router: ordered rules, each a regular expression over the query text
(case-insensitive) and the choice (a mode, a source or a strategy label) it sends to; the first
rule that matches decides, otherwise the ``default`` choice. No model, no training: the no-model
yardstick beside which a learned router's gain is read.

Rules come from the operator only. A rules file (YAML ``{rules: [{pattern, choice}, ...],
default}``, :func:`load_rules`) is named by the operator's configuration (a strategy's
``router_rules``); a request cannot set it (:class:`~routerag.provenance.OperatorOnly`), so no
pattern a request sends is ever compiled or matched - a hostile pattern such as ``(a+)+$`` can
backtrack for minutes, and bounding its length would not prevent that. The query is cut to
:data:`~routerag.routing.source_routing.ROUTE_QUERY_CHARS` (as the other routers) before it is matched.

:func:`routerag.train.router.keyword_fit.fit_rules` fits such rules from labelled questions (the
words whose presence best predicts a choice)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated

from pydantic import ValidationError

from routerag.provenance import OperatorOnly
from routerag.routing.base import RouterDeps, RouteResult, RoutingError, ranked_by_score
from routerag.routing.keyword_rules import KeywordRules
from routerag.routing.source_routing import ROUTE_QUERY_CHARS

RouterRules = Annotated[str, OperatorOnly("router rules")]
"""A strategy's keyword rules file (YAML): the operator's to configure, refused from a request."""


def compile_rules(rules: KeywordRules) -> list[re.Pattern[str]]:
    """Each rule's pattern compiled; an invalid one is a :class:`RoutingError` naming the rule."""
    compiled = []
    for i, rule in enumerate(rules.rules, 1):
        try:
            compiled.append(re.compile(rule.pattern, re.IGNORECASE))
        except re.error as exc:
            raise RoutingError(f"keyword rule {i} ({rule.pattern!r} -> {rule.choice}): not a regular expression: {exc}") from None
    return compiled


def load_rules(path: str | Path) -> KeywordRules:
    """A rules file (YAML); a missing, unreadable or malformed one, or an invalid pattern, is a
    :class:`RoutingError`."""
    import yaml

    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        rules = KeywordRules.model_validate(data)
    except OSError as exc:
        raise RoutingError(f"keyword rules {path}: cannot be read ({exc.strerror or exc})") from None
    except yaml.YAMLError as exc:
        raise RoutingError(f"keyword rules {path}: not valid YAML: {' '.join(str(exc).split())}") from None
    except ValidationError as exc:
        reasons = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'file'}: {e['msg']}" for e in exc.errors())
        raise RoutingError(f"keyword rules {path}: {reasons} (expected {{rules: [{{pattern, choice}}, ...], default}})") from None
    compile_rules(rules)
    return rules


def write_rules(rules: KeywordRules, path: str | Path, comment: str = "") -> None:
    """``rules`` as a rules file :func:`load_rules` reads back; ``comment`` heads it as ``#`` lines."""
    import yaml

    from routerag.config import atomic_write_text

    head = "".join(f"# {line}".rstrip() + "\n" for line in comment.splitlines())
    atomic_write_text(Path(path), head + yaml.safe_dump(rules.model_dump(mode="json"), sort_keys=False, allow_unicode=True))


def strategy_rules(router: str, rules_file: str | None) -> KeywordRules | None:
    """What a strategy's ``router`` / ``router_rules`` give the router: the rules file loaded when
    the router is ``keyword`` (which needs one; a :class:`RoutingError` otherwise), else None."""
    if router != "keyword":
        return None
    if not rules_file:
        raise RoutingError("router=keyword needs router_rules: a rules file (YAML: rules: [{pattern, choice}], default)")
    return load_rules(rules_file)


def rules_fingerprint(router: str, rules_file: str | None) -> dict[str, str]:
    """A run's fingerprint input for the keyword router: its rules file's content hash (an edited
    file makes a new fingerprint, so a run is never resumed across two rule sets)."""
    if router != "keyword" or not rules_file:
        return {}
    from routerag.filehash import file_sha256

    return {"router_rules": "sha256:" + file_sha256(rules_file, what="keyword rules")[:32]}


class KeywordRouter:
    name = "keyword"

    def __init__(self, rules: KeywordRules) -> None:
        self.rules = rules
        self.patterns = compile_rules(rules)

    def fired(self, query: str) -> int | None:
        """The 0-based index of the first rule matching ``query`` (None: the default applies)."""
        text = query[:ROUTE_QUERY_CHARS]
        return next((i for i, p in enumerate(self.patterns) if p.search(text)), None)

    def decide(self, query: str) -> str:
        i = self.fired(query)
        return self.rules.default if i is None else self.rules.rules[i].choice

    def route(self, query: str, choices: Mapping[str, str]) -> RouteResult:
        names = list(choices) or self.rules.targets()
        self.rules.check_choices(names)
        i = self.fired(query)
        if i is None:
            chosen, reason = self.rules.default, f"no keyword rule matched: the default {self.rules.default}"
        else:
            rule = self.rules.rules[i]
            chosen, reason = rule.choice, f"keyword rule {i + 1} /{rule.pattern}/ matched: {rule.choice}"
        scores = {n: float(n == chosen) for n in names}
        return RouteResult(ranked=ranked_by_score(scores, first=chosen), reason=reason,
                           metadata={"router": self.name, "rule": None if i is None else i + 1})


def keyword_router(deps: RouterDeps) -> KeywordRouter:
    if deps.rules is None:
        raise RoutingError("the keyword router needs rules: a rules file (a strategy's router_rules)")
    return KeywordRouter(deps.rules)
