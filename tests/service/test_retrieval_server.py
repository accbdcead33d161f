"""The retrieval server over real HTTP on loopback: a uvicorn server in a thread on a free port,
serving a real dense + BM25 index built over 50 2WikiMultihopQA passages."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import httpx
import pytest

from routerag.edge.serving import BackgroundServer
from routerag.server.retrieval_app import create_retrieval_app
from routerag.server.searchr1_adapter import TagRouter, parse_mode_tags
from routerag.server.settings import SearchR1Settings, ServerSettings
from routerag.sources.base import MAX_BATCH, MAX_K, MAX_QUERY_CHARS, QueryResult, RetrievalResponse, rank_hits
from routerag.sources.registry import bundle_sources
from routerag.sources.sourceset import SourceSet

pytestmark = pytest.mark.service
CORPUS = Path("2wikimultihopqa") / "2wikimultihopqa_corpus.json"  # in the benchmark data folder
API_KEY = "test-key-123"


class FusedSource:
    """Reciprocal-rank fusion of two mounted sources, mounted as ``hybrid`` (stands in for the
    graph engineer's hybrid source so mode tags can be tested without a graph index)."""

    def __init__(self, a, b, name: str = "hybrid") -> None:
        self.a, self.b, self.name, self.mode = a, b, name, "hybrid"
        self.profile = f"RRF of {a.name} and {b.name}"

    def search(self, queries: Sequence[str], k: int) -> list[QueryResult]:
        out = []
        t0 = time.perf_counter()
        for ra, rb in zip(self.a.search(queries, k), self.b.search(queries, k)):
            scores: dict[str, float] = {}
            best = {}
            for result in (ra, rb):
                for h in result.hits:
                    scores[h.doc_id] = scores.get(h.doc_id, 0.0) + 1.0 / (60 + h.rank)
                    best.setdefault(h.doc_id, h)
            order = sorted(scores, key=scores.get, reverse=True)[:k]
            hits = rank_hits([best[d].model_copy(update={"score": scores[d], "source": self.name, "mode": self.mode})
                              for d in order])
            out.append(QueryResult(query=ra.query, source=self.name, hits=hits, latency_ms=0.0))
        share = (time.perf_counter() - t0) * 1000 / len(queries)
        return [r.model_copy(update={"latency_ms": share}) for r in out]


@pytest.fixture(scope="session")
def sources(tmp_path_factory, shared: Path) -> SourceSet:
    from routerag.corpus.schema import Document
    from routerag.index.bundle import build_index, load_index

    rows = json.loads((shared / CORPUS).read_text(encoding="utf-8"))[:50]
    docs = [Document.make(r["title"], r["text"]) for r in rows]
    directory = tmp_path_factory.mktemp("idx") / "bundle"
    build_index(docs, directory, components=("dense", "bm25"))
    sourceset = bundle_sources(load_index(directory))
    sourceset.mount(FusedSource(sourceset.get("passage"), sourceset.get("bm25")))
    return sourceset


@pytest.fixture(scope="module")
def server(sources):
    settings = ServerSettings(max_body_bytes=4_096 * 1024,
                              searchr1=SearchR1Settings(paths=["/retrieve/searchr1", "/search"]))
    with BackgroundServer(create_retrieval_app(sources, settings)) as running:
        yield running


@pytest.fixture(scope="module")
def locked_server(sources):
    with BackgroundServer(create_retrieval_app(sources, ServerSettings(api_key=API_KEY, max_body_bytes=2048))) as running:
        yield running


@pytest.fixture(scope="module")
def client(server):
    with httpx.Client(base_url=server.url, timeout=30) as c:
        yield c


# ------------------------------------------------------------------ happy paths


def test_health_sources_and_docs(client):
    assert client.get("/health").json()["status"] == "ok"
    reply = client.get("/sources").json()
    names = {s["name"]: s for s in reply["sources"]}
    assert set(names) == {"passage", "bm25", "hybrid"}
    assert names["bm25"]["mode"] == "bm25" and names["passage"]["profile"]
    assert reply["limits"] == {"max_batch": MAX_BATCH, "max_k": MAX_K, "max_query_chars": MAX_QUERY_CHARS}
    spec = client.get("/openapi.json").json()
    assert {"/retrieve", "/sources", "/health", "/retrieve/searchr1", "/search"} <= set(spec["paths"])
    assert client.get("/docs").status_code == 200


def test_retrieve_one_query(client):
    r = client.post("/retrieve", json={"queries": ["Who was Teutberga married to?"], "k": 3, "sources": ["passage"]})
    assert r.status_code == 200, r.text
    assert "retrieve;dur=" in r.headers["server-timing"]
    reply = RetrievalResponse.model_validate(r.json())
    [result] = reply.results["passage"]
    assert [h.rank for h in result.hits] == [1, 2, 3]
    assert result.hits[0].title == "Teutberga"
    assert all(h.source == "passage" and h.mode == "passage" for h in result.hits)
    assert result.latency_ms > 0 and reply.wall_ms > 0


def test_retrieve_batch_from_several_sources(client):
    queries = ["Who was Teutberga married to?", "Bishop of Elmham", "margrave of Tuscany"]
    r = client.post("/retrieve", json={"queries": queries, "k": 2, "sources": ["bm25", "passage", "hybrid"]})
    assert r.status_code == 200, r.text
    reply = RetrievalResponse.model_validate(r.json())
    assert list(reply.results) == ["bm25", "passage", "hybrid"]
    for name, results in reply.results.items():
        assert [x.query for x in results] == queries
        assert all(1 <= len(x.hits) <= 2 and x.source == name for x in results), name
    assert reply.results["bm25"][1].hits[0].title.startswith("Theodred II")


def test_concurrent_requests_are_served_in_parallel_threads(client, server):
    errors: list[str] = []

    def hit(i: int) -> None:
        with httpx.Client(base_url=server.url, timeout=30) as c:
            r = c.post("/retrieve", json={"queries": [f"queen of Lotharingia {i}"], "k": 1, "sources": ["bm25"]})
            if r.status_code != 200:
                errors.append(r.text)

    threads = [threading.Thread(target=hit, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert client.get("/health").status_code == 200  # the event loop is still answering


class BlockedSource:
    """A source whose search blocks until the test releases it (a unit-test double: it only proves
    the server stays responsive while a retrieval is running; no timing involved)."""

    name, mode, profile = "slow", "passage", "blocks"

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()

    def search(self, queries: Sequence[str], k: int) -> list[QueryResult]:
        self.started.set()
        self.release.wait(30)
        return [QueryResult(query=q, source=self.name, hits=[], latency_ms=0.0) for q in queries]


def test_slow_retrieval_does_not_block_the_event_loop():
    source = BlockedSource()
    with BackgroundServer(create_retrieval_app(SourceSet([source]))) as running:
        slow = threading.Thread(target=lambda: httpx.post(f"{running.url}/retrieve", timeout=30,
                                                          json={"queries": ["q"], "k": 1, "sources": ["slow"]}))
        slow.start()
        try:
            assert source.started.wait(30)  # the retrieval is now blocked in a worker thread
            assert httpx.get(f"{running.url}/health", timeout=10).status_code == 200
            assert not source.release.is_set() and slow.is_alive()  # answered while it was still running
        finally:
            source.release.set()
            slow.join()


# ------------------------------------------------------------------ 4xx with reasons


@pytest.mark.parametrize(
    ("body", "status", "reason"),
    [
        ({"queries": ["  "], "k": 3, "sources": ["bm25"]}, 422, "query 0 is empty"),
        ({"queries": ["x" * (MAX_QUERY_CHARS + 1)], "k": 3, "sources": ["bm25"]}, 422, "the limit is"),
        ({"queries": ["q"] * (MAX_BATCH + 1), "k": 3, "sources": ["bm25"]}, 422, "at most 256"),
        ({"queries": ["q"], "k": 0, "sources": ["bm25"]}, 422, "k: Input should be greater than or equal to 1"),
        ({"queries": ["q"], "k": MAX_K + 1, "sources": ["bm25"]}, 422, "k: Input should be less than or equal to 100"),
        ({"queries": ["q"], "k": 3, "sources": ["nope"]}, 422, "unknown source 'nope'; mounted: passage, bm25, hybrid"),
        ({"queries": ["q"], "k": 3, "sources": []}, 422, "sources"),
        ({"queries": [], "k": 3, "sources": ["bm25"]}, 422, "queries"),
        ({"k": 3, "sources": ["bm25"]}, 422, "queries: Field required"),
    ],
)
def test_bad_requests_get_a_clear_reason(client, body, status, reason):
    r = client.post("/retrieve", json=body)
    assert r.status_code == status, r.text
    assert reason in r.json()["detail"]


def test_bad_json_is_400(client):
    r = client.post("/retrieve", content=b'{"queries": ["a"', headers={"content-type": "application/json"})
    assert r.status_code == 400
    assert r.json()["detail"] == "request body is not valid JSON"


def test_server_limits_stricter_than_the_protocol(sources):
    settings = ServerSettings(max_batch=2, max_k=4, max_query_chars=20)
    with BackgroundServer(create_retrieval_app(sources, settings)) as running, httpx.Client(base_url=running.url) as c:
        assert c.get("/sources").json()["limits"] == {"max_batch": 2, "max_k": 4, "max_query_chars": 20}
        r = c.post("/retrieve", json={"queries": ["a", "b", "c"], "k": 1, "sources": ["bm25"]})
        assert r.status_code == 422 and "at most 2" in r.json()["detail"]
        r = c.post("/retrieve", json={"queries": ["a"], "k": 5, "sources": ["bm25"]})
        assert r.status_code == 422 and "limit of 4" in r.json()["detail"]
        r = c.post("/retrieve", json={"queries": ["x" * 21], "k": 1, "sources": ["bm25"]})
        assert r.status_code == 422 and "at most 20" in r.json()["detail"]


def test_api_key_and_body_limit(locked_server):
    with httpx.Client(base_url=locked_server.url, timeout=30) as c:
        body = {"queries": ["Teutberga"], "k": 1, "sources": ["bm25"]}
        assert c.get("/health").status_code == 200  # liveness needs no key
        r = c.post("/retrieve", json=body)
        assert r.status_code == 401 and "API key is required" in r.json()["detail"]
        assert c.get("/sources").status_code == 401
        assert c.post("/retrieve", json=body, headers={"X-API-Key": "wrong"}).status_code == 401
        assert c.post("/retrieve", json=body, headers={"X-API-Key": API_KEY}).status_code == 200
        assert c.post("/retrieve", json=body, headers={"Authorization": f"Bearer {API_KEY}"}).status_code == 200
        assert c.post("/retrieve/searchr1", json={"queries": ["q"]}).status_code == 401
        big = {"queries": ["Teutberga " * 50] * 10, "k": 1, "sources": ["bm25"]}
        r = c.post("/retrieve", json=big, headers={"X-API-Key": API_KEY})
        assert r.status_code == 413 and "the limit is 2048" in r.json()["detail"]

        def chunked():  # no Content-Length: the limit is counted while reading
            for _ in range(10):
                yield b" " * 512

        r = c.post("/retrieve", content=chunked(), headers={"X-API-Key": API_KEY, "content-type": "application/json"})
        assert r.status_code == 413


def test_settings_refuse_exposed_host_without_key():
    with pytest.raises(ValueError, match="set an API key"):
        ServerSettings(host="0.0.0.0")
    assert ServerSettings(host="0.0.0.0", api_key="k").host == "0.0.0.0"
    with pytest.raises(ValueError, match="taken by the native API"):
        SearchR1Settings(paths=["/retrieve"])
    assert SearchR1Settings(tag_sources={"Graph": "graph"}).tag_sources == {"graph": "graph"}
    for bad in ({"my graph": "graph"}, {"[graph]": "graph"}, {"graph": "a", "GRAPH": "b"}):
        with pytest.raises(ValueError, match="mode tag"):
            SearchR1Settings(tag_sources=bad)


# ------------------------------------------------------------------ Search-R1 / RouteRAG adapter


def test_parse_mode_tags():
    assert parse_mode_tags("[graph][passage] who is it") == (("graph", "passage"), "who is it")
    assert parse_mode_tags("  [Passage]  who") == (("passage",), "who")
    assert parse_mode_tags("[passage][passage] x") == (("passage",), "x")
    assert parse_mode_tags("who [graph] is it") == ((), "who [graph] is it")
    assert parse_mode_tags("[graph]") == (("graph",), "")
    known = {"graph", "passage"}
    assert parse_mode_tags("[1990s] films about Teutberga", known) == ((), "[1990s] films about Teutberga")
    assert parse_mode_tags("[GRAPH][1990s] films", known) == (("graph",), "[1990s] films")
    assert parse_mode_tags("[ passage ] who", known) == ((), "[ passage ] who")
    assert parse_mode_tags("[Lothair II] queen", known) == ((), "[Lothair II] queen")
    assert parse_mode_tags("[PASSAGE]who", known) == (("passage",), "who")
    router = TagRouter(SearchR1Settings())
    assert router.route(()) == "passage"
    assert router.route(("graph",)) == "graph"
    assert router.route(("graph", "passage")) == "hybrid"
    with pytest.raises(ValueError, match=r"unknown mode tag \[web\]"):
        router.route(("web",))


def test_searchr1_shape_with_scores(client):
    body = {"queries": ["Who was Teutberga married to?", "[bm25] Theodred Bishop of Elmham", "[passage][bm25] Lothair II of Lotharingia"],
            "topk": 2, "return_scores": True}
    r = client.post("/retrieve/searchr1", json=body)
    assert r.status_code == 200, r.text
    result = r.json()["result"]
    assert len(result) == 3 and len(result[0]) == len(result[2]) == 2 and 1 <= len(result[1]) <= 2
    first = result[0][0]
    assert set(first) == {"document", "score"} and set(first["document"]) == {"id", "contents"}
    title, _, text = first["document"]["contents"].partition("\n")
    assert title == '"Teutberga"' and text.startswith("Teutberga(")
    assert result[1][0]["document"]["contents"].startswith('"Theodred II')
    # [passage][bm25] -> the combined source (RRF scores are small and positive)
    assert all(0 < item["score"] < 0.05 for item in result[2])


def test_searchr1_tags_route_to_the_named_source(client):
    plain = client.post("/retrieve", json={"queries": ["Lothair II queen"], "k": 3, "sources": ["bm25"]}).json()
    tagged = client.post("/search", json={"queries": ["[bm25] Lothair II queen"], "topk": 3, "return_scores": True}).json()
    assert [i["document"]["id"] for i in tagged["result"][0]] == [h["doc_id"] for h in plain["results"]["bm25"][0]["hits"]]


def test_searchr1_without_scores_and_default_topk(client):
    r = client.post("/retrieve/searchr1", json={"queries": ["Teutberga"]})
    assert r.status_code == 200
    docs = r.json()["result"][0]
    assert len(docs) == 3 and set(docs[0]) == {"id", "contents"}


def test_searchr1_bad_queries_are_answered_for_their_own_position(client):
    queries = ["[graph]   ", "[bm25] Lothair II queen", "[web] who", "[graph] who", "x" * 2_500, "[ passage ] Teutberga", ""]
    r = client.post("/retrieve/searchr1", json={"queries": queries, "topk": 2})
    assert r.status_code == 200, r.text
    body = r.json()
    result = body["result"]
    assert len(result) == len(queries)
    assert result[0] == [] and result[3] == [] and result[6] == []
    assert [len(result[i]) for i in (1, 2, 4, 5)] == [2, 2, 2, 2]  # [web] and [ passage ] are searched as text
    assert body["empty"] == [0, 6] and body["truncated"] == [4] and body["unrouted"] == [3]  # no graph source here
    assert (r.headers["x-empty-queries"], r.headers["x-truncated-queries"], r.headers["x-unrouted-queries"]) == ("2", "1", "1")


# --------------------------------------------------------------------------- micro-batching


class GatedSource:
    """A real source behind a gate: its first call waits until the test opens the gate, so the
    requests sent meanwhile queue up; records every batch it serves; fails on a query saying boom."""

    def __init__(self, inner) -> None:
        self.inner, self.name, self.mode, self.profile = inner, inner.name, inner.mode, inner.profile
        self.gate = threading.Event()
        self.batches: list[list[str]] = []

    def search(self, queries: Sequence[str], k: int) -> list[QueryResult]:
        self.batches.append(list(queries))
        self.gate.wait(10)
        if any("boom" in q for q in queries):
            raise RuntimeError("boom")
        return self.inner.search(queries, k)


def _run_concurrently(batcher, requests, gated):
    """The first request takes the only thread (and waits at the gate); the others are sent
    meanwhile; once all of them wait, the gate opens. Returns the outcomes in order."""
    import asyncio

    async def until(condition) -> None:
        deadline = time.monotonic() + 10
        while not condition():
            assert time.monotonic() < deadline, "the requests did not queue up"
            await asyncio.sleep(0.005)

    async def main():
        first = asyncio.ensure_future(batcher.run(requests[0]))
        await until(lambda: len(gated.batches) == 1)
        rest = [asyncio.ensure_future(batcher.run(r)) for r in requests[1:]]
        await until(lambda: sum(len(g.requests) for g in batcher._open.values()) == len(requests) - 1)
        gated.gate.set()
        return await asyncio.gather(first, *rest, return_exceptions=True)

    return asyncio.run(main())


@pytest.mark.parametrize("enabled", [True, False])
def test_concurrent_requests_waiting_for_a_thread_are_served_by_one_call(sources, enabled):
    from routerag.server.batching import RequestBatcher
    from routerag.sources.base import RetrievalRequest

    gated = GatedSource(sources.get("passage"))
    batcher = RequestBatcher(SourceSet([gated]), threads=1, max_batch=64, enabled=enabled)
    questions = ["Who was Teutberga married to?", "Where is Leeds?", "bishop of Elmham", "margrave of Tuscany",
                 "Lothair II", "Waldrada"]
    requests = [RetrievalRequest(queries=[q], k=3, sources=["passage"]) for q in questions]
    if not enabled:
        gated.gate.set()
        import asyncio

        async def main():
            return await asyncio.gather(*(batcher.run(r) for r in requests))

        replies = asyncio.run(main())
        assert [len(b) for b in gated.batches] == [1] * len(questions)
    else:
        replies = _run_concurrently(batcher, requests, gated)
        # the first request took the only thread; the five that queued meanwhile went as one batch
        assert [len(b) for b in gated.batches] == [1, 5] and batcher.batches == 1
    for question, reply in zip(questions, replies):
        alone = sources.retrieve(RetrievalRequest(queries=[question], k=3, sources=["passage"]))
        assert [r.query for r in reply.results["passage"]] == [question]
        assert [h.doc_id for h in reply.results["passage"][0].hits] == [h.doc_id for h in alone.results["passage"][0].hits]


def test_a_failing_batch_is_retried_request_by_request(sources):
    from routerag.server.batching import RequestBatcher
    from routerag.sources.base import RetrievalRequest

    gated = GatedSource(sources.get("bm25"))
    batcher = RequestBatcher(SourceSet([gated]), threads=1, max_batch=64)
    queries = ["first", "Leeds", "boom here", "Teutberga"]
    replies = _run_concurrently(batcher, [RetrievalRequest(queries=[q], k=2, sources=["bm25"]) for q in queries], gated)
    assert isinstance(replies[2], RuntimeError)  # only the request that caused it sees the error
    assert all(isinstance(r, RetrievalResponse) for i, r in enumerate(replies) if i != 2)
    assert [r.results["bm25"][0].query for i, r in enumerate(replies) if i != 2] == ["first", "Leeds", "Teutberga"]


def test_requests_with_other_k_or_sources_are_not_merged(sources):
    from routerag.server.batching import RequestBatcher
    from routerag.sources.base import RetrievalRequest

    gated = GatedSource(sources.get("bm25"))
    batcher = RequestBatcher(SourceSet([gated]), threads=1, max_batch=64)
    requests = [RetrievalRequest(queries=["a Teutberga"], k=1, sources=["bm25"]),
                RetrievalRequest(queries=["b Teutberga"], k=1, sources=["bm25"]),
                RetrievalRequest(queries=["c Teutberga"], k=2, sources=["bm25"]),
                RetrievalRequest(queries=["d Teutberga"], k=1, sources=["bm25"])]
    replies = _run_concurrently(batcher, requests, gated)
    assert sorted(map(sorted, gated.batches)) == [["a Teutberga"], ["b Teutberga", "d Teutberga"], ["c Teutberga"]]
    assert [len(r.results["bm25"][0].hits) for r in replies] == [1, 1, 2, 1]
