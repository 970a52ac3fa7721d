"""The same requests to a FastAPI app under `surge serve` and under uvicorn: the same answers.

Compared: status, body, and the headers that must match (content-type, the
framing: content-length or chunked, and what the app itself set).
"""

from __future__ import annotations

import json
import os
import time

import pytest
from conftest import AsgiServer, AsgiServers
from rawhttp import RawResponse, build_request

pytestmark = pytest.mark.timeout(60)

#: Headers whose values must be the same under both servers when present in either.
COMPARED = (
    "content-type",
    "content-length",
    "transfer-encoding",
    "x-middleware",
    "etag",
    "last-modified",
    "content-disposition",
)

BOUNDARY = "surgeboundary1234"


def multipart(fields: list[tuple[str, str | tuple[str, bytes, str]]]) -> bytes:
    parts = []
    for name, value in fields:
        if isinstance(value, tuple):
            filename, data, ctype = value
            head = (
                f'Content-Disposition: form-data; name="{name}"; filename="{filename}"\r\n'
                f"Content-Type: {ctype}\r\n\r\n"
            )
            parts.append(f"--{BOUNDARY}\r\n{head}".encode() + data + b"\r\n")
        else:
            head = f'Content-Disposition: form-data; name="{name}"\r\n\r\n'
            parts.append(f"--{BOUNDARY}\r\n{head}{value}\r\n".encode())
    return b"".join(parts) + f"--{BOUNDARY}--\r\n".encode()


UPLOAD = os.urandom(300_000)
JSON = {"Content-Type": "application/json"}
FORM = {"Content-Type": "application/x-www-form-urlencoded"}
MULTIPART = {"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"}

CASES: dict[str, tuple[str, str, dict[str, str], bytes | None]] = {
    "root": ("GET", "/", {}, None),
    "query_and_path_params": ("GET", "/items/42?q=hello%20world&n=3", {}, None),
    "path_param_invalid": ("GET", "/items/abc", {}, None),
    "not_found": ("GET", "/nope", {}, None),
    "method_not_allowed": ("DELETE", "/items/1", {}, None),
    "json_body": ("POST", "/items", JSON, b'{"name": "pen", "price": 1.5, "tags": ["a"]}'),
    "json_validation_422": ("POST", "/items", JSON, b'{"name": "pen", "price": "cheap"}'),
    "json_malformed_422": ("POST", "/items", JSON, b'{"name": '),
    "form": ("POST", "/form", FORM, b"name=Ann+Lee&age=31"),
    "form_missing_field_422": ("POST", "/form", FORM, b"name=Ann"),
    "multipart_upload": (
        "POST",
        "/upload",
        MULTIPART,
        multipart([("note", "hi"), ("file", ("data.bin", UPLOAD, "application/octet-stream"))]),
    ),
    "streaming_response": ("GET", "/stream", {}, None),
    "file_response": ("GET", "/file", {}, None),
    "head_file": ("HEAD", "/file", {}, None),
    "exception_handler": ("GET", "/teapot", {}, None),
    "unhandled_exception_500": ("GET", "/crash", {}, None),
    "lifespan_state": ("GET", "/state", {}, None),
    "plain_text": ("GET", "/plain", {}, None),
    "request_headers": ("GET", "/headers", {"X-Custom": "Value 1"}, None),
}


def fetch(server: AsgiServer, method: str, target: str, headers: dict, body: bytes | None):
    return server.fetch(method, target, headers, body)


def summary(resp: RawResponse) -> dict:
    headers = {name: resp.header(name) for name in COMPARED if resp.header(name) is not None}
    body: object = resp.body
    if resp.body and (resp.header("content-type") or "").startswith("application/json"):
        body = json.loads(resp.body)
    return {"status": resp.status, "headers": headers, "body": body}


@pytest.fixture(scope="module")
def pair(asgi_servers: AsgiServers) -> tuple[AsgiServer, AsgiServer]:
    return asgi_servers.get("surge", "fastapi_app:app"), asgi_servers.get(
        "uvicorn", "fastapi_app:app"
    )


@pytest.mark.parametrize("case", list(CASES))
def test_fastapi_same_as_uvicorn(pair: tuple[AsgiServer, AsgiServer], case: str) -> None:
    method, target, headers, body = CASES[case]
    surge, uvicorn = pair
    ours = fetch(surge, method, target, headers, body)
    theirs = fetch(uvicorn, method, target, headers, body)
    assert summary(ours) == summary(theirs)
    assert ours.header("server") == "surge" and ours.header("date")


def test_fastapi_background_task_runs_after_response(pair) -> None:
    for server in pair:
        word = f"w{server.port}"
        resp = fetch(server, "POST", f"/background?word={word}", {}, None)
        assert resp.status == 200 and json.loads(resp.body) == {"scheduled": word}
        deadline = time.monotonic() + 5
        while word not in json.loads(fetch(server, "GET", "/background", {}, None).body)["done"]:
            assert time.monotonic() < deadline, f"{server.kind}: background task never ran"
            time.sleep(0.02)


def test_fastapi_keep_alive_sequence_same_as_uvicorn(pair) -> None:
    """Several requests on one connection, answered in order by both servers."""
    order = ["root", "json_validation_422", "streaming_response", "file_response", "form"]
    results = [
        [summary(r) for r in server.fetch_in_turn([CASES[name] for name in order])]
        for server in pair
    ]
    assert results[0] == results[1]


def test_fastapi_chunked_request_body(pair) -> None:
    body = b'{"name": "pen", "price": 2, "tags": []}'
    answers = []
    for server in pair:
        conn = server.connect()
        try:
            conn.send(build_request("POST", "/items", JSON, body, chunked=True, chunk_size=7))
            answers.append(summary(conn.read_response()))
        finally:
            conn.sock.close()
    assert answers[0] == answers[1]
    assert answers[0]["body"] == {"created": {"name": "pen", "price": 2.0, "tags": []}}
