"""What handlers see of a request, and the connection semantics around it:
bodies (Content-Length, chunked, streamed), 100-continue, HTTP/1.0, close."""

from __future__ import annotations

import hashlib
import http.client
import json
import os

import pytest
from rawhttp import build_request, encode_chunked, fetch

pytestmark = pytest.mark.timeout(30)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# Method, path, query, headers, cookies --------------------------------------------------


@pytest.mark.parametrize("echo", ["/echo", "/aecho"])
@pytest.mark.parametrize("method", ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"])
def test_method(server, echo, method):
    with server.connect() as c:
        r = c.request(method, echo)
    assert json.loads(r.body)["method"] == method


def test_path_is_percent_decoded(server):
    with server.connect() as c:
        r = c.request("GET", "/echo/a%20b/c%C3%A9/%2F?q=%20")
    data = json.loads(r.body)
    assert data["path"] == "/echo/a b/cé//"
    assert data["raw_path"] == "/echo/a%20b/c%C3%A9/%2F"
    assert data["query"] == "q=%20"


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        (
            "a=1&a=2&b=x+y&b=%26",
            {"a": "1", "all_a": ["1", "2"], "args_b": ["x y", "&"], "keys": ["a", "b"]},
        ),
        ("", {"a": None, "all_a": [], "args_b": [], "keys": []}),
        ("a=&b", {"a": "", "all_a": [""], "args_b": [""], "keys": ["a", "b"]}),
        ("a=%C3%BC&c=3", {"a": "ü", "all_a": ["ü"], "args_b": [], "keys": ["a", "c"]}),
    ],
)
def test_query_params(server, query, expected):
    r = fetch(server.port, f"/req/query?{query}" if query else "/req/query")
    assert r.json() == {**expected, "raw": query}


def test_headers_are_case_insensitive_and_multi(server):
    with server.connect() as c:
        r = c.request(
            "GET",
            "/req/headers",
            headers=[("x-CuStOm", "v1"), ("X-Multi", "a"), ("x-multi", "b, c"), ("X-Multi", "d")],
            host="example.test:8080",
        )
    assert r.status == 200
    assert json.loads(r.body) == {
        "custom": "v1",
        "custom_lower": "v1",
        "missing": None,
        "missing_default": "dflt",
        "multi": ["a", "b, c", "d"],
        "contains": True,
        "host": "example.test:8080",
        "count": 5,
    }


def test_header_values_are_trimmed_and_latin1(server):
    with server.connect() as c:
        c.send(
            b"GET /echo HTTP/1.1\r\nHost: t\r\nX-Pad:   padded value \t \r\n"
            b"X-Latin: caf\xe9\r\n\r\n"
        )
        data = json.loads(c.read_response().body)
    assert data["headers"] == [["x-pad", "padded value"], ["x-latin", "café"]]


def test_cookies(server):
    r = fetch(
        server.port,
        "/req/cookies",
        headers={"Cookie": 'a=1; b="quoted value"; c=x=y; broken; d='},
    )
    assert r.json() == {"a": "1", "b": "quoted value", "c": "x=y", "d": ""}


def test_cookies_from_several_headers(server):
    with server.connect() as c:
        r = c.request("GET", "/req/cookies", headers=[("Cookie", "a=1"), ("Cookie", "b=2; a=3")])
    assert json.loads(r.body) == {"a": "1", "b": "2"}


# Bodies -------------------------------------------------------------------------------


def test_body_text_and_content_type(server):
    r = fetch(
        server.port,
        "/req/text",
        method="POST",
        body="héllo".encode(),
        headers={"Content-Type": "text/plain; charset=utf-8"},
    )
    assert r.json() == {"text": "héllo", "ct": "text/plain; charset=utf-8"}


def test_body_json(server):
    payload = {"x": [1, 2, {"y": None}], "s": "ü"}
    r = fetch(server.port, "/req/json", method="POST", body=json.dumps(payload).encode())
    assert r.json() == {"got": payload}


