"""``routing_report``: is routing worth it on my data? — the job of ``routerag routing-report``.

Over a question set with gold answers (every dataset ``routerag eval`` reads, ``file:<path>``
included) and an index with two or more modes or sources (a prebuilt index directory, or the
dataset's own cached index as ``routerag eval`` builds it), each choice's retrieval outcome is
measured per question (:mod:`routerag.train.router.outcomes`; resumable), then compared with the
oracle, the best fixed choice, retrieving from all and the routers
(:mod:`routerag.train.router.report`), and written as Markdown, JSON and a PNG figure."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from routerag.errors import RouteragError
from routerag.sources.base import MAX_K
from routerag.train.router.keyword_fit import KeywordSettings
from routerag.train.router.report import JSON_NAME, MARKDOWN_NAME, PLOT_NAME, Inputs, LearnedSettings

if TYPE_CHECKING:
    from routerag.corpus.datasets import Dataset
    from routerag.corpus.schema import Question
    from routerag.routing.keyword_rules import KeywordRules
    from routerag.sources.sourceset import SourceSet
    from routerag.train.router.outcomes import OutcomeSettings, QuestionOutcome
    from routerag.train.router.report import RoutingReport

NO_TRAINING_ROUTERS: tuple[str, ...] = ("profile-embedding",)
"""The routers measured per question beside the learned one: those that need neither a model call
nor training (``llm`` needs a chat model and is not part of the report)."""
LLM_NOTE = ("the `llm` router is not measured: it needs a chat model; compare it end to end with `routerag eval` "
            "(e.g. `--strategy hard-route --set params.router=llm`)")


class RoutingReportError(RouteragError, ValueError):
    """A routing report that cannot be made as asked (no gold answers, fewer than two choices, an
    unknown choice, no index, a rules file that cannot be used)."""


class RoutingReportParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    dataset: str = Field(..., description="the questions: a dataset name or file:<path> (every format `routerag eval` reads)")
    out: Path = Field(..., description="the report folder; an existing one is resumed")
    index_dir: Path | None = Field(None, description="a prebuilt index directory; None: the dataset's cached index")
    choices: list[str] = Field(default_factory=list, description="modes or sources compared (default: every one mounted)")
    k: int = Field(5, ge=1, le=MAX_K, description="a choice succeeds when its top k hits hold a gold answer")
    limit: int | None = Field(None, ge=1, description="evenly spaced questions (None: all)")
    components: list[str] = Field(default_factory=lambda: ["dense", "bm25"], description="the dataset's cached index: its components")
    source_mode: str = Field("passage", description="multi-source datasets: the mode each named source is served with")
    learned: LearnedSettings | None = Field(default_factory=LearnedSettings, description="None: no learned router row")
    keyword: KeywordSettings | None = Field(default_factory=KeywordSettings, description="None: no fitted keyword rules row")
    rules: Path | None = Field(None, description="the operator's keyword rules file (YAML), reported as written")
    resamples: int = Field(10_000, ge=100)
    seed: int = 0
    plot: bool = True


@dataclass(frozen=True)
class RoutingReportResult:
    report: RoutingReport
    files: dict[str, Path]
    measured: int  # questions searched now
    resumed: int  # questions whose outcomes were measured before
    plot_skipped: str = ""  # why no figure was written, if none was


def _questions(params: RoutingReportParams) -> tuple[Dataset, list[tuple[int, Question]], int]:
    from routerag.corpus.datasets import load_dataset

    data = load_dataset(params.dataset, n_questions=params.limit)
    with_gold = [(i, q) for i, q in enumerate(data.questions) if any(a.strip() for a in q.answers) and q.question.strip()]
    if not with_gold:
        held = f"none of its {len(data.questions)} questions has" if data.questions else "it holds no questions, hence no"
        raise RoutingReportError(f"{params.dataset}: {held} gold answers; recall@k needs questions with gold answers "
                                 "(an `answer`, `answers` or `golden_answers` field)")
    return data, with_gold, len(data.questions) - len(with_gold)


def _sources(params: RoutingReportParams, data: Dataset) -> tuple[SourceSet, str, list[Path]]:
    """The sources searched, the index they come from (a folder, or ``cache:<name>`` under the
    index cache, wherever it lives), its manifest files."""
    if params.index_dir is not None:
        from routerag.index.bundle import load_index
        from routerag.sources.registry import mount_bundle

        sources, _ = mount_bundle(load_index(params.index_dir))
        return sources, str(params.index_dir.resolve()), [params.index_dir / "manifest.json"]
    if not data.documents():
        raise RoutingReportError(f"{params.dataset} has no passages to index; give a prebuilt index with --index")
    from routerag.run.assemble import build_sources
    from routerag.run.config import RunConfig

    config = RunConfig(dataset=params.dataset, components=params.components, source_mode=params.source_mode)
    sources, manifests = build_sources(data, config)
    root = manifests[0].parent.parent if data.multisource else manifests[0].parent
    return sources, f"cache:{root.name}", manifests


def check_choices(wanted: list[str], mounted: list[str]) -> list[str]:
    """The choices compared: ``wanted`` (default: every mounted mode or source), at least two."""
    unknown = [c for c in wanted if c not in mounted]
    if unknown:
        raise RoutingReportError(f"unknown mode or source {', '.join(unknown)}; the index mounts: {', '.join(mounted) or '(none)'}")
    choices = list(dict.fromkeys(wanted or mounted))
    if len(choices) < 2:
        raise RoutingReportError(f"routing needs two or more modes or sources to choose between; "
                                 f"{'asked for' if wanted else 'the index mounts'} only {', '.join(choices) or '(none)'}")
    return choices


def routing_report(params: RoutingReportParams) -> RoutingReportResult:
    """Measure (resuming what the folder holds), compare and write the report."""
    from routerag import progress
    from routerag.eval.provenance import files_sha256
    from routerag.routing import build_router
    from routerag.train.router.outcomes import OutcomeSettings, OutcomeStore, measure

    data, questions, skipped = _questions(params)
    sources, index, manifests = _sources(params, data)
    choices = check_choices(params.choices, sources.names())
    rules = operator_rules(params.rules, choices)
    settings = OutcomeSettings(dataset=params.dataset, index=index, index_manifest=files_sha256([m for m in manifests if m.is_file()]),
                               choices=choices, k=params.k, routers=list(NO_TRAINING_ROUTERS))
    store = OutcomeStore(params.out, settings)
    done = store.open()
    todo = [(i, q) for i, q in questions if q.qid not in done]
    if todo:
        routers = {name: build_router(name) for name in NO_TRAINING_ROUTERS}
        with progress.step(f"routing report: {len(choices)} choices, top {params.k}", total=len(todo), unit="items",
                           label="questions") as task:
            for record in measure(sources, todo, choices, params.k, routers=routers):
                store.append(record)
                done[record.qid] = record
                task.advance()
    return _write(params, [done[q.qid] for _, q in questions], settings, skipped, rules, measured=len(todo))


def operator_rules(path: Path | None, choices: list[str]) -> KeywordRules | None:
    """The operator's rules file, loaded and checked against the choices compared (before any
    search: a bad file is refused at once)."""
    if path is None:
        return None
    from routerag.routing.base import RoutingError
    from routerag.routing.keyword import load_rules

    try:
        rules = load_rules(path)
        rules.check_choices(choices)
    except RoutingError as exc:
        raise RoutingReportError(str(exc)) from None
    return rules


def _write(params: RoutingReportParams, records: list[QuestionOutcome], settings: OutcomeSettings, skipped: int,
           rules: KeywordRules | None, *, measured: int) -> RoutingReportResult:
    import json

    from routerag.config import atomic_write_text
    from routerag.train.router.report import build_report
    from routerag.train.router.report_markdown import render_markdown

    report = build_report(records, settings, learned=params.learned, keyword=params.keyword, rules=rules,
                          rules_name=params.rules.name if params.rules else "", skipped_no_gold=skipped,
                          resamples=params.resamples, seed=params.seed, notes=[LLM_NOTE])
    out = params.out
    files = {"markdown": out / MARKDOWN_NAME, "json": out / JSON_NAME}
    atomic_write_text(files["markdown"], render_markdown(report))
    atomic_write_text(files["json"], json.dumps(json.loads(report.model_dump_json()), indent=2) + "\n")
    skipped_plot = ""
    if params.plot:
        skipped_plot = _plot(report, out / PLOT_NAME)
        if not skipped_plot:
            files["plot"] = out / PLOT_NAME
    return RoutingReportResult(report, files, measured=measured, resumed=len(records) - measured, plot_skipped=skipped_plot)


def _plot(report: RoutingReport, path: Path) -> str:
    """Write the figure; the reason it was not written ('' when it was)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return "no figure: matplotlib is not installed (`pip install 'routerag[eval]'`)"
    from routerag.eval.plots import CostPoint, plot_recall_vs_cost

    points = [CostPoint(label=r.name, kind=r.kind, cost=r.tokens, recall=r.recall) for r in report.rows]
    plot_recall_vs_cost(points, path, k=report.settings.k, title=f"Routing on {report.settings.dataset}")
    return ""


__all__ = ["Inputs", "KeywordSettings", "LearnedSettings", "RoutingReportError", "RoutingReportParams", "RoutingReportResult", "check_choices",
           "routing_report"]
