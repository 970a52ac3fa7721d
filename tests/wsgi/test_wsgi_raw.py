"""A bare WSGI app under `surge serve` on a raw socket: PEP 3333's environ and
types, `wsgi.input` read in pieces across a slowly sent body, response framing
(Content-Length, chunked, close-delimited for HTTP/1.0), start_response's rules,
close() of iterables (also when the client leaves mid-body), errors before and
after the headers, pipelining order."""

from __future__ import annotations

import json
import socket
import struct
import time

import pytest
from rawhttp import build_request
from wsgiservers import WsgiServer

pytestmark = pytest.mark.timeout(30)


def test_environ_keys_and_types(raw_surge: WsgiServer) -> None:
    conn = raw_surge.connect()
    conn.send(
        build_request(
            "POST",
            "/environ?a=1&b=%20",
            [("X-Twice", "1"), ("X-Twice", "2"), ("X_Spoof", "bad"), ("Content-Type", "text/x")],
            b"abc",
        )
    )
    env = json.loads(conn.read_response().body)
    assert env["REQUEST_METHOD"] == ["str", "POST"]
    assert env["SCRIPT_NAME"] == ["str", ""]
    assert env["PATH_INFO"] == ["str", "/environ"]
    assert env["QUERY_STRING"] == ["str", "a=1&b=%20"]
    assert env["CONTENT_TYPE"] == ["str", "text/x"]
    assert env["CONTENT_LENGTH"] == ["str", "3"]
    assert env["SERVER_NAME"] == ["str", "127.0.0.1"]
    assert env["SERVER_PORT"] == ["str", str(raw_surge.port)]
    assert env["SERVER_PROTOCOL"] == ["str", "HTTP/1.1"]
    assert env["REMOTE_ADDR"] == ["str", "127.0.0.1"]
    assert env["REMOTE_PORT"] == ["str", str(conn.sock.getsockname()[1])]
    assert env["HTTP_HOST"] == ["str", "test"]
    assert env["HTTP_X_TWICE"] == ["str", "1,2"]
    assert "HTTP_X_SPOOF" not in env and "HTTP_CONTENT_TYPE" not in env
    assert env["wsgi.version"] == ["tuple", [1, 0]]
    assert env["wsgi.url_scheme"] == ["str", "http"]
    assert env["wsgi.multithread"] == ["bool", True]
    assert env["wsgi.multiprocess"] == ["bool", False]
    assert env["wsgi.run_once"] == ["bool", False]
    assert env["wsgi.errors"][0] == env["wsgi.input"][0] == env["wsgi.file_wrapper"][0] == "True"


def test_environ_joins_repeated_headers_in_any_case(raw_surge: WsgiServer) -> None:
    # A common name (its key is shared), a name repeated in another case, and
    # repeats past the 32nd field (looked up in the environ there) join with ","
    # in arrival order, as gunicorn does.
    filler = [(f"X-Filler-{i}", str(i)) for i in range(34)]
    headers = [("Accept", "a"), ("accept", "b"), ("X-Case", "1"), ("x-CASE", "2"), *filler]
    headers += [("X-Case", "3"), ("User-Agent", "ua"), ("X-Filler-3", "again"), ("ACCEPT", "c")]
    conn = raw_surge.connect()
    conn.send(build_request("GET", "/environ", headers))
    env = json.loads(conn.read_response().body)
    assert env["HTTP_ACCEPT"] == ["str", "a,b,c"]
    assert env["HTTP_X_CASE"] == ["str", "1,2,3"]
    assert env["HTTP_X_FILLER_3"] == ["str", "3,again"]
    assert env["HTTP_X_FILLER_33"] == ["str", "33"]
    assert env["HTTP_USER_AGENT"] == ["str", "ua"]


def test_path_info_is_latin1_of_percent_decoded_bytes(raw_surge: WsgiServer) -> None:
    conn = raw_surge.connect()
    # /environ followed by nothing: use a 404 path and check through /environ's sibling.
    conn.send(build_request("GET", "/%65nviron"))
    env = json.loads(conn.read_response().body)
    assert env["PATH_INFO"] == ["str", "/environ"]
    conn.send(build_request("GET", "/environ/caf%C3%A9"))
    assert conn.read_response().status == 404  # routed by PATH_INFO: not "/environ"


def test_read_one_byte_at_a_time_across_a_slow_body(raw_surge: WsgiServer) -> None:
    body = b"0123456789" * 30
    conn = raw_surge.connect()
    head = build_request("POST", "/read1", {}, body)[: -len(body)]
    conn.send(head)
    for i in range(0, len(body), 50):
        conn.send(body[i : i + 50])
        time.sleep(0.02)
    resp = conn.read_response()
    assert json.loads(resp.body) == {"n": 300, "body": body.decode()}


def test_readline_and_readlines_across_a_slow_chunked_body(raw_surge: WsgiServer) -> None:
    body = b"first line\nsecond\nthird\nlast without newline"
    conn = raw_surge.connect()
    req = build_request("POST", "/readline", {}, body, chunked=True, chunk_size=4)
    conn.send_pieces(req, 7, pause=0.005)
    assert json.loads(conn.read_response().body) == {
        "first": "first line\n",
        "second": "sec",
        "rest": ["ond\n", "third\n", "last without newline"],
    }


