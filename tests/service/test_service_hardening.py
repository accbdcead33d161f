"""Hostile requests against both servers over real HTTP on loopback: each defect found
by probing the service is reproduced here, and each must get a clean 4xx, keep the connection
and the server healthy, and lose no run."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from routerag.edge.serving import BackgroundServer
from routerag.llm.scripted import ScriptedModel
from routerag.server.app import create_app
from routerag.server.settings import ServiceSettings

pytestmark = pytest.mark.service
VANILLA = {"strategy": "vanilla", "params": {"source": "bm25", "k": 2}}
LONE = "\ud800"  # a lone surrogate: valid JSON escape, not encodable as UTF-8


def answer(messages, params, continue_final) -> str:
    return "Lothair II" if "Lothair II" in messages[0].content else "unknown"


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("hardening-data")


@pytest.fixture(scope="module")
def service(sources, data_dir):
    settings = ServiceSettings(run_workers=1, data_dir=data_dir)
    with BackgroundServer(create_app(ScriptedModel(answer), sources, settings)) as running:
        yield running


@pytest.fixture(scope="module")
def svc(service):
    with httpx.Client(base_url=service.url, timeout=30) as c:
        yield c


@pytest.fixture(scope="module")
def ret(retrieval):
    with httpx.Client(base_url=retrieval.url, timeout=60) as c:
        yield c


def raw_post(client: httpx.Client, path: str, body: object, **headers: str) -> httpx.Response:
    """POST ``body`` as JSON with ASCII escapes, so a lone surrogate travels as ``\\ud800``."""
    data = json.dumps(body, ensure_ascii=True).encode("ascii")
    return client.post(path, content=data, headers={"content-type": "application/json", **headers})


def wait_finished(client: httpx.Client, run_id: str, timeout_s: float = 30) -> dict:
    deadline = time.monotonic() + timeout_s
    while (status := client.get(f"/v1/runs/{run_id}").json())["finished_at"] is None:
        assert time.monotonic() < deadline, status
        time.sleep(0.05)
    return status


# ------------------------------------------------------------------ 1. lone surrogates

SURROGATE_SERVICE = [
    ("/v1/ask", {"question": f"Who {LONE}?", **VANILLA}),
    ("/v1/ask", {"question": "Who?", "qid": LONE, **VANILLA}),
    ("/v1/ask", {"question": "Who?", "strategy": "vanilla", "params": {"source": LONE}}),
    ("/v1/ask/stream", {"question": f"Who {LONE}?", **VANILLA}),
    ("/v1/runs", {"questions": [{"question": "Who?", "qid": LONE, "answers": ["x"]}], **VANILLA}),
    ("/v1/runs", {"questions": [{"question": "Who?", "answers": [LONE]}], **VANILLA}),
    ("/retrieval/retrieve", {"queries": [LONE], "k": 2, "sources": ["bm25"]}),
    ("/retrieval/retrieve/searchr1", {"queries": [f"a {LONE}"], "topk": 2}),
    ("/v1/ask", {"question": "Who?", LONE: 1, **VANILLA}),  # in a key
]


@pytest.mark.parametrize(("path", "body"), SURROGATE_SERVICE)
def test_lone_surrogates_are_422_and_keep_the_connection(svc, path, body):
    r = raw_post(svc, path, body)
    assert r.status_code == 422, r.text
    assert "surrogate" in r.json()["detail"]
    assert svc.get("/health").status_code == 200  # same keep-alive connection
    assert svc.post("/v1/ask", json={"question": "Who was Teutberga married to?", **VANILLA}).status_code == 200


@pytest.mark.parametrize("body", [{"queries": [LONE], "k": 2, "sources": ["bm25"]},
                                  {"queries": ["ok"], "k": 2, "sources": [LONE]}])
def test_lone_surrogates_on_the_retrieval_server(ret, body):
    r = raw_post(ret, "/retrieve", body)
    assert r.status_code == 422, r.text
    r = raw_post(ret, "/retrieve/searchr1", {"queries": body["queries"], "topk": 2})
    assert r.status_code in (200, 422), r.text
    assert ret.get("/health").json()["status"] == "ok"


def test_raw_utf8_encoded_surrogates_are_refused_too(svc):
    # json.loads(bytes) decodes with 'surrogatepass', so ED A0 80 arrives as a lone surrogate
    data = b'{"question": "Who \xed\xa0\x80?", "strategy": "vanilla", "params": {"source": "bm25"}}'
    r = svc.post("/v1/ask", content=data, headers={"content-type": "application/json"})
    assert r.status_code in (400, 422), r.text


# ------------------------------------------------------------------ 2. every run ends and is stored


def test_a_run_that_cannot_be_saved_ends_failed_and_is_stored(sources, tmp_path):
    """Text that cannot be written as UTF-8 JSON (it can no longer arrive over HTTP, see 1.) used
    to leave the run ``running`` for ever, unsaved, with 500 on /traces and /report."""
    from routerag.corpus.schema import Question
    from routerag.run.assemble import StrategyChoice, prepare_strategy
    from routerag.server.jobs import ConfigInfo, PreparedConfig, RunManager
    from routerag.strategies import StrategyContext

    prepared = prepare_strategy(StrategyChoice("vanilla", {"source": "bm25", "k": 2}))
    config = PreparedConfig(info=ConfigInfo(label="vanilla", strategy="vanilla", params={}),
                       make=lambda: prepared.build(StrategyContext(model=ScriptedModel(answer), sources=sources)))
    manager = RunManager(store_dir=tmp_path)
    status = manager.submit([config], [Question(qid=f"q{LONE}", question="Who was Teutberga married to?",
                                                answers=[LONE])])
    deadline = time.monotonic() + 30
    while (now := manager.status(status.run_id)).finished_at is None:
        assert time.monotonic() < deadline, now
        time.sleep(0.02)
    assert now.state == "failed" and "could not be saved" in now.error
    manager.traces(status.run_id)
    manager.report(status.run_id).model_dump_json()  # readable, no 500
    manager.shutdown()
    reloaded = RunManager(store_dir=tmp_path)  # stored, so it survives a restart
    assert reloaded.status(status.run_id).state == "failed"
    reloaded.shutdown()


def test_runs_over_http_end_and_survive(svc):
    r = svc.post("/v1/runs", json={"questions": [{"question": "Who was Teutberga married to?", "answers": ["Lothair II"]}],
                                   **VANILLA})
    assert r.status_code == 202, r.text
    status = wait_finished(svc, r.json()["run_id"])
    assert status["state"] == "done" and status["error"] is None
    assert svc.get(f"/v1/runs/{status['run_id']}/report").status_code == 200


# ------------------------------------------------------------------ 3. the Search-R1 endpoint


class SearchR1StyleClient:
    """The retrieval client of a Search-R1 rollout, written from its documented request shape: one
    POST with every active rollout's query, then ``["result"][i][j]["document"]["contents"]``
    turned into a ``Doc n(Title: ...) text`` reference block per query."""

    def __init__(self, url: str, topk: int = 3) -> None:
        self.url, self.topk = url, topk

    def batch_search(self, queries: list[str]) -> list[list[dict]]:
        import requests

        payload = {"queries": queries, "topk": self.topk, "return_scores": True}
        return requests.post(self.url, json=payload, timeout=300).json()["result"]

    @staticmethod
    def passages_to_string(retrieved: list[dict]) -> str:
        reference = ""
        for n, item in enumerate(retrieved):
            content = item["document"]["contents"]
            title, _, text = content.partition("\n")
            reference += f"Doc {n + 1}(Title: {title}) {text}\n"
        return reference

    def search(self, queries: list[str]) -> list[str]:
        return [self.passages_to_string(hits) for hits in self.batch_search(queries)]


@pytest.mark.parametrize("n", [400, 2_560])
def test_searchr1_client_logic_with_training_sized_batches(retrieval, n):
    titles = ["Teutberga", "Lothair II", "Bishop of Elmham", "margrave of Tuscany", "Waldrada"]
    queries = [f"who is {titles[i % len(titles)]} (rollout {i})" for i in range(n)]
    references = SearchR1StyleClient(retrieval.url + "/retrieve/searchr1").search(queries)
    assert len(references) == n
    assert all(ref.count("Doc ") == 3 and "(Title: \"" in ref for ref in references)
    assert "Teutberga" in references[0].split("\n")[0]  # query 0 is answered by query 0's hits


def test_searchr1_client_logic_survives_bad_queries_in_a_batch(retrieval):
    """A rollout's ``<search></search>``, a leading bracketed non-mode word and an over-long query,
    mixed into a training-sized batch: Search-R1's client gets a list for every position."""
    good = [f"who is {t}" for t in ("Teutberga", "Lothair II", "Waldrada")] * 853
    bad = {7: "", 500: "[1990s] films about Teutberga", 1_200: "Teutberga " * 300, 2_000: "[passage]  ", 2_558: "   "}
    queries = list(good)
    for i, q in sorted(bad.items()):
        queries.insert(i, q)
    client = SearchR1StyleClient(retrieval.url + "/retrieve/searchr1")
    lists = client.batch_search(queries)
    assert len(lists) == len(queries) == 2_564
    for i, hits in enumerate(lists):
        if i in (7, 2_000, 2_558):
            assert hits == [], i  # empty once the tags are removed
        elif i in (500, 1_200):
            assert hits, i  # searched as text / cut to the limit
        else:
            assert len(hits) == 3, i
    assert "Teutberga" in client.passages_to_string(lists[500]) and "Teutberga" in client.passages_to_string(lists[1_200])
    references = client.search(queries)
    assert references[7] == "" and references[0].count("Doc ") == 3


