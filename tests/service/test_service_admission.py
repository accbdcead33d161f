"""Admission control, health under load and connection limits of the ask service.

The model blocks on an event, so "every ask slot is taken" is a state the test waits for (asks
counted by the admission, model calls entered), never a sleep: then a further ask gets 429 with
``Retry-After``, ``/ready`` is 503 and ``/health`` still answers. Counts go back to zero after an
ask completes, fails, or its client disconnects."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator

import httpx
import pytest

from routerag.edge.admission import Admission, OverBound
from routerag.edge.serving import BackgroundServer
from routerag.edge.settings import AdmissionSettings, SecuritySettings
from routerag.llm.scripted import ScriptedModel
from routerag.server.app import create_app
from routerag.server.jobs import ConfigInfo, PreparedConfig, RunManager
from routerag.server.settings import ServiceSettings
from routerag.sources.sourceset import SourceSet

pytestmark = pytest.mark.service

ASK = {"question": "Who was Teutberga married to?", "strategy": "direct"}
WAIT_S = 30.0


class Gate:
    """A model that blocks every call until ``open()``; ``entered`` counts calls that have begun."""

    def __init__(self, fail: bool = False) -> None:
        self.opened = threading.Event()
        self.entered = threading.Semaphore(0)
        self.fail = fail

    def __call__(self, messages, params, continue_final) -> str:
        self.entered.release()
        if not self.opened.wait(WAIT_S):
            raise TimeoutError("the test never opened the gate")
        if self.fail:
            raise RuntimeError("the model failed")
        return "Lothair II"

    def wait_entered(self, n: int) -> None:
        for _ in range(n):
            assert self.entered.acquire(timeout=WAIT_S), "a model call never began"

    def open(self) -> None:
        self.opened.set()


def until(condition: Callable[[], bool], what: str) -> None:
    """Wait for a state change that happens on the server's side (a count given back after the response)."""
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for: {what}"
        time.sleep(0.005)


def in_background(fn: Callable[[], object]) -> tuple[threading.Thread, list[object]]:
    out: list[object] = []
    thread = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    thread.start()
    return thread, out


@pytest.fixture
def served(tmp_path) -> Iterator[Callable[..., tuple[BackgroundServer, Gate, object]]]:
    """``served(gate, **settings)`` -> a running service over the gated model (stopped after the test)."""
    started: list[tuple[BackgroundServer, Gate]] = []

    def start(gate: Gate | None = None, security: SecuritySettings | None = None, **settings: object):
        gate = gate or Gate()
        app = create_app(ScriptedModel(gate), SourceSet(), ServiceSettings(data_dir=tmp_path / "svc", ui=False, **settings))
        server = BackgroundServer(app, security=security).start()
        started.append((server, gate))
        return server, gate, app

    yield start
    for server, gate in started:
        gate.open()
        server.stop()


def post(url: str, path: str = "/v1/ask", body: object = ASK, **headers: str) -> httpx.Response:
    with httpx.Client(base_url=url, timeout=WAIT_S) as c:
        return c.post(path, json=body, headers=headers)


# ------------------------------------------------------------------ the bound on asks


def test_over_the_bound_an_ask_gets_429_and_health_still_answers(served):
    server, gate, app = served(ask_threads=2, admission=AdmissionSettings(max_asks=3, retry_after_s=7))
    asks = app.state.service.asks
    waiting = [in_background(lambda: post(server.url)) for _ in range(3)]
    gate.wait_entered(2)  # two asks in the model, the third waits for a thread
    until(lambda: asks.in_use() == 3, "three asks admitted")

    refused = post(server.url)
    assert refused.status_code == 429, refused.text
    assert refused.headers["retry-after"] == "7"
    assert refused.json()["bound"] == "asks" and refused.json()["limit"] == 3
    stream = post(server.url, "/v1/ask/stream")
    assert stream.status_code == 429 and stream.json()["bound"] == "asks"

    with httpx.Client(base_url=server.url, timeout=WAIT_S) as c:
        health = c.get("/health")  # answered while every ask slot and every worker thread is blocked
        ready = c.get("/ready")
    assert health.status_code == 200 and health.json()["status"] == "ok"
    assert ready.status_code == 503, ready.text
    assert ready.json()["ready"] is False and "asks: 3 of 3" in ready.json()["reasons"][0]

    gate.open()
    for thread, out in waiting:
        thread.join(WAIT_S)
        assert out[0].status_code == 200 and out[0].json()["answer"] == "Lothair II"
    until(lambda: asks.in_use() == 0, "every ask given back after completion")
    with httpx.Client(base_url=server.url, timeout=WAIT_S) as c:
        assert c.get("/ready").status_code == 200
        assert c.post("/v1/ask", json=ASK).status_code == 200


