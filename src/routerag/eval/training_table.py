"""The README's training table: what each training stage of a system did, generated from stored runs.

Two parts, both declared in a small YAML file (:class:`TrainingTableSpec`, by default
``docs/results/training-table.yaml``) and written between :data:`START_MARKER` and
:data:`END_MARKER`:

* **question-level stages** (:class:`StageRow`): one run folder per dataset of a stage (untrained,
  SFT, an RL stage) on the evaluation sets, scored like the results table — EM over all questions,
  open-answer EM with the paired bootstrap interval and exact sign test against the row named in
  ``baseline`` (vanilla RAG on the same base), searches per question. A stage not evaluated on a
  set shows ``–`` there (the spec says so; nothing is filled in).
* **step-level stages** (:class:`StepStageRow`): evaluation runs over held-out steps of released
  trajectories (``r1-router-step`` on ``r1router-steps-heldout``): routing accuracy (the first
  decision against the gold knowledge base), format errors and sub-question similarity, each with
  the paired interval and sign test against ``baseline`` on the steps both rows scored
  (:func:`route_step_scores`). A row whose steps a router decides (``router: keyword``, a no-model
  rule) writes no sub-question: its Sim is ``–``. With ``step_rule_baseline`` (the strongest
  no-model rule's row) every other step row's routing accuracy is also compared with the rule's
  (a "vs rule" column), as every routing claim is read beside the rule for the same decision.

Every number comes from the evaluation code (:mod:`routerag.eval.report`,
:mod:`routerag.eval.bootstrap`, :mod:`routerag.eval.signtest`), as in
:mod:`routerag.eval.results_table`, whose block helpers this shares; :mod:`routerag.eval.readme_tables` writes both into the README.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from routerag.eval.report import LoadedRun, load_runs, main_table
from routerag.eval.results_table import (
    METRIC,
    DatasetColumn,
    ResultsTableError,
    check_policy,
    delta_cell,
    load_table_spec,
    open_em_comparison,
    percent,
)

START_MARKER = "<!-- training:start -->"
END_MARKER = "<!-- training:end -->"
STEP_METRICS = ("routing acc.", "format errors", "sub-question Sim")


class StageRow(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(description="the row's name, used by other rows' `baseline`")
    system: str = Field(description="the system (strategy) column")
    base: str = Field(description="the base model column (\"none\" for a rule without a model)")
    stage: str = Field(description="the training stage: untrained, SFT, an RL stage, or a baseline's name")
    runs: dict[str, str] = Field(description="dataset name -> run folder, relative to the spec file; "
                                             "a dataset left out was not evaluated for this stage")
    baseline: str | None = Field(None, description="the row this one is compared with on open-answer EM")
    policy: str | None = Field(None, description="the shipped policy (data/policies/NAME) whose adapter every run "
                                                "of the row applied, checked against the adapter's sha256")


class StepStageRow(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(description="the row's name, used by other step rows' `baseline`")
    system: str
    base: str
    stage: str
    runs: list[str] = Field(min_length=1, description="run folders of one sample (lanes), relative to the spec file; "
                                                     "the first record of a step counts")
    baseline: str | None = Field(None, description="the step row this one is compared with, paired by step")


class TrainingTableSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    datasets: list[DatasetColumn] = Field(min_length=1, description="the question-level columns")
    rows: list[StageRow] = Field(default_factory=list)
    step_rows: list[StepStageRow] = Field(default_factory=list)
    step_rule_baseline: str | None = Field(None, description="the step row of the strongest no-model rule: every other "
                                           "step row's routing accuracy is also compared with it (a 'vs rule' column)")
    notes: list[str] = Field(default_factory=list, description="paragraphs printed under the tables")
    resamples: int = Field(10_000, ge=100, description="bootstrap resamples")
    seed: int = Field(0, description="bootstrap seed")

    @model_validator(mode="after")
    def _check(self) -> TrainingTableSpec:
        names = [d.name for d in self.datasets]
        for kind, rows in (("row", self.rows), ("step row", self.step_rows)):
            ids = [r.id for r in rows]
            if len(set(ids)) != len(ids):
                raise ValueError(f"{kind} ids must be unique: {ids}")
            for row in rows:
                if row.baseline is not None and (row.baseline not in ids or row.baseline == row.id):
                    raise ValueError(f"{kind} {row.id!r}: baseline {row.baseline!r} is not another {kind}")
        if self.step_rule_baseline is not None and self.step_rule_baseline not in {r.id for r in self.step_rows}:
            raise ValueError(f"step_rule_baseline {self.step_rule_baseline!r} is not a step row")
        for row in self.rows:
            if unknown := sorted(set(row.runs) - set(names)):
                raise ValueError(f"row {row.id!r} names datasets {unknown} that are not columns {names}")
            if not row.runs:
                raise ValueError(f"row {row.id!r} names no run")
        return self


def load_training_spec(path: str | Path) -> TrainingTableSpec:
    return load_table_spec(path, TrainingTableSpec, "training table")


# ---------------------------------------------------------------- step level


def route_step_scores(runs: Sequence[LoadedRun]) -> dict[str, dict[str, float]]:
    """Per step (qid), over the runs of one sample: routing accuracy (1 when the first decision is
    the gold knowledge base), format errors (1 when the step's output broke the format) and the
    sub-question's semantic similarity to the gold one, each 0-1; a step a router decided (not the
    policy: it wrote no sub-question) has no similarity. The first record of a qid counts."""
    out: dict[str, dict[str, float]] = {}
    for run in runs:
        for rec in run.records:
            if rec.qid in out:
                continue
            if rec.routing is None:
                raise ResultsTableError(f"{run.path}: step {rec.qid} has no routing outcome (a run of a dataset "
                                        "with gold sources, e.g. r1router-steps-heldout, is needed)")
            first = rec.trace.steps[0] if rec.trace.steps else None
            routed = first is not None and first.route is not None and first.route.chosen_by != "policy"
            semantic = rec.metrics.get("semantic")
            if semantic is None and not routed:
                raise ResultsTableError(f"{run.path}: step {rec.qid} has no semantic score (eval with metrics [em,f1,semantic])")
            out[rec.qid] = {"routing acc.": float(rec.routing.correct),
                            "format errors": float(first is not None and first.format_error is not None)}
            if not routed and semantic is not None:
                out[rec.qid]["sub-question Sim"] = float(semantic)
    return out


StepScores = dict[str, dict[str, float]]


def _step_delta(mine: StepScores, other: StepScores, metric: str, spec: TrainingTableSpec) -> str:
    """``Δ [95% CI], p ..., n=...`` of ``mine`` against ``other`` on the steps both scored."""
    from routerag.eval.bootstrap import paired_bootstrap
    from routerag.eval.signtest import sign_test

    keys = [k for k in mine if k in other]
    if not keys:
        raise ResultsTableError("two step rows share no step")
    xs, ys = [100 * other[k][metric] for k in keys], [100 * mine[k][metric] for k in keys]
    d = paired_bootstrap(xs, ys, resamples=spec.resamples, seed=spec.seed)
    s = sign_test(xs, ys)
    return f"{delta_cell(d.diff / 100, d.low / 100, d.high / 100, s.p_value)}, n={d.n}"


def _step_cell(mine: StepScores, other: StepScores | None, metric: str, spec: TrainingTableSpec) -> str:
    values = [v[metric] for v in mine.values() if metric in v]
    if not values:
        return "–"  # not applicable: a rule writes no sub-question
    mean = f"{100 * sum(values) / len(values):.1f}"
    if other is None or not any(metric in v for v in other.values()):
        return mean
    return f"{mean} ({_step_delta(mine, other, metric, spec)})"


def render_step_table(spec: TrainingTableSpec, root: Path) -> list[str]:
    scores: dict[str, StepScores] = {}
    for row in spec.step_rows:
        runs = load_runs([root / r for r in row.runs])
        for run in runs:
            if not run.header.dataset.startswith("r1router-steps"):
                raise ResultsTableError(f"{run.path} is a run on {run.header.dataset!r}, not on R1-Router steps")
        scores[row.id] = route_step_scores(runs)
    rule = spec.step_rule_baseline
    if rule is None:  # each row against its own baseline only
        cols = ["System", "Base", "Stage", "Steps"] + [f"{m} (Δ [95% CI], sign-test p)" for m in STEP_METRICS]
    else:  # routing against the no-model rule first; the rest against each row's own baseline (the untrained policy)
        cols = ["System", "Base", "Stage", "Steps", f"{STEP_METRICS[0]} (Δ vs rule [95% CI], sign-test p)",
                f"{STEP_METRICS[0]} Δ vs untrained [95% CI], sign-test p"]
        cols += [f"{m} (Δ vs untrained [95% CI], sign-test p)" for m in STEP_METRICS[1:]]
    lines = ["| " + " | ".join(cols) + " |", "|---|---|---|" + "---:|" * (len(cols) - 3)]
    for row in spec.step_rows:
        mine = scores[row.id]
        other = scores[row.baseline] if row.baseline else None
        cells = [row.system, row.base, row.stage, str(len(mine))]
        if rule is None:
            cells += [_step_cell(mine, other, m, spec) for m in STEP_METRICS]
        else:
            cells.append(_step_cell(mine, None if row.id == rule else scores[rule], STEP_METRICS[0], spec))
            cells.append("–" if other is None else _step_delta(mine, other, STEP_METRICS[0], spec))
            cells += [_step_cell(mine, other, m, spec) for m in STEP_METRICS[1:]]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


# ---------------------------------------------------------------- question level


def render_stage_table(spec: TrainingTableSpec, root: Path) -> list[str]:
    names = [d.name for d in spec.datasets]
    cells: dict[tuple[str, str], LoadedRun] = {}
    for row in spec.rows:
        runs = load_runs([root / row.runs[n] for n in names if n in row.runs])
        for name, run in zip([n for n in names if n in row.runs], runs):
            if run.header.dataset != name:
                raise ResultsTableError(f"{run.path} is a run on {run.header.dataset!r}, not {name!r} (row {row.id!r})")
            if not run.summary.complete:
                raise ResultsTableError(f"{run.path} is incomplete ({run.summary.n_done}/{run.summary.n_questions})")
            if row.policy is not None:
                check_policy(row.id, row.policy, run)
            run.header.label = run.summary.label = row.id
            cells[(row.id, name)] = run
    table = {r.label: r for r in main_table(list(cells.values()), [METRIC]).rows}
    cols = ["System", "Base", "Stage"]
    for d in spec.datasets:
        cols += [f"{d.title} EM", f"{d.title} open EM (Δ vs vanilla [95% CI], sign-test p)"]
    cols.append("Searches / question")
    lines = ["| " + " | ".join(cols) + " |", "|---|---|---|" + "---:|" * (len(cols) - 3)]
    for row in spec.rows:
        scores = table[row.id]
        out = [row.system, row.base, row.stage]
        for name in names:
            if (row.id, name) not in cells:
                out += ["–", "–"]
                continue
            out.append(percent(scores.scores[name][METRIC]))
            open_em = percent(scores.open_scores[name][METRIC])
            base = cells.get((row.baseline, name)) if row.baseline else None
            if base is None:
                out.append(open_em)
                continue
            found = open_em_comparison(base, cells[(row.id, name)], resamples=spec.resamples, seed=spec.seed)
            r, sign = found.result, found.sign
            out.append(f"{open_em} ({delta_cell(r.diff, r.low, r.high, sign.p_value if sign else None)}, n={r.n})")
        out.append(f"{scores.retrieval_turns:.2f}")
        lines.append("| " + " | ".join(out) + " |")
    return lines


def render_training_table(spec: TrainingTableSpec, root: str | Path) -> str:
    """The markdown block (tables and notes) from the runs ``spec`` names under ``root``."""
    root = Path(root)
    parts: list[str] = []
    if spec.rows:
        parts += render_stage_table(spec, root) + [""]
    if spec.step_rows:
        parts += render_step_table(spec, root) + [""]
    parts += [p for note in spec.notes for p in (note.strip(), "")]
    return "\n".join(parts).strip("\n")


__all__: Sequence[str] = [
    "END_MARKER",
    "START_MARKER",
    "StageRow",
    "StepStageRow",
    "TrainingTableSpec",
    "load_training_spec",
    "render_training_table",
    "route_step_scores",
]
