"""A run store on a full disk: a run whose answers stop being saved stops with what it saved (every
answer reported done is on disk and reads back), ends ``failed`` saying why, and its traces read
back; a new run is refused (507) while the store has too little free space; a store that cannot
be read answers 503 with a reason, never 500."""

from __future__ import annotations

import errno
import shutil
import time
from pathlib import Path

import httpx
import pytest

from routerag.corpus.schema import Question
from routerag.edge.serving import BackgroundServer
from routerag.eval import runs as eval_runs
from routerag.llm.scripted import ScriptedModel
from routerag.run.assemble import StrategyChoice, prepare_strategy
from routerag.runtime.base import Strategy
from routerag.server import run_files
from routerag.server.app import create_app
from routerag.server.jobs import ConfigInfo, PreparedConfig, RunManager
from routerag.server.run_space import RunStoreFullError
from routerag.server.settings import ServiceSettings
from routerag.sources.sourceset import SourceSet
from routerag.strategies import StrategyContext

SAVED = 7  # answers the disk takes before it is full
N_QUESTIONS = 40


def reply(messages, params, continue_final) -> str:
    return "Lothair II"


def direct() -> PreparedConfig:
    prepared = prepare_strategy(StrategyChoice("direct", {}))

    def make() -> Strategy:
        return prepared.build(StrategyContext(model=ScriptedModel(reply), sources=SourceSet()))

    return PreparedConfig(info=ConfigInfo(label="direct", strategy="direct", params={}), make=make)


def questions(n: int = N_QUESTIONS) -> list[Question]:
    return [Question(qid=f"q{i}", question=f"Who was Teutberga married to? ({i})", answers=["Lothair II"])
            for i in range(n)]


def fill_the_disk(monkeypatch: pytest.MonkeyPatch, after: int) -> None:
    """Every write fails with ENOSPC once ``after`` answers have been appended."""
    appended = {"n": 0}
    append, atomic = eval_runs.RecordLog.append, run_files.atomic_write_text

    def full() -> OSError:
        return OSError(errno.ENOSPC, "No space left on device")

    def limited_append(self, record) -> None:
        if appended["n"] >= after:
            raise full()
        append(self, record)
        appended["n"] += 1

    def limited_write(path, text) -> None:
        if appended["n"] >= after:
            raise full()
        atomic(path, text)

    monkeypatch.setattr(eval_runs.RecordLog, "append", limited_append)
    monkeypatch.setattr(run_files, "atomic_write_text", limited_write)


def wait_ended(manager: RunManager, run_id: str, timeout_s: float = 60):
    deadline = time.monotonic() + timeout_s
    while (status := manager.status(run_id)).finished_at is None:
        assert time.monotonic() < deadline, status
        time.sleep(0.02)
    return status


def test_a_run_on_a_full_disk_stops_with_every_answer_it_reported_done_saved(tmp_path, monkeypatch):
    fill_the_disk(monkeypatch, after=SAVED)
    manager = RunManager(workers=2, store_dir=tmp_path)
    try:
        run_id = manager.submit([direct()], questions()).run_id
        status = wait_ended(manager, run_id)
        assert status.state == "failed", status
        assert "disk under the run store is full" in (status.error or "") and "No space left" in (status.error or "")
        assert f"{SAVED} of {N_QUESTIONS} answers saved" in (status.error or "")
        assert status.done == SAVED and status.done + status.skipped == status.total  # it stopped, not ran on
        traces = manager.traces(run_id)  # read back from the store, as a finished run is
        assert len(traces) == SAVED and all(t.answer == "Lothair II" for t in traces)
    finally:
        manager.shutdown()
    monkeypatch.undo()  # the disk has room again: a restarted service reads every saved answer back
    on_disk = eval_runs.RunDir(tmp_path / run_id / "0").read_records()
    assert sorted(r.qid for r in on_disk) == sorted(t.qid for t in traces)
    reloaded = RunManager(store_dir=tmp_path)
    try:
        assert len(reloaded.traces(run_id)) == SAVED
        assert reloaded.status(run_id).done == SAVED
    finally:
        reloaded.shutdown()


def test_a_new_run_is_refused_while_the_store_is_short_of_space(tmp_path, monkeypatch):
    free = shutil.disk_usage(tmp_path).free
    manager = RunManager(store_dir=tmp_path, min_free_bytes=free + 2**40)
    try:
        with pytest.raises(RunStoreFullError, match="MiB free"):
            manager.submit([direct()], questions(3))
        assert manager.list() == [] and not list(tmp_path.glob("*.json"))
    finally:
        manager.shutdown()


def test_a_new_run_whose_files_cannot_be_written_is_refused(tmp_path, monkeypatch):
    fill_the_disk(monkeypatch, after=0)
    manager = RunManager(store_dir=tmp_path)
    try:
        with pytest.raises(RunStoreFullError, match="disk under the run store is full"):
            manager.submit([direct()], questions(3))
        assert manager.list() == []
    finally:
        manager.shutdown()


@pytest.fixture
def service(tmp_path: Path):
    settings = ServiceSettings(run_workers=1, data_dir=tmp_path)
    with BackgroundServer(create_app(ScriptedModel(reply), SourceSet(), settings)) as running:
        with httpx.Client(base_url=running.url, timeout=30) as client:
            yield client


@pytest.mark.service
def test_over_http_a_full_disk_is_507_and_an_unreadable_store_503(service, tmp_path, monkeypatch):
    client = service
    body = {"questions": [{"question": "Who was Teutberga married to?", "answers": ["Lothair II"]}], "strategy": "direct"}
    fill_the_disk(monkeypatch, after=0)
    refused = client.post("/v1/runs", json=body)
    assert refused.status_code == 507 and "full" in refused.json()["detail"], refused.text
    monkeypatch.undo()
    kept, lost = (start(client, body) for _ in range(2))
    assert len(client.get(f"/v1/runs/{kept}/traces").json()) == 1
    (tmp_path / "runs" / f"{lost}.json").unlink()  # the store lost a run's files
    gone = client.get(f"/v1/runs/{lost}/traces")
    assert gone.status_code == 503 and "cannot be read" in gone.json()["detail"], gone.text
    assert client.get(f"/v1/runs/{kept}/traces").status_code == 200


def start(client: httpx.Client, body: dict) -> str:
    """Start a run and wait for it to end."""
    r = client.post("/v1/runs", json=body)
    assert r.status_code == 202, r.text
    run_id = r.json()["run_id"]
    deadline = time.monotonic() + 30
    while client.get(f"/v1/runs/{run_id}").json()["finished_at"] is None:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    return run_id
