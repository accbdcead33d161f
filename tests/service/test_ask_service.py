"""The ask service over real HTTP on loopback: strategies from the registry, a ScriptedModel, a
real BM25 index over 50 2WikiMultihopQA passages."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import httpx
import pytest

from conftest import wait_until_serving
from routerag.edge.serving import BackgroundServer, bind_socket
from routerag.llm.scripted import ScriptedModel
from routerag.server.app import create_app
from routerag.server.settings import ServiceSettings
from routerag.trace import Trace

pytestmark = pytest.mark.service
KEY = "ask-key"
VANILLA = {"strategy": "vanilla", "params": {"source": "bm25", "k": 2}}


def answer_from_context(messages, params, continue_final) -> str:
    """Answers 'Lothair II' when the retrieved reference mentions him, else 'unknown'; slow
    enough that a cancelled run still has questions waiting."""
    time.sleep(0.05)
    return "Lothair II" if "Lothair II" in messages[0].content else "unknown"


@pytest.fixture(scope="module")
def server(sources, tmp_path_factory):
    settings = ServiceSettings(api_key=KEY, run_workers=1, data_dir=tmp_path_factory.mktemp("service"))
    app = create_app(ScriptedModel(answer_from_context), sources, settings)
    with BackgroundServer(app) as running:
        yield running


@pytest.fixture(scope="module")
def client(server):
    with httpx.Client(base_url=server.url, timeout=30, headers={"X-API-Key": KEY}) as c:
        yield c


def test_ask_returns_the_trace(client):
    r = client.post("/v1/ask", json={"question": "Who was Teutberga married to?", "qid": "q1", **VANILLA})
    assert r.status_code == 200, r.text
    trace = Trace.model_validate(r.json())
    assert trace.answer == "Lothair II" and trace.qid == "q1" and trace.error is None
    assert [s.kind for s in trace.steps] == ["search", "answer"]
    assert trace.steps[0].sources == ["bm25"] and len(trace.steps[0].hits) == 2
    assert trace.params["k"] == 2 and trace.prompt_tokens > 0


def test_the_trace_schema_is_published(server):
    """What the UI may read (tests/unit/test_trace_schema.py checks web/js against it); no key needed."""
    from routerag.trace import trace_json_schema

    with httpx.Client(base_url=server.url) as c:
        r = c.get("/v1/schema/trace")
    assert r.status_code == 200 and r.json() == trace_json_schema()
    assert {"route", "selection", "forced", "subquery", "source_details"} <= set(r.json()["$defs"]["Step"]["properties"])


def test_strategies_are_listed_with_their_params(client):
    infos = {s["name"]: s for s in client.get("/v1/strategies").json()}
    assert {"direct", "vanilla"} <= set(infos)
    assert "k" in infos["vanilla"]["params_schema"]["properties"]


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({"question": "q", "strategy": "nope"}, "unknown strategy 'nope'; valid:"),
        ({"question": "q", "strategy": "vanilla", "params": {"k": 0}}, "invalid params for strategy 'vanilla': k:"),
        ({"question": "   ", "strategy": "vanilla"}, "question is empty"),
        ({"question": "x" * 4001}, "the limit is 4000"),
        # checked when the request arrives, not when the strategy runs (only bm25 is mounted here)
        ({"question": "q", "strategy": "r1-router"}, "none of the retrievers' sources ['passage', 'table'] is mounted"),
        ({"question": "q", "strategy": "r1-router", "params": {"retrievers": {"Text Retriever": "nope"}}},
         "none of the retrievers' sources ['nope'] is mounted; mounted: bm25"),
    ],
)
def test_bad_asks_get_422_with_reason(client, body, reason):
    r = client.post("/v1/ask", json=body)
    assert r.status_code == 422, r.text
    assert reason in r.json()["detail"]


def test_key_is_required(server):
    with httpx.Client(base_url=server.url) as c:
        assert c.post("/v1/ask", json={"question": "q"}).status_code == 401
        assert c.post("/retrieval/retrieve", json={"queries": ["q"], "k": 1, "sources": ["bm25"]}).status_code == 401
        assert c.get("/health").status_code == 200


def test_stream_sends_progress_then_the_trace(client):
    with client.stream("POST", "/v1/ask/stream", json={"question": "Who was Teutberga married to?", **VANILLA}) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        events = []
        name = None
        for line in r.iter_lines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                events.append((name, json.loads(line[6:])))
    steps = [data["step"] for k, data in events if k == "step"]  # the step observer's events (tests/service/test_step_stream.py)
    assert [s["kind"] for s in steps] == ["search", "answer"]
    events = [(k, data) for k, data in events if k != "step"]
    kinds = [k for k, _ in events]
    assert kinds == ["start", "retrieval", "model", "trace", "done"]
    retrieval = events[1][1]
    assert retrieval["sources"] == ["bm25"] and retrieval["hits"] == 2 and retrieval["top"][0]["source"] == "bm25"
    assert events[2][1]["text"] == "Lothair II"
    assert Trace.model_validate(events[3][1]).answer == "Lothair II"
    assert events[4][1]["answer"] == "Lothair II" and events[4][1]["retrieval_turns"] == 1


def test_stream_rejects_bad_params_before_streaming(client):
    r = client.post("/v1/ask/stream", json={"question": "q", "strategy": "vanilla", "params": {"bogus_k": "x", "k": "many"}})
    assert r.status_code == 422 and "'bogus_k'" in r.json()["detail"]
    r = client.post("/v1/ask/stream", json={"question": "q", "strategy": "vanilla", "params": {"k": "many"}})
    assert r.status_code == 422 and "k:" in r.json()["detail"]


def _wait(client, run_id: str, timeout_s: float = 30) -> dict:
    deadline = time.monotonic() + timeout_s
    while True:
        status = client.get(f"/v1/runs/{run_id}").json()
        if status["finished_at"] is not None:
            return status
        assert time.monotonic() < deadline, status
        time.sleep(0.05)


def test_background_run_completes_and_pages(client):
    questions = [{"question": "Who was Teutberga married to?", "qid": f"q{i}"} for i in range(4)]
    r = client.post("/v1/runs", json={"questions": questions, **VANILLA})
    assert r.status_code == 202, r.text
    run_id = r.json()["run_id"]
    status = _wait(client, run_id)
    assert status["state"] == "done" and status["done"] == 4 and status["errors"] == 0
    traces = client.get(f"/v1/runs/{run_id}/traces", params={"offset": 1, "limit": 2}).json()
    assert [t["qid"] for t in traces] == ["q1", "q2"]
    assert run_id in [s["run_id"] for s in client.get("/v1/runs").json()]


def test_background_run_can_be_cancelled(client):
    questions = [{"question": f"question {i} about Lothair"} for i in range(60)]
    run_id = client.post("/v1/runs", json={"questions": questions, **VANILLA}).json()["run_id"]
    time.sleep(0.2)
    assert client.delete(f"/v1/runs/{run_id}").status_code == 200
    status = _wait(client, run_id)
    assert status["state"] == "cancelled" and status["skipped"] > 0
    assert status["done"] + status["skipped"] == 60


def test_unknown_run_is_404_and_bad_run_is_422(client):
    r = client.get("/v1/runs/doesnotexist")
    assert r.status_code == 404 and "no run 'doesnotexist'" in r.json()["detail"]
    r = client.post("/v1/runs", json={"questions": [], "strategy": "vanilla"})
    assert r.status_code == 422
    r = client.post("/v1/runs", json={"questions": [{"question": "q"}], "strategy": "vanilla", "params": {"k": -1}})
    assert r.status_code == 422 and "invalid params" in r.json()["detail"]


def test_retrieval_api_is_mounted(client):
    r = client.post("/retrieval/retrieve", json={"queries": ["Teutberga"], "k": 1, "sources": ["bm25"]})
    assert r.status_code == 200 and r.json()["results"]["bm25"][0]["hits"][0]["title"] == "Teutberga"


def test_cli_serve_with_a_scripted_model(index_dir, tmp_path):
    """`routerag serve DIR --model-set backend=scripted ...` in a subprocess, asked over HTTP."""
    sock = bind_socket()
    port = sock.getsockname()[1]
    sock.close()
    code = "import routerag.cli.index_cmds, routerag.cli.server_cmds; from routerag.cli.app import app; app()"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "serve", str(index_dir), "--port", str(port),
         "--model-set", "backend=scripted", "--model-set", 'scripted_outputs=["Lothair II"]'],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=dict(os.environ, ROUTERAG_HOME=str(tmp_path)),
    )
    try:
        wait_until_serving(f"http://127.0.0.1:{port}/health", proc)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as c:
            r = c.post("/v1/ask", json={"question": "Who was Teutberga married to?", **VANILLA})
            assert r.status_code == 200 and r.json()["answer"] == "Lothair II"
            page = c.get("/")  # the web UI is served too
            assert page.status_code == 200 and "/ui/js/main.js" in page.text
            assert c.get("/ui/js/main.js").headers["content-type"].startswith("text/javascript")
    finally:
        proc.terminate()
        proc.wait(10)


def test_comparison_run_can_be_cancelled_and_reports_what_finished(client):
    questions = [{"question": f"question {i} about Lothair", "answers": ["Lothair II"]} for i in range(30)]
    configs = [{"strategy": "vanilla", "params": {"source": "bm25", "k": k}} for k in (1, 2)]
    run_id = client.post("/v1/runs", json={"questions": questions, "configs": configs}).json()["run_id"]
    time.sleep(0.2)
    client.delete(f"/v1/runs/{run_id}")
    status = _wait(client, run_id)
    assert status["state"] == "cancelled" and status["done"] + status["skipped"] == 60 and status["skipped"] > 0
    report = client.get(f"/v1/runs/{run_id}/report").json()
    assert [s["label"] for s in report["summaries"]] == ["vanilla", "vanilla #2"]
    assert sum(s["n_done"] for s in report["summaries"]) == status["done"]
    unanswered = [a for q in report["questions"] for a in q["answers"] if a["prediction"] is None]
    assert len(unanswered) == status["skipped"]
