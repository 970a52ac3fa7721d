"""The same requests to a Flask app and a Django app under `surge serve` and under
gunicorn (gthread): the same answers. Compared: status, body and the headers that
must match (content-type, the framing, and what the app itself set)."""

from __future__ import annotations

import json
import os

import pytest
from rawhttp import RawResponse, build_request
from wsgiservers import WsgiServer, WsgiServers

pytestmark = pytest.mark.timeout(60)

COMPARED = (
    "content-type",
    "content-length",
    "transfer-encoding",
    "location",
    "content-disposition",
    "etag",
    "last-modified",
)

BOUNDARY = "surgeboundary1234"
UPLOAD = os.urandom(300_000)


def multipart(note: str, filename: str, data: bytes) -> bytes:
    return (
        (
            f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="note"\r\n\r\n{note}\r\n'
            f"--{BOUNDARY}\r\nContent-Disposition: form-data; "
            f'name="file"; filename="{filename}"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n"
        ).encode()
        + data
        + f"\r\n--{BOUNDARY}--\r\n".encode()
    )


JSON = {"Content-Type": "application/json"}
FORM = {"Content-Type": "application/x-www-form-urlencoded"}
MULTIPART = {"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"}

FLASK_CASES: dict[str, tuple[str, str, dict[str, str], bytes | None]] = {
    "root": ("GET", "/", {}, None),
    "query": ("GET", "/query?q=hello%20world&n=1&n=2&u=%C3%A9", {}, None),
    "form_post": ("POST", "/form", FORM, b"name=Ann+Lee&age=31&age=32"),
    "json_post": ("POST", "/json", JSON, b'{"a": [1, 2, {"b": null}]}'),
    "json_malformed_400": ("POST", "/json", JSON, b'{"a": '),
    "upload": ("POST", "/upload", MULTIPART, multipart("hi", "data.bin", UPLOAD)),
    "streaming_generator": ("GET", "/stream", {}, None),
    "file_wrapper": ("GET", "/file", {}, None),
    "head_file": ("HEAD", "/file", {}, None),
    "not_found_404": ("GET", "/nope", {}, None),
    "abort_404": ("GET", "/missing", {}, None),
    "crash_500": ("GET", "/crash", {}, None),
    "method_not_allowed_405": ("DELETE", "/", {}, None),
    "cookies": ("GET", "/cookie", {"Cookie": "a=1; z=9"}, None),
    "redirect": ("GET", "/redirect", {}, None),
    "request_headers": ("PUT", "/headers", {"X-Custom": "Value 1"}, b""),
}

DJANGO_CASES = {
    "fast": ("GET", "/fast", {}, None),
    "form": ("POST", "/form?x=1", FORM, b"a=1&b=two"),
    "not_found": ("GET", "/nope", {}, None),
    "append_slash_redirect_or_404": ("GET", "/fast/", {}, None),
}


def summary(resp: RawResponse) -> dict:
    headers = {name: resp.header(name) for name in COMPARED if resp.header(name) is not None}
    cookies = sorted(resp.getall("set-cookie"))
    body: object = resp.body
    if resp.body and (resp.header("content-type") or "").startswith("application/json"):
        body = json.loads(resp.body)
    return {"status": resp.status, "headers": headers, "cookies": cookies, "body": body}


@pytest.fixture(scope="module")
def flask_pair(wsgi_servers: WsgiServers) -> tuple[WsgiServer, WsgiServer]:
    return wsgi_servers.get("surge", "flask_app:app"), wsgi_servers.get("gunicorn", "flask_app:app")


@pytest.fixture(scope="module")
def django_pair(wsgi_servers: WsgiServers) -> tuple[WsgiServer, WsgiServer]:
    return wsgi_servers.get("surge", "django_app:app"), wsgi_servers.get(
        "gunicorn", "django_app:app"
    )


@pytest.mark.parametrize("case", list(FLASK_CASES))
def test_flask_same_as_gunicorn(flask_pair, case: str) -> None:
    method, target, headers, body = FLASK_CASES[case]
    surge, gunicorn = flask_pair
    ours = surge.fetch(method, target, headers, body)
    theirs = gunicorn.fetch(method, target, headers, body)
    assert summary(ours) == summary(theirs)
    assert ours.header("server") == "surge" and ours.header("date")


@pytest.mark.parametrize("case", list(DJANGO_CASES))
def test_django_same_as_gunicorn(django_pair, case: str) -> None:
    method, target, headers, body = DJANGO_CASES[case]
    surge, gunicorn = django_pair
    assert summary(surge.fetch(method, target, headers, body)) == summary(
        gunicorn.fetch(method, target, headers, body)
    )


def test_flask_keep_alive_sequence_same_as_gunicorn(flask_pair) -> None:
    """Several requests on one connection, answered in order by both servers."""
    order = ["root", "upload", "streaming_generator", "file_wrapper", "form_post", "crash_500"]
    results = [
        [summary(r) for r in server.fetch_in_turn([FLASK_CASES[name] for name in order])]
        for server in flask_pair
    ]
    assert results[0] == results[1]


def test_flask_chunked_request_body(flask_pair) -> None:
    body = b'{"name": "pen", "price": 2}'
    answers = []
    for server in flask_pair:
        conn = server.connect()
        try:
            conn.send(build_request("POST", "/json", JSON, body, chunked=True, chunk_size=5))
            answers.append(summary(conn.read_response()))
        finally:
            conn.sock.close()
    assert answers[0] == answers[1]
    assert answers[0]["body"] == {"got": {"name": "pen", "price": 2}, "kind": "dict"}
