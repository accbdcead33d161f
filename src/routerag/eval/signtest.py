"""The exact sign test of a paired comparison (McNemar's test for right/wrong scores): among the
questions where the two systems' scores differ, how unlikely is a split at least this uneven if
either system were as likely to be the better one? An exact two-sided binomial test
(``scipy.stats.binomtest``, p = 0.5) on the counts of questions each system scores higher."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel


class SignTest(BaseModel):
    b_better: int  # questions where system b scored higher than a
    a_better: int  # questions where a scored higher
    ties: int
    p_value: float  # exact two-sided binomial p over the b_better + a_better discordant questions


def sign_test(a: Sequence[float], b: Sequence[float]) -> SignTest:
    """The exact sign test of ``b`` against ``a`` (paired scores of the same questions)."""
    from scipy.stats import binomtest

    if len(a) != len(b):
        raise ValueError(f"paired scores must be two lists of one length, got {len(a)} and {len(b)}")
    b_better = sum(1 for x, y in zip(a, b) if y > x)
    a_better = sum(1 for x, y in zip(a, b) if y < x)
    discordant = b_better + a_better
    p = float(binomtest(b_better, discordant, 0.5).pvalue) if discordant else 1.0
    return SignTest(b_better=b_better, a_better=a_better, ties=len(a) - discordant, p_value=min(1.0, p))
