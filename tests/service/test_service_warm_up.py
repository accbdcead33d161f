"""The ask service's warm-up: ``/ready`` is 503 (``warming``) while what the default strategy's first
answer needs loads in a background thread, and ``/health`` answers at once meanwhile; then 200.
Off: ready at once. A failure: the service keeps serving and ``/ready`` says what failed.

The slow part is a test double: a source whose search waits at a gate the test opens (the
warm-up's one search of each source the strategy names loads a lazily built index)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence

import httpx
import pytest

from routerag.edge.asks import Preparation
from routerag.edge.serving import BackgroundServer
from routerag.llm.scripted import ScriptedModel
from routerag.run.assemble import StrategyChoice, prepare_strategy
from routerag.server.app import create_app
from routerag.server.settings import ServiceSettings
from routerag.server.upload_parse import UploadSettings
from routerag.server.uploads import SourceStore
from routerag.server.warm_plan import strategy_plan
from routerag.server.warmup import WarmUp, WarmUpSkipped
from routerag.sources.base import QueryResult
from routerag.sources.sourceset import SourceSet
from routerag.trace import Hit

WAIT_S = 20.0
HEALTH_S = 0.5  # /health during the warm-up: far below the time the warm-up is held


class GatedSource:
    """The ``passage`` source: each search waits until ``gate`` opens (or raises, when ``fail``)."""

    def __init__(self, name: str = "passage", *, fail: bool = False) -> None:
        self.name, self.mode, self.profile = name, "keyword", "test passages"
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.fail = fail

    def search(self, queries: Sequence[str], k: int) -> list[QueryResult]:
        self.entered.set()
        self.gate.wait(WAIT_S)
        if self.fail:
            raise RuntimeError("index file is corrupt")
        hit = Hit(doc_id="d1", title="Lothair II", text="Lothair II married Teutberga.", score=1.0,
                  source=self.name, mode="keyword", rank=1)
        return [QueryResult(query=q, source=self.name, hits=[hit], latency_ms=0.1) for q in queries]


def until(condition, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for: {what}"
        time.sleep(0.02)


@pytest.fixture
def serve(tmp_path) -> Iterator:
    servers: list[BackgroundServer] = []

    def start(source: GatedSource, **settings: object) -> str:
        app = create_app(ScriptedModel(["Lothair II"]), SourceSet([source]),
                         ServiceSettings(data_dir=tmp_path / f"svc{len(servers)}", ui=False,
                                         **{"warm_up": True, **settings}))
        servers.append(BackgroundServer(app).start())
        return servers[-1].url

    yield start
    for server in servers:
        server.stop()


@pytest.mark.service
def test_ready_is_503_while_warming_and_health_answers_at_once(serve):
    source = GatedSource()
    url = serve(source)
    with httpx.Client(base_url=url, timeout=WAIT_S) as c:
        assert source.entered.wait(WAIT_S), "the warm-up searched the passage source"
        ready = c.get("/ready")
        assert ready.status_code == 503, ready.text
        body = ready.json()
        assert body["ready"] is False and body["warm_up"]["state"] == "warming"
        assert body["warm_up"]["strategy"] == "routerag" and body["warm_up"]["warming"] == ["source passage"]
        assert body["warm_up"]["warmed"][0].startswith("model")
        assert any(reason.startswith("warming routerag: source passage") for reason in body["reasons"])
        for _ in range(5):
            start = time.monotonic()
            assert c.get("/health").status_code == 200
            assert time.monotonic() - start < HEALTH_S
        source.gate.set()
        until(lambda: c.get("/ready").status_code == 200, "/ready 200 once the warm-up is done")
        body = c.get("/ready").json()
        assert body["ready"] is True and body["reasons"] == []
        assert body["warm_up"]["state"] == "done" and body["warm_up"]["warming"] == []
        assert "source passage" in body["warm_up"]["warmed"] and body["warm_up"]["seconds"] >= 0


@pytest.mark.service
def test_warm_up_off_is_ready_at_once(serve):
    source = GatedSource()  # never opened: a warm-up would hold /ready at 503
    url = serve(source, warm_up=False)
    with httpx.Client(base_url=url, timeout=WAIT_S) as c:
        ready = c.get("/ready")
    assert ready.status_code == 200, ready.text
    assert ready.json()["warm_up"]["state"] == "off" and not source.entered.is_set()


@pytest.mark.service
def test_a_failed_warm_up_is_reported_and_the_service_keeps_serving(serve):
    source = GatedSource(fail=True)
    source.gate.set()
    url = serve(source)
    with httpx.Client(base_url=url, timeout=WAIT_S) as c:
        until(lambda: c.get("/ready").json()["warm_up"]["state"] != "warming", "the warm-up finished")
        ready = c.get("/ready")
        assert ready.status_code == 503, ready.text
        warm_up = ready.json()["warm_up"]
        assert warm_up["state"] == "failed"
        assert warm_up["error"] == "source passage: RuntimeError: index file is corrupt"
        assert "warm-up of routerag failed: source passage" in ready.json()["reasons"][0]
        assert c.get("/health").status_code == 200
        asked = c.post("/v1/ask", json={"question": "Who was Teutberga married to?", "strategy": "direct"})
        assert asked.status_code == 200 and asked.json()["answer"] == "Lothair II"


@pytest.mark.service
def test_an_unknown_warm_up_strategy_fails_and_is_reported(serve):
    source = GatedSource()
    url = serve(source, warm_up_strategy="no-such-strategy")
    with httpx.Client(base_url=url, timeout=WAIT_S) as c:
        until(lambda: c.get("/ready").json()["warm_up"]["state"] == "failed", "the warm-up failed")
        assert "unknown strategy 'no-such-strategy'" in c.get("/ready").json()["warm_up"]["error"]


def test_the_plan_builds_the_strategys_model_then_searches_the_sources_it_names(tmp_path):
    passage = GatedSource()
    passage.gate.set()
    sources = SourceSet([passage, GatedSource("unnamed")])
    prepare = Preparation(sources, 8192, None, ServiceSettings().security.from_request(tmp_path),
                          uploads=SourceStore(tmp_path, UploadSettings(), reserved=set(sources.names())))
    built: list[str] = []

    def model_for(strategy) -> ScriptedModel:
        built.append(strategy.name)
        return ScriptedModel(["x"])

    parts = strategy_plan("routerag", prepare, model_for)()
    assert [part.name for part in parts] == ["model (the base model)", "source passage"]  # graph, hybrid: not mounted
    for part in parts:
        part.load()
    assert built == ["routerag"] and passage.entered.is_set()


def test_a_strategy_that_cannot_run_here_is_skipped_and_does_not_hold_readiness():
    def plan() -> list:
        raise WarmUpSkipped("r1-router cannot run on this service's defaults")

    warm_up = WarmUp("r1-router", plan)
    warm_up.start()
    warm_up.join(WAIT_S)
    state = warm_up.state()
    assert state.state == "skipped" and state.blocks_readiness() is None and "r1-router" in (state.error or "")
    assert prepare_strategy(StrategyChoice("routerag", {})).name == "routerag"  # the default strategy prepares without a model config
