"""Paired bootstrap over questions: the difference of two systems' mean scores on the same
questions, with a seeded percentile confidence interval."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel


class PairedDifference(BaseModel):
    n: int  # paired questions
    mean_a: float
    mean_b: float
    diff: float  # mean_b - mean_a
    low: float  # confidence interval of diff
    high: float
    confidence: float
    p_value: float  # two-sided: how often the resampled difference falls on the other side of 0
    resamples: int
    seed: int


def paired_bootstrap(
    a: Sequence[float],
    b: Sequence[float],
    *,
    resamples: int = 10_000,
    confidence: float = 0.95,
    seed: int = 0,
) -> PairedDifference:
    """Resample question indices with replacement; report the percentile interval of
    ``mean(b) - mean(a)`` over the resamples."""
    x = np.asarray(a, dtype=np.float64)
    y = np.asarray(b, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"paired scores must be two lists of one length, got {x.shape} and {y.shape}")
    if x.size == 0:
        raise ValueError("no paired questions to compare")
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must lie in (0, 1)")
    delta = y - x
    rng = np.random.default_rng(seed)
    means = np.empty(resamples, dtype=np.float64)
    chunk = max(1, 2_000_000 // x.size)  # bound memory: chunk * n indices at a time
    for start in range(0, resamples, chunk):
        stop = min(resamples, start + chunk)
        idx = rng.integers(0, x.size, size=(stop - start, x.size))
        means[start:stop] = delta[idx].mean(axis=1)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [alpha, 1.0 - alpha])
    diff = float(delta.mean())
    if diff == 0.0:
        p = 1.0
    else:
        other_side = np.mean(means <= 0.0) if diff > 0 else np.mean(means >= 0.0)
        p = float(min(1.0, 2.0 * other_side))
    return PairedDifference(
        n=int(x.size),
        mean_a=float(x.mean()),
        mean_b=float(y.mean()),
        diff=diff,
        low=float(low),
        high=float(high),
        confidence=confidence,
        p_value=p,
        resamples=resamples,
        seed=seed,
    )
