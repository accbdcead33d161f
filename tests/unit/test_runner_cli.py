"""``routerag eval`` / ``routerag report`` end to end (scripted model, a question file, no index)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import routerag.cli.eval_cmds  # noqa: F401 - registers the commands
from routerag.cli.app import app
from routerag.runtime.base import strategy_revision

runner = CliRunner()


@pytest.fixture
def qa_file(tmp_path):
    path = tmp_path / "capitals.jsonl"
    rows = [
        {"question": "What is the capital of France?", "answer": "Paris"},
        {"question": "What is the capital of Peru?", "answer": "Lima"},
        {"question": "What is the capital of Japan?", "answer": "Tokyo"},
        {"question": "What is the capital of Chile?", "answer": "Santiago"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("ROUTERAG_HOME", str(tmp_path / "home"))


def _eval(qa_file, out, *extra: str):
    return runner.invoke(
        app,
        [
            "eval", "--dataset", f"file:{qa_file}", "--strategy", "direct", "--out", str(out), "--no-progress",
            "--set", "model.backend=scripted", "--set", "model.scripted_outputs=[Paris, Quito, Tokyo, Lima]",
            "--order", "sample",  # the scripted model answers in call order
            *extra,
        ],
    )


def test_unknown_names_list_the_valid_ones(tmp_path) -> None:
    result = runner.invoke(app, ["eval", "--dataset", "nope", "--strategy", "vanilla", "--out", str(tmp_path / "r")])
    assert result.exit_code == 2
    assert "unknown dataset 'nope'; valid: " in result.output and "2wiki" in result.output and "law-med" in result.output
    result = runner.invoke(app, ["eval", "--dataset", "demo", "--strategy", "magic", "--out", str(tmp_path / "r")])
    assert result.exit_code == 2 and "unknown strategy 'magic'; valid: " in result.output and "routerag" in result.output
    result = runner.invoke(app, ["eval", "--strategy", "direct", "--set", "metrics=[em,bleu]", "--out", str(tmp_path / "r")])
    assert result.exit_code == 2 and "unknown metric 'bleu'; valid: " in result.output
    result = runner.invoke(app, ["eval", "--set", "nonsense=1", "--out", str(tmp_path / "r")])
    assert result.exit_code == 1 and "nonsense" in result.output


def test_eval_resume_and_report(qa_file, tmp_path) -> None:
    out = tmp_path / "runs" / "direct"
    first = _eval(qa_file, out, "--limit", "3")
    assert first.exit_code == 0, first.output
    assert "3/3 questions (0 resumed, 3 answered now, 0 errors)" in first.output
    assert "em 66.7" in first.output  # Paris right, Quito wrong, Tokyo right
    assert {p.name for p in out.iterdir()} >= {"run.json", "config.resolved.yaml", "results.jsonl", "summary.json"}
    header = json.loads((out / "run.json").read_text())
    assert header["versions"]["model"].startswith("scripted") and header["dataset"] == f"file:{qa_file}"
    again = _eval(qa_file, out, "--limit", "3")
    assert again.exit_code == 0 and "(3 resumed, 0 answered now" in again.output
    other = _eval(qa_file, out, "--limit", "4")
    assert other.exit_code == 1 and "sampled other questions" in other.output
    report_dir = tmp_path / "report"
    rep = runner.invoke(app, ["report", str(out), "--out", str(report_dir)])
    assert rep.exit_code == 0, rep.output
    assert "| direct | 66.7 | 66.7 | 66.7 | 66.7 | 66.7 | 66.7 | 66.7 | 66.7 | 0.00 |" in rep.output  # all, open; avg
    assert (report_dir / "em_vs_turns.png").stat().st_size > 5000
    bad = runner.invoke(app, ["report", str(out), "--metrics", "bleu", "--out", str(report_dir)])
    assert bad.exit_code == 2 and "they have: cover_em, em, f1, f1_recall" in bad.output


def test_a_strategy_revision_changes_the_fingerprint_and_revision_0_keeps_old_ones() -> None:
    """A run stored before revisions existed keeps its fingerprint (it resumes); a strategy whose
    code revision changed answers refuses to resume it (no run mixes two versions of a strategy)."""
    from pathlib import Path

    from routerag.config import load_config
    from routerag.eval.config import EvalConfig
    from routerag.eval.runs import RunDir
    from routerag.eval.setup import answer_fingerprint, check_names

    stored = Path(__file__).resolve().parents[2] / "docs" / "results" / "runs" / "musique-vanilla"  # a revision-0 strategy
    header = RunDir(stored).read_header()
    cfg = load_config(EvalConfig, stored / "config.resolved.yaml", [])
    params = check_names(cfg).Params.model_validate(cfg.params)
    identity = header.versions.model
    assert answer_fingerprint(cfg, params, identity) == header.fingerprint
    assert answer_fingerprint(cfg, params, identity, revision=1) != header.fingerprint
    assert strategy_revision(check_names(cfg)) == 0
    hard_route = check_names(cfg.model_copy(update={"strategy": "hard-route"}))
    assert hard_route.revision >= 1  # its plans copying the prompt's example are refused since revision 1


def test_a_strategy_revision_must_be_a_non_negative_int() -> None:
    class Odd:
        name = "odd"
        revision = "2"

    with pytest.raises(TypeError, match="odd.*revision must be an int"):
        strategy_revision(Odd)
    Odd.revision = 3
    assert strategy_revision(Odd) == 3


def test_every_stored_result_run_matches_the_current_code() -> None:
    """docs/results/runs holds runs of the current strategy code: each fingerprint, recomputed from
    its stored configuration, matches (so each resumes). A change of answers needs a strategy
    revision and its runs redone (the old ones go to runs-rev0); a new parameter whose default keeps
    the old behaviour is marked OMIT_AT_DEFAULT instead of orphaning the runs."""
    from pathlib import Path

    from routerag.config import load_config
    from routerag.eval.config import EvalConfig
    from routerag.eval.runs import RunDir
    from routerag.eval.setup import answer_fingerprint, check_names

    runs = sorted((Path(__file__).resolve().parents[2] / "docs" / "results" / "runs").iterdir())
    assert len(runs) >= 20
    stale = []
    for run in runs:
        header = RunDir(run).read_header()
        cfg = load_config(EvalConfig, run / "config.resolved.yaml", [])
        cls = check_names(cfg)
        params = cls.Params.model_validate(cfg.params)
        if answer_fingerprint(cfg, params, header.versions.model, strategy_revision(cls)) != header.fingerprint:
            stale.append(run.name)
    assert stale == []


def test_a_parameter_marked_omit_at_default_leaves_the_fingerprint_alone_at_its_default() -> None:
    from pydantic import BaseModel, Field

    from routerag.config import OMIT_AT_DEFAULT
    from routerag.eval.setup import fingerprint_params

    class Old(BaseModel):
        k: int = 3

    class New(Old):
        router: str = Field(default="llm", json_schema_extra=OMIT_AT_DEFAULT)

    assert fingerprint_params(New()) == fingerprint_params(Old()) == {"k": 3}
    assert fingerprint_params(New(router="embedding")) == {"k": 3, "router": "embedding"}


def test_a_recovered_log_is_reported_once(qa_file, tmp_path) -> None:
    """A crash left half a line: the resumed eval says so exactly once (not once per layer). Run
    as a process, as a user runs it: in-process, pytest's log capture would hide a logged copy."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    out = tmp_path / "run"
    assert _eval(qa_file, out, "--limit", "4").exit_code == 0
    log = out / "results.jsonl"
    rows = log.read_text().splitlines(keepends=True)
    log.write_text("".join(rows[:2]) + rows[2][:40])  # two records and a partial third
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}
    args = [
        sys.executable, "-m", "routerag.cli.main", "eval", "--dataset", f"file:{qa_file}", "--strategy", "direct",
        "--out", str(out), "--no-progress", "--set", "model.backend=scripted",
        "--set", "model.scripted_outputs=[Paris, Quito, Tokyo, Lima]", "--order", "sample", "--limit", "4",
    ]
    again = subprocess.run(args, capture_output=True, text=True, env=env, timeout=300)
    assert again.returncode == 0, again.stderr
    both = again.stdout + again.stderr
    assert both.count("the last line was incomplete") == 1, both
    assert "(2 resumed, 2 answered now" in both


