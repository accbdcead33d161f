"""Keep BLAS from fighting torch for the cores.

numpy's OpenBLAS and torch's OpenMP each keep their own worker threads; OpenBLAS workers spin for
a while after a product, so a numpy matrix-vector product right before a torch query embedding
slows the embedding down by 2-3x on a 2-core machine. Score products over a few thousand vectors
are memory-bound anyway, so they run on one BLAS thread inside :func:`single_threaded_blas`."""

from __future__ import annotations

from collections.abc import Iterator
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
