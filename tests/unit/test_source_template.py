"""``BaseSource.search`` is written once (checks, the empty batch, one result per query) and calls
the ``_search`` each source implements; every built-in source implements ``_search`` only."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from routerag.sources.base import BaseSource, QueryResult, RetrievalError
from routerag.sources.multi import NamedSource
from routerag.trace import Hit

pytestmark = pytest.mark.unit

SOURCES_DIR = Path(__file__).resolve().parents[2] / "src" / "routerag" / "sources"


class Echo(BaseSource):
    mode = "echo"
    profile = "each query back as its one hit"

    def __init__(self, results_per_call: int | None = None) -> None:
        self.name = "echo"
        self.calls: list[tuple[list[str], int]] = []
        self.results_per_call = results_per_call

    def _search(self, queries: list[str], k: int) -> list[QueryResult]:
        self.calls.append((queries, k))
        results = [QueryResult(query=q, source=self.name, latency_ms=0.0,
                               hits=[Hit(doc_id=q, title="", text=q, score=1.0, source=self.name, mode=self.mode, rank=1)])
                   for q in queries]
        return results[: self.results_per_call] if self.results_per_call is not None else results


def test_search_checks_then_calls_search_with_a_list():
    source = Echo()
    assert [r.query for r in source.search(("a", "b"), 2)] == ["a", "b"]
    assert source.calls == [(["a", "b"], 2)]


@pytest.mark.parametrize(("queries", "k", "reason"), [
    (["ok", "  "], 3, "query 1 is empty"),
    (["x" * 2_001], 3, "query 0 has 2001 characters"),
    (["ok"], 0, "k must be a positive integer"),
])
def test_a_bad_batch_is_refused_before_search(queries, k, reason):
    source = Echo()
    with pytest.raises(RetrievalError, match=reason):
        source.search(queries, k)
    assert source.calls == []


def test_an_empty_batch_has_no_results_and_no_call():
    source = Echo()
    assert source.search([], 3) == [] and source.calls == []


def test_a_source_that_drops_a_result_is_an_error():
    with pytest.raises(RetrievalError, match="source 'echo' returned 1 results for 2 queries"):
        Echo(results_per_call=1).search(["a", "b"], 1)


def test_a_wrapper_is_a_template_source_too():
    named = NamedSource(Echo(), "renamed")
    assert isinstance(named, BaseSource)
    assert [h.source for r in named.search(["a"], 1) for h in r.hits] == ["renamed"]
    with pytest.raises(RetrievalError, match="query 0 is empty"):
        named.search([""], 1)


def test_built_in_sources_implement_search_only_through_the_template():
    overriding = []
    for path in sorted(SOURCES_DIR.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and node.name not in {"Source", "BaseSource"}:  # the protocol, the template
                if any(isinstance(f, ast.FunctionDef) and f.name == "search" for f in node.body):
                    overriding.append(f"{path.name}:{node.name}")
    assert overriding == ["sourceset.py:SourceSet"]  # a set of sources, not a Source
