"""The learned router's jobs — ``routerag router labels | strategy-labels | train | show``:
routing labels from retrieval outcomes, strategy labels from stored evaluation runs, the
routers fitted on them (cross-validated by question) and what a trained router holds."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from routerag.errors import RouteragError

if TYPE_CHECKING:
    from routerag.routing.model import RouterManifest
    from routerag.train.router.labels import LabelProvenance, RouteLabel


class RouterRequestError(RouteragError, ValueError):
    """A router job that cannot run as asked (an unknown router, missing label files, a bad plan)."""


# model name -> the label files it is trained on (globs in the labels folder). The shipped `mode`
# model is trained on mode-hotpotqa + mode-musique only: retrained with mode-hotpotqa-distractor as
# well it was worse on the held-out recall@5 of MuSiQue-50 and 2Wiki-100 (docs/experiments/), so that
# set is trained on with `--file` (a test checks the shipped model matches these files).
ROUTER_LABELS: dict[str, tuple[str, ...]] = {
    "mode": ("mode-hotpotqa.jsonl.gz", "mode-musique.jsonl.gz"),
    "source-law-med": ("source-law-med.jsonl.gz",),
    "source-2wiki-multisource": ("source-2wiki-multisource.jsonl.gz",),
    "strategy": ("strategy-*.jsonl.gz",),
}


def default_labels_dir() -> Path:
    """The package's shipped label files."""
    from routerag.routing.learned import shipped_dir

    return shipped_dir() / "labels"


def label_files(name: str, labels: Path) -> list[Path]:
    """The label files in ``labels`` that the router ``name`` is trained on (:data:`ROUTER_LABELS`)."""
    return sorted({p for pattern in ROUTER_LABELS[name] for p in labels.glob(pattern)})


def build_labels(sets: Sequence[str] | None, out: Path | None, *, k: int = 5,
                 eval_sets: Sequence[str] | None = None) -> Iterator[Path]:
    """Build each label set (default: all of ``LABEL_SETS``) into ``out`` (default: the shipped
    labels), yielding each file as it is written; a set's refusal names the set."""
    from routerag.train.router.labels import DEFAULT_EVAL_SETS, LABEL_SETS, build_label_set

    folder = out or default_labels_dir()
    for stem in sets or list(LABEL_SETS):
        try:
            yield build_label_set(stem, folder, k=k, eval_sets=list(eval_sets or DEFAULT_EVAL_SETS))
        except RouteragError as exc:
            raise RouterRequestError(f"{stem}: {exc}") from None


@dataclass(frozen=True)
class StrategyLabels:
    path: Path
    provenance: LabelProvenance
    rows: list[RouteLabel]


def run_plan(items: Sequence[str]) -> dict[str, Path]:
    """``CHOICE=RUN_FOLDER`` items -> ``{choice: folder}``."""
    plan: dict[str, Path] = {}
    for item in items:
        choice, sep, folder = item.partition("=")
        if not sep or not choice or not folder:
            raise RouterRequestError(f"--run {item!r}: expected CHOICE=RUN_FOLDER")
        if choice in plan:
            raise RouterRequestError(f"--run: choice {choice!r} given twice")
        plan[choice] = Path(folder)
    return plan


def build_strategy_labels(plan: Mapping[str, Path], out: Path | None, *, metric: str = "em", threshold: float = 1.0,
                          eval_sets: Sequence[str] | None = None, allow_trained_on: bool = False) -> StrategyLabels:
    """Strategy labels (for ``adaptive``) from one stored run per choice over the same training
    questions, written to ``out`` (default: the shipped labels' ``strategy-<dataset>.jsonl.gz``)."""
    from routerag.train.router.labels import DEFAULT_EVAL_SETS, write_labels
    from routerag.train.router.strategy_labels import strategy_labels

    provenance, rows = strategy_labels(dict(plan), metric=metric, threshold=threshold,
                                       eval_sets=list(eval_sets or DEFAULT_EVAL_SETS), allow_trained_on=allow_trained_on)
    path = write_labels(out or default_labels_dir() / f"strategy-{provenance.dataset}.jsonl.gz", provenance, rows)
    return StrategyLabels(path, provenance, rows)


def router_plan(names: Sequence[str] | None, labels: Path | None, files: Sequence[Path] | None) -> dict[str, list[Path]]:
    """Which label files each router is trained on: ``files`` for one named router, else each
    router of ``names`` (default: all of :data:`ROUTER_LABELS`) on its files in ``labels``."""
    folder = labels or default_labels_dir()
    if files:
        if not names or len(names) != 1:
            raise RouterRequestError("--file needs exactly one --name")
        return {names[0]: list(files)}
    plan: dict[str, list[Path]] = {}
    for name in names or list(ROUTER_LABELS):
        if name not in ROUTER_LABELS:
            raise RouterRequestError(f"unknown router {name!r}; valid: {', '.join(ROUTER_LABELS)} (or --file with --name)")
        found = label_files(name, folder)
        if not found:
            raise RouterRequestError(f"{name}: no label files {', '.join(ROUTER_LABELS[name])} in {folder}; "
                                     "build them with `routerag router labels`")
        plan[name] = found
    return plan


def train_routers(plan: Mapping[str, Sequence[Path]], out: Path | None, *, c: Sequence[float] = (1.0,), folds: int = 5,
                  k: int | None = None, inputs: Sequence[str] = ("embedding+features",)) -> Iterator[tuple[str, Path, RouterManifest]]:
    """Fit, cross-validate (grouped by question) and save each router of ``plan`` under ``out``
    (default: the package's shipped routers), yielding ``(name, folder, manifest)`` as each is saved."""
    from routerag.routing.learned import shipped_dir
    from routerag.train.router.fit import train_router

    root = out or shipped_dir()
    for name, paths in plan.items():
        try:
            manifest = train_router(list(paths), root / name, name, c=list(c), folds=folds, k=k, inputs=list(inputs))
        except RouteragError as exc:
            raise RouterRequestError(f"{name}: {exc}") from None
        yield name, root / name, manifest


def router_manifest(model: str) -> RouterManifest:
    """A trained router's manifest (a shipped router's name or a model folder)."""
    from routerag.routing.learned import resolve_model
    from routerag.routing.model import load_model

    manifest, _ = load_model(resolve_model(model, []))
    return manifest
