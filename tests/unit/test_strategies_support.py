"""Test doubles shared by the strategy tests: a tiny keyword source implementing the ``Source``
protocol, and a helper to build a ``StrategyContext`` from scripted outputs. The few tests here
check the double itself, so the strategy tests rest on something verified."""

from __future__ import annotations

import re
from collections.abc import Sequence

from routerag.llm.scripted import ScriptedModel
from routerag.runtime.base import StrategyContext
from routerag.sources.base import QueryResult, Source
from routerag.sources.sourceset import SourceSet
from routerag.trace import Hit

CORPUS = [
    ("Polish-Russian War (film)", "Polish-Russian War is a 2009 Polish film directed by Xawery Zulawski."),
    ("Xawery Zulawski", "Xawery Zulawski is the son of actress Malgorzata Braunek."),
    ("Paris", "Paris is the capital of France."),
    ("Berlin", "Berlin is the capital of Germany."),
]

_WORD = re.compile(r"\w+")


class KeywordSource:
    """Ranks a fixed list of documents by the number of query words they contain."""

    def __init__(self, name: str, mode: str | None = None, docs: Sequence[tuple[str, str]] = CORPUS) -> None:
        self.name = name
        self.mode = mode or name
        self.profile = f"test source {name}"
        self.docs = list(docs)
        self.queries: list[str] = []

    def search(self, queries: Sequence[str], k: int) -> list[QueryResult]:
        out = []
        for query in queries:
            self.queries.append(query)
            words = {w.lower() for w in _WORD.findall(query)}
            scored = sorted(
                ((len(words & {w.lower() for w in _WORD.findall(f"{t} {x}")}), i) for i, (t, x) in enumerate(self.docs)),
                key=lambda pair: (-pair[0], pair[1]),
            )[:k]
            hits = [
                Hit(doc_id=f"{self.name}-{i}", title=self.docs[i][0], text=self.docs[i][1], score=float(s),
                    source=self.name, mode=self.mode, rank=r)
                for r, (s, i) in enumerate(scored, start=1)
            ]
            out.append(QueryResult(query=query, source=self.name, hits=hits, latency_ms=0.1))
        return out


def make_context(outputs, names: Sequence[str] = ("passage", "graph", "hybrid")) -> tuple[StrategyContext, ScriptedModel, dict[str, KeywordSource]]:
    sources = {n: KeywordSource(n) for n in names}
    model = ScriptedModel(outputs)
    return StrategyContext(model=model, sources=SourceSet(sources.values())), model, sources


def test_keyword_source_implements_protocol_and_ranks():
    src = KeywordSource("passage")
    assert isinstance(src, Source)
    [result] = src.search(["capital of France"], 2)
    assert [h.title for h in result.hits] == ["Paris", "Berlin"]
    assert [h.rank for h in result.hits] == [1, 2]


def test_make_context_mounts_named_sources():
    ctx, _, sources = make_context(["x"], names=("passage", "triples"))
    assert ctx.sources.names() == ["passage", "triples"]
    assert ctx.sources.search_one("Berlin", 1, "triples").hits[0].title == "Berlin"
    assert sources["triples"].queries == ["Berlin"]
