"""Deterministic question sampling shared by every strategy and run.

RealRoute's protocol evaluates every strategy on the same evenly spaced subset of a question set;
:func:`evenly_spaced` picks indices ``floor(i * len / n)`` for ``i = 0 .. n-1`` — the first item is
always included, picks are spread over the whole file (not just its head, which in several
benchmark files is sorted by question type), and the result depends only on ``len`` and ``n``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


def evenly_spaced_indices(total: int, n: int | None) -> list[int]:
    """``n`` distinct, increasing indices spread evenly over ``range(total)`` (all of them when ``n``
    is None or at least ``total``)."""
    if total < 0:
        raise ValueError("total must be non-negative")
    if n is None or n >= total:
        return list(range(total))
    if n < 0:
        raise ValueError(f"cannot sample {n} items")
    return [(i * total) // n for i in range(n)]


def evenly_spaced(items: Sequence[T], n: int | None) -> list[T]:
    """``n`` items at evenly spaced positions of ``items`` (see :func:`evenly_spaced_indices`)."""
    return [items[i] for i in evenly_spaced_indices(len(items), n)]


def spread_order(n: int) -> list[int]:
    """``range(n)`` reordered so that every prefix is spread over the whole range: positions in
    bit-reversed (van der Corput) order — 0, n/2, n/4, 3n/4, ... Answering a sample in this order
    makes an interrupted run's finished questions an evenly spaced subset of the sample rather
    than its head."""
    if n < 0:
        raise ValueError("n must be non-negative")
    bits = max(1, (n - 1).bit_length())
    out = []
    for i in range(1 << bits):
        p = int(format(i, f"0{bits}b")[::-1], 2)
        if p < n:
            out.append(p)
    return out
