"""The step observer (``StrategyContext.on_step``) feeds the service's live stream: over real HTTP,
a ``step`` event carrying the real search step arrives while the strategy is still running.

The scripted model that writes the answer waits until the test has read the search step from the
stream: if steps were only sent after the run, it would wait out its timeout and answer
``too late`` (and the test fails)."""

from __future__ import annotations

import json
import threading

import httpx
import pytest

from conftest import FirstChoice
from routerag.edge.serving import BackgroundServer
from routerag.llm.scripted import ScriptedModel
from routerag.server.app import create_app
from routerag.server.settings import ServiceSettings
from routerag.trace import Step, Trace

pytestmark = pytest.mark.service
QUESTION = "Who was Teutberga married to?"


class Gate:
    """The model's reply waits for ``seen``, set by the test when the search step arrived."""

    def __init__(self) -> None:
        self.seen = threading.Event()
        self.waited: list[bool] = []

    def reply(self, messages, params, continue_final) -> str:
        self.waited.append(self.seen.wait(timeout=20))
        return "Lothair II" if self.waited[-1] else "too late"


@pytest.fixture
def gate() -> Gate:
    return Gate()


@pytest.fixture
def server(sources, gate, tmp_path):
    app = create_app(ScriptedModel(gate.reply), sources, ServiceSettings(data_dir=tmp_path))
    with BackgroundServer(app) as running:
        yield running


def test_steps_stream_while_the_run_is_going(server, gate: Gate) -> None:
    events: list[tuple[str, dict]] = []
    name = ""
    body = {"question": QUESTION, "strategy": "vanilla", "params": {"source": "bm25", "k": 2}}
    with httpx.Client(base_url=server.url, timeout=60) as client, client.stream("POST", "/v1/ask/stream", json=body) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data = json.loads(line[6:])
                events.append((name, data))
                if name == "step" and data["step"]["kind"] == "search":
                    assert not gate.waited, "the answer was written before the search step was streamed"
                    gate.seen.set()
    kinds = [k for k, _ in events]
    assert kinds[0] == "start" and kinds[-2:] == ["trace", "done"]
    streamed = [Step.model_validate(data["step"]) for k, data in events if k == "step"]
    trace = Trace.model_validate(events[-2][1])
    assert gate.waited == [True] and trace.answer == "Lothair II"
    # the streamed steps are the trace's own steps, in order, each sent before the trace
    assert [s.kind for s in streamed] == [s.kind for s in trace.steps] == ["search", "answer"]
    assert [s.index for s in streamed] == [0, 1]
    assert streamed[0].hits == trace.steps[0].hits and streamed[0].query == QUESTION
    assert streamed[1].answer == "Lothair II"
    # the search step is sent after its retrieval event and before the answering model call
    assert kinds.index("retrieval") < kinds.index("step") < kinds.index("model")



def test_adaptive_choices_params_are_checked_strictly_by_the_service(server) -> None:
    """Adaptive's choices are resolved through the front door: a JSON body's "3" for an integer is
    refused with 422, as it is for a top-level strategy."""
    from routerag.routing import ROUTERS

    if "stream-first" not in ROUTERS:
        ROUTERS.register("stream-first", FirstChoice)
    body = {"question": QUESTION, "strategy": "adaptive",
            "params": {"router": "stream-first", "strategies": {"a": "direct", "b": "vanilla"},
                       "strategy_params": {"b": {"source": "bm25", "k": "3"}}}}
    with httpx.Client(base_url=server.url, timeout=60) as client:
        r = client.post("/v1/ask", json=body)
    assert r.status_code == 422, r.text
    assert "invalid params for strategy 'vanilla': k" in r.json()["detail"]