def test_asks_are_given_back_after_errors(served):
    server, gate, app = served(gate=Gate(fail=True), admission=AdmissionSettings(max_asks=1))
    gate.open()
    failed = post(server.url)  # the model raises: the trace carries the error
    assert failed.status_code == 200 and failed.json()["error"], failed.text
    until(lambda: app.state.service.asks.in_use() == 0, "the failed ask given back")
    bad = post(server.url, body={**ASK, "strategy": "no-such-strategy"})  # refused after it was admitted
    assert bad.status_code == 422, bad.text
    until(lambda: app.state.service.asks.in_use() == 0, "the refused ask given back")
    streamed = post(server.url, "/v1/ask/stream")
    assert streamed.status_code == 200 and "event: done" in streamed.text
    until(lambda: app.state.service.asks.in_use() == 0, "the streamed ask given back")
    chat = post(server.url, "/v1/chat/completions", {**CHAT, "stream": True})
    assert chat.status_code == 200 and '"error"' in chat.text and chat.text.endswith("data: [DONE]\n\n"), chat.text
    until(lambda: app.state.service.asks.in_use() == 0, "the streamed completion given back")


CHAT = {"model": "direct", "messages": [{"role": "user", "content": "Who was Teutberga married to?"}]}
ASKS = {"/v1/ask": ("/v1/ask", ASK), "/v1/ask/stream": ("/v1/ask/stream", ASK),
        "chat": ("/v1/chat/completions", CHAT), "chat-stream": ("/v1/chat/completions", {**CHAT, "stream": True})}


@pytest.mark.parametrize("path,ask", list(ASKS.values()), ids=list(ASKS))
def test_asks_are_given_back_when_the_client_disconnects(served, path, ask):
    server, gate, app = served(admission=AdmissionSettings(max_asks=1))
    body = json.dumps(ask).encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=WAIT_S) as sock:
        sock.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        gate.wait_entered(1)
        assert app.state.service.asks.in_use() == 1
        assert post(server.url).status_code == 429
    # the client has gone while its run is still blocked in the model: the slot is free again
    until(lambda: app.state.service.asks.in_use() == 0, "the abandoned ask given back")
    assert not gate.opened.is_set()
    thread, out = in_background(lambda: post(server.url))
    gate.open()
    thread.join(WAIT_S)
    assert out[0].status_code == 200


def test_chat_completions_are_asks_too(served):
    server, gate, app = served(admission=AdmissionSettings(max_asks=1, retry_after_s=3))
    chat = CHAT
    thread, out = in_background(lambda: post(server.url, "/v1/chat/completions", chat))
    gate.wait_entered(1)
    refused = post(server.url, "/v1/chat/completions", chat)
    assert refused.status_code == 429 and refused.headers["retry-after"] == "3", refused.text
    assert refused.json()["error"]["code"] == "rate_limit_exceeded" and "asks=1" in refused.json()["error"]["message"]
    assert post(server.url).status_code == 429  # one bound for /v1/ask and the chat endpoint
    gate.open()
    thread.join(WAIT_S)
    assert out[0].status_code == 200, out[0].text
    until(lambda: app.state.service.asks.in_use() == 0, "the completion given back")


def test_the_per_key_bound_counts_a_hash_of_the_key(served):
    server, gate, app = served(api_key="k3y", admission=AdmissionSettings(max_asks=10, max_asks_per_key=1))
    thread, out = in_background(lambda: post(server.url, **{"X-API-Key": "k3y"}))
    gate.wait_entered(1)
    refused = post(server.url, **{"Authorization": "Bearer k3y"})  # the same key, sent the other way
    assert refused.status_code == 429 and refused.json()["bound"] == "asks_per_key", refused.text
    assert post(server.url).status_code == 401  # the key is checked first
    identities = list(app.state.service.asks._by_identity)
    assert len(identities) == 1 and "k3y" not in identities[0] and identities[0].startswith("key:")
    gate.open()
    thread.join(WAIT_S)
    assert out[0].status_code == 200
    until(lambda: app.state.service.asks.in_use() == 0, "the ask given back")


