"""Stored evaluation runs: ``routerag report`` (tables in the papers' layout, paired bootstrap
comparisons and plots) and ``routerag runs compress | uncompress`` (a finished run's records as
``results.jsonl.xz``; every reader and resume accept every form, see :mod:`routerag.eval.runs`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from routerag.errors import RouteragError
from routerag.eval.runs import RunError

if TYPE_CHECKING:
    from routerag.eval.runs import CompressReport

__all__ = ["ReportRequestError", "ReportResult", "RunError", "RunsRequestError", "compress_run", "find_run_dirs",
           "report", "uncompress_run"]


class ReportRequestError(RouteragError, ValueError):
    """A report that cannot be made as asked (a metric the runs lack, an unknown baseline)."""


class RunsRequestError(RouteragError, ValueError):
    """Paths that hold no run directory."""


@dataclass(frozen=True)
class ReportResult:
    markdown: str
    files: dict[str, Path]


def report(runs: Sequence[Path], out: Path, *, metrics: Sequence[str] | None = None, baseline: str | None = None,
           plot_metric: str = "em", plots: bool = True, seed: int = 0) -> ReportResult:
    """The report over stored ``runs`` (the first run per dataset is the baseline of comparisons
    unless ``baseline`` names one), written to ``out`` with its tables and, with ``plots``, figures."""
    from routerag.eval.report import DEFAULT_TABLE_METRICS, build_report, load_runs, render_markdown, write_report

    names = list(metrics or DEFAULT_TABLE_METRICS)
    loaded = load_runs(runs)
    unknown = [m for m in [*names, plot_metric] if not any(m in r.summary.metrics for r in loaded)]
    if unknown:
        known = sorted({m for r in loaded for m in r.summary.metrics})
        raise ReportRequestError(f"metric(s) {', '.join(unknown)} not in these runs; they have: {', '.join(known)}")
    if baseline is not None and not any(r.label == baseline for r in loaded):
        raise ReportRequestError(f"no run is labelled {baseline!r}; labels: {', '.join(dict.fromkeys(r.label for r in loaded))}")
    built = build_report(loaded, names, seed=seed, baseline=baseline)
    files = write_report(built, out)
    if plots:
        from routerag.eval.plots import plot_all

        for path in plot_all(built.runs, built.table, out, plot_metric):
            files[path.stem] = path
    return ReportResult(render_markdown(built), files)


def find_run_dirs(paths: Sequence[Path]) -> list[Path]:
    """Each path is a run directory (it has ``run.json``) or a folder searched for run directories."""
    from routerag.eval.runs import HEADER_NAME

    found: list[Path] = []
    for path in paths:
        if not path.is_dir():
            raise RunsRequestError(f"{path} is not a directory")
        if (path / HEADER_NAME).is_file():
            found.append(path)
        else:
            found.extend(sorted(p.parent for p in path.rglob(HEADER_NAME)))
    if not found:
        raise RunsRequestError(f"no run directory (a folder with {HEADER_NAME}) under {', '.join(map(str, paths))}")
    return found


def compress_run(path: Path) -> CompressReport:
    """Replace the run's ``results.jsonl`` by ``results.jsonl.xz`` (verified before the plain file
    is removed; a ``results.jsonl.gz`` packed earlier is re-packed as xz); :class:`RunError` when
    the run cannot be compressed."""
    from routerag.eval.runs import RunDir

    run = RunDir(path)
    with run.lock():
        return run.results.compress()


def uncompress_run(path: Path) -> Path:
    """Turn the run's ``results.jsonl.xz`` (or ``.gz``) back into ``results.jsonl``; the file it now reads."""
    from routerag.eval.runs import RunDir

    run = RunDir(path)
    with run.lock():
        run.results.unpack()
    return run.results.location
