"""The README's results table, generated from stored runs so that it cannot drift from them.

Which runs make the table is declared in a small YAML file (:class:`ResultsTableSpec`, by default
``docs/results/readme-table.yaml``): the datasets (columns) and, per row, one run folder per
dataset and the row it is compared with. Every number comes from the report code
(:func:`routerag.eval.report.main_table` for the scores and costs,
:func:`routerag.eval.report.compare_runs` for the paired bootstrap interval and the exact sign
test), so the README and ``routerag report`` cannot disagree. The table is written between
:data:`START_MARKER` and :data:`END_MARKER` (``routerag docs results-table``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from routerag.errors import RouteragError
from routerag.eval.report import Comparison, LoadedRun, compare_runs, load_runs, main_table

START_MARKER = "<!-- results:start -->"
END_MARKER = "<!-- results:end -->"
METRIC = "em"
SUBSET = "open"  # the compared subset: the open-answer questions


class ResultsTableError(RouteragError, ValueError):
    """A table specification or a README that cannot be used."""


class DatasetColumn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="the dataset name the runs carry (run.json)")
    title: str = Field(description="the column title (e.g. 2Wiki-100)")


class TableRowSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(description="the row's name, used by other rows' `baseline`")
    title: str = Field(description="the row's name in the table")
    base: str = Field(description="the base model column (\"none\" for a rule without a model)")
    runs: dict[str, str] = Field(description="dataset name -> run folder, relative to the spec file")
    baseline: str | None = Field(None, description="the row this one is compared with on open-answer EM")
    model: str | None = Field(None, description="the model every run of the row used (its identity's model part), checked")
    policy: str | None = Field(None, description="the shipped policy (data/policies/NAME) whose adapter every run "
                                                "of the row applied, checked against the adapter's sha256")


class ResultsTableSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    datasets: list[DatasetColumn] = Field(min_length=1)
    rows: list[TableRowSpec] = Field(min_length=1)
    resamples: int = Field(10_000, ge=100, description="bootstrap resamples")
    seed: int = Field(0, description="bootstrap seed")

    @model_validator(mode="after")
    def _check(self) -> ResultsTableSpec:
        names = [d.name for d in self.datasets]
        ids = [r.id for r in self.rows]
        if len(set(ids)) != len(ids):
            raise ValueError(f"row ids must be unique: {ids}")
        for row in self.rows:
            if set(row.runs) != set(names):
                raise ValueError(f"row {row.id!r} must name one run per dataset {names}, has {sorted(row.runs)}")
            if row.baseline is not None and (row.baseline not in ids or row.baseline == row.id):
                raise ValueError(f"row {row.id!r}: baseline {row.baseline!r} is not another row")
        return self


SpecT = TypeVar("SpecT", bound=BaseModel)


def load_table_spec(path: str | Path, model: type[SpecT], what: str) -> SpecT:
    """A table specification file (YAML) read into ``model``; one clear error when it cannot be."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ResultsTableError(f"cannot read the {what} specification {path}: {exc}") from None
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise ResultsTableError(f"{path}: {exc}") from None


def load_spec(path: str | Path) -> ResultsTableSpec:
    return load_table_spec(path, ResultsTableSpec, "results table")


def _check_model(row: TableRowSpec, run: LoadedRun) -> None:
    """The run used the row's model and, for a policy row, the shipped adapter as it is now."""
    identity = run.header.versions.model or ""
    parts = identity.split("|")
    if row.model is not None and (len(parts) < 2 or parts[1] != row.model):
        raise ResultsTableError(f"{run.path}: row {row.id!r} names model {row.model!r}, the run used {identity!r}")
    if row.policy is not None:
        check_policy(row.id, row.policy, run)


def check_policy(row_id: str, policy: str, run: LoadedRun) -> None:
    """The run applied the shipped policy ``policy``'s adapter as it is now (its identity's ``lora=<sha16>``)."""
    from routerag.filehash import file_sha256
    from routerag.llm.config import bundled_policy_path, policy_dir, recorded_adapter_sha256

    identity = run.header.versions.model or ""
    sha = recorded_adapter_sha256(policy_dir(policy)) or file_sha256(bundled_policy_path(policy), what="LoRA adapter")
    expected = f"lora={sha[:16]}@1"
    if expected not in identity.split("|"):
        raise ResultsTableError(f"{run.path}: row {row_id!r} names the shipped policy {policy!r} ({expected}), "
                                f"the run used {identity!r}; evaluate the shipped adapter and list that run")


def percent(value: float | None) -> str:
    """A percentage cell (``–``: not run)."""
    return "–" if value is None else f"{value:.1f}"


def delta_cell(diff: float, low: float, high: float, p_value: float | None) -> str:
    """A paired difference (fractions) as ``+d [low, high], p P``, bold where the interval excludes 0
    and the sign test's p < 0.05."""
    text = f"{100 * diff:+.1f} [{100 * low:+.1f}, {100 * high:+.1f}]"
    if (low > 0 or high < 0) and p_value is not None and p_value < 0.05:
        text = f"**{text}**"  # the interval excludes 0 and the sign test agrees
    return f"{text}, p {p_value:.3f}" if p_value is not None else text


