"""Custom-source uploads and comparison runs over real HTTP on loopback: every bad upload gets a
clear 4xx, a good one is indexed in the background and mountable by name; comparisons report
EM/F1/cost per configuration and the questions they disagree on."""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest

from conftest import NOTES_CSV
from routerag.edge.serving import BackgroundServer
from routerag.llm.scripted import ScriptedModel
from routerag.server.app import create_app
from routerag.server.settings import ServiceSettings
from routerag.server.upload_parse import UploadSettings

pytestmark = pytest.mark.service
KEY = "upload-key"


def responder(messages, params, continue_final) -> str:
    """Answers from the retrieved passages only, so different sources give different answers."""
    context = messages[0].content
    if "fictional moon of Neptune" in context:
        return "Ada Quill"
    return "Lothair II" if "Lothair II" in context else "unknown"


@pytest.fixture(scope="module")
def settings(tmp_path_factory) -> ServiceSettings:
    return ServiceSettings(api_key=KEY, run_workers=2, data_dir=tmp_path_factory.mktemp("data"),
                           uploads=UploadSettings(max_bytes=20_000, max_rows=30))


@pytest.fixture(scope="module")
def server(sources, settings):
    with BackgroundServer(create_app(ScriptedModel(responder), sources, settings)) as running:
        yield running


@pytest.fixture(scope="module")
def client(server):
    with httpx.Client(base_url=server.url, timeout=30, headers={"X-API-Key": KEY}) as c:
        yield c


def upload(client, name, content, filename="notes.csv", content_type="text/csv", profile=""):
    data = content.encode("utf-8") if isinstance(content, str) else content
    return client.post("/v1/sources", data={"name": name, "profile": profile},
                       files={"file": (filename, data, content_type)})


def wait_ready(client, name, timeout_s=30):
    deadline = time.monotonic() + timeout_s
    while (meta := client.get(f"/v1/sources/{name}").json())["state"] == "indexing":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    return meta


def test_csv_upload_is_indexed_and_mountable(client):
    r = upload(client, "notes", NOTES_CSV, profile="astronomy notes")
    assert r.status_code == 202, r.text
    assert r.json()["n_docs"] == 3 and r.json()["state"] in ("indexing", "ready")
    meta = wait_ready(client, "notes")
    assert meta["state"] == "ready" and meta["profile"] == "astronomy notes"
    listed = {s["name"]: s for s in client.get("/v1/sources").json()}
    assert listed["notes"]["kind"] == "custom" and listed["bm25"]["kind"] == "builtin"
    body = {"question": "Who discovered Zorblax?", "strategy": "vanilla",
            "params": {"source": "notes", "k": 2}, "sources": ["notes"]}
    trace = client.post("/v1/ask", json=body).json()
    assert trace["answer"] == "Ada Quill"
    assert trace["steps"][0]["sources"] == ["notes"] and trace["steps"][0]["hits"][0]["title"] == "Zorblax"
    # without mounting it, the same strategy cannot see it: refused before it runs
    r = client.post("/v1/ask", json={**body, "sources": []})
    assert r.status_code == 422 and "unknown source 'notes'" in r.json()["detail"]


def test_json_upload_of_objects_and_strings(client):
    content = json.dumps([{"title": "Quill", "text": "Quill is a pen."}, "A bare string passage.", "A bare string passage."])
    r = upload(client, "jnotes", content, "notes.json", "application/json")
    assert r.status_code == 202, r.text
    assert r.json()["n_docs"] == 2 and r.json()["duplicates"] == 1
    assert wait_ready(client, "jnotes")["state"] == "ready"
    assert client.delete("/v1/sources/jnotes").status_code == 200
    assert client.get("/v1/sources/jnotes").status_code == 404