# ------------------------------------------------------------------ the bound on run answers


def wait_run(url: str, run_id: str) -> dict:
    with httpx.Client(base_url=url, timeout=WAIT_S) as c:
        status: dict = {}
        until(lambda: status.update(c.get(f"/v1/runs/{run_id}").json()) or status.get("finished_at") is not None,
              f"run {run_id} finished")
        return status


def test_run_answers_are_bounded_and_given_back_on_cancel(served):
    server, gate, app = served(admission=AdmissionSettings(max_run_answers=5))
    answers = app.state.service.run_answers
    questions = [{"question": f"Question {i}?"} for i in range(3)]
    too_large = post(server.url, "/v1/runs", {"questions": questions * 2, "strategy": "direct"})
    assert too_large.status_code == 422 and "max_run_answers" not in too_large.text  # never fits: not a retry
    first = post(server.url, "/v1/runs", {"questions": questions, "strategy": "direct"})
    assert first.status_code == 202, first.text
    gate.wait_entered(1)
    assert answers.in_use() == 3
    refused = post(server.url, "/v1/runs", {"questions": questions, "strategy": "direct"})
    assert refused.status_code == 429 and refused.json()["bound"] == "run_answers", refused.text
    assert "retry-after" in refused.headers

    with httpx.Client(base_url=server.url, timeout=WAIT_S) as c:
        cancelled = c.delete(f"/v1/runs/{first.json()['run_id']}").json()
    assert cancelled["skipped"] == 2
    assert answers.in_use() == 1  # the answer in the model is still held
    gate.open()
    assert wait_run(server.url, first.json()["run_id"])["state"] == "cancelled"
    until(lambda: answers.in_use() == 0, "every run answer given back")
    second = post(server.url, "/v1/runs", {"questions": questions, "strategy": "direct"})
    assert second.status_code == 202
    assert wait_run(server.url, second.json()["run_id"])["done"] == 3
    until(lambda: answers.in_use() == 0, "every run answer given back after completion")


def test_a_cancelled_queued_run_drops_its_questions(tmp_path):
    """The queue holds runs, not answers: cancelling a queued run skips its answers at once, stores
    it, and keeps only its status in memory; its answers are read back from disk."""
    from routerag.corpus.schema import Question
    from routerag.run.assemble import StrategyChoice, prepare_strategy
    from routerag.runtime.base import Strategy
    from routerag.strategies import StrategyContext

    gate = Gate()
    prepared = prepare_strategy(StrategyChoice("direct", {}))

    def make() -> Strategy:
        return prepared.build(StrategyContext(model=ScriptedModel(gate), sources=SourceSet()))

    config = PreparedConfig(info=ConfigInfo(label="direct", strategy="direct", params={}), make=make)
    manager = RunManager(store_dir=tmp_path)
    admission = Admission("run_answers", 1000)
    try:
        busy = manager.submit([config], [Question(qid="a", question="A?", answers=[])], ticket=admission.admit(units=1))
        gate.wait_entered(1)
        queued = manager.submit([config], [Question(qid=f"q{i}", question=f"Q{i}?", answers=[]) for i in range(500)],
                                ticket=admission.admit(units=500))
        status = manager.cancel(queued.run_id)
        assert (status.state, status.skipped, status.done) == ("cancelled", 500, 0)
        run = manager.store.get(queued.run_id)
        assert len(run.questions) == 0 and run.records == [] and run.configs == () and run.stored
        assert admission.in_use() == 1  # only the answer in the model
        assert manager.report(queued.run_id).status.n_questions == 500  # read back from disk
        gate.open()
        until(lambda: manager.status(busy.run_id).finished_at is not None, "the busy run finished")
        assert admission.in_use() == 0
        assert [t.answer for t in manager.traces(busy.run_id)] == ["Lothair II"]
    finally:
        gate.open()
        manager.shutdown()


def test_packed_questions_read_back_as_given():
    from routerag.corpus.schema import Question
    from routerag.server.packed import PackedQuestions

    questions = [Question(qid=f"q{i}", question=f"Wer war {i} — \u00e9t\u00e9 \U0001f600?", answers=[f"a{i}", "b"])
                 for i in range(5)]
    packed = PackedQuestions(questions)
    assert len(packed) == 5 and list(packed) == questions and packed[-1] == questions[-1] and packed[1:3] == questions[1:3]
    with pytest.raises(IndexError):
        packed[5]
    assert json.loads(packed.json_array()) == [q.model_dump(mode="json") for q in questions]
    assert len(PackedQuestions()) == 0 and PackedQuestions().json_array() == b"[]"


