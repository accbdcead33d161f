"""A trained router model on disk, without pickle: ``manifest.json`` (embedder, features, labels,
costs, training provenance, cross-validation) + ``weights.npz`` (numpy arrays, read with
``allow_pickle=False``). Inference is numpy only: standardise, one logistic unit per label."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field

from routerag.routing.base import RoutingError

FORMAT_VERSION = 1
MANIFEST = "manifest.json"
WEIGHTS = "weights.npz"
ARRAYS = ("mean", "scale", "coef", "intercept")


class RouterManifest(BaseModel):
    format_version: int = FORMAT_VERSION
    name: str
    kind: str  # "mode" | "source"
    labels: list[str]  # one logistic unit per label: P(this choice succeeds)
    # what the classifier reads: the query embedding then the cheap features, or the features alone
    # (embed_dim 0: no embedder is loaded to route)
    inputs: Literal["embedding+features", "features"] = "embedding+features"
    embedder: str  # the embedder identity the model expects (Embedder.identity)
    embedder_version: str = ""  # the installed package version of the embedder's weights
    embed_dim: int
    features: list[str]  # names of the cheap features after the embedding
    features_version: int
    classifier: str = "logistic-regression, one-vs-rest"
    hyperparameters: dict[str, object] = Field(default_factory=dict)
    mode_cost: dict[str, float] = Field(default_factory=dict)  # label -> the rewards' price
    wall_ms: dict[str, float] = Field(default_factory=dict)  # label -> mean measured retrieval ms in the training labels
    training: list[dict[str, object]] = Field(default_factory=list)  # provenance of each label file used
    rows: int = 0
    questions: int = 0
    cv: dict[str, object] = Field(default_factory=dict)  # grouped cross-validation results
    train_seconds: float = 0.0
    created: str = ""


class RouterWeights:
    """The arrays: ``mean``/``scale`` (D) standardise the input; ``coef`` (L x D) and ``intercept`` (L)."""

    def __init__(self, mean: np.ndarray, scale: np.ndarray, coef: np.ndarray, intercept: np.ndarray) -> None:
        self.mean = np.asarray(mean, dtype=np.float32)
        self.scale = np.asarray(scale, dtype=np.float32)
        self.coef = np.asarray(coef, dtype=np.float32)
        self.intercept = np.asarray(intercept, dtype=np.float32)
        d = self.mean.shape[0]
        if self.scale.shape != (d,) or self.coef.ndim != 2 or self.coef.shape[1] != d or self.intercept.shape != (self.coef.shape[0],):
            raise RoutingError(f"inconsistent router weights: mean {self.mean.shape}, scale {self.scale.shape}, "
                             f"coef {self.coef.shape}, intercept {self.intercept.shape}")

    def predict(self, x: np.ndarray) -> np.ndarray:
        """P(success) per label for each row of ``x`` (N x D) -> N x L."""
        z = ((np.atleast_2d(x) - self.mean) / self.scale) @ self.coef.T + self.intercept
        return 1.0 / (1.0 + np.exp(-z))


def save_model(directory: str | Path, manifest: RouterManifest, weights: RouterWeights) -> Path:
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(directory / WEIGHTS, **{name: getattr(weights, name) for name in ARRAYS})
    (directory / MANIFEST).write_text(manifest.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return directory


def load_model(directory: str | Path) -> tuple[RouterManifest, RouterWeights]:
    directory = Path(directory)
    try:
        manifest = RouterManifest.model_validate_json((directory / MANIFEST).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RoutingError(f"{directory}: not a router model (no {MANIFEST})") from None
    except ValueError as exc:
        raise RoutingError(f"{directory / MANIFEST}: invalid router manifest ({str(exc).splitlines()[0]})") from None
    if manifest.format_version != FORMAT_VERSION:
        raise RoutingError(f"{directory}: router format {manifest.format_version}, this code reads {FORMAT_VERSION}")
    try:
        with np.load(directory / WEIGHTS, allow_pickle=False) as arrays:
            weights = RouterWeights(*(arrays[name] for name in ARRAYS))
    except (OSError, KeyError, ValueError) as exc:
        raise RoutingError(f"{directory / WEIGHTS}: unreadable router weights ({exc})") from None
    expected = manifest.embed_dim + len(manifest.features)
    if weights.coef.shape != (len(manifest.labels), expected):
        raise RoutingError(f"{directory}: weights are {weights.coef.shape}, the manifest says "
                         f"{len(manifest.labels)} labels x {expected} inputs")
    return manifest, weights


def manifest_json(manifest: RouterManifest) -> str:
    return json.dumps(manifest.model_dump(mode="json"), indent=2)
