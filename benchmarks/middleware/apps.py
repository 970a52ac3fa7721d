"""Hello world with and without three middlewares, as a surge App and as a
Starlette app (served by uvicorn), for benchmarks.middleware.

``user``: three ``@app.middleware("http")`` functions, each adding one header
(the same code in both frameworks). ``builtin``: the frameworks' own CORS, GZip
(the body is under its minimum size) and session middleware.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.middleware.cors import CORSMiddleware as StarletteCORS
from starlette.middleware.gzip import GZipMiddleware as StarletteGZip
from starlette.middleware.sessions import SessionMiddleware as StarletteSessions
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from surge.http import App
from surge.http.middleware import CORSMiddleware, GZipMiddleware, SessionMiddleware

HELLO = "Hello, world!"
SECRET = "benchmark-secret"
CORS = {"allow_origins": ["https://a.example"], "allow_methods": ["GET"]}


def _tagger(n: int):  # type: ignore[no-untyped-def]
    async def tag(request, call_next):  # type: ignore[no-untyped-def]
        response = await call_next(request)
        response.headers[f"X-Mw-{n}"] = "1"
        return response

    return tag


def _surge_tagger(n: int):  # type: ignore[no-untyped-def]
    async def tag(request, call_next):  # type: ignore[no-untyped-def]
        response = await call_next(request)
        response.add_header(f"X-Mw-{n}", "1")
        return response

    return tag


def surge(kind: str) -> App:
    app = App()
    if kind == "user":
        for n in range(3):
            app.middleware("http")(_surge_tagger(n))
    elif kind == "builtin":
        app.add_middleware(SessionMiddleware, secret_key=SECRET)
        app.add_middleware(GZipMiddleware)
        app.add_middleware(CORSMiddleware, **CORS)

    @app.get("/")
    def hello(request):  # type: ignore[no-untyped-def]
        return HELLO

    return app


async def _hello(request):  # type: ignore[no-untyped-def]
    return PlainTextResponse(HELLO)


def starlette(kind: str) -> Starlette:
    middleware = []
    if kind == "builtin":
        middleware = [
            Middleware(StarletteCORS, **CORS),
            Middleware(StarletteGZip),
            Middleware(StarletteSessions, secret_key=SECRET),
        ]
    if kind == "user":
        # What Starlette's (since removed) @app.middleware("http") registered.
        middleware = [Middleware(BaseHTTPMiddleware, dispatch=_tagger(n)) for n in range(3)]
    return Starlette(routes=[Route("/", _hello)], middleware=middleware)


surge_none = surge("none")
surge_user = surge("user")
surge_builtin = surge("builtin")
starlette_none = starlette("none")
starlette_user = starlette("user")
starlette_builtin = starlette("builtin")
