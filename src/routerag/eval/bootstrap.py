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


def resampled_means(columns: np.ndarray, *, resamples: int, seed: int) -> np.ndarray:
    """Means of each column of ``columns`` (questions x series) over ``resamples`` resamples of the
    questions with replacement, the same resampled questions for every series: (resamples x series)."""
    n = columns.shape[0]
    rng = np.random.default_rng(seed)
    means = np.empty((resamples, columns.shape[1]), dtype=np.float64)
    chunk = max(1, 2_000_000 // n)  # bound memory: chunk * n indices at a time
    for start in range(0, resamples, chunk):
        stop = min(resamples, start + chunk)
        idx = rng.integers(0, n, size=(stop - start, n))
        means[start:stop] = columns[idx].mean(axis=1)
    return means


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
    means = resampled_means(delta[:, None], resamples=resamples, seed=seed)[:, 0]
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


class RecoveredShare(BaseModel):
    """How much of the headroom between a baseline and a ceiling a system recovers on the same
    questions: ``(mean(system) - mean(baseline)) / (mean(ceiling) - mean(baseline))``."""

    n: int
    gain: float  # mean(system) - mean(baseline)
    headroom: float  # mean(ceiling) - mean(baseline)
    share: float | None  # gain / headroom; None without headroom
    low: float | None  # percentile interval of the share over the resamples that have headroom
    high: float | None
    confidence: float
    resamples: int
    seed: int


def recovered_share(
    baseline: Sequence[float],
    system: Sequence[float],
    ceiling: Sequence[float],
    *,
    resamples: int = 10_000,
    confidence: float = 0.95,
    seed: int = 0,
) -> RecoveredShare:
    """The share of the ceiling's headroom over the baseline that ``system`` recovers, with a
    paired bootstrap interval: the three series are resampled together (the same questions), the
    share computed in each resample; resamples without headroom (the ceiling no better than the
    baseline on them) are left out of the interval."""
    cols = np.asarray([baseline, system, ceiling], dtype=np.float64).T
    if cols.ndim != 2 or cols.shape[0] == 0:
        raise ValueError("no paired questions to compare")
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must lie in (0, 1)")
    base, sys_, top = cols.mean(axis=0)
    gain, headroom = float(sys_ - base), float(top - base)
    share = gain / headroom if headroom > 0 else None
    low = high = None
    if share is not None:
        means = resampled_means(cols, resamples=resamples, seed=seed)
        room = means[:, 2] - means[:, 0]
        kept = room > 0
        shares = (means[kept, 1] - means[kept, 0]) / room[kept]
        alpha = (1.0 - confidence) / 2.0
        low, high = (float(v) for v in np.quantile(shares, [alpha, 1.0 - alpha]))
    return RecoveredShare(n=int(cols.shape[0]), gain=gain, headroom=headroom, share=share, low=low, high=high,
                          confidence=confidence, resamples=resamples, seed=seed)
