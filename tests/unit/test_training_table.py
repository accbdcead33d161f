"""The README's training table is generated from the stored runs (docs/results/training-table.yaml);
it fails here when README.md's table differs from what the runs give."""

from __future__ import annotations

from pathlib import Path

import pytest

from routerag.eval.report import load_runs
from routerag.eval.results_table import ResultsTableError, current_block
from routerag.eval.training_table import (
    END_MARKER,
    START_MARKER,
    TrainingTableSpec,
    load_training_spec,
    render_training_table,
    route_step_scores,
)

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "docs" / "results" / "training-table.yaml"
MARKERS = (START_MARKER, END_MARKER)


def test_the_readme_training_table_is_what_the_stored_runs_give() -> None:
    block = render_training_table(load_training_spec(SPEC), SPEC.parent)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert current_block(readme, MARKERS) == block.strip("\n"), (
        "README.md's training table differs from the stored runs; regenerate it: routerag docs results-table"
    )


def test_a_stage_left_unevaluated_shows_a_dash_not_a_number() -> None:
    spec = load_training_spec(SPEC)
    partial = [r for r in spec.rows if len(r.runs) < len(spec.datasets)]
    assert partial, "the spec has a stage evaluated on only some sets"
    block = render_training_table(spec.model_copy(update={"rows": partial, "step_rows": [], "notes": []}), SPEC.parent)
    row = block.splitlines()[2]
    assert row.count("| – ") == 2 * sum(1 for d in spec.datasets if d.name not in partial[0].runs)


def test_route_step_scores_read_routing_format_and_similarity_per_step() -> None:
    runs = load_runs([SPEC.parent / "r1router-training" / "runs" / "heldout-untrained"])
    scores = route_step_scores(runs)
    assert len(scores) == 87  # every held-out decompose-and-route step
    assert all(set(v) == {"routing acc.", "format errors", "sub-question Sim"} for v in scores.values())
    correct = sum(r.routing.correct for r in runs[0].records if r.routing is not None)
    assert sum(v["routing acc."] for v in scores.values()) == correct
    assert all(0.0 <= v["sub-question Sim"] <= 1.0 for v in scores.values())


def test_lanes_of_one_sample_count_each_step_once() -> None:
    lanes = [SPEC.parent / "r1router-training" / "runs" / name for name in ("heldout-sft", "heldout-sft-b")]
    both = route_step_scores(load_runs(lanes))
    first = route_step_scores(load_runs(lanes[:1]))
    assert set(first) <= set(both) and len(both) == 79


def test_a_question_run_is_refused_as_a_step_row() -> None:
    spec = load_training_spec(SPEC)
    wrong = spec.step_rows[0].model_copy(update={"runs": ["runs/2wiki-vanilla"]})
    with pytest.raises(ResultsTableError, match="not on R1-Router steps"):
        render_training_table(spec.model_copy(update={"rows": [], "step_rows": [wrong]}), SPEC.parent)


def test_a_spec_names_known_datasets_and_baselines() -> None:
    datasets = [{"name": "a", "title": "A"}]
    row = {"id": "x", "system": "s", "base": "b", "stage": "untrained", "runs": {"a": "r"}}
    TrainingTableSpec.model_validate({"datasets": datasets, "rows": [row]})
    with pytest.raises(ValueError, match="not columns"):
        TrainingTableSpec.model_validate({"datasets": datasets, "rows": [{**row, "runs": {"z": "r"}}]})
    with pytest.raises(ValueError, match="names no run"):
        TrainingTableSpec.model_validate({"datasets": datasets, "rows": [{**row, "runs": {}}]})
    with pytest.raises(ValueError, match="is not another"):
        TrainingTableSpec.model_validate({"datasets": datasets, "rows": [{**row, "baseline": "y"}]})


def test_every_step_row_is_read_beside_the_no_model_rule() -> None:
    """Routing accuracy is read against the no-model rule for the same decision first; the untrained
    policy is the comparison only in its own column."""
    spec = load_training_spec(SPEC)
    assert spec.step_rule_baseline is not None
    rule = next(r for r in spec.step_rows if r.id == spec.step_rule_baseline)
    assert rule.base == "none"
    block = render_training_table(spec.model_copy(update={"rows": [], "notes": []}), SPEC.parent)
    header, _, *rows = block.splitlines()
    cols = [c.strip() for c in header.strip("|").split("|")]
    at = cols.index("routing acc. (Δ vs rule [95% CI], sign-test p)")
    assert at == 4 and cols[at + 1] == "routing acc. Δ vs untrained [95% CI], sign-test p"
    assert len(rows) == len(spec.step_rows)
    for spec_row, line in zip(spec.step_rows, rows):
        row = [c.strip() for c in line.strip("|").split("|")]
        assert row[0] == spec_row.system
        if spec_row.id == rule.id:
            assert "(" not in row[at] and row[cols.index("sub-question Sim (Δ vs untrained [95% CI], sign-test p)")] == "–"
        else:
            assert ", p " in row[at] and "n=" in row[at]
        assert (row[at + 1] == "–") == (spec_row.baseline is None)
    # without it the column is not there
    plain = render_training_table(spec.model_copy(update={"rows": [], "notes": [], "step_rule_baseline": None}), SPEC.parent)
    assert "vs rule" not in plain.splitlines()[0]
    with pytest.raises(ValueError, match="step_rule_baseline 'nope' is not a step row"):
        TrainingTableSpec.model_validate({**spec.model_dump(), "step_rule_baseline": "nope"})


def test_a_rule_row_scores_routing_and_no_sub_question() -> None:
    runs = load_runs([SPEC.parent / "r1router-training" / "runs" / "heldout-rule-markers"])
    scores = route_step_scores(runs)
    assert len(scores) == 87 and all(set(v) == {"routing acc.", "format errors"} for v in scores.values())
    assert round(100 * sum(v["routing acc."] for v in scores.values()) / 87, 1) == 78.2


def test_the_shipped_graphrag_r1_row_must_be_runs_of_its_shipped_adapter() -> None:
    """The row that names a shipped policy is checked against that adapter's sha256: naming the RouteRAG
    policy instead (another adapter) is refused."""
    spec = load_training_spec(SPEC)
    shipped = [r for r in spec.rows if r.policy is not None]
    assert [r.system for r in shipped] == ["graphrag-r1"]
    wrong = shipped[0].model_copy(update={"policy": "routerag-sft-qwen2.5-coder-0.5b"})
    bad = spec.model_copy(update={"rows": [wrong], "step_rows": [], "notes": []})
    with pytest.raises(ResultsTableError, match="names the shipped policy"):
        render_training_table(bad, SPEC.parent)
