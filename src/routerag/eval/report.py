"""Reports over stored runs: the papers' main-table layout (datasets as column groups, EM/F1 per
dataset and their average — overall and over the open-answer questions — then retrieval turns,
tokens and latency), the scores by question type (form: yes/no, choice, open; the dataset's own
type), routing accuracy, and paired comparisons of runs on the same questions (all of them and
the open-answer ones) with a bootstrap confidence interval and an exact sign test.

Everything is rebuilt from ``results.jsonl`` with :func:`routerag.eval.summary.summarize`; a run
whose stored ``summary.json`` disagrees with the rebuilt one is flagged in the report.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, Field

from routerag.config import atomic_write_text
from routerag.eval.bootstrap import PairedDifference, paired_bootstrap
from routerag.eval.routing import RoutingOutcome
from routerag.eval.runs import QuestionRecord, RunDir, RunError, RunHeader
from routerag.eval.signtest import SignTest, sign_test
from routerag.eval.stopping import StopEvidence, stop_evidence, stop_evidence_rows
from routerag.eval.summary import RunSummary, record_types, summarize

DEFAULT_TABLE_METRICS = ("em", "f1")
METRIC_TITLES = {"em": "EM", "f1": "F1", "cover_em": "Acc", "f1_recall": "F1-R", "precision": "P", "semantic": "Sim", "judge": "Judge"}


class LoadedRun(BaseModel):
    path: str
    header: RunHeader
    records: list[QuestionRecord]
    summary: RunSummary  # rebuilt from the records
    summary_matches: bool | None  # vs summary.json; None when the run has none

    @property
    def label(self) -> str:
        return self.header.label

    def scores(self, metric: str, subset: str = "all") -> dict[str, float]:
        """qid -> score, over every question or those of one form (``subset="open"``...)."""
        return {
            r.qid: v
            for r in self.records
            if (v := r.metrics.get(metric)) is not None and (subset == "all" or record_types(r)["form"] == subset)
        }


def load_run(path: str | Path) -> LoadedRun:
    run_dir = RunDir(path)
    header = run_dir.read_header()
    seen: set[str] = set()
    records = []
    for record in run_dir.read_records():
        if record.qid not in seen:
            seen.add(record.qid)
            records.append(record)
    summary = summarize(header, records)
    matches: bool | None = None
    if run_dir.summary_path.is_file():
        raw = json.loads(run_dir.summary_path.read_bytes())
        if not records and raw.get("n_done") and not run_dir.results.location.exists():
            raise RunError(
                f"{path}: summary.json counts {raw['n_done']} answered questions but the per-question log "
                f"({run_dir.results.path.name}[.xz]) is not here, so nothing can be rebuilt from it; restore the log "
                "(a stored run whose log left the repository: docs/results/README.md names the commit that has it)"
            )
        stored = RunSummary.model_validate(raw)
        # a summary written before the question-type breakdown existed is compared without it
        matches = stored == (summary if "breakdown" in raw else summary.model_copy(update={"breakdown": {}}))
    return LoadedRun(path=str(path), header=header, records=records, summary=summary, summary_matches=matches)


def load_runs(paths: Sequence[str | Path]) -> list[LoadedRun]:
    if not paths:
        raise RunError("no runs given")
    runs = [load_run(p) for p in paths]
    resolved = [Path(r.path).resolve() for r in runs]
    for i, here in enumerate(resolved):
        if here in resolved[:i]:
            raise RunError(f"run {runs[i].path} is given twice")
    # Two runs in one cell (same label, same dataset) are told apart by the folder that holds
    # them (a rerun kept elsewhere: its runs on every dataset share one row), else by run name.
    base = [r.header.label for r in runs]
    suffixes = (
        lambda r: Path(r.path).resolve().parent.name,
        lambda r: f"{Path(r.path).resolve().parent.name}/{r.header.name}",
        lambda r: str(Path(r.path).resolve()),
    )
    for suffix in suffixes:
        keys = [(r.label, r.header.dataset) for r in runs]
        clashing = {label for (label, _), n in ((k, keys.count(k)) for k in keys) if n > 1}
        if not clashing:
            break
        for run, label in zip(runs, base):
            if run.label in clashing:  # every run of that row, on every dataset, so rows stay whole
                run.header.label = run.summary.label = f"{label} ({suffix(run)})"
    return runs


# ---------------------------------------------------------------- main table


class TableRow(BaseModel):
    label: str
    scores: dict[str, dict[str, float | None]]  # dataset -> metric -> percentage (None: not run)
    average: dict[str, float | None]  # metric -> mean over datasets (None unless all datasets were run)
    open_scores: dict[str, dict[str, float | None]] = Field(default_factory=dict)  # the same, open-answer questions
    open_average: dict[str, float | None] = Field(default_factory=dict)
    retrieval_turns: float
    total_tokens: float
    latency_s: float
    n_questions: dict[str, int]  # dataset -> questions answered
    n_sample: dict[str, int] = Field(default_factory=dict)  # dataset -> questions sampled (more: a partial run)

    @property
    def partial(self) -> dict[str, tuple[int, int]]:
        """Datasets whose run is unfinished: ``{dataset: (answered, sampled)}``."""
        return {ds: (n, self.n_sample[ds]) for ds, n in self.n_questions.items() if n < self.n_sample.get(ds, n)}


class MainTable(BaseModel):
    datasets: list[str]
    metrics: list[str]
    rows: list[TableRow]


def _weighted(pairs: list[tuple[float, int]]) -> float:
    total = sum(n for _, n in pairs)
    return sum(v * n for v, n in pairs) / total if total else 0.0


def _open_score(summary: RunSummary | None, metric: str) -> float | None:
    group = summary.group("form", "open") if summary is not None else None
    return 100.0 * group.metrics[metric] if group is not None and metric in group.metrics else None


def _average(scores: dict[str, dict[str, float | None]], datasets: Sequence[str], metrics: Sequence[str]) -> dict[str, float | None]:
    average: dict[str, float | None] = {}
    for m in metrics:
        values = [scores[ds][m] for ds in datasets]
        average[m] = sum(values) / len(values) if all(v is not None for v in values) else None  # type: ignore[misc]
    return average


def main_table(runs: Sequence[LoadedRun], metrics: Sequence[str] = DEFAULT_TABLE_METRICS) -> MainTable:
    datasets: list[str] = []
    labels: list[str] = []
    for run in runs:
        if run.header.dataset not in datasets:
            datasets.append(run.header.dataset)
        if run.label not in labels:
            labels.append(run.label)
    rows = []
    for label in labels:
        mine = {r.header.dataset: r.summary for r in runs if r.label == label}
        scores = {
            ds: {m: (100.0 * mine[ds].metrics[m] if ds in mine and m in mine[ds].metrics else None) for m in metrics}
            for ds in datasets
        }
        open_scores = {ds: {m: _open_score(mine.get(ds), m) for m in metrics} for ds in datasets}
        summaries = list(mine.values())
        rows.append(
            TableRow(
                label=label,
                scores=scores,
                average=_average(scores, datasets, metrics),
                open_scores=open_scores,
                open_average=_average(open_scores, datasets, metrics),
                retrieval_turns=_weighted([(s.cost.retrieval_turns, s.n_done) for s in summaries]),
                total_tokens=_weighted([(s.cost.total_tokens, s.n_done) for s in summaries]),
                latency_s=_weighted([(s.cost.latency_ms / 1000.0, s.n_done) for s in summaries]),
                n_questions={ds: s.n_done for ds, s in mine.items()},
                n_sample={ds: s.n_questions for ds, s in mine.items()},
            )
        )
    return MainTable(datasets=datasets, metrics=list(metrics), rows=rows)


def _fmt(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def table_columns(table: MainTable) -> list[str]:
    cols = ["Method"]
    for ds in [*table.datasets, "Avg"]:
        cols.extend(f"{ds} {METRIC_TITLES.get(m, m)}" for m in table.metrics)
        cols.extend(f"{ds} open {METRIC_TITLES.get(m, m)}" for m in table.metrics)
    return [*cols, "Turns", "Tokens", "Latency (s)"]


def table_cells(table: MainTable) -> list[list[str]]:
    out = []
    for row in table.rows:
        partial = ", ".join(f"{ds} {done}/{total}" for ds, (done, total) in row.partial.items())
        cells = [f"{row.label} (partial: {partial})" if partial else row.label]
        for ds in table.datasets:
            cells.extend(_fmt(row.scores[ds][m]) for m in table.metrics)
            cells.extend(_fmt(row.open_scores.get(ds, {}).get(m)) for m in table.metrics)
        cells.extend(_fmt(row.average[m]) for m in table.metrics)
        cells.extend(_fmt(row.open_average.get(m)) for m in table.metrics)
        cells.extend([_fmt(row.retrieval_turns, 2), _fmt(row.total_tokens, 0), _fmt(row.latency_s, 2)])
        out.append(cells)
    return out


def markdown_table(columns: list[str], rows: list[list[str]]) -> str:
    """A Markdown table: the first column left-aligned, the others right-aligned (numbers)."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" if i == 0 else "---:" for i in range(len(columns))) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(cell: str) -> str:
    """A cell a spreadsheet shows as text: one starting with ``= + - @`` (or a tab or carriage
    return) would be read as a formula (``=HYPERLINK(...)`` in a run label), so it gets a leading
    ``'``; a number such as ``-3.0`` or ``+17.0`` is left as it is."""
    if not cell.startswith(_FORMULA_START):
        return cell
    try:
        float(cell)
    except ValueError:
        return "'" + cell
    return cell


