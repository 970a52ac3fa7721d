"""The Starlette side of the differential tests (run under uvicorn): the same
static directory and the same form dump as files_app.py."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from starlette.applications import Starlette
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

ROOT = Path(os.environ["SURGE_FILES_ROOT"])


async def dump(request: Request) -> JSONResponse:
    out: list = []
    async with request.form() as form:
        for key, value in form.multi_items():
            if isinstance(value, UploadFile):
                data = await value.read()
                out.append(
                    [
                        key,
                        {
                            "filename": value.filename,
                            "content_type": value.content_type,
                            "size": len(data),
                            "sha256": hashlib.sha256(data).hexdigest(),
                        },
                    ]
                )
            else:
                out.append([key, value])
    return JSONResponse(out)


async def file(request: Request) -> FileResponse:
    return FileResponse(ROOT / "public" / request.path_params["name"])


app = Starlette(
    routes=[
        Route("/form", dump, methods=["POST"]),
        Route("/upload", dump, methods=["POST"]),
        Route("/file/{name}", file),
        Mount("/static", StaticFiles(directory=ROOT / "public")),
        Mount("/site", StaticFiles(directory=ROOT / "public", html=True)),
    ]
)
