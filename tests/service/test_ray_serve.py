"""``routerag serve-retrieval --ray``: the retrieval app in one Ray Serve replica with the query
encoder as its own batched deployment, queried over HTTP (Ray in local mode, real MiniLM, real
2Wiki passages); the answers must be the in-process server's."""

from __future__ import annotations

import json
import socket

import httpx
import pytest

from routerag.sources.registry import bundle_sources

pytestmark = [pytest.mark.ray, pytest.mark.service]

QUESTION = "Who was Teutberga married to?"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def bundle_dir(shared, tmp_path_factory):
    from routerag.corpus.schema import Document
    from routerag.index.bundle import build_index

    rows = json.loads((shared / "2wikimultihopqa" / "2wikimultihopqa_corpus.json").read_text(encoding="utf-8"))[:50]
    directory = tmp_path_factory.mktemp("ray-serve") / "bundle"
    build_index([Document.make(r["title"], r["text"]) for r in rows], directory, components=("dense", "bm25"))
    return directory


@pytest.fixture(scope="module")
def served(ray_local, bundle_dir):
    import ray
    from ray import serve

    from routerag.server.ray_serve import APP_NAME, RayServeSettings, serve_on_ray
    from routerag.server.settings import SearchR1Settings, ServerSettings

    settings = ServerSettings(port=_free_port(), searchr1=SearchR1Settings(default_source="passage"))
    try:
        serve_on_ray(bundle_dir, None, settings, RayServeSettings(replicas=1, encoder_cpus=0.5), blocking=False)
    except (ray.exceptions.ActorDiedError, TimeoutError):
        # Ray Serve gives its HTTP proxy a fixed 60 s to start and kills it after; on 2 cores shared
        # with other jobs it can need longer (seen once in CI under a load of ~3): start once more
        serve.shutdown()
        serve_on_ray(bundle_dir, None, settings, RayServeSettings(replicas=1, encoder_cpus=0.5), blocking=False)
    yield f"http://127.0.0.1:{settings.port}"
    serve.delete(APP_NAME)
    serve.shutdown()


def test_both_endpoints_answer_like_the_in_process_server(served, bundle_dir):
    from routerag.index.bundle import load_index
    from routerag.sources.base import RetrievalRequest

    local = bundle_sources(load_index(bundle_dir)).retrieve(RetrievalRequest(queries=[QUESTION], k=3, sources=["passage", "bm25"]))
    with httpx.Client(base_url=served, timeout=60) as client:
        assert client.get("/health").json()["status"] == "ok"
        r = client.post("/retrieve", json={"queries": [QUESTION], "k": 3, "sources": ["passage", "bm25"]})
        assert r.status_code == 200, r.text
        body = r.json()
        for name in ("passage", "bm25"):
            assert [h["doc_id"] for h in body["results"][name][0]["hits"]] == [h.doc_id for h in local.results[name][0].hits]
        r = client.post("/retrieve/searchr1", json={"queries": [QUESTION, f"[bm25] {QUESTION}"], "topk": 3, "return_scores": True})
        assert r.status_code == 200, r.text
        result = r.json()["result"]
        assert [d["document"]["id"] for d in result[0]] == [h.doc_id for h in local.results["passage"][0].hits]
        assert [d["document"]["id"] for d in result[1]] == [h.doc_id for h in local.results["bm25"][0].hits]
        # the app's own validation still answers (422 with a reason), through Ray Serve's proxy
        r = client.post("/retrieve", json={"queries": [QUESTION], "k": 3, "sources": ["nope"]})
        assert r.status_code == 422 and "nope" in r.json()["detail"]