def test_invalid_json_body_is_a_400(server):
    r = fetch(server.port, "/req/json", method="POST", body=b"{not json")
    assert r.status == 400
    assert b"invalid JSON body" in r.body


@pytest.mark.parametrize("size", [0, 1, 1000, 65536, 300_000, 1024 * 1024])
@pytest.mark.parametrize("chunked", [False, True], ids=["length", "chunked"])
def test_body_sizes(server, size, chunked):
    body = os.urandom(size)
    with server.connect() as c:
        c.send(build_request("POST", "/req/len", body=body, chunked=chunked, chunk_size=8192))
        r = c.read_response()
    assert r.status == 200
    assert json.loads(r.body) == {"len": size, "sha": sha(body)}


def test_body_in_async_handler(server):
    body = os.urandom(50_000)
    with server.connect() as c:
        r = c.request("POST", "/req/async-body", body=body, chunked=True, chunk_size=7000)
    assert json.loads(r.body) == {"len": 50_000}


def test_chunked_with_extensions_and_trailers(server):
    with server.connect() as c:
        c.send(
            b"POST /req/len HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"5;name=value\r\nhello\r\n6 ; x\r\n world\r\n"
            b"0\r\nX-Trailer: yes\r\nX-Other: 1\r\n\r\n"
        )
        r = c.read_response()
        assert json.loads(r.body) == {"len": 11, "sha": sha(b"hello world")}
        assert c.request("GET", "/").body == b"hello"


def test_chunked_body_byte_by_byte(uv_server):
    body = b"abcdefghij" * 3
    data = build_request("POST", "/req/len", body=body, chunked=True, chunk_size=7)
    with uv_server.connect() as c:
        for i in range(len(data)):
            c.send(data[i : i + 1])
        r = c.read_response()
    assert json.loads(r.body) == {"len": 30, "sha": sha(body)}


def test_body_limit_raised_by_route(server):
    body = os.urandom(2 * 1024 * 1024)
    for chunked in (False, True):
        with server.connect(timeout=20) as c:
            r = c.request("POST", "/req/big", body=body, chunked=chunked, chunk_size=65536)
        assert r.status == 200
        assert json.loads(r.body) == {"len": len(body), "sha": sha(body)}


# Streamed request bodies ----------------------------------------------------------------


@pytest.mark.parametrize("chunked", [True, False], ids=["chunked", "length"])
def test_streamed_upload_arrives_in_pieces(server, chunked):
    body = os.urandom(8 * 1024 * 1024)
    data = build_request("POST", "/req/upload", body=body, chunked=chunked, chunk_size=65536)
    with server.connect(timeout=30) as c:
        # In several writes, so the server sees the body arrive over time.
        for i in range(0, len(data), 512 * 1024):
            assert c.send(data[i : i + 512 * 1024])
        r = c.read_response()
        assert r.status == 200
        result = json.loads(r.body)
        assert result["len"] == len(body)
        assert result["sha"] == sha(body)
        assert result["chunks"] > 1
        assert result["max"] < len(body)
        # The connection is still usable afterwards.
        assert c.request("GET", "/").body == b"hello"


def test_streamed_upload_with_a_slow_reader(uv_server):
    """Reading pauses while the handler lags; nothing is lost or reordered."""
    body = os.urandom(6 * 1024 * 1024)
    with uv_server.connect(timeout=30) as c:
        r = c.request("POST", "/req/upload-slow", body=body, chunked=True, chunk_size=100_000)
    assert json.loads(r.body) == {"len": len(body)}


def test_streamed_upload_followed_by_pipelined_requests(server):
    body = os.urandom(300_000)
    with server.connect(timeout=20) as c:
        c.send(
            build_request("POST", "/req/upload", body=body, chunked=True, chunk_size=30_000)
            + build_request("GET", "/")
            + build_request("POST", "/req/len", body=b"after")
        )
        first, second, third = c.read_responses(["POST", "GET", "POST"])
    assert json.loads(first.body)["sha"] == sha(body)
    assert second.body == b"hello"
    assert json.loads(third.body) == {"len": 5, "sha": sha(b"after")}