@pytest.mark.parametrize(
    ("name", "content", "filename", "ctype", "status", "reason"),
    [
        ("a1", NOTES_CSV, "notes.png", "image/png", 415, "unsupported file type 'image/png'"),
        ("a2", b"title,text\nx,caf\xe9 au lait\n", "n.csv", "text/csv", 422, "not UTF-8: invalid byte 0xe9"),
        ("a3", "text\n" + "x" * 25_000 + "\n", "n.csv", "text/csv", 413, "the limit is 20000"),
        ("a4", "text\n" + "".join(f"passage {i}\n" for i in range(31)), "n.csv", "text/csv", 422, "too many rows: more than 30"),
        ("a5", "title,body\nx,y\n", "n.csv", "text/csv", 422, "missing 'text' column"),
        ("../etc", NOTES_CSV, "n.csv", "text/csv", 422, "invalid source name '../etc'"),
        ("Upper", NOTES_CSV, "n.csv", "text/csv", 422, "invalid source name"),
        ("bm25", NOTES_CSV, "n.csv", "text/csv", 409, "started with"),
        ("a6", '[{"title": "x"', "n.json", "application/json", 422, "invalid JSON at line 1"),
        ("a7", '{"text": "x"}', "n.json", "application/json", 422, "expected a JSON list"),
    ],
    ids=["content-type", "not-utf8", "oversized", "too-many-rows", "no-text-column", "path-traversal", "bad-name",
         "builtin-name", "broken-json", "json-object"],
)
def test_bad_uploads_get_a_clear_4xx(client, name, content, filename, ctype, status, reason):
    r = upload(client, name, content, filename, ctype)
    assert r.status_code == status, r.text
    assert reason in r.json()["detail"], r.json()
    assert client.get("/v1/sources").json() and name not in [s["name"] for s in client.get("/v1/sources").json() if s["kind"] == "custom"]


def test_row_level_errors_name_their_lines(client):
    csv_text = "title,text\nok,fine text\nblank,\n\"multi\nline\",\"y\",extra\nlast,also fine\n"
    r = upload(client, "rows", csv_text)
    assert r.status_code == 422
    errors = r.json()["errors"]
    assert [(e["line"], e["field"]) for e in errors] == [(3, "text"), (4, None)]
    assert "2 invalid row(s); the first: line 3 (record 1), text: empty text" == r.json()["detail"]
    content = '[\n {"title": "a", "text": "fine"},\n {"title": "b"},\n 42,\n {"title": 1, "text": "t"}\n]'
    errors = upload(client, "rows", content, "r.json", "application/json").json()["errors"]
    assert [(e["line"], e["record"], e["field"]) for e in errors] == [(3, 1, "text"), (4, 2, None), (5, 3, "title")]


def test_path_traversal_in_get_and_delete_is_refused(client):
    assert client.get("/v1/sources/..%2F..%2Fetc").status_code in (404, 422)
    r = client.delete("/v1/sources/UPPER")
    assert r.status_code == 422 and "invalid source name" in r.json()["detail"]
    assert client.delete("/v1/sources/bm25").status_code == 409


def test_upload_needs_the_key_and_a_file(server, client):
    with httpx.Client(base_url=server.url) as anonymous:
        assert upload(anonymous, "x1", NOTES_CSV).status_code == 401
    r = client.post("/v1/sources", data={"name": "x2"})
    assert r.status_code == 422 and "file" in r.json()["detail"]


def _wait_run(client, run_id, timeout_s=60):
    deadline = time.monotonic() + timeout_s
    while (status := client.get(f"/v1/runs/{run_id}").json())["finished_at"] is None:
        assert time.monotonic() < deadline, status
        time.sleep(0.05)
    return status


def test_comparison_reports_metrics_and_disagreements(client):
    upload(client, "moons", NOTES_CSV)
    wait_ready(client, "moons")
    questions = [{"question": "Who was Teutberga married to?", "answers": ["Lothair II"], "qid": "t"},
                 {"question": "Who discovered Zorblax?", "answers": ["Ada Quill"], "qid": "z"}]
    body = {"questions": questions, "configs": [
        {"strategy": "vanilla", "params": {"source": "bm25", "k": 1}, "label": "wiki"},
        {"strategy": "vanilla", "params": {"source": "moons", "k": 1}, "sources": ["moons"], "label": "moons"},
    ]}
    r = client.post("/v1/runs", json=body)
    assert r.status_code == 202, r.text
    status = _wait_run(client, r.json()["run_id"])
    assert status["state"] == "done" and status["total"] == 4 and status["done"] == 4
    report = client.get(f"/v1/runs/{status['run_id']}/report").json()
    rows = {s["label"]: s for s in report["summaries"]}
    assert rows["wiki"]["em"] == 0.5 and rows["moons"]["em"] == 0.5
    assert rows["wiki"]["retrieval_turns"] == 1.0 and rows["wiki"]["total_tokens"] > 0 and rows["wiki"]["latency_ms"] > 0
    assert report["disagreements"] == 2 and all(q["disagree"] for q in report["questions"])
    first = report["questions"][0]["answers"]
    assert [(a["label"], a["prediction"], a["em"]) for a in first] == [("wiki", "Lothair II", 1.0), ("moons", "unknown", 0.0)]
    traces = client.get(f"/v1/runs/{status['run_id']}/traces", params={"config": 1}).json()
    assert [t["qid"] for t in traces] == ["t", "z"] and traces[0]["steps"][0]["sources"] == ["moons"]


