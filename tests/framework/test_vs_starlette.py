"""CORSMiddleware and SessionMiddleware against Starlette's: the same app (apps/
cors_apps.py) under `surge serve` and, with Starlette's middleware, under uvicorn;
the same requests; the same status, CORS headers and session cookies."""

from __future__ import annotations

import json

import pytest

LISTED_REQUESTS = [
    ("GET", "/", {}),
    ("GET", "/", {"Origin": "https://a.example"}),
    ("GET", "/", {"Origin": "https://shop.b.example"}),
    ("GET", "/", {"Origin": "https://evil.example"}),
    ("GET", "/", {"Origin": "https://x.b.example.evil"}),
    ("GET", "/", {"Origin": "https://a.example", "Cookie": "k=v"}),
    ("POST", "/items", {"Origin": "https://a.example"}),
    ("GET", "/nope", {"Origin": "https://a.example"}),
    ("OPTIONS", "/", {"Origin": "https://a.example", "Access-Control-Request-Method": "GET"}),
    ("OPTIONS", "/items", {"Origin": "https://a.example", "Access-Control-Request-Method": "POST"}),
    ("OPTIONS", "/", {"Origin": "https://a.example", "Access-Control-Request-Method": "DELETE"}),
    ("OPTIONS", "/", {"Origin": "https://evil.example", "Access-Control-Request-Method": "GET"}),
    (
        "OPTIONS",
        "/",
        {
            "Origin": "https://a.example",
            "Access-Control-Request-Method": "GET",
            "Access-Control-Request-Headers": "X-Token, content-type",
        },
    ),
    (
        "OPTIONS",
        "/",
        {
            "Origin": "https://a.example",
            "Access-Control-Request-Method": "GET",
            "Access-Control-Request-Headers": "X-Other",
        },
    ),
    (
        "OPTIONS",
        "/",
        {
            "Origin": "https://a.example",
            "Access-Control-Request-Method": "GET",
            "Access-Control-Request-Private-Network": "true",
        },
    ),
]
OPEN_REQUESTS = [
    ("GET", "/", {}),
    ("GET", "/", {"Origin": "https://any.example"}),
    ("GET", "/", {"Origin": "https://any.example", "Cookie": "k=v"}),
    ("POST", "/items", {"Origin": "https://any.example"}),
    ("OPTIONS", "/", {"Origin": "https://any.example", "Access-Control-Request-Method": "PUT"}),
    (
        "OPTIONS",
        "/items",
        {
            "Origin": "https://any.example",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "X-Whatever, X-Else",
        },
    ),
]


def cors_view(response) -> dict:
    """What a browser's CORS check reads from a response."""
    seen = {
        name.lower(): value
        for name, value in response.headers
        if name.lower().startswith("access-control-") or name.lower() == "vary"
    }
    preflight_body = response.body if response.status in (200, 400) and seen else None
    if preflight_body is not None and (response.header("Content-Type") or "").startswith(
        "application"
    ):
        preflight_body = None  # a route's own body, not the middleware's answer
    return {"status": response.status, "headers": seen, "body": preflight_body}


@pytest.mark.parametrize(
    ("variant", "requests"), [("listed", LISTED_REQUESTS), ("open", OPEN_REQUESTS)]
)
def test_cors_answers_as_starlette(servers, variant, requests):
    surge = servers.get("surge", f"cors_apps:surge_{variant}")
    peer = servers.get("uvicorn", f"cors_apps:starlette_{variant}")
    for method, path, headers in requests:
        ours = cors_view(surge.fetch(method, path, headers))
        theirs = cors_view(peer.fetch(method, path, headers))
        assert ours == theirs, (method, path, headers)


def _cookie(response) -> str:
    return response.header("Set-Cookie") or ""


def test_session_cookies_cross_between_surge_and_starlette(servers):
    surge = servers.get("surge", "cors_apps:surge_listed")
    peer = servers.get("uvicorn", "cors_apps:starlette_listed")
    for maker, reader in ((surge, peer), (peer, surge)):
        made = maker.fetch("GET", "/login/ann")
        cookie = _cookie(made)
        value = cookie.partition(";")[0]
        assert value.startswith("session=")
        got = reader.fetch("GET", "/me", {"Cookie": value})
        assert json.loads(got.body) == {"user": "ann"}
    ours = _cookie(surge.fetch("GET", "/login/bob")).partition(";")[2]
    theirs = _cookie(peer.fetch("GET", "/login/bob")).partition(";")[2]
    assert ours == theirs
    # Tampered: both ignore it.
    value = _cookie(surge.fetch("GET", "/login/eve")).partition(";")[0]
    forged = value[:-2] + ("AA" if not value.endswith("AA") else "BB")
    for server in (surge, peer):
        assert json.loads(server.fetch("GET", "/me", {"Cookie": forged}).body) == {"user": None}