def test_results_without_a_header_are_refused_and_left_untouched(qa_file, tmp_path) -> None:
    """A folder with answers but no run.json cannot show which configuration made them: eval
    refuses to adopt it, says how to go on, and changes nothing there."""
    out = tmp_path / "run"
    assert _eval(qa_file, out, "--limit", "3").exit_code == 0
    (out / "run.json").unlink()
    (out / "config.resolved.yaml").write_text("# the user's own notes\n")
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file() and p.name != ".lock"}
    again = _eval(qa_file, out, "--limit", "3")
    assert again.exit_code == 1
    assert "3 answered questions" in again.output and "no run.json" in again.output
    assert "--out" in again.output  # how to proceed
    after = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file() and p.name != ".lock"}
    assert after == before


def test_runs_compress_then_report_and_resume(qa_file, tmp_path) -> None:
    import routerag.cli.runs_cmds  # noqa: F401 - registers the commands

    out = tmp_path / "runs" / "direct"
    assert _eval(qa_file, out, "--limit", "3").exit_code == 0
    before = runner.invoke(app, ["report", str(out), "--out", str(tmp_path / "r1"), "--no-plots"])
    packed = runner.invoke(app, ["runs", "compress", str(tmp_path / "runs")])
    assert packed.exit_code == 0, packed.output
    assert f"{out}: compressed, 3 records" in packed.output
    assert not (out / "results.jsonl").exists() and (out / "results.jsonl.xz").is_file()
    after = runner.invoke(app, ["report", str(out), "--out", str(tmp_path / "r2"), "--no-plots"])
    assert after.exit_code == 0 and after.stdout == before.stdout
    assert (tmp_path / "r1" / "main_table.csv").read_bytes() == (tmp_path / "r2" / "main_table.csv").read_bytes()
    again = _eval(qa_file, out, "--limit", "3")
    assert again.exit_code == 0 and "(3 resumed, 0 answered now" in again.output
    more = _eval(qa_file, out, "--limit", "3", "--retry-errors")
    assert more.exit_code == 0
    assert runner.invoke(app, ["runs", "compress", str(out)]).output.count("already compressed") == 1
    assert runner.invoke(app, ["runs", "compress", str(tmp_path / "nothing-here")]).exit_code == 2


def test_engine_ray_without_the_scale_extra_says_what_to_install(qa_file, tmp_path, monkeypatch) -> None:
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ray" else find_spec(name, *a))
    result = _eval(qa_file, tmp_path / "run", "--engine", "ray")
    assert result.exit_code == 1 and "error: the Ray path needs the scale extra: pip install 'routerag[scale]'" in result.output
    assert not (tmp_path / "run").exists()  # nothing written
    result = _eval(qa_file, tmp_path / "run", "--engine", "spark")
    assert result.exit_code == 2 and "unknown engine 'spark'; valid: thread, ray" in result.output