def open_em_comparison(baseline: LoadedRun, run: LoadedRun, *, resamples: int, seed: int) -> Comparison:
    """``run`` against ``baseline`` on the open-answer questions both answered: EM's paired
    bootstrap interval and exact sign test (:func:`routerag.eval.report.compare_runs`)."""
    found = compare_runs([baseline, run], [METRIC], resamples=resamples, seed=seed, subsets=(SUBSET,))
    if len(found) != 1 or found[0].result.n == 0:
        raise ResultsTableError(f"{run.path} and {baseline.path} share no open-answer question on {run.header.dataset}")
    return found[0]


def _delta(c: Comparison) -> str:
    return delta_cell(c.result.diff, c.result.low, c.result.high, c.sign.p_value if c.sign is not None else None)


def render_table(spec: ResultsTableSpec, root: str | Path) -> str:
    """The markdown block (table and its notes) from the runs ``spec`` names under ``root``."""
    root = Path(root)
    folders = [root / row.runs[d.name] for row in spec.rows for d in spec.datasets]
    runs = load_runs(folders)
    by_cell: dict[tuple[str, str], LoadedRun] = {}
    it = iter(runs)
    for row in spec.rows:
        for d in spec.datasets:
            run = next(it)
            if run.header.dataset != d.name:
                raise ResultsTableError(f"{run.path} is a run on {run.header.dataset!r}, not {d.name!r} (row {row.id!r})")
            if not run.summary.complete:
                raise ResultsTableError(f"{run.path} is incomplete ({run.summary.n_done}/{run.summary.n_questions})")
            _check_model(row, run)
            run.header.label = run.summary.label = row.id  # main_table groups by label: one row per spec row
            by_cell[(row.id, d.name)] = run
    table = {r.label: r for r in main_table(runs, [METRIC]).rows}
    open_n: dict[str, int] = {}
    deltas: dict[tuple[str, str], Comparison] = {}
    for row in spec.rows:
        if row.baseline is None:
            continue
        for d in spec.datasets:
            found = open_em_comparison(by_cell[(row.baseline, d.name)], by_cell[(row.id, d.name)],
                                       resamples=spec.resamples, seed=spec.seed)
            deltas[(row.id, d.name)] = found
            open_n[d.name] = found.result.n
    cols = ["System", "Base"]
    for d in spec.datasets:
        n = f", n={open_n[d.name]}" if d.name in open_n else ""
        cols += [f"{d.title} EM", f"{d.title} open EM{n} (Δ vs vanilla [95% CI], sign-test p)"]
    cols += ["Searches / question", "Seconds / question"]
    lines = ["| " + " | ".join(cols) + " |", "|---|---|" + "---:|" * (len(cols) - 2)]
    for row in spec.rows:
        scores = table[row.id]
        cells = [row.title, row.base]
        for d in spec.datasets:
            cells.append(percent(scores.scores[d.name][METRIC]))
            open_em = percent(scores.open_scores[d.name][METRIC])
            delta = deltas.get((row.id, d.name))
            cells.append(f"{open_em} ({_delta(delta)})" if delta is not None else open_em)
        cells += [f"{scores.retrieval_turns:.2f}", f"{scores.latency_s:.1f}"]
        lines.append("| " + " | ".join(cells) + " |")
    notes = [
        "",
        f"Scores in %. Open EM: the questions whose answer the question does not name (not yes/no, not one of two "
        f"options it names). Δ: paired bootstrap over those questions ({spec.resamples:,} resamples, seed {spec.seed}) "
        "against the vanilla row on the same base, and the exact sign test; bold where the interval excludes 0 and the sign "
        "test's p < 0.05; an interval that crosses 0 means no significant difference. Searches and seconds are means over all "
        "questions of the three sets; the runs were made at different times on shared CPUs, so seconds compare only "
        "roughly across rows. Generated from the runs listed in `docs/results/readme-table.yaml` by "
        "`routerag docs results-table`.",
    ]
    return "\n".join(lines + notes)


def replace_block(text: str, block: str, markers: tuple[str, str] = (START_MARKER, END_MARKER)) -> str:
    """``text`` with what lies between the markers replaced by ``block``."""
    first, last = markers
    start, end = text.find(first), text.find(last)
    if start < 0 or end < 0 or end < start or text.count(first) != 1 or text.count(last) != 1:
        raise ResultsTableError(f"the README must hold {first} then {last}, once each")
    return text[: start + len(first)] + "\n" + block.strip("\n") + "\n" + text[end:]


def current_block(text: str, markers: tuple[str, str] = (START_MARKER, END_MARKER)) -> str:
    """What lies between the markers now (the empty string when they are missing)."""
    first, last = markers
    start, end = text.find(first), text.find(last)
    if start < 0 or end < start:
        return ""
    return text[start + len(first) : end].strip("\n")


__all__: Sequence[str] = [
    "END_MARKER",
    "START_MARKER",
    "ResultsTableError",
    "ResultsTableSpec",
    "current_block",
    "delta_cell",
    "load_spec",
    "load_table_spec",
    "open_em_comparison",
    "percent",
    "render_table",
    "replace_block",
]
