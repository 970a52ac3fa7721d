"""The ASGI dispatcher seen from raw sockets: the scope's exact types, framing,
pipelining, body streaming, disconnects, back-pressure and startup behaviour."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest
from conftest import APPS, AsgiServer, AsgiServers, free_port
from rawhttp import IncompleteResponse, build_request

pytestmark = pytest.mark.timeout(180)  # server starts may take a minute on a loaded machine

SURGE = [sys.executable, "-m", "surge"]


def last_events(server: AsgiServer) -> dict:
    conn = server.connect()
    try:
        return json.loads(conn.request("GET", "/last-event").body)
    finally:
        conn.sock.close()


def test_scope_keys_and_types_exact(raw_surge: AsgiServer) -> None:
    conn = raw_surge.connect()
    headers = [("X-Mixed-Case", "Value"), ("x-mixed-case", "second"), ("Accept", "*/*")]
    resp = conn.request("GET", "/scope/a%20b%2Fc?x=1&y=%20z", headers=headers)
    assert resp.status == 200
    got = json.loads(resp.body)
    scope, types = got["scope"], got["types"]
    assert scope["type"] == "http"
    assert scope["asgi"] == {"version": "3.0", "spec_version": "2.4"}
    assert scope["http_version"] == "1.1"
    assert scope["method"] == "GET"
    assert scope["scheme"] == "http"
    assert scope["path"] == "/scope/a b/c"
    assert scope["raw_path"] == {"bytes": "/scope/a%20b%2Fc"}
    assert scope["query_string"] == {"bytes": "x=1&y=%20z"}
    assert scope["root_path"] == ""
    assert scope["server"] == {"tuple": ["127.0.0.1", raw_surge.port]}
    assert scope["client"] == {"tuple": ["127.0.0.1", conn.sock.getsockname()[1]]}
    # Lower-cased names, bytes, in arrival order, repeats kept.
    assert [(h["tuple"][0]["bytes"], h["tuple"][1]["bytes"]) for h in scope["headers"]] == [
        ("host", "test"),
        ("x-mixed-case", "Value"),
        ("x-mixed-case", "second"),
        ("accept", "*/*"),
    ]
    assert types == {
        "client": ["str", "int"],
        "server": ["str", "int"],
        "client_type": "tuple",
        "server_type": "tuple",
        "raw_path": "bytes",
        "query_string": "bytes",
        "path": "str",
        "headers": "list",
        "header_items": ["bytes,bytes"],
    }


def test_scope_of_each_request_on_one_connection(raw_surge: AsgiServer) -> None:
    # The scope is a copy of a per-connection template holding the usual
    # http_version, method and query_string; a request that differs must show
    # its own values, and the next one the usual ones again.
    requests = [
        ("GET", "/scope/a", {}, ("1.1", "GET", "")),
        ("POST", "/scope/b?q=1", {"body": b"x"}, ("1.1", "POST", "q=1")),
        ("GET", "/scope/c", {}, ("1.1", "GET", "")),
        ("DELETE", "/scope/d?", {}, ("1.1", "DELETE", "")),
        ("GET", "/scope/e?z=%20", {"version": "HTTP/1.0"}, ("1.0", "GET", "z=%20")),
        ("GET", "/scope/f", {}, ("1.1", "GET", "")),
    ]
    conn = raw_surge.connect()
    try:
        for method, target, kw, (version, want_method, query) in requests:
            if kw.get("version") == "HTTP/1.0":
                kw = {**kw, "headers": [("Connection", "keep-alive")]}
            resp = conn.request(method, target, **kw)
            assert resp.status == 200, (target, resp)
            scope = json.loads(resp.body)["scope"]
            assert scope["http_version"] == version, target
            assert scope["method"] == want_method, target
            assert scope["query_string"] == {"bytes": query}, target
            assert scope["path"] == target.partition("?")[0], target
    finally:
        conn.close()


def _raw_scope(server: AsgiServer, request: bytes) -> dict:
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(request)
        data = b""
        while b"\r\n\r\n" not in data or not data.endswith(b"}"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 "), head
    return json.loads(body)["scope"]


def test_asterisk_form_target_reaches_the_app(raw_surge: AsgiServer) -> None:
    # RFC 9112 3.2.4: `OPTIONS *` is for the server as a whole; the app decides.
    scope = _raw_scope(
        raw_surge, b"OPTIONS * HTTP/1.1\r\nHost: test\r\nContent-Length: 3\r\n\r\nabc"
    )
    assert scope["method"] == "OPTIONS"
    assert scope["path"] == "*"
    assert scope["raw_path"] == {"bytes": "*"}


def test_absolute_form_target_is_served_by_its_path(raw_surge: AsgiServer) -> None:
    # RFC 9112 3.2.2: a server must accept the absolute form; the path is routed.
    scope = _raw_scope(
        raw_surge, b"GET http://example.com/scope/x%20y?q=1 HTTP/1.1\r\nHost: test\r\n\r\n"
    )
    assert scope["path"] == "/scope/x y"
    assert scope["raw_path"] == {"bytes": "/scope/x%20y"}
    assert scope["query_string"] == {"bytes": "q=1"}


@pytest.fixture(scope="module")
def big_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, bytes]:
    data = os.urandom(3 * 1024 * 1024 + 17)
    path = tmp_path_factory.mktemp("pathsend") / "big.bin"
    path.write_bytes(data)
    return str(path), data


def test_pathsend_with_content_length(raw_surge: AsgiServer, big_file: tuple[str, bytes]) -> None:
    path, data = big_file
    assert (
        "http.response.pathsend"
        in json.loads(raw_surge.connect().request("GET", "/scope").body)["scope"]["extensions"]
    )
    conn = raw_surge.connect()
    resp = conn.request("GET", f"/pathsend?file={path}&length={len(data)}")
    assert resp.status == 200
    assert resp.header("content-length") == str(len(data))
    assert resp.body == data
    # The connection stays usable after the file.
    again = conn.request("GET", f"/pathsend?file={path}&length={len(data)}")
    assert again.body == data


def test_pathsend_chunked_and_head(raw_surge: AsgiServer, big_file: tuple[str, bytes]) -> None:
    path, data = big_file
    conn = raw_surge.connect()
    resp = conn.request("GET", f"/pathsend?file={path}")
    assert resp.header("transfer-encoding") == "chunked"
    assert resp.body == data
    head = conn.request("HEAD", f"/pathsend?file={path}&length={len(data)}")
    assert head.status == 200 and head.body == b""
    assert conn.request("GET", "/state").status == 200


def test_pathsend_length_mismatch_is_500(
    raw_surge: AsgiServer, big_file: tuple[str, bytes]
) -> None:
    path, data = big_file
    resp = raw_surge.connect().request("GET", f"/pathsend?file={path}&length={len(data) - 1}")
    assert resp.status == 500


def test_lifespan_state_reaches_requests(raw_surge: AsgiServer) -> None:
    resp = raw_surge.connect().request("GET", "/state")
    assert json.loads(resp.body) == {"started": "yes"}


def test_pipelined_requests_answered_in_order(raw_surge: AsgiServer) -> None:
    conn = raw_surge.connect()
    delays = [120, 0, 60, 0, 30]
    conn.send(b"".join(build_request("GET", f"/slow?ms={ms}&i={i}") for i, ms in enumerate(delays)))
    bodies = [conn.read_response().body for _ in delays]
    assert bodies == [f"/slow?ms={ms}&i={i}".encode() for i, ms in enumerate(delays)]


def test_http10_client_gets_no_chunked_encoding(raw_surge: AsgiServer) -> None:
    conn = raw_surge.connect()
    resp = conn.request("GET", "/stream?n=4", version="HTTP/1.0")
    assert resp.status == 200
    assert resp.header("transfer-encoding") is None
    assert resp.until_close
    assert resp.body == b"".join(b"chunk %d\n" % i for i in range(4))
    assert conn.is_closed()


def test_http10_keep_alive_with_content_length(raw_surge: AsgiServer) -> None:
    conn = raw_surge.connect()
    for _ in range(2):
        resp = conn.request(
            "GET", "/length", version="HTTP/1.0", headers={"Connection": "keep-alive"}
        )
        assert resp.body == b"0123456789"
        assert resp.header("connection") == "keep-alive"


def test_http11_streamed_response_is_chunked(raw_surge: AsgiServer) -> None:
    conn = raw_surge.connect()
    resp = conn.request("GET", "/stream?n=3")
    assert resp.header("transfer-encoding") == "chunked"
    assert resp.chunks == [b"chunk 0\n", b"chunk 1\n", b"chunk 2\n"]
    # The connection stays usable.
    assert conn.request("GET", "/length").body == b"0123456789"


def test_content_length_sent_exactly_in_parts(raw_surge: AsgiServer) -> None:
    conn = raw_surge.connect()
    resp = conn.request("GET", "/length")
    assert resp.header("content-length") == "10"
    assert resp.header("transfer-encoding") is None
    assert resp.body == b"0123456789"
    assert resp.header("server") == "surge" and resp.header("date")


def test_head_request_gets_no_body(raw_surge: AsgiServer) -> None:
    conn = raw_surge.connect()
    resp = conn.request("HEAD", "/length")
    assert resp.header("content-length") == "10"
    assert conn.request("GET", "/length").body == b"0123456789"


def test_exception_before_start_is_500(raw_surge: AsgiServer) -> None:
    conn = raw_surge.connect()
    resp = conn.request("GET", "/error-before")
    assert resp.status == 500
    assert resp.body == b"Internal Server Error"
    assert conn.is_closed()
    assert "boom before start" in raw_surge.log()


def test_exception_after_start_closes_connection(raw_surge: AsgiServer) -> None:
    conn = raw_surge.connect()
    with pytest.raises(IncompleteResponse):
        conn.request("GET", "/error-after")
    assert "boom after start" in raw_surge.log()


def test_request_body_streamed_in_several_messages(raw_surge: AsgiServer) -> None:
    conn = raw_surge.connect()
    body = os.urandom(256 * 1024)
    conn.send(build_request("POST", "/echo", body=body)[: -len(body)])
    for i in range(0, len(body), 32 * 1024):
        conn.send(body[i : i + 32 * 1024])
        time.sleep(0.02)
    resp = conn.read_response()
    assert resp.body == body
    assert int(resp.header("x-messages") or 0) > 1


def test_chunked_request_body(raw_surge: AsgiServer) -> None:
    conn = raw_surge.connect()
    body = os.urandom(100_000)
    resp = conn.request("POST", "/echo", body=body, chunked=True, chunk_size=4096)
    assert resp.body == body


def test_client_leaving_mid_request_gives_http_disconnect(raw_surge: AsgiServer) -> None:
    conn = raw_surge.connect()
    conn.send(build_request("POST", "/wait-disconnect", headers={"Content-Length": "1000"}))
    conn.send(b"0123456789")
    time.sleep(0.1)
    conn.sock.close()
    deadline = time.monotonic() + 5
    while "disconnect" not in (events := last_events(raw_surge)):
        assert time.monotonic() < deadline
    assert events["disconnect"][-1] == "http.disconnect"
    assert events["disconnect"][0] == "http.request"


def test_client_leaving_during_streamed_response_fails_send(raw_surge: AsgiServer) -> None:
    conn = raw_surge.connect()
    conn.send(build_request("GET", "/stream-until-disconnect"))
    conn.read_head()
    conn.sock.recv(65536)
    conn.sock.close()
    deadline = time.monotonic() + 5
    while "send_error" not in (events := last_events(raw_surge)):
        assert time.monotonic() < deadline
    assert events["send_error_is_oserror"] is True


def test_streamed_response_respects_write_back_pressure(raw_surge: AsgiServer) -> None:
    """A client that does not read holds the app back (no 25 MB buffered in the server)."""
    conn = raw_surge.connect()
    conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    conn.send(build_request("GET", "/big?n=400"))
    time.sleep(1.0)
    sent = last_events(raw_surge)["big_sent"]
    assert sent < 200, f"the app sent {sent} x 64 KiB to a client that reads nothing"
    conn.read_head()
    total = len(conn.buf)  # body bytes read with the head
    while total < 400 * 65536 + 5:  # the chunks' payload and their framing
        data = conn.sock.recv(1 << 20)
        assert data
        total += len(data)
        if data.endswith(b"0\r\n\r\n"):
            break
    assert last_events(raw_surge)["big_sent"] == 400


def test_root_path(asgi_servers: AsgiServers) -> None:
    server = asgi_servers.get("surge", "raw_app:app")
    del server  # the default one has no root path; start one with it below
    port = free_port()
    proc = subprocess.Popen(
        [*SURGE, "serve", "raw_app:app", "--port", str(port), "--root-path", "/api"],
        cwd=APPS,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        scope = json.loads(_get_when_up(port, "/scope"))["scope"]
        assert scope["root_path"] == "/api"
        assert scope["path"] == "/api/scope"
        assert scope["raw_path"] == {"bytes": "/api/scope"}
    finally:
        proc.terminate()
        proc.wait(10)


def _get_when_up(port: int, path: str, timeout: float = 60.0) -> bytes:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                # HTTP/1.0: the body ends at the close, whatever its framing would be.
                sock.sendall(build_request("GET", path, version="HTTP/1.0"))
                data = b""
                while chunk := sock.recv(65536):
                    data += chunk
                return data.partition(b"\r\n\r\n")[2]
        except OSError:
            assert time.monotonic() < deadline
            time.sleep(0.05)


def _serve(*args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "surge", "serve", *args, "--port", str(free_port())],
        cwd=APPS,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["odd_apps:failing_startup"], 1, "ASGI lifespan startup failed: database unreachable"),
        (["odd_apps:no_lifespan", "--lifespan", "on"], 1, "ASGI lifespan startup failed"),
        (["odd_apps:Asgi2App"], 2, "looks like an ASGI 2 application"),
        (["raw_app:app", "--interface", "wsgi"], 2, "an ASGI 3 application, not a WSGI one"),
        (["raw_app:app", "--interface", "surge"], 2, "not a surge.http.App"),
    ],
)
def test_refused_targets_exit_with_one_clear_line(args: list[str], code: int, message: str) -> None:
    done = _serve(*args)
    assert done.returncode == code, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("surge: error: ") and message in last, done.stderr


@pytest.mark.parametrize(
    ("target", "extra", "body"),
    [
        ("odd_apps:no_lifespan", [], b"no lifespan here"),
        ("odd_apps:no_lifespan", ["--lifespan", "off"], b"no lifespan here"),
        ("odd_apps:asgi3_instance", [], b"from a class instance"),
        ("odd_apps:asgi3_instance", ["--interface", "asgi"], b"from a class instance"),
        ("odd_apps:wsgi_app", [], b"wsgi"),
        ("odd_apps:wsgi_app", ["--interface", "wsgi"], b"wsgi"),
    ],
)
def test_detected_and_served(target: str, extra: list[str], body: bytes) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "surge", "serve", target, "--port", str(port), *extra],
        cwd=APPS,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert _get_when_up(port, "/") == body
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture
def raw_uvicorn(asgi_servers: AsgiServers) -> AsgiServer:
    """The raw ASGI app under uvicorn (httptools), for the same-answer tests."""
    return asgi_servers.get("uvicorn", "raw_app:app")


SAME_ANSWER = [
    ("GET", "/await-between", b""),
    ("POST", "/suspend-first", b"payload"),
    ("GET", "/background", b""),
    ("GET", "/mapping", b""),
    ("HEAD", "/length", b""),
    ("GET", "/stream?n=5", b""),
]


@pytest.mark.parametrize(("method", "target", "body"), SAME_ANSWER)
def test_same_answer_as_uvicorn(
    raw_surge: AsgiServer, raw_uvicorn: AsgiServer, method: str, target: str, body: bytes
) -> None:
    """Apps that await other work between sends, suspend before starting, work on
    after the response or send Mappings: the same status, framing and body."""
    answers = []
    for server in (raw_surge, raw_uvicorn):
        conn = server.connect()
        resp = conn.request(method, target, body=body or None)
        framing = {h: resp.header(h) for h in ("content-length", "transfer-encoding", "x-kind")}
        answers.append((resp.status, framing, resp.body))
        # The connection stays usable after it.
        assert conn.request("GET", "/length").body == b"0123456789"
    assert answers[0] == answers[1]


def test_work_after_the_response_finishes(raw_surge: AsgiServer) -> None:
    conn = raw_surge.connect()
    assert conn.request("GET", "/background").body == b"answered"
    deadline = time.monotonic() + 5
    while last_events(raw_surge).get("background") != "finished":
        assert time.monotonic() < deadline


def test_each_request_runs_in_a_context_of_its_own(raw_surge: AsgiServer) -> None:
    # The app's first step runs in the dispatcher, not in a task of its own
    # (`surge._core.AsgiDispatch`): what it sets in a context variable must still
    # stay out of the next request on the same connection.
    conn = raw_surge.connect()
    assert conn.request("GET", "/context?set=first").body == b"unset"
    assert conn.request("GET", "/context?set=second").body == b"unset"


def test_first_step_after_one_that_became_a_task(raw_surge: AsgiServer) -> None:
    # A first step that registers on its task or suspends makes the task it ran in
    # the app's own (`EagerStarter._finish`); the next request's first step must
    # run in a fresh task, not in that one (done by then).
    conn = raw_surge.connect()
    for first in ("/on-done", "/suspend-first", "/on-done"):
        assert conn.request("GET", first).status == 200
        assert conn.request("GET", "/task-state").body == b"pending", first


def test_receive_result_runs_as_a_task(raw_surge: AsgiServer) -> None:
    # `receive()` completes at once and natively; it must still be a coroutine
    # for asyncio (ensure_future wraps it in a Task that sends into it).
    conn = raw_surge.connect()
    resp = conn.request("POST", "/receive-task", body=b"payload")
    assert resp.body == b"http.request:payload"


def test_done_callback_on_the_first_step_task_runs(raw_surge: AsgiServer) -> None:
    # A callback registered on the current task during a first step that then
    # returns: the task finishes as a task would, and the callback runs.
    conn = raw_surge.connect()
    assert conn.request("GET", "/on-done").body == b"registered"
    deadline = time.monotonic() + 10
    while last_events(raw_surge).get("done_callback") != "surge-asgi":
        assert time.monotonic() < deadline


@pytest.mark.parametrize("what", ["name", "value", "length", "str", "status"])
def test_invalid_response_is_an_honest_500(raw_surge: AsgiServer, what: str) -> None:
    """A header that would split the response, a bad length or status: nothing of it
    leaves; the client gets a 500 and the worker stays healthy."""
    conn = raw_surge.connect()
    resp = conn.request("GET", f"/bad?what={what}")
    assert resp.status == 500
    assert b"should not be sent" not in resp.raw + resp.body
    assert b"x-injected" not in resp.raw
    assert raw_surge.connect().request("GET", "/length").body == b"0123456789"


def test_repeated_header_list_changed_between_responses(raw_surge: AsgiServer) -> None:
    """An app answering with one header list again and again (which the server may
    keep encoded): an item replaced in the list, or a bytearray value changed in
    place, shows in the next response; a `connection: close` in such a list closes
    every connection it answers, HTTP/1.0 or 1.1."""
    conn = raw_surge.connect()
    expected = "0"
    for version in ["0", None, None, "1", None, "2", "0", None]:
        target = "/same-headers" + (f"?set={version}" if version else "")
        resp = conn.request("GET", target)
        expected = version or expected
        assert (resp.status, resp.body) == (200, b"ok")
        assert resp.getall("x-version") == [expected], target
        assert resp.header("content-type") == "text/plain"
    for value in ["a", "a", "b", "b", "cc", "a"]:
        resp = conn.request("GET", f"/same-headers?which=mutable&value={value}")
        assert resp.getall("x-mutable") == [value]
    for version in ["HTTP/1.1", "HTTP/1.1", "HTTP/1.0", "HTTP/1.1"]:
        closing = raw_surge.connect()
        resp = closing.request("GET", "/same-headers?which=close", version=version)
        assert (resp.body, resp.getall("connection")) == (b"ok", ["close"])
        assert closing.is_closed()
    assert conn.request("GET", "/same-headers").getall("x-version") == ["0"]


def test_fresh_equal_header_lists_between_responses(raw_surge: AsgiServer) -> None:
    """An app answering with a fresh list of fresh but equal tuples each time (as
    Starlette does; the server may reuse the encoding of equal bytes): a changed
    name, value or content-length shows in the next response, and a fresh
    `connection: close` closes every connection it answers."""
    conn = raw_surge.connect()
    steps = [
        ("x-value", "a", "ok"),
        ("x-value", "a", "ok"),
        ("x-value", "b", "ok"),
        ("x-value", "b", "ok"),
        ("x-other", "b", "ok"),
        ("x-value", "b", "a-longer-body"),
        ("x-value", "b", "a-longer-body"),
        ("x-value", "a", "ok"),
    ]
    for name, value, body in steps:
        resp = conn.request("GET", f"/fresh-headers?name={name}&value={value}&body={body}")
        assert (resp.status, resp.body) == (200, body.encode())
        assert resp.getall(name) == [value]
        other = "x-other" if name == "x-value" else "x-value"
        assert resp.getall(other) == []
        assert resp.header("content-length") == str(len(body))
    for _ in range(3):
        closing = raw_surge.connect()
        resp = closing.request("GET", "/fresh-headers?close=1")
        assert (resp.body, resp.getall("connection")) == (b"ok", ["close"])
        assert closing.is_closed()
    assert conn.request("GET", "/fresh-headers").getall("connection") == []


def test_many_pipelined_requests_mixed_framing(raw_surge: AsgiServer) -> None:
    """300 pipelined requests in one write, answered in order, whatever each
    response's framing and whether its app suspends."""
    targets = ["/length", "/stream?n=2", "/await-between", "/suspend-first", "/mapping"] * 60
    conn = raw_surge.connect(timeout=30)
    conn.send(b"".join(build_request("GET", t) for t in targets))
    expected = {
        "/length": b"0123456789",
        "/stream?n=2": b"chunk 0\nchunk 1\n",
        "/await-between": b"abcdefghijkl",
        "/suspend-first": b"after a suspension: ",
        "/mapping": b"mapped",
    }
    for target in targets:
        assert conn.read_response().body == expected[target], target
