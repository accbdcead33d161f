"""How a run that raised is recorded on its trace: the error's text (``Trace.error``) and its
kind (``Trace.error_kind``), so that readers such as the OpenAI-compatible endpoint can tell a
source this service cannot serve from a failed model or remote source without parsing the text."""

from __future__ import annotations

from routerag.llm.base import ModelError
from routerag.sources.base import RetrievalError
from routerag.sources.remote import RemoteSourceError
from routerag.trace import RunErrorKind, Trace

__all__ = ["failure_kind", "record_failure"]


def failure_kind(exc: BaseException) -> RunErrorKind:
    """The kind of a run's failure: ``retrieval`` (a retrieval request that cannot be served),
    ``model`` (a chat model backend failed), ``remote_source`` (a remote retrieval server is
    unreachable or failing) or ``other`` (anything else, e.g. a bug)."""
    if isinstance(exc, RetrievalError):
        return "retrieval"
    if isinstance(exc, ModelError):
        return "model"
    if isinstance(exc, RemoteSourceError):
        return "remote_source"
    return "other"


def record_failure(trace: Trace, exc: BaseException) -> Trace:
    """Record ``exc`` on ``trace``: ``error`` is ``"<ExceptionClass>: <message>"`` (the text
    stored runs have always held) and ``error_kind`` its :func:`failure_kind`."""
    trace.error = f"{type(exc).__name__}: {exc}"
    trace.error_kind = failure_kind(exc)
    return trace
