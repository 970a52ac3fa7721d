"""The same requests to a real Litestar app (`apps/litestar_app.py`) under `surge serve
--interface asgi` and under uvicorn: the same answers.

Compared as in `test_asgi_vs_uvicorn`: status, body (parsed when JSON), and the
headers that must match (content-type, the framing, what the app and its
middleware set).
"""

from __future__ import annotations

import json
import time

import pytest
from conftest import APPS, AsgiServer, AsgiServers
from peer_servers import surge_command
from rawhttp import build_request
from test_asgi_vs_uvicorn import FORM, JSON, MULTIPART, UPLOAD, multipart, summary

pytestmark = pytest.mark.timeout(60)

TARGET = "litestar_app:app"

CASES: dict[str, tuple[str, str, dict[str, str], bytes | None]] = {
    "root": ("GET", "/", {}, None),
    "path_and_query_params": ("GET", "/items/42?q=hello%20world&n=3", {}, None),
    "query_param_invalid_400": ("GET", "/items/42?n=many", {}, None),
    "path_param_invalid_404": ("GET", "/items/abc", {}, None),
    "not_found": ("GET", "/nope", {}, None),
    "method_not_allowed": ("DELETE", "/", {}, None),
    "json_body": ("POST", "/items", JSON, b'{"name": "pen", "price": 1.5, "tags": ["a"]}'),
    "json_validation_400": ("POST", "/items", JSON, b'{"name": "pen", "price": "cheap"}'),
    "json_malformed_400": ("POST", "/items", JSON, b'{"name": '),
    "form": ("POST", "/form", FORM, b"name=Ann+Lee&age=31"),
    "form_invalid_400": ("POST", "/form", FORM, b"name=Ann&age=old"),
    "multipart_upload": (
        "POST",
        "/upload",
        MULTIPART,
        multipart([("note", "hi"), ("file", ("data.bin", UPLOAD, "application/octet-stream"))]),
    ),
    "streaming_response": ("GET", "/stream", {}, None),
    "file_response": ("GET", "/file", {}, None),
    "head_without_route_405": ("HEAD", "/file", {}, None),
    "exception_handler": ("GET", "/teapot", {}, None),
    "unhandled_exception_500": ("GET", "/crash", {}, None),
    "lifespan_state": ("GET", "/state", {}, None),
    "plain_text": ("GET", "/plain", {}, None),
    "request_headers": ("GET", "/headers", {"X-Custom": "Value 1"}, None),
}


class _LitestarServers(AsgiServers):
    """surge with `--interface asgi` (no detection), uvicorn as in `conftest`."""

    def __init__(self, log_dir) -> None:  # type: ignore[no-untyped-def]
        super().__init__(log_dir)
        peer = self.command

        def command(kind: str, target: str, port: int) -> list[str]:
            if kind == "surge":
                return [*surge_command(target, port), "--interface", "asgi"]
            return peer(kind, target, port)

        self.command = command


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[AsgiServer, AsgiServer]:
    servers = _LitestarServers(tmp_path_factory.mktemp("litestar-logs"))
    try:
        yield servers.get("surge", TARGET), servers.get("uvicorn", TARGET)
    finally:
        servers.stop_all()


@pytest.fixture(autouse=True)
def _healthy(pair: tuple[AsgiServer, AsgiServer]):  # type: ignore[no-untyped-def]
    yield
    for server in pair:
        server.check_health()


@pytest.mark.parametrize("case", list(CASES))
def test_litestar_same_as_uvicorn(pair: tuple[AsgiServer, AsgiServer], case: str) -> None:
    method, target, headers, body = CASES[case]
    surge, uvicorn = pair
    ours = surge.fetch(method, target, headers, body)
    theirs = uvicorn.fetch(method, target, headers, body)
    assert summary(ours) == summary(theirs)
    assert ours.header("server") == "surge" and ours.header("date")
    if ours.status not in (404, 405):  # Litestar answers those before any middleware
        assert ours.header("x-middleware") == "yes"


def test_litestar_background_task_runs_after_response(pair) -> None:
    for server in pair:
        word = f"w{server.port}"
        resp = server.fetch("POST", f"/background?word={word}")
        assert resp.status == 200 and json.loads(resp.body) == {"scheduled": word}
        deadline = time.monotonic() + 5
        while word not in json.loads(server.fetch("GET", "/background").body)["done"]:
            assert time.monotonic() < deadline, f"{server.kind}: background task never ran"
            time.sleep(0.02)


def test_litestar_keep_alive_sequence_same_as_uvicorn(pair) -> None:
    """Several requests on one connection, answered in order by both servers."""
    order = [
        "root",
        "json_validation_400",
        "multipart_upload",
        "streaming_response",
        "file_response",
        "form",
        "exception_handler",
    ]
    results = [
        [summary(r) for r in server.fetch_in_turn([CASES[name] for name in order])]
        for server in pair
    ]
    assert results[0] == results[1]


def test_litestar_pipelined_in_order(pair) -> None:
    order = ["path_and_query_params", "streaming_response", "lifespan_state", "file_response"]
    answers = []
    for server in pair:
        conn = server.connect()
        try:
            conn.send(
                b"".join(build_request(m, t, h, b) for m, t, h, b in (CASES[n] for n in order))
            )
            answers.append([summary(conn.read_response()) for _ in order])
        finally:
            conn.sock.close()
    assert answers[0] == answers[1]


def test_litestar_chunked_request_body(pair) -> None:
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


def test_litestar_detected_as_asgi(tmp_path) -> None:
    # Without --interface, `surge serve` must detect a Litestar app as ASGI 3 too.
    from peer_servers import PeerServer

    def command(kind: str, target: str, port: int) -> list[str]:
        return surge_command(target, port)

    server = PeerServer("surge-auto", TARGET, tmp_path, APPS, command)
    try:
        resp = server.fetch("GET", "/state")
        assert json.loads(resp.body) == {"greeting": "hello from lifespan"}
        server.check_health()
    finally:
        server.stop()