def test_searchr1_reports_what_it_tolerated_and_refuses_only_batch_faults(ret):
    r = ret.post("/retrieve/searchr1", json={"queries": ["x" * 2_001, "", "[web] q"], "topk": 3})
    assert r.status_code == 200, r.text
    assert r.json()["truncated"] == [0] and r.json()["empty"] == [1]
    assert r.headers["x-truncated-queries"] == "1" and r.headers["x-empty-queries"] == "1"
    r = ret.post("/retrieve/searchr1", json={"queries": ["q"] * 8_193, "topk": 3})
    assert r.status_code == 422 and "at most 8192" in r.json()["detail"], r.text
    r = ret.post("/retrieve/searchr1", content=b'{"queries": ["q"', headers={"content-type": "application/json"})
    assert r.status_code == 400, r.text


# ------------------------------------------------------------------ 4. cross-site writes, 5. Host allow-list

NOTE_JSON = json.dumps([{"title": "Zorblax", "text": "Zorblax is a fictional moon of Neptune."}]).encode()


def upload(client: httpx.Client, name: str, data: bytes = NOTE_JSON, **headers: str) -> httpx.Response:
    return client.post("/v1/sources", data={"name": name}, files={"file": ("n.json", data, "application/json")},
                       headers=headers)


@pytest.mark.parametrize("headers", [
    {"Origin": "http://attacker.example", "Sec-Fetch-Site": "cross-site"},  # a no-cors fetch from another site
    {"Origin": "http://attacker.example"},  # an older browser: Origin only
    {"Sec-Fetch-Site": "same-site"},  # another port on the same host is another origin
    {"Origin": "null"},  # a sandboxed frame or a file:// page
])
def test_cross_site_writes_are_refused_without_a_key(svc, service, headers):
    r = upload(svc, "crosssite", **headers)
    assert r.status_code == 403, r.text
    assert "cross-" in r.json()["detail"]
    r = svc.post("/v1/ask", json={"question": "Who?", **VANILLA}, headers=headers)
    assert r.status_code == 403
    r = svc.post("/retrieval/retrieve", json={"queries": ["q"], "k": 1, "sources": ["bm25"]}, headers=headers)
    assert r.status_code == 403
    assert svc.get("/v1/sources/crosssite").status_code == 404  # nothing was stored


