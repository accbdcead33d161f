"""A run made through the service's HTTP API is stored in the run format of ``routerag eval``
(``<data_dir>/runs/<run_id>/<n>/``: run.json, results.jsonl, summary.json), so ``routerag report``
reads it as it reads an evaluation — with the same scores the service's own report gives — and a
restarted service reads it back."""

from __future__ import annotations

import time

import httpx
import pytest
from typer.testing import CliRunner

from routerag.edge.serving import BackgroundServer
from routerag.llm.scripted import ScriptedModel
from routerag.server.app import create_app
from routerag.server.settings import ServiceSettings

pytestmark = pytest.mark.service
QUESTIONS = [
    {"question": "Who was Teutberga married to?", "answers": ["Lothair II"], "qid": "teutberga"},
    {"question": "Who is the spouse of Lothair II?", "answers": ["Teutberga"], "qid": "lothair"},
    {"question": "What is the capital of France?", "answers": ["Paris"], "qid": "france"},
]
CONFIGS = [{"strategy": "vanilla", "params": {"source": "bm25", "k": 2}, "label": "vanilla-k2"},
           {"strategy": "direct", "label": "closed-book"}]


def reply(messages, params, continue_final) -> str:
    return "Lothair II" if "Lothair II" in messages[-1].content or "Lothair II" in messages[0].content else "Paris"


@pytest.fixture
def data_dir(tmp_path):
    return tmp_path / "service"


def _finished_run(sources, data_dir) -> tuple[str, dict]:
    app = create_app(ScriptedModel(reply), sources, ServiceSettings(data_dir=data_dir, run_workers=1))
    with BackgroundServer(app) as server, httpx.Client(base_url=server.url, timeout=60) as client:
        r = client.post("/v1/runs", json={"questions": QUESTIONS, "configs": CONFIGS})
        assert r.status_code == 202, r.text
        run_id = r.json()["run_id"]
        deadline = time.monotonic() + 60
        while (status := client.get(f"/v1/runs/{run_id}").json())["finished_at"] is None:
            assert time.monotonic() < deadline, status
            time.sleep(0.05)
        assert status["state"] == "done", status
        return run_id, client.get(f"/v1/runs/{run_id}/report").json()


def test_a_service_run_is_read_by_routerag_report(sources, data_dir, tmp_path) -> None:
    from routerag.cli.app import app
    from routerag.cli.main import _load
    from routerag.eval.report import load_runs

    run_id, served = _finished_run(sources, data_dir)
    folders = [data_dir / "runs" / run_id / str(c) for c in range(len(CONFIGS))]
    loaded = load_runs(folders)
    assert [r.label for r in loaded] == ["vanilla-k2", "closed-book"]
    assert all(r.summary_matches for r in loaded)  # summary.json agrees with the records
    for run, summary in zip(loaded, served["summaries"]):
        assert [rec.qid for rec in run.records] == [q["qid"] for q in QUESTIONS]
        assert run.summary.n_done == summary["n_done"] == len(QUESTIONS)
        assert run.summary.metrics["em"] == pytest.approx(summary["em"])
        assert run.summary.metrics["f1"] == pytest.approx(summary["f1"])
    assert loaded[0].records[0].trace.steps[0].kind == "search"  # the full traces are there
    _load()
    result = CliRunner().invoke(app, ["report", *map(str, folders), "--no-plots", "--out", str(tmp_path / "report")])
    assert result.exit_code == 0, result.output
    assert "vanilla-k2" in result.output and "closed-book" in result.output


def test_a_restarted_service_reads_its_stored_runs_back(sources, data_dir) -> None:
    from routerag.server.jobs import RunManager

    run_id, served = _finished_run(sources, data_dir)
    manager = RunManager(store_dir=data_dir / "runs")
    try:
        again = manager.report(run_id)
        assert [s.em for s in again.summaries] == [s["em"] for s in served["summaries"]]
        assert len(manager.traces(run_id)) == len(QUESTIONS) * len(CONFIGS)
    finally:
        manager.shutdown()


def test_runs_stored_before_the_run_folders_still_load(sources, data_dir, tmp_path) -> None:
    """An older service stored the answers inside ``<run_id>.json``; those files still load."""
    from routerag.server.jobs import RunManager
    from routerag.server.run_files import StoredRun

    run_id, served = _finished_run(sources, data_dir)
    manager = RunManager(store_dir=data_dir / "runs")
    try:
        status, questions, records = manager.store.contents(run_id)
        legacy = StoredRun(status=status, questions=questions, records=records)
    finally:
        manager.shutdown()
    old_store = tmp_path / "old-runs"
    old_store.mkdir()
    (old_store / f"{run_id}.json").write_text(legacy.model_dump_json(), encoding="utf-8")
    reloaded = RunManager(store_dir=old_store)
    try:
        assert [s.em for s in reloaded.report(run_id).summaries] == [s["em"] for s in served["summaries"]]
    finally:
        reloaded.shutdown()
