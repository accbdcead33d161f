"""Preparing a request's strategy raises routerag's own errors, never an HTTP one; each API family
of the service maps their kinds to HTTP statuses in one table at its edge, and the MCP tools use
the service's ask path (``routerag.edge.asks``) without its HTTP errors."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from routerag.errors import RouteragError
from routerag.run.assemble import Mounted, RequestLimits, StrategyChoice, StrategyRequestError, assemble
from routerag.server.chat_messages import ConversationRefused
from routerag.server.domain_errors import DOMAIN_ERRORS, by_kind, reply_for
from routerag.server.jobs import RunNotResumableError, UnknownRunError
from routerag.server.openai_errors import openai_error
from routerag.server.upload_parse import UnknownUploadError, UploadConflictError, UploadRejected
from routerag.sources.sourceset import SourceSet
from routerag.strategies.resolve import StrategyParamsError

pytestmark = pytest.mark.unit

SRC = Path(__file__).resolve().parents[2] / "src" / "routerag"


@pytest.mark.parametrize(("name", "params", "limits", "reason"), [
    ("no-such-strategy", {}, RequestLimits(), "unknown strategy 'no-such-strategy'"),
    ("vanilla", {"k": 0}, RequestLimits(), "invalid params for strategy 'vanilla'"),
    ("vanilla", {"k": True}, RequestLimits(), "invalid params for strategy 'vanilla'"),
    ("vanilla", {"source": "nope"}, RequestLimits(), "params.source: unknown source 'nope'"),
    ("direct", {"max_tokens": 100}, RequestLimits(max_new_tokens=10), "params.max_tokens: 100 is above this service's limit of 10 tokens"),
])
def test_a_refused_strategy_request_is_a_routerag_error(name, params, limits, reason):
    with pytest.raises(StrategyRequestError) as refused:
        assemble(StrategyChoice(name, params, limits=limits), Mounted(SourceSet()), "caller")
    assert isinstance(refused.value, RouteragError) and isinstance(refused.value, ValueError)
    assert reason in str(refused.value)


def test_the_table_names_routerag_kinds_and_keeps_the_statuses():
    assert all(issubclass(kind, RouteragError) for kind in DOMAIN_ERRORS)
    assert DOMAIN_ERRORS[StrategyRequestError].status == DOMAIN_ERRORS[StrategyParamsError].status == 422
    assert DOMAIN_ERRORS[UnknownRunError].status == 404 and DOMAIN_ERRORS[RunNotResumableError].status == 409
    assert (DOMAIN_ERRORS[StrategyRequestError].param, DOMAIN_ERRORS[StrategyParamsError].param) == ("routerag", "routerag.params")
    assert [DOMAIN_ERRORS[k].status for k in (UploadRejected, UnknownUploadError, UploadConflictError)] == [422, 404, 409]


def test_each_family_answers_only_the_kinds_its_routes_raise():
    assert reply_for(ConversationRefused("messages[0]: x"), "native") is None
    assert reply_for(ConversationRefused("messages[0]: x"), "openai").status == 400
    assert reply_for(UnknownRunError("no run 'x'"), "openai") is None
    assert reply_for(UnknownRunError("no run 'x'"), "native").status == 404
    mapped = openai_error(UploadConflictError("'notes' is reserved"))
    assert mapped is not None and (mapped[0], mapped[1].param) == (409, "routerag.sources")


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
    assert "routerag.edge.asks" in imported  # the service's ask path: prepare, answer
    assert not {module for module in imported if module and module.startswith("routerag.server")}