def test_same_origin_and_non_browser_writes_are_served(svc, service):
    same = {"Origin": service.url, "Sec-Fetch-Site": "same-origin"}
    assert svc.post("/v1/ask", json={"question": "Who was Teutberga married to?", **VANILLA}, headers=same).status_code == 200
    assert svc.post("/v1/ask", json={"question": "Who was Teutberga married to?", **VANILLA}).status_code == 200
    r = upload(svc, "sameorigin", **same)
    assert r.status_code == 202, r.text


def test_configured_origin_is_allowed(sources, tmp_path):
    from routerag.edge.settings import SecuritySettings

    settings = ServiceSettings(data_dir=tmp_path, security=SecuritySettings(allowed_origins=["https://ui.example.org"]))
    with BackgroundServer(create_app(ScriptedModel(answer), sources, settings)) as running, \
            httpx.Client(base_url=running.url, timeout=30) as c:
        body = {"question": "Who was Teutberga married to?", **VANILLA}
        assert c.post("/v1/ask", json=body, headers={"Origin": "https://ui.example.org"}).status_code == 200
        assert c.post("/v1/ask", json=body, headers={"Origin": "https://other.example.org"}).status_code == 403


@pytest.mark.parametrize("path", ["/health", "/v1/info", "/retrieval/health", "/"])
def test_foreign_host_names_are_refused(svc, path):
    r = svc.get(path, headers={"Host": "attacker.example"})
    assert r.status_code == 400 and "attacker.example" in r.json()["detail"]
    assert svc.get(path, headers={"Host": "localhost"}).status_code == 200


