"""Cookies: `set_cookie` / `delete_cookie` with every attribute on native and
Python responses, compared with Starlette's; `request.cookies`; and a real
client's cookie jar (http.cookiejar, httpx) against the live server."""

from __future__ import annotations

import http.cookiejar
import urllib.request
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from rawhttp import RawConnection
from surge.http import FileResponse, Response, StreamingResponse
from surge.http.datastructures import parse_cookies

#: The servers and fixtures (`surge_port`, `starlette_files`, `files_root`).
pytest_plugins = ["files_servers"]
pytestmark = pytest.mark.timeout(60)


def _attributes(header: str) -> tuple[str, str, dict[str, str]]:
    """(name, value, {attribute lowercased: value}) of one Set-Cookie value."""
    first, *attrs = [p.strip() for p in header.split(";")]
    name, _, value = first.partition("=")
    parsed = {}
    for a in attrs:
        k, _, v = a.partition("=")
        parsed[k.lower()] = v.lower() if k.lower() in ("samesite",) else v
    return name, value, parsed


CASES = [
    {"key": "a", "value": "1"},
    {"key": "sid", "value": "abc.DEF-123_~", "max_age": 60, "httponly": True, "secure": True},
    {"key": "t", "value": "v", "path": "/app", "domain": "example.com", "samesite": "strict"},
    {"key": "n", "value": "", "samesite": "none", "secure": True},
    {"key": "x", "value": "y", "samesite": None, "path": None},
    {"key": "e", "value": "1", "expires": datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)},
    {"key": "e", "value": "1", "expires": "Wed, 02 Jan 2030 03:04:05 GMT"},
]


@pytest.mark.parametrize("kw", CASES)
def test_set_cookie_like_starlette(kw):
    from starlette.responses import Response as StarletteResponse

    ours = Response("x")
    ours.set_cookie(**kw)
    theirs = StarletteResponse("x")
    theirs.set_cookie(**kw)
    (our_header,) = [v for n, v in ours.headers if n == "Set-Cookie"]
    (their_header,) = [v.decode() for n, v in theirs.raw_headers if n == b"set-cookie"]
    ours_parsed, theirs_parsed = _attributes(our_header), _attributes(their_header)
    if kw["value"] == "":
        # http.cookies writes an empty value as `""`, which a browser stores as two
        # quote characters (RFC 6265 5.2); surge writes `n=`, an empty value.
        assert (ours_parsed[1], theirs_parsed[1]) == ("", '""')
        theirs_parsed = (theirs_parsed[0], "", theirs_parsed[2])
    assert ours_parsed == theirs_parsed


def test_every_response_type_has_the_same_cookies(tmp_path):
    kw = {"max_age": 5, "secure": True, "httponly": True, "samesite": "strict", "partitioned": True}
    native = Response("x")
    streaming = StreamingResponse(iter([b"x"]))
    file = FileResponse(tmp_path / "f")
    for r in (native, streaming, file):
        r.set_cookie("k", "v", **kw)
        r.delete_cookie("old", path="/p")
    expected = [
        ("Set-Cookie", "k=v; Max-Age=5; Path=/; Secure; HttpOnly; SameSite=Strict; Partitioned"),
        (
            "Set-Cookie",
            "old=; Max-Age=0; Expires=Thu, 01 Jan 1970 00:00:00 GMT; Path=/p; SameSite=Lax",
        ),
    ]
    assert native.headers == streaming.headers == file.headers == expected


def test_expires_forms():
    r = Response()
    r.set_cookie("a", expires=datetime(2031, 5, 6, 7, 8, 9))  # naive: UTC
    r.set_cookie("b", expires=3600)  # seconds from now, as Starlette
    a, b = (v for _, v in r.headers)
    assert "Expires=Tue, 06 May 2031 07:08:09 GMT" in a
    when = datetime.strptime(_attributes(b)[2]["expires"], "%a, %d %b %Y %H:%M:%S GMT")
    assert abs(when.replace(tzinfo=UTC) - datetime.now(UTC) - timedelta(hours=1)) < timedelta(
        seconds=5
    )


@pytest.mark.parametrize(
    "kw",
    [
        {"key": "a b", "value": "1"},
        {"key": "", "value": "1"},
        {"key": "a", "value": "has space"},
        {"key": "a", "value": "semi;colon"},
        {"key": "a", "value": "new\r\nline"},
        {"key": "a", "value": "caf\u00e9"},
        {"key": "a", "value": 'in"side'},
        {"key": "a", "value": "1", "samesite": "sometimes"},
        {"key": "a", "value": "1", "path": "/x; Secure"},
        {"key": "a", "value": "1", "domain": "evil\r\n"},
        {"key": "a", "value": "1", "expires": "soon; HttpOnly"},
    ],
)
def test_what_a_cookie_cannot_carry_raises(kw):
    r = Response()
    with pytest.raises(ValueError):
        r.set_cookie(**kw)
    assert r.headers == []


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        (["a=1; b=2"], {"a": "1", "b": "2"}),
        (["a=1", "b=2"], {"a": "1", "b": "2"}),
        (["a=1;b=2;;  c = 3 "], {"a": "1", "b": "2", "c": "3"}),
        (['q="quoted value"'], {"q": "quoted value"}),
        (["eq=a=b=c"], {"eq": "a=b=c"}),
        (["bare; a=1; =nameless"], {"a": "1"}),
        (["dup=first; dup=second"], {"dup": "first"}),  # the most specific comes first
        ([""], {}),
        (["\u00e9=1; x=\u00ff"], {"\u00e9": "1", "x": "\u00ff"}),
    ],
)
def test_request_cookie_parsing_is_tolerant(headers, expected):
    assert parse_cookies(headers) == expected


def test_several_set_cookie_headers_stay_separate(surge_port):
    with RawConnection(surge_port) as c:
        r = c.request("GET", "/cookies/set")
    values = r.getall("set-cookie")
    assert [v.split("=", 1)[0] for v in values] == ["session", "theme", "scoped", "gone"]
    assert "HttpOnly" in values[0] and "Max-Age=3600" in values[0]


def test_cookiejar_round_trip(surge_port):
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    base = f"http://127.0.0.1:{surge_port}"
    opener.open(f"{base}/cookies/set", timeout=10).read()
    stored = {c.name: c for c in jar}
    assert set(stored) == {"session", "theme", "scoped", "gone"}
    assert stored["session"].has_nonstandard_attr("HttpOnly")
    assert stored["theme"].path == "/cookies"
    import json

    sent = json.loads(opener.open(f"{base}/cookies/echo", timeout=10).read())
    # "scoped" belongs to /elsewhere: the jar does not send it here.
    assert sent == {"session": "abc123", "theme": "dark", "gone": "soon"}
    opener.open(f"{base}/cookies/delete", timeout=10).read()
    sent = json.loads(opener.open(f"{base}/cookies/echo", timeout=10).read())
    assert sent == {"session": "abc123", "theme": "dark"}


def test_httpx_cookie_jar(surge_port):
    with httpx.Client(base_url=f"http://127.0.0.1:{surge_port}") as client:
        client.get("/cookies/set")
        assert client.cookies.get("session") == "abc123"
        assert client.get("/cookies/echo").json()["session"] == "abc123"
        client.get("/cookies/delete")
        assert "gone" not in client.get("/cookies/echo").json()
