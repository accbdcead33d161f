"""Serve the static web UI (``src/routerag/web``: HTML, CSS and ES modules, no build step) at ``/``."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

WEB_DIR = Path(__file__).resolve().parent.parent / "web"
# the UI talks only to this origin and runs only its own scripts
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
       "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'")


def mount_ui(app: FastAPI) -> None:
    if not (WEB_DIR / "index.html").is_file():
        raise FileNotFoundError(f"{WEB_DIR / 'index.html'}: the web UI is missing from the package")

    @app.get("/", include_in_schema=False)
    async def index() -> FileResponse:
        return FileResponse(WEB_DIR / "index.html", media_type="text/html",
                            headers={"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff",
                                     "Cache-Control": "no-cache"})

    app.mount("/ui", StaticFiles(directory=WEB_DIR), name="ui")