def test_foreign_host_names_are_refused_by_the_retrieval_server(ret, retrieval):
    assert ret.get("/health", headers={"Host": "attacker.example:80"}).status_code == 400
    r = ret.post("/retrieve", json={"queries": ["q"], "k": 1, "sources": ["bm25"]}, headers={"Host": "rebind.example"})
    assert r.status_code == 400
    assert ret.get("/health", headers={"Host": f"localhost:{retrieval.port}"}).status_code == 200


def test_allowed_hosts_is_configurable():
    from routerag.edge.guard import allowed_host_names

    assert allowed_host_names("127.0.0.1", None) == {"localhost", "127.0.0.1", "::1"}
    assert allowed_host_names("0.0.0.0", ["api.example.org"]) == {"api.example.org"}
    assert allowed_host_names("0.0.0.0", None) is None  # exposed servers need a key (settings refuse otherwise)
    assert allowed_host_names("127.0.0.1", ["*"]) is None


# ------------------------------------------------------------------ 6. uploads


@pytest.mark.parametrize(("data", "reason"), [
    (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    (b'[{"title": "T", "text": "a \\ud800 b"}]', "surrogate"),
    (b'[{"title": "\\udfff", "text": "fine text here"}]', "surrogate"),
    (b'[{"title": "T", "text": "fine", "n": ' + b"9" * 5_000 + b"}]", "cannot be read"),
    (b'[{"title": "the", "text": "and of a is it"}, "the of"]', "no passage has a searchable word"),
], ids=["deep", "surrogate-text", "surrogate-title", "long-int", "stop-words"])
def test_hostile_uploads_are_422(svc, data, reason):
    r = upload(svc, "hostile", data)
    assert r.status_code == 422, r.text
    assert reason in r.json()["detail"]
    assert svc.get("/v1/sources/hostile").status_code == 404
    assert svc.get("/health").status_code == 200


@pytest.mark.parametrize(("name", "status"), [("bm25\n", 422), ("notes\n", 422), ("bm25", 409), ("graph", 409),
                                              ("hybrid", 409), ("passage", 409)])
def test_source_names_are_checked_whole_and_reserved_names_refused(svc, name, status):
    r = upload(svc, name)
    assert r.status_code == status, r.text
    custom = [s["name"] for s in svc.get("/v1/sources").json() if s["kind"] == "custom"]
    assert name not in custom and name.strip() not in custom


# ------------------------------------------------------------------ 8. strict validation


@pytest.mark.parametrize(("path", "body", "reason"), [
    ("/v1/ask", {"question": "Who?", "sourse": ["bm25"], **VANILLA}, "sourse"),
    ("/v1/ask", {"question": "Who?", "strategy": "vanilla", "params": {"source": "bm25", "kk": 3}}, "'kk'"),
    ("/v1/ask", {"question": "Who?", "strategy": "vanilla", "params": {"source": "bm25", "k": True}}, "k:"),
    ("/v1/ask", {"question": "Who?", "strategy": "vanilla", "params": {"source": "bm25", "k": "3"}}, "k:"),
    ("/v1/ask", {"question": "Who?", "strategy": "vanilla", "params": {"source": "nope"}}, "unknown source 'nope'"),
    ("/v1/ask", {"question": "Who?", "strategy": "graphrag-r1", "params": {"text_source": "nope"}}, "unknown source"),
    ("/v1/ask", {"question": "Who?", "strategy": "routerag", "params": {"mode_sources": {"passage": "nope", "graph": "bm25", "hybrid": "bm25"}}},
     "unknown source"),
    ("/v1/ask", {"question": "Who?", "strategy": "realroute", "params": {"max_new_tokens": 10**9}}, "limit of 8192"),
    ("/v1/ask/stream", {"question": "Who?", "strategy": "vanilla", "params": {"source": "nope"}}, "unknown source"),
    ("/v1/runs", {"questions": [{"question": "Who?", "answer": ["x"]}], **VANILLA}, "answer"),
    ("/v1/runs", {"questions": [{"question": "Who?"}], "strategy": "vanilla", "params": {"source": "nope"}},
     "unknown source"),
    ("/v1/runs", {"questions": [{"question": "Who?"}], "configs": [{"strategy": "vanilla", "parms": {}}]}, "parms"),
    ("/v1/runs", {"dataset": "2wikimultihopqa", "sample_size": True, **VANILLA}, "sample_size"),
    ("/retrieval/retrieve", {"queries": ["q"], "k": True, "sources": ["bm25"]}, "k:"),
    ("/retrieval/retrieve", {"queries": ["q"], "kk": 3, "sources": ["bm25"]}, "kk"),
    ("/retrieval/retrieve/searchr1", {"queries": ["q"], "top_k": 5}, "top_k"),
    ("/retrieval/retrieve/searchr1", {"queries": ["q"], "topk": True}, "topk"),
    ("/retrieval/retrieve/searchr1", {"queries": ["q"], "return_scores": "yes"}, "return_scores"),
])
def test_unknown_and_loosely_typed_fields_are_422(svc, path, body, reason):
    r = svc.post(path, json=body)
    assert r.status_code == 422, r.text
    assert reason in r.json()["detail"]


def test_strict_params_still_take_what_the_ui_sends(svc):
    body = {"question": "Who was Teutberga married to?", "strategy": "vanilla",
            "params": {"source": "bm25", "k": 2, "temperature": 0, "max_tokens": 32}}
    r = svc.post("/v1/ask", json=body)
    assert r.status_code == 200, r.text
    assert r.json()["answer"] == "Lothair II"


# ------------------------------------------------------------------ 9. a gone client's run stops


def test_abandoned_asks_stop_their_runs(sources, tmp_path):
    """Ten clients start a run at once and leave while the two worker threads are busy: the two
    runs inside a model call finish that call, the eight waiting never call the model (before:
    all ten ran to the end, and the next ask waited for them)."""
    import threading

    calls: list[float] = []

    def slow(messages, params, continue_final) -> str:
        calls.append(time.monotonic())
        time.sleep(1.0)
        return "Lothair II"

    settings = ServiceSettings(data_dir=tmp_path, ask_threads=2)
    body = {"question": "Who was Teutberga married to?", **VANILLA}

    def leave_stream(url: str) -> None:  # read the start event, then hang up
        with httpx.Client(base_url=url, timeout=30) as c, c.stream("POST", "/v1/ask/stream", json=body) as r:
            assert next(r.iter_lines()).startswith("event: start")
            time.sleep(0.3)

    def leave_ask(url: str) -> None:  # give up waiting
        with httpx.Client(base_url=url, timeout=0.3) as c, pytest.raises(httpx.ReadTimeout):
            c.post("/v1/ask", json=body)

    with BackgroundServer(create_app(ScriptedModel(slow), sources, settings)) as running:
        clients = [threading.Thread(target=fn, args=(running.url,)) for fn in [leave_stream, leave_ask] * 5]
        for t in clients:
            t.start()
        for t in clients:
            t.join()
        with httpx.Client(base_url=running.url, timeout=30) as c:
            assert c.post("/v1/ask", json=body).json()["answer"] == "Lothair II"
        assert len(calls) == settings.ask_threads + 1, len(calls)


# ------------------------------------------------------------------ 10. errors, key before body, body timeout


def test_an_unexpected_error_names_its_operation():
    from fastapi import FastAPI

    from routerag.server.retrieval_app import install_error_handlers

    app = FastAPI()
    install_error_handlers(app)

    @app.post("/v1/sources")
    async def upload() -> None:
        raise KeyError("boom")

    with BackgroundServer(app) as running, httpx.Client(base_url=running.url) as c:
        r = c.post("/v1/sources", json={})
    assert r.status_code == 500
    assert r.json()["detail"] == "internal error in POST /v1/sources (KeyError)"


def test_the_key_is_checked_before_the_body_is_read(sources, tmp_path):
    settings = ServiceSettings(data_dir=tmp_path, api_key="k3y")
    with BackgroundServer(create_app(ScriptedModel(answer), sources, settings)) as running, \
            httpx.Client(base_url=running.url, timeout=30) as c:
        for path in ("/v1/ask", "/v1/runs", "/retrieval/retrieve", "/retrieval/retrieve/searchr1"):
            r = c.post(path, content=b"{not json", headers={"content-type": "application/json"})
            assert r.status_code == 401, (path, r.text)
            assert raw_post(c, path, {"question": LONE}).status_code == 401
        assert upload(c, "late").status_code == 401
        # a 3 MB body announced but never sent: the 401 comes back without the server waiting for it
        # (httpx sending the body while the server answers and closes races; a raw socket does not)
        import socket

        with socket.create_connection(("127.0.0.1", running.port), timeout=10) as sock:
            sock.sendall(b"POST /v1/ask HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 3000000\r\n\r\n{")
            reply = sock.recv(4096).decode()
        assert reply.startswith("HTTP/1.1 401"), reply  # not 413 and not 408: nothing is read without the key
        assert c.post("/v1/ask", json={"question": "Who?", **VANILLA}, headers={"X-API-Key": "k3y"}).status_code == 200


def test_a_body_that_does_not_arrive_gets_408(sources, tmp_path):
    import socket

    from routerag.edge.settings import SecuritySettings

    settings = ServiceSettings(data_dir=tmp_path, security=SecuritySettings(body_timeout_s=0.5))
    with BackgroundServer(create_app(ScriptedModel(answer), sources, settings)) as running:
        with socket.create_connection(("127.0.0.1", running.port), timeout=10) as sock:
            sock.sendall(b"POST /v1/ask HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 100\r\n\r\n{\"question\": ")  # and then nothing
            t0 = time.monotonic()
            reply = sock.recv(4096).decode()
            waited = time.monotonic() - t0
        assert reply.startswith("HTTP/1.1 408"), reply
        assert "did not arrive within 0.5 s" in reply and waited < 5
        with httpx.Client(base_url=running.url) as c:
            assert c.get("/health").status_code == 200


# ------------------------------------------------------------------ found by the fuzz suite (tests/service/test_service_fuzz.py)


def test_background_servers_answer_keep_alive_requests_without_nagle_delay():
    """uvicorn serving a socket it did not bind left Nagle's algorithm on: every reply on a
    keep-alive connection (headers, then body) waited ~40 ms for the client's delayed ACK, ten
    times the request itself (found when the fuzz suite ran at 45 ms a request). Accepted
    connections inherit TCP_NODELAY from the listening socket."""
    import socket

    from routerag.edge.serving import bind_socket

    sock = bind_socket("127.0.0.1", 0)
    try:
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
    finally:
        sock.close()