def test_dataset_sampling_and_bad_run_requests(client):
    r = client.post("/v1/runs", json={"dataset": "demo", "sample_size": 3, "strategy": "direct"})
    assert r.status_code == 202, r.text
    status = _wait_run(client, r.json()["run_id"])
    assert status["n_questions"] == 3 and status["dataset"] == "demo"
    for body, reason in [
        ({"dataset": "file:/etc/passwd"}, "unknown dataset 'file:/etc/passwd'"),
        ({"questions": [{"question": "q"}], "dataset": "demo"}, "either questions or dataset"),
        ({"questions": [{"question": "q"}], "sources": ["nope"]}, "unknown source 'nope'"),
        ({"questions": [{"question": "q"}], "configs": [{"strategy": "vanilla", "params": {"k": 0}}]}, "invalid params"),
    ]:
        r = client.post("/v1/runs", json=body)
        assert r.status_code == 422 and reason in r.json()["detail"], (body, r.text)


def test_concurrent_jobs_from_two_clients(server):
    """Two clients each upload a source and start a comparison at the same time; both finish
    with every answer accounted for and see each other's runs in the listing."""
    results: dict[str, dict] = {}
    errors: list[BaseException] = []

    def work(tag: str) -> None:
        try:
            with httpx.Client(base_url=server.url, timeout=60, headers={"X-API-Key": KEY}) as c:
                assert upload(c, f"src-{tag}", NOTES_CSV.replace("Zorblax", f"Zorblax{tag}")).status_code == 202
                assert wait_ready(c, f"src-{tag}")["state"] == "ready"
                questions = [{"question": f"Who discovered Zorblax{tag}? {i}", "answers": ["Ada Quill"]} for i in range(6)]
                body = {"questions": questions, "configs": [
                    {"strategy": "vanilla", "params": {"source": "bm25", "k": 1}},
                    {"strategy": "vanilla", "params": {"source": f"src-{tag}", "k": 1}, "sources": [f"src-{tag}"]}]}
                run_id = c.post("/v1/runs", json=body).json()["run_id"]
                results[tag] = _wait_run(c, run_id)
                results[tag]["report"] = c.get(f"/v1/runs/{run_id}/report").json()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    assert not errors, errors
    for tag, status in results.items():
        assert status["state"] == "done" and status["done"] == 12 and status["errors"] == 0
        summaries = {s["label"]: s for s in status["report"]["summaries"]}
        assert summaries["vanilla #2"]["em"] == 1.0, tag
    with httpx.Client(base_url=server.url, headers={"X-API-Key": KEY}) as c:
        listed = [r["run_id"] for r in c.get("/v1/runs").json()]
    assert all(results[t]["run_id"] in listed for t in results)


def test_sources_and_runs_survive_a_restart(client, sources, settings):
    """A second server on the same data directory serves the uploaded sources and the finished runs."""
    assert upload(client, "kept", NOTES_CSV).status_code == 202 and wait_ready(client, "kept")["state"] == "ready"
    run = client.post("/v1/runs", json={"questions": [{"question": "Who discovered Zorblax?"}],
                                        "strategy": "vanilla", "params": {"source": "kept", "k": 1}, "sources": ["kept"]})
    _wait_run(client, run.json()["run_id"])
    before = {r["run_id"] for r in client.get("/v1/runs").json() if r["finished_at"] is not None}
    assert run.json()["run_id"] in before
    with BackgroundServer(create_app(ScriptedModel(responder), sources, settings)) as again, \
            httpx.Client(base_url=again.url, timeout=30, headers={"X-API-Key": KEY}) as c:
        assert before <= {r["run_id"] for r in c.get("/v1/runs").json()}
        run_id = min(before)
        assert c.get(f"/v1/runs/{run_id}/report").json()["status"]["run_id"] == run_id
        assert c.get("/v1/sources/kept").json()["state"] == "ready"
        body = {"question": "Who discovered Zorblax?", "strategy": "vanilla",
                "params": {"source": "kept", "k": 1}, "sources": ["kept"]}
        assert c.post("/v1/ask", json=body).json()["answer"] == "Ada Quill"
