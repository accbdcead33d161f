"""Preparing a request's strategy raises routerag's own errors, never an HTTP one; each API family
of the service maps their kinds to HTTP statuses in one table at its edge, and the MCP tools use
the preparation without the service's HTTP errors."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from routerag.errors import RouteragError
from routerag.server.domain_errors import NATIVE_STATUS, by_kind
from routerag.server.jobs import RunNotResumableError, UnknownRunError
from routerag.server.openai_errors import DOMAIN_REPLIES, openai_error
from routerag.sources.sourceset import SourceSet
from routerag.strategies.prepare import StrategyRequestError, prepare_strategy
from routerag.strategies.resolve import StrategyParamsError

pytestmark = pytest.mark.unit

SRC = Path(__file__).resolve().parents[1] / "src" / "routerag"


@pytest.mark.parametrize(("name", "params", "kwargs", "reason"), [
    ("no-such-strategy", {}, {}, "unknown strategy 'no-such-strategy'"),
    ("vanilla", {"k": 0}, {}, "invalid params for strategy 'vanilla'"),
    ("vanilla", {"k": True}, {}, "invalid params for strategy 'vanilla'"),
    ("vanilla", {"source": "nope"}, {"sources": SourceSet()}, "params.source: unknown source 'nope'"),
    ("direct", {"max_tokens": 100}, {"max_new_tokens": 10}, "params.max_tokens: 100 is above this service's limit of 10 tokens"),
])
def test_a_refused_strategy_request_is_a_routerag_error(name, params, kwargs, reason):
    with pytest.raises(StrategyRequestError) as refused:
        prepare_strategy(name, params, **kwargs)
    assert isinstance(refused.value, RouteragError) and isinstance(refused.value, ValueError)
    assert reason in str(refused.value)


def test_the_tables_name_routerag_kinds_and_keep_the_statuses():
    assert all(issubclass(kind, RouteragError) for kind in [*NATIVE_STATUS, *DOMAIN_REPLIES])
    assert NATIVE_STATUS[StrategyRequestError] == NATIVE_STATUS[StrategyParamsError] == 422
    assert NATIVE_STATUS[UnknownRunError] == 404 and NATIVE_STATUS[RunNotResumableError] == 409
    assert DOMAIN_REPLIES[StrategyRequestError] == (422, "routerag")
    assert DOMAIN_REPLIES[StrategyParamsError] == (422, "routerag.params")


def test_a_kind_gets_its_most_specific_entry():
    class Narrower(StrategyParamsError):
        pass

    assert by_kind(Narrower("x"), {StrategyParamsError: 1, RouteragError: 2}) == 1
    assert by_kind(RouteragError("x"), {StrategyParamsError: 1}) is None
    mapped = openai_error(StrategyRequestError("params.k: bad"))
    assert mapped is not None
    status, error, _ = mapped
    assert (status, error.param, error.message, error.type) == (422, "routerag", "params.k: bad", "invalid_request_error")


def test_the_run_errors_are_routerag_errors_with_their_builtin_bases():
    assert issubclass(UnknownRunError, RouteragError) and issubclass(UnknownRunError, KeyError)
    assert str(UnknownRunError("no run 'x'")) == "no run 'x'"
    assert issubclass(RunNotResumableError, RouteragError) and issubclass(RunNotResumableError, ValueError)


def test_the_mcp_tools_prepare_without_the_services_http_errors():
    tree = ast.parse((SRC / "integrations" / "mcp_tools.py").read_text(encoding="utf-8"))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert "routerag.strategies.prepare" in imported
    assert not imported & {"routerag.server.errors", "routerag.server.prepare", "routerag.server.retrieval_app"}
