"""surge's HTTP/1.1 server and micro-framework."""

from surge._core import Headers, Request

from .app import App, Route
from .client import Client, ClientLimits, ClientResponse, Timeout
from .config import Limits
from .datastructures import QueryParams
from .errors import ClientDisconnected, HTTPException
from .forms import FormData, UploadFile
from .response import (
    FileResponse,
    HTMLResponse,
    JSONResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from .routing import NoMatchFound, Router
from .server import Server, serve
from .staticfiles import StaticFiles

__all__ = [
    "App",
    "Client",
    "ClientDisconnected",
    "ClientLimits",
    "ClientResponse",
    "FileResponse",
    "FormData",
    "HTMLResponse",
    "HTTPException",
    "Headers",
    "JSONResponse",
    "Limits",
    "NoMatchFound",
    "QueryParams",
    "RedirectResponse",
    "Request",
    "Response",
    "Route",
    "Router",
    "Server",
    "StaticFiles",
    "StreamingResponse",
    "Timeout",
    "UploadFile",
    "serve",
]