# Expect: 100-continue --------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/req/len", "/req/async-body", "/req/upload"])
def test_expect_100_continue(server, path):
    body = b"x" * 5000
    with server.connect() as c:
        c.send(
            b"POST %b HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n"
            b"Expect: 100-continue\r\n\r\n" % (path.encode(), len(body))
        )
        interim = c.read_response()
        assert interim.raw == b"HTTP/1.1 100 Continue\r\n\r\n"
        c.send(body)
        final = c.read_response("POST")
        assert final.status == 200
        assert json.loads(final.body)["len"] == len(body)


def test_expect_100_continue_behind_a_slow_response(server):
    with server.connect(timeout=1.5) as c:
        c.send(
            build_request("GET", "/slow?s=0.3")
            + b"POST /req/len HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n"
            b"Expect: 100-continue\r\n\r\n"
        )
        assert c.read_response().body == b"slow 0.3"
        assert c.read_response().raw == b"HTTP/1.1 100 Continue\r\n\r\n"
        c.send(b"hello")
        assert json.loads(c.read_response("POST").body)["len"] == 5


def test_expect_100_continue_pipelined_client_sends_anyway(server):
    """What holds already: a client that stops waiting and sends the body is answered."""
    with server.connect() as c:
        c.send(
            build_request("GET", "/slow?s=0.2")
            + b"POST /req/len HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n"
            b"Expect: 100-continue\r\n\r\n"
        )
        assert c.read_response().body == b"slow 0.2"
        c.send(b"hello")
        r = c.read_response("POST")
        if r.status == 100:
            r = c.read_response("POST")
        assert json.loads(r.body)["len"] == 5


def test_expect_100_continue_with_curl(uv_server, run_curl):
    out = run_curl(
        "-sv",
        "-H",
        "Expect: 100-continue",
        "--data-binary",
        "@-",
        uv_server.url("/req/len"),
        input=b"y" * 2000,
    )
    assert b"< HTTP/1.1 100 Continue" in out.stderr
    assert json.loads(out.stdout)["len"] == 2000


def test_expect_100_continue_over_the_limit_gets_413(uv_server):
    with uv_server.connect() as c:
        c.send(
            b"POST /req/len HTTP/1.1\r\nHost: t\r\nContent-Length: 5000000\r\n"
            b"Expect: 100-continue\r\n\r\n"
        )
        # The final status at once: a 100 first would have the client send 5 MB
        # in vain.
        r = c.read_response("POST")
        assert r.status == 413
        assert c.is_closed()


@pytest.mark.parametrize("stream", [False, True])
def test_expect_100_continue_over_a_route_limit_gets_413_at_once(uv_server, stream):
    path = "/req/upload" if stream else "/req/len"
    with uv_server.connect() as c:
        c.send(
            b"POST %b HTTP/1.1\r\nHost: t\r\nContent-Length: 99999999\r\n"
            b"Expect: 100-continue\r\n\r\n" % path.encode()
        )
        assert c.read_response("POST").status == 413


# HTTP/1.0, keep-alive and Connection: close ------------------------------------------------


def test_http10_closes_by_default(server):
    with server.connect() as c:
        c.send(b"GET / HTTP/1.0\r\n\r\n")
        r = c.read_response()
        assert r.version == "HTTP/1.1"
        assert (r.status, r.body) == (200, b"hello")
        assert r.header("Connection") == "close"
        assert c.is_closed()


