"""The same small app behind gzip compression, as a surge App (``surge_app``,
`GZipMiddleware`) and as a Starlette app (``starlette_app``, Starlette's
`GZipMiddleware`), for the differential test."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.gzip import GZipMiddleware as StarletteGZip
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route
from surge.http import App
from surge.http import Response as SurgeResponse
from surge.http import StreamingResponse as SurgeStreaming
from surge.http.middleware import GZipMiddleware

BIG = "surge compresses this line.\n" * 100
SMALL = "tiny"
PNG = bytes(range(256)) * 8
LINES = [f"line {i}\n" for i in range(300)]


def surge_app() -> App:
    app = App()
    app.add_middleware(GZipMiddleware, minimum_size=500)

    @app.get("/big")
    def big(request):
        return BIG

    @app.get("/small")
    def small(request):
        return SMALL

    @app.get("/png")
    def png(request):
        return SurgeResponse(PNG, content_type="image/png")

    @app.get("/encoded")
    def encoded(request):
        return SurgeResponse(BIG, headers={"Content-Encoding": "identity-ish"})

    @app.get("/stream")
    def stream(request):
        return SurgeStreaming(iter(LINES), content_type="text/plain")

    return app


def _starlette() -> Starlette:
    async def big(request):
        return PlainTextResponse(BIG)

    async def small(request):
        return PlainTextResponse(SMALL)

    async def png(request):
        return Response(PNG, media_type="image/png")

    async def encoded(request):
        return PlainTextResponse(BIG, headers={"Content-Encoding": "identity-ish"})

    async def stream(request):
        async def lines():
            for line in LINES:
                yield line

        return StreamingResponse(lines(), media_type="text/plain")

    routes = [
        Route("/big", big),
        Route("/small", small),
        Route("/png", png),
        Route("/encoded", encoded),
        Route("/stream", stream),
    ]
    return Starlette(routes=routes, middleware=[Middleware(StarletteGZip, minimum_size=500)])


surge = surge_app()
starlette_app = _starlette()
