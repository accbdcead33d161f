"""Durable service runs: a real ``routerag`` service process killed with SIGKILL mid-run keeps every
finished answer; restarted over the same data folder it lists the run as ``interrupted``, and
``POST /v1/runs/{id}/resume`` ends it with every question answered exactly once."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from conftest import wait_until_serving
from routerag.edge.serving import bind_socket

pytestmark = pytest.mark.service

# The service as `routerag serve` builds it, with a scripted model slow enough to be killed mid-run.
SERVER = """
import sys, time
from routerag.index.bundle import load_index
from routerag.llm.scripted import ScriptedModel
from routerag.server.app import create_app
from routerag.edge.serving import serve
from routerag.server.settings import ServiceSettings
from routerag.sources.registry import bundle_sources

index_dir, data_dir, port = sys.argv[1:4]

def reply(messages, params, continue_final):
    time.sleep(0.03)
    return "Lothair II" if "Lothair II" in messages[0].content else "unknown"

settings = ServiceSettings(run_workers=2, data_dir=data_dir)
serve(create_app(ScriptedModel(reply), bundle_sources(load_index(index_dir)), settings), "127.0.0.1", int(port),
      log_level="warning")
"""

N_QUESTIONS = 120
CLEAN_EXIT = (0, -signal.SIGTERM)  # uvicorn shuts down, then re-raises the signal it caught
CONFIGS = [{"strategy": "vanilla", "params": {"source": "bm25", "k": k}} for k in (1, 2)]


@contextmanager
def service(index_dir: Path, data_dir: Path) -> Iterator[tuple[subprocess.Popen, httpx.Client]]:
    sock = bind_socket()
    port = sock.getsockname()[1]
    sock.close()
    proc = subprocess.Popen([sys.executable, "-c", SERVER, str(index_dir), str(data_dir), str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_until_serving(f"http://127.0.0.1:{port}/health", proc)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            yield proc, client
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
        if proc.stdout:
            proc.stdout.close()


def wait_for(client: httpx.Client, run_id: str, done: bool, timeout_s: float = 120) -> dict:
    """Poll until the run has ended (``done``) or has stored at least a quarter of its answers."""
    deadline = time.monotonic() + timeout_s
    while True:
        status = client.get(f"/v1/runs/{run_id}").json()
        if (status["finished_at"] is not None) if done else status["done"] >= status["total"] // 4:
            return status
        assert time.monotonic() < deadline, status
        time.sleep(0.02)


def stored(data_dir: Path, run_id: str, config: int) -> list[dict]:
    path = data_dir / "runs" / run_id / str(config) / "results.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.endswith("}")]


def test_a_killed_service_run_resumes_without_losing_or_redoing_an_answer(index_dir, tmp_path) -> None:
    data_dir = tmp_path / "service"
    questions = [{"question": f"Who was Teutberga married to? ({i})", "qid": f"q{i}", "answers": ["Lothair II"]}
                 for i in range(N_QUESTIONS)]
    qids = [q["qid"] for q in questions]

    with service(index_dir, data_dir) as (proc, client):
        r = client.post("/v1/runs", json={"questions": questions, "configs": CONFIGS})
        assert r.status_code == 202, r.text
        run_id = r.json()["run_id"]
        before = wait_for(client, run_id, done=False)
        assert before["finished_at"] is None, "the run ended before it could be killed"
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)

    kept = {c: {r["qid"]: r for r in stored(data_dir, run_id, c)} for c in (0, 1)}
    n_kept = sum(len(v) for v in kept.values())
    assert before["done"] <= n_kept < 2 * N_QUESTIONS  # what the service reported done was on disk
    # a crash in the middle of a write leaves a partial last line: resume cuts it
    with (data_dir / "runs" / run_id / "0" / "results.jsonl").open("ab") as handle:
        handle.write(b'{"position": 3, "qid": "q3", "ques')

    with service(index_dir, data_dir) as (proc, client):
        listed = {s["run_id"]: s for s in client.get("/v1/runs").json()}
        status = client.get(f"/v1/runs/{run_id}").json()
        assert listed[run_id] == status
        assert status["state"] == "interrupted" and status["done"] == n_kept and status["finished_at"] is not None
        traces = client.get(f"/v1/runs/{run_id}/traces", params={"limit": 1000}).json()
        assert len(traces) == n_kept and all(t["answer"] == "Lothair II" for t in traces)
        report = client.get(f"/v1/runs/{run_id}/report").json()
        assert sum(s["n_done"] for s in report["summaries"]) == n_kept

        r = client.post(f"/v1/runs/{run_id}/resume")
        assert r.status_code == 202, r.text
        assert r.json()["state"] in ("queued", "running") and r.json()["resumed"] == 1
        assert client.post(f"/v1/runs/{run_id}/resume").status_code == 409  # running: not twice
        final = wait_for(client, run_id, done=True)
        assert final["state"] == "done" and final["done"] == final["total"] == 2 * N_QUESTIONS and final["errors"] == 0
        r = client.post(f"/v1/runs/{run_id}/resume")
        assert r.status_code == 409 and "is done" in r.json()["detail"]
        assert client.post("/v1/runs/0123456789abcdef/resume").status_code == 404

        proc.send_signal(signal.SIGTERM)  # a clean stop stays clean
        assert proc.wait(30) in CLEAN_EXIT

    for c in (0, 1):
        records = stored(data_dir, run_id, c)
        counts = Counter(r["qid"] for r in records)
        assert sorted(counts) == sorted(qids) and set(counts.values()) == {1}, f"config {c}: {counts.most_common(3)}"
        by_qid = {r["qid"]: r for r in records}
        for qid, record in kept[c].items():  # the answers stored before the kill were not redone
            assert by_qid[qid] == record, qid
        summary = json.loads((data_dir / "runs" / run_id / str(c) / "summary.json").read_text(encoding="utf-8"))
        assert summary["n_done"] == N_QUESTIONS


def test_sigterm_stores_the_run_as_cancelled_and_it_resumes(index_dir, tmp_path) -> None:
    data_dir = tmp_path / "service"
    questions = [{"question": f"Who was Teutberga married to? ({i})", "qid": f"q{i}"} for i in range(N_QUESTIONS)]
    with service(index_dir, data_dir) as (proc, client):
        run_id = client.post("/v1/runs", json={"questions": questions, **CONFIGS[0]}).json()["run_id"]
        wait_for(client, run_id, done=False)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) in CLEAN_EXIT
    with service(index_dir, data_dir) as (proc, client):
        status = client.get(f"/v1/runs/{run_id}").json()
        assert status["state"] == "cancelled" and 0 < status["done"] < N_QUESTIONS
        assert status["done"] + status["skipped"] == N_QUESTIONS
        assert client.post(f"/v1/runs/{run_id}/resume").status_code == 202
        final = wait_for(client, run_id, done=True)
        assert final["state"] == "done" and final["done"] == N_QUESTIONS and final["skipped"] == 0
    counts = Counter(r["qid"] for r in stored(data_dir, run_id, 0))
    assert len(counts) == N_QUESTIONS and set(counts.values()) == {1}


def test_stored_runs_stay_bounded_on_disk(index_dir, tmp_path) -> None:
    """``keep_runs`` bounds the folders on disk too: a start with a smaller bound removes the oldest,
    and a run folder whose status file is gone (a removal cut short) is removed."""
    from routerag.corpus.schema import Question
    from routerag.index.bundle import load_index
    from routerag.llm.scripted import ScriptedModel
    from routerag.run.assemble import StrategyChoice, prepare_strategy
    from routerag.server.jobs import ConfigInfo, PreparedConfig, RunManager
    from routerag.sources.registry import bundle_sources
    from routerag.strategies import StrategyContext

    sources = bundle_sources(load_index(index_dir))
    prepared = prepare_strategy(StrategyChoice("vanilla", {"source": "bm25", "k": 1}))
    config = PreparedConfig(info=ConfigInfo(label="vanilla", strategy="vanilla", params={}),
                       make=lambda: prepared.build(StrategyContext(model=ScriptedModel(["Lothair II"], cycle=True),
                                                                   sources=sources)))
    manager = RunManager(keep=5, store_dir=tmp_path)
    ids = []
    for i in range(4):
        run_id = manager.submit([config], [Question(qid="q", question=f"Who was Teutberga married to? {i}", answers=[])]).run_id
        deadline = time.monotonic() + 30
        while manager.status(run_id).finished_at is None:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        ids.append(run_id)
    manager.shutdown()
    assert len(list(tmp_path.iterdir())) == 8
    (tmp_path / "0123456789abcdef").mkdir()

    reloaded = RunManager(keep=2, store_dir=tmp_path)
    reloaded.shutdown()
    assert [s.run_id for s in reloaded.list()] == [ids[3], ids[2]]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(ids[2:] + [f"{i}.json" for i in ids[2:]])