def test_http10_keep_alive_when_asked(server):
    with server.connect() as c:
        for _ in range(3):
            c.send(b"GET /echo HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            r = c.read_response()
            assert r.status == 200
            assert json.loads(r.body)["version"] == "1.0"
            assert r.header("Connection") == "keep-alive"
        c.send(b"GET / HTTP/1.0\r\n\r\n")
        assert c.read_response().header("Connection") == "close"
        assert c.is_closed()


def test_http10_body_by_content_length(server):
    with server.connect() as c:
        c.send(b"POST /req/len HTTP/1.0\r\nContent-Length: 5\r\n\r\nhello")
        assert json.loads(c.read_response().body)["len"] == 5
        assert c.is_closed()


def test_connection_close_in_the_middle_of_a_pipeline(server):
    with server.connect() as c:
        c.send(
            build_request("GET", "/afast/1")
            + build_request("GET", "/slow?s=0.2", headers={"Connection": "close"})
            + build_request("GET", "/fast/3")
        )
        assert c.read_response().body == b"afast 1"
        r = c.read_response()
        assert (r.body, r.header("Connection")) == (b"slow 0.2", "close")
        assert c.is_closed()


@pytest.mark.parametrize("path", ["/stream/async", "/file/self"])
def test_connection_close_after_a_body_written_by_python(server, path):
    with server.connect() as c:
        c.send(
            build_request("GET", path, headers={"Connection": "close"}) + build_request("GET", "/")
        )
        r = c.read_response()
        assert r.status == 200 and r.body
        assert c.is_closed()


@pytest.mark.parametrize("path", ["/", "/ret/async-str", "/nope", "/error/boom"])
def test_connection_close(server, path):
    with server.connect() as c:
        # Anything pipelined after `Connection: close` is ignored.
        c.send(
            build_request("GET", path, headers={"Connection": "close"}) + build_request("GET", "/")
        )
        r = c.read_response()
        assert r.header("Connection") == "close"
        assert c.is_closed()


def test_keep_alive_is_the_default_in_http11(server):
    with server.connect() as c:
        for i in range(20):
            r = c.request("GET", f"/fast/{i}")
            assert r.body == f"fast {i}".encode()
            assert r.header("Connection") is None


def test_http_client_reuses_the_connection(server):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        for path, body in [("/", b"hello"), ("/ret/async-str", b"async hello"), ("/", b"hello")]:
            conn.request("GET", path)
            r = conn.getresponse()
            assert r.read() == body
        sock = conn.sock
        conn.request("POST", "/req/len", body=b"12345")
        assert json.loads(conn.getresponse().read())["len"] == 5
        assert conn.sock is sock
    finally:
        conn.close()


# curl --------------------------------------------------------------------------------------


def test_curl_get_and_reuse(uv_server, run_curl):
    out = run_curl("-sv", uv_server.url("/"), uv_server.url("/ret/dict"))
    assert out.stdout == b'hello{"a":1,"b":[true,null],"c":"\xc3\xbc"}'
    assert b"Re-using existing connection" in out.stderr


def test_curl_post_and_chunked_upload(uv_server, run_curl, tmp_path):
    body = os.urandom(3 * 1024 * 1024)
    f = tmp_path / "upload.bin"
    f.write_bytes(body)
    out = run_curl("-sS", "--data-binary", f"@{f}", uv_server.url("/req/big"))
    assert json.loads(out.stdout) == {"len": len(body), "sha": sha(body)}
    out = run_curl(
        "-sS",
        "-H",
        "Transfer-Encoding: chunked",
        "--data-binary",
        f"@{f}",
        uv_server.url("/req/upload"),
    )
    result = json.loads(out.stdout)
    assert (result["len"], result["sha"]) == (len(body), sha(body))


def test_curl_http10(uv_server, run_curl):
    out = run_curl("-sS", "-0", "-i", uv_server.url("/echo"))
    head, _, body = out.stdout.partition(b"\r\n\r\n")
    assert b"Connection: close" in head
    assert json.loads(body)["version"] == "1.0"


def test_curl_head(uv_server, run_curl):
    out = run_curl("-sS", "-I", uv_server.url("/ret/str"))
    assert out.stdout.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"Content-Length: 13\r\n" in out.stdout


def test_curl_sees_404_and_405(uv_server, run_curl):
    out = run_curl("-s", "-o", "/dev/null", "-w", "%{http_code}", uv_server.url("/nope"))
    assert out.stdout == b"404"
    out = run_curl("-s", "-i", "-X", "DELETE", uv_server.url("/submit"))
    assert out.stdout.startswith(b"HTTP/1.1 405")
    assert b"Allow: OPTIONS, POST\r\n" in out.stdout


def test_raw_chunk_encoder_matches_curl_framing():
    # The helper the other tests rely on frames like RFC 9112 says.
    assert encode_chunked(b"hello world", 5) == b"5\r\nhello\r\n5\r\n worl\r\n1\r\nd\r\n0\r\n\r\n"


# Valid but unusual input (RFC 9112 allows or requires accepting it) ------------------------

UNUSUAL_VALID = [
    (
        "te-uppercase",
        b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: CHUNKED\r\n\r\n"
        b"3\r\nabc\r\n0\r\n\r\n",
        3,
    ),
    (
        "content-length-leading-zero",
        b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 003\r\n\r\nabc",
        3,
    ),
    (
        "content-length-padded",
        b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length:   3  \r\n\r\nabc",
        3,
    ),
    (
        "chunk-ext-quoted",
        b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
        b'3;a="x y";b\r\nabc\r\n0\r\n\r\n',
        3,
    ),
    (
        "chunk-size-uppercase-hex",
        b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n"
        b"\r\nA\r\n0123456789\r\n0\r\n\r\n",
        10,
    ),
    ("empty-line-before-request", b"\r\nGET /echo HTTP/1.1\r\nHost: t\r\n\r\n", 0),
    ("bare-lf-line-ends", b"GET /echo HTTP/1.1\nHost: t\n\n", 0),
    (
        "connection-close-among-tokens-keeps-body",
        b"POST /echo HTTP/1.1\r\nHost: t\r\n"
        b"Connection: keep-alive, Upgrade\r\nContent-Length: 2\r\n\r\nhi",
        2,
    ),
    ("empty-host-value", b"GET /echo HTTP/1.1\r\nHost:\r\n\r\n", 0),
]


@pytest.mark.parametrize(
    ("data", "body_len"), [u[1:] for u in UNUSUAL_VALID], ids=[u[0] for u in UNUSUAL_VALID]
)
def test_unusual_but_valid_requests(server, data, body_len):
    with server.connect() as c:
        c.send(data)
        r = c.read_response()
        assert r.status == 200, r
        assert json.loads(r.body)["body_len"] == body_len
        assert c.request("GET", "/").body == b"hello"


def test_absolute_form_target(server):
    with server.connect() as c:
        c.send(b"GET http://test/echo?a=1 HTTP/1.1\r\nHost: test\r\n\r\n")
        r = c.read_response()
        assert r.status == 200
        data = json.loads(r.body)
        assert (data["path"], data["query"]) == ("/echo", "a=1")


def test_absolute_form_target_host_wins_over_the_host_header(server):
    # RFC 9112 3.2.2: the origin server uses the target's host, not Host.
    with server.connect() as c:
        c.send(b"GET http://api.example:8080/echo?a=1 HTTP/1.1\r\nHost: other\r\n\r\n")
        data = json.loads(c.read_response().body)
        assert (data["host"], data["path"], data["query"]) == ("api.example:8080", "/echo", "a=1")
        c.send(b"GET /echo HTTP/1.1\r\nHost: other\r\n\r\n")
        assert json.loads(c.read_response().body)["host"] == "other"


def test_fragment_is_not_part_of_path_or_query(server):
    with server.connect() as c:
        c.send(b"GET /echo?a=1#frag HTTP/1.1\r\nHost: t\r\n\r\n")
        data = json.loads(c.read_response().body)
        assert (data["path"], data["raw_path"], data["query"]) == ("/echo", "/echo", "a=1")
        assert data["params"] == [["a", "1"]]