def test_input_iteration(raw_surge: WsgiServer) -> None:
    conn = raw_surge.connect()
    conn.send(build_request("POST", "/iterate", {}, b"a\nbb\nccc"))
    assert json.loads(conn.read_response().body) == {"lines": ["a\n", "bb\n", "ccc"]}


def test_generator_is_chunked_on_http11(raw_surge: WsgiServer) -> None:
    conn = raw_surge.connect()
    resp = conn.request("GET", "/gen")
    assert resp.header("transfer-encoding") == "chunked"
    assert resp.chunks == [b"part0;", b"part1;", b"part2;", b"part3;"]
    assert conn.request("GET", "/gen").body == b"part0;part1;part2;part3;"  # kept alive


def test_http10_is_close_delimited(raw_surge: WsgiServer) -> None:
    conn = raw_surge.connect()
    conn.send(build_request("GET", "/gen", version="HTTP/1.0"))
    resp = conn.read_response()
    assert resp.until_close and resp.header("transfer-encoding") is None
    assert resp.header("connection") == "close"
    assert resp.body == b"part0;part1;part2;part3;"


def test_http10_keep_alive_with_content_length(raw_surge: WsgiServer) -> None:
    conn = raw_surge.connect()
    req = build_request("GET", "/tracked?ka10", [("Connection", "keep-alive")], version="HTTP/1.0")
    conn.send(req)
    resp = conn.read_response()
    assert resp.body == b"abcd" and resp.header("connection") == "keep-alive"
    conn.send(req)
    assert conn.read_response().body == b"abcd"


def test_pipelined_requests_answered_in_order(raw_surge: WsgiServer) -> None:
    conn = raw_surge.connect()
    targets = ["/sleep?0.3", "/gen", "/sleep?0.1", "/write", "/sleep?0"]
    conn.send(b"".join(build_request("GET", t) for t in targets))
    bodies = [r.body for r in conn.read_responses(["GET"] * len(targets))]
    assert bodies == [
        b'{"slept": "0.3"}',
        b"part0;part1;part2;part3;",
        b'{"slept": "0.1"}',
        b"written;returned",
        b'{"slept": "0"}',
    ]


def test_write_callable(raw_surge: WsgiServer) -> None:
    assert raw_surge.connect().request("GET", "/write").body == b"written;returned"


def test_iterable_close_is_called(raw_surge: WsgiServer) -> None:
    conn = raw_surge.connect()
    assert conn.request("GET", "/tracked?one").body == b"abcd"
    assert conn.request("HEAD", "/tracked?two").body == b""
    deadline = time.monotonic() + 2
    while True:
        closed = json.loads(conn.request("GET", "/closed").body)["closed"]
        if ("one" in closed and "two" in closed) or time.monotonic() > deadline:
            break
    assert "one" in closed and "two" in closed


def test_client_leaving_mid_body_stops_the_iteration(raw_surge: WsgiServer) -> None:
    """The thread waiting for room learns the client left: the iterable is closed."""
    conn = raw_surge.connect(timeout=10)
    conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 * 1024)
    conn.send(build_request("GET", "/tracked-big?gone"))
    assert conn.sock.recv(1000).startswith(b"HTTP/1.1 200 OK")
    time.sleep(0.2)  # the thread is waiting at the high-water mark by now
    conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.sock.close()  # a reset, with megabytes unsent
    other = raw_surge.connect()
    deadline = time.monotonic() + 30
    while True:
        closed = json.loads(other.request("GET", "/closed").body)["closed"]
        if "gone" in closed or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert "gone" in closed
    assert other.request("GET", "/write").body == b"written;returned"


def test_exc_info_replaces_headers_before_they_left(raw_surge: WsgiServer) -> None:
    resp = raw_surge.connect().request("GET", "/exc-info")
    assert resp.status == 500 and resp.reason == "Oops" and resp.body == b"replaced"


def test_error_before_start_response_is_500(raw_surge: WsgiServer) -> None:
    conn = raw_surge.connect()
    resp = conn.request("GET", "/fail-before")
    assert resp.status == 500 and resp.header("connection") == "close"
    assert "before start_response" in raw_surge.log()


def test_hop_by_hop_header_is_refused(raw_surge: WsgiServer) -> None:
    assert raw_surge.connect().request("GET", "/hop").status == 500


def test_error_after_headers_closes_the_connection(raw_surge: WsgiServer) -> None:
    conn = raw_surge.connect()
    conn.send(build_request("GET", "/fail-after-headers"))
    raw = b""
    while chunk := conn.sock.recv(65536):
        raw += chunk
    assert raw.startswith(b"HTTP/1.1 200 OK") and b"first;" in raw
    assert not raw.endswith(b"0\r\n\r\n")  # no terminating chunk: the client sees it cut


def test_file_wrapper(raw_surge: WsgiServer) -> None:
    resp = raw_surge.connect().request("GET", "/file")
    assert resp.body == b"hello from a file\n"


def test_large_response_with_slow_reader_is_complete(raw_surge: WsgiServer) -> None:
    """Write back-pressure: the thread waits while the client does not read."""
    conn = raw_surge.connect(timeout=10)
    conn.send(build_request("GET", "/big?160"))  # 10 MiB: more than the socket buffers hold
    time.sleep(0.5)
    resp = conn.read_response()
    assert len(resp.body) == 160 * 65536 and set(resp.body) == {ord("x")}
    assert conn.request("GET", "/write").body == b"written;returned"
