"""RemoteSource against live retrieval servers on loopback (real HTTP, real BM25 index)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from fastapi.responses import JSONResponse

from conftest import wait_until_serving
from routerag.edge.serving import BackgroundServer, bind_socket
from routerag.server.retrieval_app import create_retrieval_app
from routerag.server.settings import ServerSettings
from routerag.sources.base import RetrievalError, Source
from routerag.sources.registry import bundle_sources
from routerag.sources.remote import (
    RemoteSource,
    RemoteSourceConfig,
    RemoteSourceError,
    RetrievalClient,
    remote_sources,
)
from routerag.sources.sourceset import SourceSet
from routerag.trace import RemoteRetrieval, read_source_details

pytestmark = pytest.mark.service
CORPUS = Path("2wikimultihopqa") / "2wikimultihopqa_corpus.json"  # in the benchmark data folder
KEY = "remote-test-key"
QUERIES = ["Who was Teutberga married to?", "Bishop of Elmham", "Lothair II of Lotharingia", "margrave Tuscany", "abbey"]


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory, shared: Path) -> Path:
    from routerag.corpus.schema import Document
    from routerag.index.bundle import build_index

    rows = json.loads((shared / CORPUS).read_text(encoding="utf-8"))[:50]
    docs = [Document.make(r["title"], r["text"]) for r in rows]
    directory = tmp_path_factory.mktemp("remote-idx") / "bundle"
    build_index(docs, directory, components=("bm25",))  # BM25 only: no model to load
    return directory


@pytest.fixture(scope="module")
def local(index_dir) -> SourceSet:
    from routerag.index.bundle import load_index

    return bundle_sources(load_index(index_dir))


@pytest.fixture(scope="module")
def server(local):
    settings = ServerSettings(api_key=KEY, max_batch=2, max_k=4)
    with BackgroundServer(create_retrieval_app(local, settings)) as running:
        yield running


@pytest.fixture()
def down_url() -> str:
    sock = bind_socket()
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now: connections are refused
    return f"http://127.0.0.1:{port}"


def test_metadata_is_fetched_and_results_match_local(local, server):
    remote = RemoteSource(server.url, "bm25", api_key=KEY)
    assert isinstance(remote, Source)
    assert (remote.name, remote.mode) == ("bm25", "bm25")
    assert remote.profile == local.get("bm25").profile
    results = remote.search(QUERIES, 3)  # 5 queries > max_batch=2: sent as 3 calls
    expected = local.get("bm25").search(QUERIES, 3)
    assert [r.query for r in results] == QUERIES
    for got, want in zip(results, expected):
        assert [h.doc_id for h in got.hits] == [h.doc_id for h in want.hits]
        assert [h.score for h in got.hits] == pytest.approx([h.score for h in want.hits])
        assert got.metadata["kind"] == "remote" and got.metadata["url"] == server.url and got.latency_ms > 0
        assert read_source_details(got.metadata) == RemoteRetrieval(url=server.url, server_latency_ms=got.metadata["server_latency_ms"])
    remote.close()


def test_mounted_under_another_name_next_to_local_sources(local, server):
    remote = RemoteSource(server.url, "bm25", name="wiki", profile="Wikipedia passages", api_key=KEY)
    sources = SourceSet([local.get("bm25"), remote])
    reply = sources.search(["Teutberga"], 2, ["bm25", "wiki"])
    assert reply.results["wiki"][0].source == "wiki"
    assert all(h.source == "wiki" and h.mode == "bm25" for h in reply.results["wiki"][0].hits)
    assert [h.doc_id for h in reply.results["wiki"][0].hits] == [h.doc_id for h in reply.results["bm25"][0].hits]
    assert sources.profiles()["wiki"] == "Wikipedia passages"


def test_remote_sources_lists_every_source(server):
    found = remote_sources(server.url, api_key=KEY)
    assert [s.name for s in found] == ["bm25"]
    assert found[0].search(["Teutberga"], 1)[0].hits[0].title == "Teutberga"


def test_server_refusals_carry_the_reason(server):
    remote = RemoteSource(server.url, "bm25", api_key=KEY)
    with pytest.raises(RetrievalError, match=r"HTTP 422\): k=5 is above this server's limit of 4"):
        remote.search(["Teutberga"], 5)
    with pytest.raises(RetrievalError, match=r"has no source 'graph'; it serves: bm25"):
        RemoteSource(server.url, "graph", api_key=KEY)
    with pytest.raises(RemoteSourceError, match="rejected the API key: the API key is not valid"):
        RemoteSource(server.url, "bm25", api_key="wrong")
    with pytest.raises(RemoteSourceError, match="rejected the API key: an API key is required"):
        RemoteSource(server.url, "bm25", mode="bm25", profile="p").search(["Teutberga"], 1)


def test_server_down_is_a_clear_error(down_url):
    t0 = time.perf_counter()
    with pytest.raises(RemoteSourceError, match=r"is unreachable \(3 attempts\): ConnectError"):
        RemoteSource(RetrievalClient(down_url, retries=2, backoff_s=0.05), "bm25")
    assert time.perf_counter() - t0 < 5
    given = RemoteSource(RetrievalClient(down_url, retries=0), "bm25", mode="bm25", profile="p")  # no call yet
    with pytest.raises(RemoteSourceError, match=r"unreachable \(1 attempt\)"):
        given.search(["q"], 1)


def test_retries_on_503_then_succeeds(local):
    calls = {"n": 0}
    real = create_retrieval_app(local)
    flaky = FastAPI()

    @flaky.get("/sources")
    async def sources():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=real), base_url="http://localhost") as c:
            return (await c.get("/sources")).json()

    @flaky.post("/retrieve")
    async def retrieve(body: dict):
        calls["n"] += 1
        if calls["n"] <= 2:
            return JSONResponse({"detail": "warming up"}, status_code=503)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=real), base_url="http://localhost") as c:
            return (await c.post("/retrieve", json=body)).json()

    with BackgroundServer(flaky) as running:
        remote = RemoteSource(RetrievalClient(running.url, retries=2, backoff_s=0.01), "bm25")
        assert remote.search(["Teutberga"], 1)[0].hits[0].title == "Teutberga"
        assert calls["n"] == 3
        calls["n"] = 0  # two 503s again, but only one retry allowed now
        remote = RemoteSource(RetrievalClient(running.url, retries=1, backoff_s=0.01), "bm25")
        with pytest.raises(RemoteSourceError, match="HTTP 503: warming up"):
            remote.search(["Teutberga"], 1)


def test_chained_servers_and_upstream_down(local, server, down_url):
    """A server whose source is itself remote: works while upstream is up, 502 when it is down."""
    chain = SourceSet([RemoteSource(server.url, "bm25", name="upstream", api_key=KEY),
                       RemoteSource(RetrievalClient(down_url, retries=0), "bm25", name="gone", mode="bm25", profile="p")])
    with BackgroundServer(create_retrieval_app(chain)) as running, httpx.Client(base_url=running.url) as c:
        r = c.post("/retrieve", json={"queries": ["Teutberga"], "k": 1, "sources": ["upstream"]})
        assert r.status_code == 200 and r.json()["results"]["upstream"][0]["hits"][0]["title"] == "Teutberga"
        r = c.post("/retrieve", json={"queries": ["Teutberga"], "k": 1, "sources": ["gone"]})
        assert r.status_code == 502 and "unreachable" in r.json()["detail"]
        r = c.post("/retrieve", json={"queries": ["Teutberga"], "k": 9, "sources": ["upstream"]})
        assert r.status_code == 422 and "limit of 4" in r.json()["detail"]


def test_config_reads_the_key_from_the_environment(server, monkeypatch):
    config = RemoteSourceConfig(url=server.url, source="bm25", name="kb", api_key_env="ROUTERAG_TEST_KEY")
    with pytest.raises(ValueError, match="ROUTERAG_TEST_KEY"):
        config.build()
    monkeypatch.setenv("ROUTERAG_TEST_KEY", KEY)
    source = config.build()
    assert source.name == "kb" and source.search(["Teutberga"], 1)[0].hits[0].source == "kb"
    with pytest.raises(ValueError, match="must start with http"):
        RetrievalClient("127.0.0.1:8765")


def test_cli_serves_an_index_directory(index_dir, down_url, monkeypatch):
    """`routerag serve-retrieval DIR` in a subprocess, then a RemoteSource against it."""
    port = int(down_url.rsplit(":", 1)[1])
    env = {**os.environ, "RR_SERVE_KEY": "cli-key"}
    code = "import routerag.cli.index_cmds, routerag.cli.server_cmds; from routerag.cli.app import app; app()"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "serve-retrieval", str(index_dir), "--port", str(port), "--api-key-env", "RR_SERVE_KEY"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        wait_until_serving(f"{down_url}/health", proc)
        client = RetrievalClient(down_url, api_key="cli-key", retries=0)
        assert client.healthy()
        remote = RemoteSource(client, "bm25")
        assert remote.search(["Teutberga"], 1)[0].hits[0].title == "Teutberga"
    finally:
        proc.terminate()
        proc.wait(10)
    missing = subprocess.run([sys.executable, "-c", code, "serve-retrieval", str(index_dir), "--api-key-env", "RR_UNSET_VAR"],
                             capture_output=True, text=True, env={k: v for k, v in os.environ.items() if k != "RR_UNSET_VAR"})
    assert missing.returncode == 1 and "RR_UNSET_VAR" in missing.stderr
    exposed = subprocess.run([sys.executable, "-c", code, "serve-retrieval", str(index_dir), "--host", "0.0.0.0"],
                             capture_output=True, text=True)
    assert exposed.returncode == 1 and "set an API key" in exposed.stderr
