"""The routing reports the service shows: folders under its data folder's ``reports/``, each written
by ``routerag routing-report --out <data_dir>/reports/<name>`` (the operator runs it; a request
only names a report, and nothing outside that folder is ever opened)."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel, ValidationError

from routerag.errors import RouteragError
from routerag.train.router.report import JSON_NAME, PLOT_NAME, RoutingReport

__all__ = ["NAME_PATTERN", "ReportEntry", "ReportStore", "ReportUnreadableError", "UnknownReportError"]

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,79}$"
_NAME = re.compile(NAME_PATTERN)
MAX_JSON_BYTES = 8 * 2**20


class UnknownReportError(RouteragError, LookupError):
    """No routing report of that name in the service's reports folder."""


class ReportUnreadableError(RouteragError, OSError):
    """A stored routing report's files cannot be read or are not a routing report."""


class ReportEntry(BaseModel):
    name: str
    dataset: str
    questions: int
    k: int
    choices: list[str]
    best_fixed: str
    headroom: float
    verdict: str
    plot: bool  # the folder holds the figure (GET /v1/routing-reports/{name}/plot)


class ReportStore:
    """Reads ``root/<name>/routing-report.{json,png}``; never writes."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _folder(self, name: str) -> Path:
        if not _NAME.match(name):
            raise UnknownReportError(f"no routing report named {name!r} (names match {NAME_PATTERN})")
        folder = self.root / name
        try:
            inside = folder.resolve().is_relative_to(self.root.resolve())
        except OSError:
            inside = False
        if not inside or not (folder / JSON_NAME).is_file():
            raise UnknownReportError(f"no routing report named {name!r} in the service's reports folder")
        return folder

    def report(self, name: str) -> RoutingReport:
        path = self._folder(name) / JSON_NAME
        try:
            if path.stat().st_size > MAX_JSON_BYTES:
                raise ReportUnreadableError(f"routing report {name!r}: its JSON is larger than {MAX_JSON_BYTES // 2**20} MiB")
            return RoutingReport.model_validate_json(path.read_bytes())
        except (OSError, ValidationError) as exc:
            raise ReportUnreadableError(f"routing report {name!r} cannot be read: {type(exc).__name__}: "
                                        f"{str(exc).splitlines()[0]}") from None

    def plot(self, name: str) -> Path:
        path = self._folder(name) / PLOT_NAME
        if not path.is_file():
            raise UnknownReportError(f"routing report {name!r} has no figure (it was written without matplotlib)")
        return path

    def list(self) -> list[ReportEntry]:
        """Every readable report, by name; an unreadable folder is left out (its GET says why)."""
        if not self.root.is_dir():
            return []
        entries = []
        for folder in sorted(self.root.iterdir()):
            try:
                report = self.report(folder.name)
            except (UnknownReportError, ReportUnreadableError):
                continue
            s = report.settings
            entries.append(ReportEntry(name=folder.name, dataset=s.dataset, questions=report.questions, k=s.k,
                                       choices=list(s.choices), best_fixed=report.best_fixed, headroom=report.headroom,
                                       verdict=report.verdict, plot=(folder / PLOT_NAME).is_file()))
        return entries