def _csv(columns: list[str], rows: list[list[str]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([csv_cell(c) for c in columns])
    writer.writerows([csv_cell(c) for c in row] for row in rows)
    return buffer.getvalue()


# ---------------------------------------------------------------- comparisons


class Comparison(BaseModel):
    dataset: str
    baseline: str
    system: str
    metric: str
    result: PairedDifference  # on the questions both runs answered; scores in [0, 1]
    subset: str = "all"  # "all" questions or one form ("open": the open-answer ones)
    sign: SignTest | None = None  # exact sign test (McNemar for 0/1 scores) on the same pairs


def compare_runs(
    runs: Sequence[LoadedRun],
    metrics: Sequence[str] = DEFAULT_TABLE_METRICS,
    *,
    resamples: int = 10_000,
    seed: int = 0,
    baseline: str | None = None,
    subsets: Sequence[str] = ("all", "open"),
) -> list[Comparison]:
    """Per dataset, every run against the baseline run, paired by qid: the run labelled
    ``baseline`` when given (a dataset without one is skipped), else the first run given; over
    all shared questions and over each of ``subsets`` (question forms)."""
    out = []
    for dataset in dict.fromkeys(r.header.dataset for r in runs):
        group = [r for r in runs if r.header.dataset == dataset]
        if baseline is not None:
            group = sorted(group, key=lambda r: r.label != baseline)  # stable: the baseline first
            if group[0].label != baseline:
                continue
        base = group[0]
        for other in group[1:]:
            for subset in subsets:
                for metric in metrics:
                    a, b = base.scores(metric, subset), other.scores(metric, subset)
                    shared = [q for q in base.header.sample_qids if q in a and q in b]
                    if not shared:
                        continue
                    xs, ys = [a[q] for q in shared], [b[q] for q in shared]
                    result = paired_bootstrap(xs, ys, resamples=resamples, seed=seed)
                    out.append(Comparison(dataset=dataset, baseline=base.label, system=other.label, metric=metric,
                                          result=result, subset=subset, sign=sign_test(xs, ys)))
    return out


def comparison_rows(comparisons: Sequence[Comparison]) -> tuple[list[str], list[list[str]]]:
    cols = ["Dataset", "Questions", "Baseline", "System", "Metric", "n", "Baseline score", "System score", "Δ", "95% CI",
            "p (bootstrap)", "better / worse", "p (sign test)"]
    rows = []
    for c in comparisons:
        r = c.result
        rows.append(
            [
                c.dataset,
                c.subset,
                c.baseline,
                c.system,
                METRIC_TITLES.get(c.metric, c.metric),
                str(r.n),
                _fmt(100 * r.mean_a),
                _fmt(100 * r.mean_b),
                f"{100 * r.diff:+.1f}",
                f"[{100 * r.low:+.1f}, {100 * r.high:+.1f}]",
                f"{r.p_value:.3f}",
                f"{c.sign.b_better} / {c.sign.a_better}" if c.sign else "–",
                f"{c.sign.p_value:.3f}" if c.sign else "–",
            ]
        )
    return cols, rows


def breakdown_tables(summaries: Sequence[RunSummary], metrics: Sequence[str] = DEFAULT_TABLE_METRICS
                     ) -> list[tuple[str, list[str], list[list[str]]]]:
    """Per dataset: (dataset, columns, rows) of each run's scores by question form and by the
    dataset's own type — the first metric per group, every metric on the open questions."""
    out = []
    for dataset in dict.fromkeys(s.dataset for s in summaries):
        mine = [s for s in summaries if s.dataset == dataset]
        groups: list[tuple[str, str, int]] = []  # (axis, group, n)
        for axis in ("form", "type"):
            names = list(dict.fromkeys(g for s in mine for g in s.breakdown.get(axis, {})))
            for g in names:
                n = max(s.breakdown[axis][g].n for s in mine if g in s.breakdown.get(axis, {}))
                groups.append((axis, g, n))
        if not groups:
            continue
        head = METRIC_TITLES.get(metrics[0], metrics[0])
        cols = ["Method"]
        for axis, g, n in groups:
            cols.append(f"{g} {head} (n={n})")
            if axis == "form" and g == "open":
                cols.extend(f"open {METRIC_TITLES.get(m, m)}" for m in metrics[1:])
        cols += [f"{g} turns" for axis, g, _ in groups if axis == "form"]
        rows = []
        for s in mine:
            cells = [s.label]
            for axis, g, _ in groups:
                scores = s.group(axis, g)
                wanted = [metrics[0], *(metrics[1:] if axis == "form" and g == "open" else [])]
                cells.extend(_fmt(100 * scores.metrics[m] if scores and m in scores.metrics else None) for m in wanted)
            cells += [_fmt(sc.retrieval_turns if (sc := s.group(axis, g)) else None, 2) for axis, g, _ in groups if axis == "form"]
            rows.append(cells)
        out.append((dataset, cols, rows))
    return out


def mode_use_rows(summaries: Sequence[RunSummary]) -> tuple[list[str], list[list[str]]]:
    """Searches per mode by question form, for the runs that searched: does a policy route
    different questions differently?"""
    cols = ["Method", "Dataset", "Form", "n", "Turns", "Searches by mode"]
    rows = []
    for s in summaries:
        if not s.calls_by_mode:
            continue
        for g, scores in s.breakdown.get("form", {}).items():
            modes = ", ".join(f"{m} {c}" for m, c in scores.calls_by_mode.items()) or "none"
            rows.append([s.label, s.dataset, g, str(scores.n), _fmt(scores.retrieval_turns, 2), modes])
    return cols, rows


def routing_rows(summaries: Sequence[RunSummary]) -> tuple[list[str], list[list[str]]]:
    cols = ["Method", "Dataset", "n", "Routing acc.", "Gold source used"]
    rows = [
        [s.label, s.dataset, str(r.n), _fmt(100 * r.accuracy), _fmt(100 * r.gold_used)]
        for s in summaries
        if (r := s.routing) is not None
    ]
    return cols, rows


class GoldRouting(BaseModel):
    """How a run routed the questions whose gold source is ``gold``."""

    label: str
    dataset: str
    gold: str
    n: int
    accuracy: float  # first decision == gold
    chosen: dict[str, int]  # first decision ("+"-joined when several sources; "(none)") -> count


def routing_by_gold(runs: Sequence[LoadedRun]) -> list[GoldRouting]:
    """Per run and gold source: routing accuracy and what was chosen instead (a confusion row)."""
    out = []
    for run in runs:
        groups: dict[str, list[RoutingOutcome]] = {}
        for record in run.records:
            if record.routing is not None:
                groups.setdefault(record.routing.gold_source, []).append(record.routing)
        for gold in sorted(groups):
            outcomes = groups[gold]
            chosen: dict[str, int] = {}
            for o in outcomes:
                key = "+".join(o.chosen) or "(none)"
                chosen[key] = chosen.get(key, 0) + 1
            out.append(GoldRouting(label=run.label, dataset=run.header.dataset, gold=gold, n=len(outcomes),
                                   accuracy=sum(o.correct for o in outcomes) / len(outcomes),
                                   chosen=dict(sorted(chosen.items(), key=lambda kv: (-kv[1], kv[0])))))
    return out


def routing_by_gold_rows(rows: Sequence[GoldRouting]) -> tuple[list[str], list[list[str]]]:
    cols = ["Method", "Dataset", "Gold source", "n", "Routing acc.", "First decision (count)"]
    return cols, [
        [r.label, r.dataset, r.gold, str(r.n), _fmt(100 * r.accuracy), ", ".join(f"{k} {v}" for k, v in r.chosen.items())]
        for r in rows
    ]


# ---------------------------------------------------------------- the report


class Report(BaseModel):
    table: MainTable
    comparisons: list[Comparison]
    runs: list[RunSummary]
    warnings: list[str]
    routing_by_gold: list[GoldRouting] = Field(default_factory=list)
    stopping: list[StopEvidence] = Field(default_factory=list)


def build_report(runs: Sequence[LoadedRun], metrics: Sequence[str] = DEFAULT_TABLE_METRICS, *, seed: int = 0,
                 baseline: str | None = None) -> Report:
    warnings = []
    for run in runs:
        if run.summary_matches is False:
            warnings.append(f"{run.path}: summary.json differs from the summary rebuilt from results.jsonl (rebuilt one used)")
        if not run.summary.complete:
            warnings.append(f"{run.path}: incomplete ({run.summary.n_done}/{run.summary.n_questions} questions)")
        if run.summary.n_errors:
            warnings.append(f"{run.path}: {run.summary.n_errors} question(s) failed with an error (scored 0)")
    return Report(
        table=main_table(runs, metrics),
        comparisons=compare_runs(runs, metrics, seed=seed, baseline=baseline),
        runs=[r.summary for r in runs],
        warnings=warnings,
        routing_by_gold=routing_by_gold(runs),
        stopping=[row for run in runs if (row := stop_evidence(run.label, run.header.dataset, run.records)) is not None],
    )


def render_markdown(report: Report) -> str:
    parts = ["# Evaluation report", "", "Scores in %, means over each run's questions.", ""]
    parts.append(markdown_table(table_columns(report.table), table_cells(report.table)))
    note = ("\"open\": the questions whose answer the question does not name (neither yes/no nor one of two "
            "options it names; routerag.corpus.question_types).")
    parts += ["", note, ""]
    tables = breakdown_tables(report.runs, report.table.metrics)
    if tables:
        parts += ["## By question type", ""]
        for dataset, cols, rows in tables:
            parts += [f"### {dataset}", "", markdown_table(cols, rows), ""]
    cols, rows = mode_use_rows(report.runs)
    if rows:
        parts += ["### Retrieval by question form", "", markdown_table(cols, rows), ""]
    if report.stopping:
        parts += ["### When it stops searching", "",
                  "Questions with an answer string (not yes/no), by whether a gold answer was already in the first "
                  "search's hits; a policy that reads its evidence stops more often when it was (routerag.eval.stopping).",
                  "", markdown_table(*stop_evidence_rows(report.stopping)), ""]
    if report.comparisons:
        parts += ["", "## Paired comparisons (bootstrap over shared questions, seeded; exact sign test)", ""]
        parts.append(markdown_table(*comparison_rows(report.comparisons)))
    cols, rows = routing_rows(report.runs)
    if rows:
        parts += ["", "## Routing", ""]
        parts.append(markdown_table(cols, rows))
    if report.routing_by_gold:
        parts += ["", "### Routing by gold source", ""]
        parts.append(markdown_table(*routing_by_gold_rows(report.routing_by_gold)))
    if report.warnings:
        parts += ["", "## Warnings", ""] + [f"- {w}" for w in report.warnings]
    return "\n".join(parts) + "\n"


def write_report(report: Report, out_dir: str | Path) -> dict[str, Path]:
    """Write ``report.md``, ``main_table.csv``, ``comparisons.csv`` and ``report.json``."""
    out = Path(out_dir)
    files = {
        "markdown": out / "report.md",
        "table_csv": out / "main_table.csv",
        "comparisons_csv": out / "comparisons.csv",
        "json": out / "report.json",
    }
    atomic_write_text(files["markdown"], render_markdown(report))
    atomic_write_text(files["table_csv"], _csv(table_columns(report.table), table_cells(report.table)))
    atomic_write_text(files["comparisons_csv"], _csv(*comparison_rows(report.comparisons)))
    atomic_write_text(files["json"], json.dumps(json.loads(report.model_dump_json()), indent=2))
    return files
