"""The README's results table is generated from the stored runs (docs/results/readme-table.yaml);
it fails here when README.md's table differs from what the runs give."""

from __future__ import annotations

from pathlib import Path

import pytest

from routerag.eval.results_table import (
    END_MARKER,
    START_MARKER,
    ResultsTableError,
    ResultsTableSpec,
    current_block,
    load_spec,
    render_table,
    replace_block,
)

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "docs" / "results" / "readme-table.yaml"


def test_the_readme_table_is_what_the_stored_runs_give() -> None:
    block = render_table(load_spec(SPEC), SPEC.parent)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert current_block(readme) == block.strip("\n"), (
        "README.md's results table differs from the stored runs; regenerate it: routerag docs results-table"
    )


def test_the_table_reads_the_runs_it_names() -> None:
    spec = load_spec(SPEC)
    block = render_table(spec, SPEC.parent)
    lines = block.splitlines()
    assert len([line for line in lines if line.startswith("| ")]) == len(spec.rows) + 1  # header + one line per row
    policy = next(line for line in lines if line.startswith("| routerag + shipped 1.5B"))
    assert "| 52.0 |" in policy  # HotpotQA-distractor EM of the stored 1.5B policy run (its summary.json)
    rule = next(line for line in lines if line.startswith("| no-model rule, second option"))
    assert rule.count("| 0.0 |") >= 2  # the rule answers no open question and never searches


def test_replace_block_keeps_the_rest_and_is_idempotent() -> None:
    text = f"intro\n{START_MARKER}\nold\n{END_MARKER}\noutro\n"
    once = replace_block(text, "| a |\n")
    assert once == f"intro\n{START_MARKER}\n| a |\n{END_MARKER}\noutro\n"
    assert replace_block(once, "| a |") == once
    assert current_block(once) == "| a |"
    with pytest.raises(ResultsTableError):
        replace_block("no markers here", "x")
    with pytest.raises(ResultsTableError):
        replace_block(f"{END_MARKER}\n{START_MARKER}", "x")


def test_a_spec_must_name_one_run_per_dataset_and_known_baselines() -> None:
    datasets = [{"name": "a", "title": "A"}, {"name": "b", "title": "B"}]
    good = {"id": "x", "title": "X", "base": "none", "runs": {"a": "r1", "b": "r2"}}
    ResultsTableSpec.model_validate({"datasets": datasets, "rows": [good]})
    with pytest.raises(ValueError, match="one run per dataset"):
        ResultsTableSpec.model_validate({"datasets": datasets, "rows": [{**good, "runs": {"a": "r1"}}]})
    with pytest.raises(ValueError, match="is not another row"):
        ResultsTableSpec.model_validate({"datasets": datasets, "rows": [{**good, "baseline": "y"}]})


def test_a_run_on_the_wrong_dataset_is_refused(tmp_path: Path) -> None:
    spec = load_spec(SPEC)
    swapped = spec.rows[0].model_copy(update={"runs": {**spec.rows[0].runs, "2wiki": spec.rows[0].runs["musique"],
                                                     "musique": spec.rows[0].runs["2wiki"]}})
    bad = spec.model_copy(update={"rows": [swapped, *spec.rows[1:]]})
    with pytest.raises(ResultsTableError, match="is a run on"):
        render_table(bad, SPEC.parent)


def test_a_stored_run_without_its_log_is_refused_with_the_reason(tmp_path: Path) -> None:
    """docs/results keeps run.json and summary.json of runs whose per-question log left the tree;
    a report over such a run says the log is missing instead of reporting an empty run."""
    import shutil

    from routerag.eval.report import load_run
    from routerag.eval.runs import RunError

    run = tmp_path / "run"
    shutil.copytree(SPEC.parent / "runs" / "2wiki-rule", run)
    assert load_run(run).summary.n_done == 100
    (run / "results.jsonl.xz").unlink()
    with pytest.raises(RunError, match="per-question log .* is not here"):
        load_run(run)


def test_the_command_writes_the_table_and_check_fails_on_a_stale_one(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from routerag.cli.main import _load, app

    _load()
    readme = tmp_path / "README.md"
    from routerag.eval import training_table

    readme.write_text(f"# x\n\n{START_MARKER}\nstale\n{END_MARKER}\n\n{training_table.START_MARKER}\n"
                      f"{training_table.END_MARKER}\n", encoding="utf-8")
    args = ["docs", "results-table", "--readme", str(readme), "--spec", str(SPEC),
            "--training-spec", str(SPEC.parent / "training-table.yaml")]
    checked = CliRunner().invoke(app, [*args, "--check"])
    assert checked.exit_code == 1 and "routerag docs results-table" in checked.output
    assert "stale" in readme.read_text(encoding="utf-8")
    assert CliRunner().invoke(app, args).exit_code == 0
    assert current_block(readme.read_text(encoding="utf-8")) == render_table(load_spec(SPEC), SPEC.parent).strip("\n")
    assert CliRunner().invoke(app, [*args, "--check"]).exit_code == 0


def test_a_policy_row_must_be_runs_of_the_shipped_adapter() -> None:
    """The policy rows are evaluations of the adapters in src/routerag/data/policies as they are now:
    naming the other base's policy (another sha256) is refused."""
    spec = load_spec(SPEC)
    rows = {r.id: r for r in spec.rows}
    assert rows["policy-0p5b"].policy and rows["policy-1p5b"].policy
    wrong = rows["policy-1p5b"].model_copy(update={"policy": rows["policy-0p5b"].policy, "model": None})
    bad = spec.model_copy(update={"rows": [wrong if r.id == "policy-1p5b" else r for r in spec.rows]})
    with pytest.raises(ResultsTableError, match="names the shipped policy"):
        render_table(bad, SPEC.parent)


def test_the_readme_is_read_in_five_minutes() -> None:
    """The README stays a front page (at most 150 lines); details belong in docs/guides."""
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines; move detail into docs/guides"
