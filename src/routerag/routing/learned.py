"""The ``learned`` router: a small classifier trained on routing outcomes
(:mod:`routerag.train.router.labels`, :mod:`routerag.train.router.fit`) scores each choice's probability
of success from the query's sentence embedding (the bundled all-MiniLM-L6-v2) and cheap query
features (:mod:`routerag.routing.features`); no model call.

Cost-aware: among the choices offered, the cheapest whose predicted success is within ``margin``
of the best is chosen (``margin=0``: the most likely to succeed). Costs are the model's per-label
prices (the rewards' per-mode costs; sources cost the same).

Models ship with the package (``routerag/data/routers/<name>/``); without an explicit model the
router uses the shipped model whose labels cover the choices offered (the mounted sources, or the
allowed modes)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

from routerag.routing.base import RouterDeps, RouteResult, RoutingError, ranked_by_score
from routerag.routing.features import feature_names, input_rows
from routerag.routing.model import MANIFEST, WEIGHTS, RouterManifest, RouterWeights, load_model

QUERY_CHARS = 1500  # as the profile-embedding router: the gist is enough to route


def shipped_dir() -> Path:
    return Path(__file__).resolve().parent.parent / "data" / "routers"


def shipped_models() -> dict[str, Path]:
    root = shipped_dir()
    return {p.parent.name: p.parent for p in sorted(root.glob(f"*/{MANIFEST}"))} if root.is_dir() else {}


def resolve_model(model: str | None, choices: Sequence[str]) -> Path:
    """``model`` as a shipped model's name or a directory; without one, the shipped model whose
    labels cover ``choices``."""
    shipped = shipped_models()
    if model:
        if model in shipped:
            return shipped[model]
        path = Path(model).expanduser()
        if (path / MANIFEST).is_file():
            return path
        raise RoutingError(f"no router model {model!r}: not a shipped one ({', '.join(shipped) or 'none'}) nor a directory with {MANIFEST}")
    wanted = set(choices)
    for name, path in shipped.items():
        manifest, _ = _load(str(path))
        if wanted and wanted <= set(manifest.labels):
            return path
    raise RoutingError(f"no shipped router model covers the choices {sorted(wanted)}; shipped: "
                     f"{', '.join(shipped) or 'none'} (train one with `routerag router train`)")


def model_fingerprint(model: str | None, choices: Sequence[str]) -> str:
    """What a run's fingerprint holds for the learned router it would use (:func:`resolve_model`):
    the content hash of its manifest and weights, so that a retrained shipped router (same name,
    new weights) makes a new fingerprint and a run is never resumed across the two."""
    from routerag.filehash import file_sha256

    path = resolve_model(model, choices)
    return "sha256:" + file_sha256(path / MANIFEST, what="router manifest")[:16] + \
        file_sha256(path / WEIGHTS, what="router weights")[:16]


def shipped_fingerprint() -> str:
    """The content hash of every shipped router model (name, manifest, weights): what a run
    fingerprints when its learned router is "the shipped one covering the mounted sources", which
    are known only once they are mounted. Retraining any shipped router makes a new fingerprint,
    so such a run is never resumed across two routers (conservatively also when another shipped
    router changed)."""
    parts = [f"{name}:{model_fingerprint(str(path), [])}" for name, path in shipped_models().items()]
    if not parts:
        raise RoutingError("no shipped router model (train one with `routerag router train`)")
    return "sha256:" + hashlib.sha256("\n".join(parts).encode()).hexdigest()[:32]


@lru_cache(maxsize=16)
def _load(path: str) -> tuple[RouterManifest, RouterWeights]:
    return load_model(path)


def cost_aware_choice(probs: Mapping[str, float], costs: Mapping[str, float], margin: float) -> str:
    """The cheapest choice whose probability is within ``margin`` of the best (ties: the more
    probable, then the order given)."""
    best = max(probs.values())
    near = [n for n, p in probs.items() if p >= best - margin - 1e-12]
    return min(near, key=lambda n: (costs.get(n, 1.0), -probs[n]))


class LearnedRouter:
    name = "learned"

    def __init__(self, manifest: RouterManifest, weights: RouterWeights, *, embedder=None, margin: float = 0.0,
                 model_path: str = "") -> None:
        try:
            known = feature_names(manifest.features_version)
        except ValueError as exc:
            raise RoutingError(f"router {manifest.name!r}: {exc}") from None
        if tuple(manifest.features) != known:
            raise RoutingError(f"router {manifest.name!r} was trained on features v{manifest.features_version} "
                             f"{manifest.features}; this code's v{manifest.features_version} is {list(known)}")
        self.manifest = manifest
        self.weights = weights
        self.margin = margin
        self.model_path = model_path
        self._embedder = embedder

    @classmethod
    def load(cls, path: str | Path, **kwargs) -> "LearnedRouter":
        manifest, weights = _load(str(Path(path)))
        return cls(manifest, weights, model_path=str(path), **kwargs)

    @property
    def embedder(self):
        if self._embedder is None:
            from routerag.index.embedder import build_embedder

            self._embedder = build_embedder()
        if self._embedder.identity != self.manifest.embedder:
            raise RoutingError(f"router {self.manifest.name!r} expects the embedder {self.manifest.embedder!r}, "
                             f"got {self._embedder.identity!r}")
        return self._embedder

    def inputs(self, queries: Sequence[str], embeddings: np.ndarray | None = None) -> np.ndarray:
        """The classifier's input rows: the query embedding (unless the model reads the features
        alone) then the cheap features of the model's feature version."""
        m = self.manifest
        if m.inputs != "features" and embeddings is None:
            embeddings = np.asarray(self.embedder.encode([q[:QUERY_CHARS] for q in queries], is_query=True), dtype=np.float32)
        return input_rows(list(queries), embeddings, inputs=m.inputs, version=m.features_version)

    def predict(self, queries: Sequence[str], embeddings: np.ndarray | None = None) -> np.ndarray:
        """P(success) of every label (N x L, in ``manifest.labels`` order)."""
        return self.weights.predict(self.inputs(queries, embeddings))

    def decide(self, probs: np.ndarray, choices: Sequence[str] = ()) -> RouteResult:
        """The decision for one row of :meth:`predict` among ``choices`` (default: every label)."""
        labels = self.manifest.labels
        offered = list(choices) or labels
        unknown = [c for c in offered if c not in labels]
        if unknown:
            raise RoutingError(f"router {self.manifest.name!r} knows {labels}, not {unknown}")
        scores = {c: round(float(probs[labels.index(c)]), 4) for c in offered}
        chosen = cost_aware_choice(scores, self.manifest.mode_cost, self.margin)
        reason = f"learned router {self.manifest.name}: P(success) " + ", ".join(f"{n} {v:.3f}" for n, v in scores.items())
        if self.margin:
            reason += f"; cheapest within {self.margin:g} of the best"
        return RouteResult(ranked=ranked_by_score(scores, first=chosen), reason=reason,
                           metadata={"router": self.name, "router_model": self.manifest.name, "scores": scores,
                                     "margin": self.margin})

    def route(self, query: str, choices: Mapping[str, str]) -> RouteResult:
        return self.decide(self.predict([query])[0], list(choices))

    def route_batch(self, queries: Sequence[str], choices: Sequence[str] = ()) -> list[RouteResult]:
        return [self.decide(row, choices) for row in self.predict(queries)]


class LearnedRouterForChoices:
    """The ``learned`` router as the registry builds it: the model is named (``deps.model``) or
    found by the choices offered at the first route."""

    name = "learned"

    def __init__(self, model: str | None, margin: float) -> None:
        self.model = model
        self.margin = margin
        self._routers: dict[str, LearnedRouter] = {}

    def router_for(self, choices: Sequence[str]) -> LearnedRouter:
        path = str(resolve_model(self.model, choices))
        if path not in self._routers:
            self._routers[path] = LearnedRouter.load(path, margin=self.margin)
        return self._routers[path]

    def route(self, query: str, choices: Mapping[str, str]) -> RouteResult:
        return self.router_for(list(choices)).route(query, choices)


def learned_router(deps: RouterDeps) -> LearnedRouterForChoices:
    return LearnedRouterForChoices(deps.model, deps.margin)
