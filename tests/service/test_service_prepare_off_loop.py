"""Preparing a request (mounting its uploads, resolving its strategy, which may unpack an adapter)
never runs on the event loop: while a slow preparation is under way, ``/health`` keeps answering.

The preparation is a test double that sleeps (a blocking sleep, as reading many uploads is); the
poller records each ``/health`` poll. Polls that begin and end inside the sleep must be many: on
the event loop no poll could end while the sleep lasts, so none would. That is a matter of order,
not of speed, and holds on a loaded machine; how long polls wait under load is measured by the
benchmarks (``benchmarks/bench_service_admission.py``), not asserted here."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

import routerag.run.assemble as run_assemble
from routerag.edge.serving import BackgroundServer
from routerag.llm.scripted import ScriptedModel
from routerag.server.app import create_app
from routerag.server.settings import ServiceSettings
from routerag.sources.sourceset import SourceSet

pytestmark = pytest.mark.service

PREPARE_S = 1.0  # how long the double's preparation blocks its thread
MIN_POLLS_INSIDE = 5  # of the ~100 a free event loop answers in the second
WAIT_S = 30.0


class SlowPrepare:
    """``assemble`` that blocks its thread for ``PREPARE_S`` first, recording when."""

    def __init__(self, real: Callable[..., Any]) -> None:
        self.real = real
        self.windows: list[tuple[float, float]] = []
        self.armed = True  # False: prepares at once (a test's setup)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not self.armed:
            return self.real(*args, **kwargs)
        start = time.monotonic()
        time.sleep(PREPARE_S)
        self.windows.append((start, time.monotonic()))
        return self.real(*args, **kwargs)


def answer_slowly(messages: object, params: object, continue_final: bool) -> str:
    time.sleep(0.005)  # a long run is still running when the test cancels it
    return "Lothair II"


@pytest.fixture
def slow_service(tmp_path, monkeypatch) -> Iterator[tuple[str, SlowPrepare]]:
    slow = SlowPrepare(run_assemble.assemble)
    monkeypatch.setattr(run_assemble, "assemble", slow)
    app = create_app(ScriptedModel(answer_slowly), SourceSet(), ServiceSettings(data_dir=tmp_path / "svc", ui=False, warm_up=False))
    with BackgroundServer(app) as server:
        yield server.url, slow


def polls_during(url: str, request: Callable[[httpx.Client], httpx.Response]) -> tuple[httpx.Response, list[tuple[float, float]]]:
    """``request``'s response, and the (start, end) of every ``/health`` poll made while it ran."""
    done = threading.Event()
    out: list[httpx.Response] = []

    def send() -> None:
        try:
            with httpx.Client(base_url=url, timeout=WAIT_S) as c:
                out.append(request(c))
        finally:
            done.set()

    sender = threading.Thread(target=send, daemon=True)
    polls: list[tuple[float, float]] = []
    with httpx.Client(base_url=url, timeout=WAIT_S) as c:
        assert c.get("/health").status_code == 200  # the connection is open before the request is sent
        sender.start()
        while not done.is_set():
            start = time.monotonic()
            assert c.get("/health").status_code == 200
            polls.append((start, time.monotonic()))
            time.sleep(0.005)
    sender.join(WAIT_S)
    assert out, "the request was not answered"
    return out[0], polls


def chat(stream: bool) -> Callable[[httpx.Client], httpx.Response]:
    body = {"model": "direct", "messages": [{"role": "user", "content": "Who was Teutberga married to?"}], "stream": stream}
    return lambda c: c.post("/v1/chat/completions", json=body)


def start_run(c: httpx.Client, n: int = 1) -> httpx.Response:
    questions = [{"question": f"Who was Teutberga married to? ({i})"} for i in range(n)]
    return c.post("/v1/runs", json={"questions": questions, "strategy": "direct"})


@pytest.mark.parametrize("request_of", [chat(False), chat(True), start_run], ids=["chat", "chat-stream", "runs"])
def test_health_answers_while_a_request_is_prepared(slow_service, request_of):
    url, slow = slow_service
    response, polls = polls_during(url, request_of)
    assert response.status_code in (200, 202), response.text
    assert len(slow.windows) == 1
    begun, ended = slow.windows[0]
    inside = [(start, end) for start, end in polls if begun < start and end < ended]
    assert len(inside) >= MIN_POLLS_INSIDE, (
        f"only {len(inside)} /health polls began and ended while a request was prepared ({PREPARE_S} s)")


def test_health_answers_while_a_resumed_run_is_prepared(slow_service):
    url, slow = slow_service
    slow.armed = False
    with httpx.Client(base_url=url, timeout=WAIT_S) as c:
        run_id = start_run(c, n=2000).json()["run_id"]
        assert c.delete(f"/v1/runs/{run_id}").status_code == 200
        deadline = time.monotonic() + WAIT_S
        while c.get(f"/v1/runs/{run_id}").json()["state"] != "cancelled":
            assert time.monotonic() < deadline, "the run was never cancelled"
            time.sleep(0.01)
    slow.armed = True
    response, polls = polls_during(url, lambda c: c.post(f"/v1/runs/{run_id}/resume"))
    assert response.status_code == 202, response.text
    httpx.delete(f"{url}/v1/runs/{run_id}", timeout=WAIT_S)  # not answered to the end
    begun, ended = slow.windows[0]
    inside = [(start, end) for start, end in polls if begun < start and end < ended]
    assert len(inside) >= MIN_POLLS_INSIDE, (
        f"only {len(inside)} /health polls began and ended while a resumed run was prepared ({PREPARE_S} s)")


@pytest.mark.parametrize("stream", [False, True], ids=["chat", "chat-stream"])
def test_a_chat_completion_is_prepared_through_the_service_off_the_loop(tmp_path, monkeypatch, stream):
    """The chat endpoint resolves its model name through ``Service.prepare``, as ``/v1/ask`` does, and
    the preparation itself runs in a worker thread, where no event loop runs."""
    from routerag.server.chat_models import ChatModels
    from routerag.server.service import Service

    asked: list[dict[str, Any]] = []
    threads: list[tuple[str, bool]] = []  # the preparing thread, and whether an event loop runs in it
    service_prepare, chat_prepare = Service.prepare, ChatModels.prepare

    async def prepare(self: Service, config: Any, **how: Any) -> Any:
        asked.append(how)
        return await service_prepare(self, config, **how)

    def prepare_model(self: ChatModels, *args: Any) -> Any:
        try:
            asyncio.get_running_loop()
            on_loop = True
        except RuntimeError:
            on_loop = False
        threads.append((threading.current_thread().name, on_loop))
        return chat_prepare(self, *args)

    monkeypatch.setattr(Service, "prepare", prepare)
    monkeypatch.setattr(ChatModels, "prepare", prepare_model)
    app = create_app(ScriptedModel(answer_slowly), SourceSet(), ServiceSettings(data_dir=tmp_path / "svc", ui=False, warm_up=False))
    with BackgroundServer(app) as server, httpx.Client(base_url=server.url, timeout=WAIT_S) as c:
        response = chat(stream)(c)
        refused = c.post("/v1/chat/completions", json={"model": "nope", "messages": [{"role": "user", "content": "Q?"}]})
    assert response.status_code == 200 and "Lothair II" in response.text, response.text
    assert refused.status_code == 404 and refused.json()["error"]["code"] == "model_not_found", refused.text
    assert asked == [{"model": "direct", "token_cap": None}, {"model": "nope", "token_cap": None}]
    assert len(threads) == 2 and not any(on_loop for _, on_loop in threads), threads
