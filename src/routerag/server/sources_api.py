"""``/v1/sources``: list the mounted and uploaded sources, upload a custom source (multipart),
read one, delete one."""

from __future__ import annotations

from typing import Any

import anyio
from fastapi import APIRouter, Depends, File, Form, UploadFile
from fastapi.responses import JSONResponse
from pydantic import Field

from routerag.server.deps import get_service
from routerag.server.domain_errors import native_reply
from routerag.server.errors import ErrorReply
from routerag.server.service import Service
from routerag.server.upload_parse import (
    RowError,
    UploadConflictError,
    UploadRejected,
    UploadTooLargeError,
    check_name,
    parse_upload,
)
from routerag.server.uploads import CustomSource, SourceEntry

__all__ = ["UPLOAD_ERRORS", "UploadErrorReply", "rejected_reply", "router"]


class UploadErrorReply(ErrorReply):
    errors: list[RowError] = Field(default_factory=list)


UPLOAD_ERRORS: dict[int | str, dict[str, Any]] = {
    409: {"model": ErrorReply, "description": "the name is taken"},
    413: {"model": ErrorReply, "description": "the file is larger than the limit"},
    415: {"model": ErrorReply, "description": "not a JSON or CSV file"},
    422: {"model": UploadErrorReply, "description": "bad name, not UTF-8, too many rows or invalid rows (with lines)"},
}


def rejected_reply(exc: UploadRejected) -> JSONResponse:
    """A refused upload: its status by kind (:mod:`routerag.server.domain_errors`), its message and bad rows."""
    return native_reply(exc)


router = APIRouter(prefix="/v1/sources", tags=["sources"])


@router.get("", response_model=list[SourceEntry], summary="the service's sources and the uploaded ones")
async def list_sources(service: Service = Depends(get_service)) -> list[SourceEntry]:
    base, store = service.sources, service.uploads
    entries = [SourceEntry(name=n, kind="builtin", mode=base.get(n).mode, profile=base.get(n).profile)
               for n in base.names()]
    entries += [SourceEntry(name=m.name, kind="custom", mode="bm25", profile=m.profile, state=m.state,
                            n_docs=m.n_docs, error=m.error) for m in store.list()]
    return entries


@router.post("", response_model=CustomSource, status_code=202, responses=UPLOAD_ERRORS,
             summary="upload a JSON list of {title,text} (or strings) or a CSV text[,title]; indexed in the background")
async def upload(
    file: UploadFile = File(..., description="the corpus file (.json or .csv, UTF-8)"),
    name: str = Form(..., description="the source name: ^[a-z0-9][a-z0-9_-]{0,40}$"),
    profile: str = Form("", description="what the source holds (shown to routing strategies)"),
    service: Service = Depends(get_service),
) -> CustomSource:
    check_name(name)
    store = service.uploads
    limit = store.settings.max_bytes
    data = await file.read(limit + 1)
    if len(data) > limit:
        raise UploadTooLargeError(f"the file is more than {limit} bytes; the limit is {limit}")
    parsed = await anyio.to_thread.run_sync(
        parse_upload, data, file.filename or "", file.content_type or "", store.settings)
    return store.submit(name, profile, parsed)


@router.get("/{name}", response_model=CustomSource, responses={404: {"model": ErrorReply}})
async def get_source(name: str, service: Service = Depends(get_service)) -> CustomSource:
    return service.uploads.get(check_name(name))


@router.delete("/{name}", response_model=CustomSource, responses={404: {"model": ErrorReply}, 409: {"model": ErrorReply}})
async def delete_source(name: str, service: Service = Depends(get_service)) -> CustomSource:
    if name in service.sources.names():
        raise UploadConflictError(f"{name!r} is one of the service's own sources; only uploads can be deleted")
    return service.uploads.delete(check_name(name))
