"""surge's HTTP/1.1 server and micro-framework."""

from surge._core import Headers, Request

from .app import App, Route
from .config import Limits
from .datastructures import QueryParams
from .errors import ClientDisconnected, HTTPException
from .response import (
    FileResponse,
    HTMLResponse,
    JSONResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from .server import Server, serve

__all__ = [
    "App",
    "ClientDisconnected",
    "FileResponse",
    "HTMLResponse",
    "HTTPException",
    "Headers",
    "JSONResponse",
    "Limits",
    "QueryParams",
    "RedirectResponse",
    "Request",
    "Response",
    "Route",
    "Server",
    "StreamingResponse",
    "serve",
]