# ------------------------------------------------------------------ the admission itself


def test_admission_counts_per_service_and_per_identity():
    admission = Admission("asks", limit=3, per_key=2, retry_after_s=5)
    a1, a2 = admission.admit("a"), admission.admit("a")
    with pytest.raises(OverBound) as over:
        admission.admit("a")
    assert (over.value.bound, over.value.limit, over.value.retry_after_s) == ("asks_per_key", 2, 5)
    admission.admit("b")
    with pytest.raises(OverBound) as over:
        admission.admit(None)
    assert over.value.bound == "asks"
    a1.release()
    a1.release()  # given back once
    assert admission.in_use() == 2 and admission.in_use("a") == 1
    a2.release()
    assert admission.in_use("a") == 0 and "a" not in admission._by_identity
    big = admission.admit(None, 3 - admission.in_use())
    big.release(1)
    big.release(10)  # more than held gives back what is held
    assert admission.in_use() == 1 and not admission.state().saturated
    assert admission.fits(4) and admission.fits(3) and admission.fits(2) is None


def test_a_streamed_reply_gives_its_ticket_back_once_when_it_ends():
    """The streamed reply holds the ask's ticket past the route (whose dependency may exit before the
    body is sent) and gives it back when the response ends: sent, failed, or cancelled."""
    import anyio

    from routerag.server.admitted import AdmittedAsk, AdmittedStream

    admission = Admission("asks", limit=2)

    async def events(end: str):
        yield "data: 1\n\n"
        if end == "fails":
            raise RuntimeError("the body failed")
        if end == "cancelled":
            await anyio.sleep_forever()

    async def receive() -> dict:
        await anyio.sleep_forever()
        return {}

    async def reply(end: str) -> None:
        admitted = AdmittedAsk(admission.admit())
        response = AdmittedStream(events(end), admitted)
        admitted.route_ended()  # the dependency's exit, before the response on FastAPI 0.106 to 0.117
        assert admission.in_use() == 1
        sent: list[dict] = []

        async def send(message: dict) -> None:
            sent.append(message)

        async with anyio.create_task_group() as tg:
            async def respond() -> None:
                try:
                    await response({"type": "http"}, receive, send)
                except* RuntimeError:  # raised as it is, or in a group (older Starlette)
                    assert end == "fails"

            tg.start_soon(respond)
            while not any(m.get("body") for m in sent):
                await anyio.sleep(0.001)
            if end == "cancelled":
                assert admission.in_use() == 1  # the body is still being sent
                tg.cancel_scope.cancel()
        assert admission.in_use() == 0, end
        other = admission.admit()
        admitted.replied()
        admitted.route_ended()  # given back once: the next ask's unit stays counted
        assert admission.in_use() == 1
        other.release()

    for end in ("sent", "fails", "cancelled"):
        anyio.run(reply, end)


# ------------------------------------------------------------------ connection limits


def test_a_half_open_connection_is_closed_after_the_header_timeout(served):
    security = SecuritySettings(header_timeout_s=0.5, max_header_bytes=2048)
    server, _, _ = served(security=security)
    with socket.create_connection(("127.0.0.1", server.port), timeout=WAIT_S) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Partial: ")  # and then nothing
        t0 = time.monotonic()
        assert sock.recv(4096) == b""  # closed by the server
        assert time.monotonic() - t0 < WAIT_S / 2
    with socket.create_connection(("127.0.0.1", server.port), timeout=WAIT_S) as sock:
        assert sock.recv(4096) == b""  # one that sends nothing at all is closed too
    with socket.create_connection(("127.0.0.1", server.port), timeout=WAIT_S) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Long: " + b"x" * 4096)
        assert sock.recv(4096).startswith(b"HTTP/1.1 431")
    with socket.create_connection(("127.0.0.1", server.port), timeout=WAIT_S) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")  # complete headers are served
        assert sock.recv(4096).startswith(b"HTTP/1.1 200")
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # the next request's headers stall
        assert sock.recv(4096) == b""
