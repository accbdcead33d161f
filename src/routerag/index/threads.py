"""Thread budgets: keep BLAS from fighting torch for the cores, and split bulk model work into
single-threaded workers.

numpy's OpenBLAS and torch's OpenMP each keep their own worker threads; OpenBLAS workers spin for
a while after a product, so a numpy matrix-vector product right before a torch query embedding
slows the embedding down by 2-3x on a 2-core machine. Score products over a few thousand vectors
are memory-bound anyway, so they run on one BLAS thread inside :func:`single_threaded_blas`.

Bulk embedding (index builds) runs many small forward passes; splitting each small matrix product
over torch's intra-op threads gains little, so :func:`one_thread_per_worker` gives each of
``bulk_workers()`` Python threads one torch thread instead (torch releases the GIL inside its ops)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from functools import lru_cache
from typing import Any


@lru_cache(maxsize=1)
def _controller() -> Any:
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()  # inspecting the loaded libraries is slow: once per process


@contextmanager
def single_threaded_blas() -> Iterator[None]:
    with _controller().limit(limits=1, user_api="blas"):
        yield


def bulk_workers() -> int:
    """Worker threads for bulk model work: torch's intra-op thread budget, at most one per core."""
    import torch

    return max(1, min(torch.get_num_threads(), os.cpu_count() or 1))


@contextmanager
def one_thread_per_worker(workers: int) -> Iterator[ThreadPoolExecutor]:
    """A pool of ``workers`` threads whose torch ops each run on one thread; torch's thread count
    is restored afterwards. Threads started inside pick up torch's thread count at their first op,
    so the pool is created after it is lowered."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="routerag-embed") as pool:
            yield pool
    finally:
        torch.set_num_threads(previous)
