"""The run store's disk: the free-space check a run must pass before it is accepted, the reason a
run gives when its store stops taking answers, and the domain errors of both (answered with their
HTTP status by :mod:`routerag.server.domain_errors`)."""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

from routerag.errors import RouteragError

__all__ = ["RunStoreFullError", "RunStoreUnreadableError", "check_free_space", "store_failure"]


class RunStoreFullError(RouteragError, OSError):
    """The run store cannot take a new run: too little free space, or its files cannot be written."""


class RunStoreUnreadableError(RouteragError, OSError):
    """A stored run's files cannot be read back (removed, damaged, or the disk fails)."""


def check_free_space(store: Path, min_free_bytes: int) -> None:
    """Refuse a new run while the store's file system has less than ``min_free_bytes`` free."""
    if min_free_bytes <= 0:
        return
    try:
        free = shutil.disk_usage(store).free
    except OSError as exc:
        raise RunStoreFullError(f"the run store {store} cannot be checked for free space ({exc})") from None
    if free < min_free_bytes:
        raise RunStoreFullError(f"the run store has {free // 2**20} MiB free, less than the {min_free_bytes // 2**20} MiB "
                                "a new run needs (run_store_min_free_mb); free space or remove old runs")


def store_failure(exc: BaseException) -> str:
    """Why an answer could not be saved, in words: a full disk named as such."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"the disk under the run store is full ({type(exc).__name__}: {exc})"
    return f"an answer could not be saved ({type(exc).__name__}: {exc})"
