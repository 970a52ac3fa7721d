"""The same small app with the same CORS and session middleware, as a surge App
(``surge_*``) and as a Starlette app (``starlette_*``), for the differential tests."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware as StarletteCORS
from starlette.middleware.sessions import SessionMiddleware as StarletteSessions
from starlette.requests import Request as StarletteRequest
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route
from surge.http import App
from surge.http.middleware import CORSMiddleware, SessionMiddleware

SECRET = "shared-secret"

#: A list of origins, a regex, credentials, exposed headers.
LISTED = {
    "allow_origins": ["https://a.example"],
    "allow_origin_regex": r"https://[a-z]+\.b\.example",
    "allow_methods": ["GET", "POST"],
    "allow_headers": ["X-Token"],
    "allow_credentials": True,
    "expose_headers": ["X-Total"],
    "max_age": 300,
}
#: Everything allowed, no credentials.
OPEN = {"allow_origins": ["*"], "allow_methods": ["*"], "allow_headers": ["*"]}


def surge_app(cors: dict) -> App:
    app = App()
    app.add_middleware(SessionMiddleware, secret_key=SECRET)
    app.add_middleware(CORSMiddleware, **cors)

    @app.get("/")
    def index(request):
        return "hello"

    @app.post("/items")
    def items(request):
        return {"created": True}

    @app.get("/login/{user}")
    def login(request, user):
        request.session["user"] = user
        return "ok"

    @app.get("/me")
    def me(request):
        return {"user": request.session.get("user")}

    return app


async def _index(request: StarletteRequest) -> PlainTextResponse:
    return PlainTextResponse("hello")


async def _items(request: StarletteRequest) -> JSONResponse:
    return JSONResponse({"created": True})


async def _login(request: StarletteRequest) -> PlainTextResponse:
    request.session["user"] = request.path_params["user"]
    return PlainTextResponse("ok")


async def _me(request: StarletteRequest) -> JSONResponse:
    return JSONResponse({"user": request.session.get("user")})


def starlette_app(cors: dict) -> Starlette:
    return Starlette(
        routes=[
            Route("/", _index),
            Route("/items", _items, methods=["POST"]),
            Route("/login/{user}", _login),
            Route("/me", _me),
        ],
        middleware=[
            Middleware(StarletteCORS, **cors),
            Middleware(StarletteSessions, secret_key=SECRET),
        ],
    )


surge_listed = surge_app(LISTED)
surge_open = surge_app(OPEN)
starlette_listed = starlette_app(LISTED)
starlette_open = starlette_app(OPEN)
