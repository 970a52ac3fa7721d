"""The servers' apps for benchmarks/files/run.py; the directory is $BENCH_FILES_DIR.

* ``surge_app``: `App.static("/static", dir)` and a streamed form upload at /upload
* ``surge_sendfile_app``: the same mount with every file sent by sendfile
  (``inline_max=0``), to show what the inline read of small files is worth
* ``asgi_hello``: a trivial ASGI app for granian, whose static route does the work
* ``starlette_app``: Starlette's StaticFiles and ``request.form()`` upload
"""

from __future__ import annotations

import os
from pathlib import Path

DIR = Path(os.environ.get("BENCH_FILES_DIR", "."))


def _surge(inline_max: int | None = None):
    from surge.http import App

    app = App()
    options = {} if inline_max is None else {"inline_max": inline_max}
    app.static("/static", DIR, **options)

    @app.get("/")
    def index(request):
        return "ok"

    @app.post("/upload", stream=True, max_body_size=64 * 1024 * 1024)
    async def upload(request):
        async with request.form(max_file_size=32 * 1024 * 1024) as form:
            return {"size": form["f"].size}

    return app


if os.environ.get("BENCH_APP") == "surge":
    surge_app = _surge()
if os.environ.get("BENCH_APP") == "surge-sendfile":
    surge_sendfile_app = _surge(inline_max=0)


async def asgi_hello(scope, receive, send):
    """granian's static route answers /static/...; this answers the rest."""
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


if os.environ.get("BENCH_APP") == "starlette":
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, PlainTextResponse
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles

    async def _index(request: Request) -> PlainTextResponse:
        return PlainTextResponse("ok")

    async def _upload(request: Request) -> JSONResponse:
        async with request.form() as form:
            return JSONResponse({"size": form["f"].size})  # type: ignore[union-attr]

    starlette_app = Starlette(
        routes=[
            Route("/", _index),
            Route("/upload", _upload, methods=["POST"]),
            Mount("/static", StaticFiles(directory=DIR)),
        ]
    )
