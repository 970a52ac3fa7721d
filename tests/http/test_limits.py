"""Limits and bad input: each gets its exact status, the connection is closed
after it, and the server goes on serving new connections. Then deadlines
(slowloris, idle keep-alive) and clients that vanish at awkward moments."""

from __future__ import annotations

import json
import os
import socket
import time

import pytest
from rawhttp import RawConnection, build_request, encode_chunked, fetch

pytestmark = pytest.mark.timeout(30)

H = b"Host: t\r\n"


def post_head(*lines: bytes, path: bytes = b"/req/len") -> bytes:
    return b"POST " + path + b" HTTP/1.1\r\nHost: t\r\n" + b"".join(x + b"\r\n" for x in lines)


# input -> status. Bodies, when there are any, follow the blank line.
BAD_REQUESTS = [
    # Sizes
    ("request-line-over-8k", b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\n" + H + b"\r\n", 414),
    ("request-line-over-8k-no-newline-yet", b"GET /" + b"a" * 9000, 414),
    (
        "header-line-over-8k",
        b"GET / HTTP/1.1\r\n" + H + b"X-Long: " + b"a" * 9000 + b"\r\n\r\n",
        431,
    ),
    ("header-line-over-8k-unfinished", b"GET / HTTP/1.1\r\n" + H + b"X-Long: " + b"a" * 9000, 431),
    (
        "101-headers",
        b"GET / HTTP/1.1\r\n" + H + b"".join(b"X-H%d: v\r\n" % i for i in range(100)) + b"\r\n",
        431,
    ),
    ("body-over-1mib-by-length", post_head(b"Content-Length: 1048577") + b"\r\n", 413),
    # Framing (RFC 9112 section 6)
    (
        "length-and-chunked",
        post_head(b"Content-Length: 5", b"Transfer-Encoding: chunked") + b"\r\n0\r\n\r\n",
        400,
    ),
    (
        "chunked-and-length",
        post_head(b"Transfer-Encoding: chunked", b"Content-Length: 5") + b"\r\n0\r\n\r\n",
        400,
    ),
    (
        "duplicate-content-length",
        post_head(b"Content-Length: 5", b"Content-Length: 5") + b"\r\nhello",
        400,
    ),
    ("content-length-list", post_head(b"Content-Length: 5, 5") + b"\r\nhello", 400),
    ("content-length-negative", post_head(b"Content-Length: -1") + b"\r\n", 400),
    ("content-length-plus", post_head(b"Content-Length: +5") + b"\r\nhello", 400),
    ("content-length-hex", post_head(b"Content-Length: 0x5") + b"\r\nhello", 400),
    ("content-length-inner-space", post_head(b"Content-Length: 1 2") + b"\r\n", 400),
    ("content-length-empty", post_head(b"Content-Length: ") + b"\r\n", 400),
    ("content-length-letters", post_head(b"Content-Length: five") + b"\r\n", 400),
    ("content-length-overflow", post_head(b"Content-Length: 99999999999999999999") + b"\r\n", 400),
    ("te-gzip", post_head(b"Transfer-Encoding: gzip") + b"\r\nhello", 400),
    ("te-chunked-then-gzip", post_head(b"Transfer-Encoding: chunked, gzip") + b"\r\n", 400),
    ("te-chunked-twice", post_head(b"Transfer-Encoding: chunked, chunked") + b"\r\n", 400),
    (
        "te-chunked-in-two-fields",
        post_head(b"Transfer-Encoding: chunked", b"Transfer-Encoding: chunked") + b"\r\n",
        400,
    ),
    (
        "te-gzip-then-chunked",
        post_head(b"Transfer-Encoding: gzip, chunked") + b"\r\n0\r\n\r\n",
        501,
    ),
    (
        "te-in-http10",
        b"POST /req/len HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        400,
    ),
    # Chunked coding (RFC 9112 section 7.1)
    ("chunk-size-not-hex", post_head(b"Transfer-Encoding: chunked") + b"\r\nzz\r\n", 400),
    ("chunk-size-negative", post_head(b"Transfer-Encoding: chunked") + b"\r\n-5\r\nhello\r\n", 400),
    ("chunk-size-0x", post_head(b"Transfer-Encoding: chunked") + b"\r\n0x5\r\nhello\r\n", 400),
    ("chunk-size-empty", post_head(b"Transfer-Encoding: chunked") + b"\r\n\r\nhello\r\n", 400),
    (
        "chunk-size-overflow",
        post_head(b"Transfer-Encoding: chunked") + b"\r\n1" + b"0" * 16 + b"\r\n",
        400,
    ),
    (
        "chunk-size-bare-lf",
        post_head(b"Transfer-Encoding: chunked") + b"\r\n5\nhello\r\n0\r\n\r\n",
        400,
    ),
    (
        "chunk-data-without-crlf",
        post_head(b"Transfer-Encoding: chunked") + b"\r\n5\r\nhelloXX0\r\n\r\n",
        400,
    ),
    (
        "chunk-data-bare-lf",
        post_head(b"Transfer-Encoding: chunked") + b"\r\n5\r\nhello\n0\r\n\r\n",
        400,
    ),
    (
        "chunk-data-longer-than-size",
        post_head(b"Transfer-Encoding: chunked") + b"\r\n3\r\nhello\r\n0\r\n\r\n",
        400,
    ),
    (
        "bad-trailer",
        post_head(b"Transfer-Encoding: chunked") + b"\r\n0\r\nbad trailer line\r\n\r\n",
        400,
    ),
    # Header fields (RFC 9110 section 5, RFC 9112 section 5)
    ("obs-fold-space", b"GET / HTTP/1.1\r\n" + H + b"X-A: a\r\n  b\r\n\r\n", 400),
    ("obs-fold-tab", b"GET / HTTP/1.1\r\n" + H + b"X-A: a\r\n\tb\r\n\r\n", 400),
    ("space-in-header-name", b"GET / HTTP/1.1\r\n" + H + b"Bad Name: x\r\n\r\n", 400),
    ("space-before-colon", b"GET / HTTP/1.1\r\n" + H + b"X-A : x\r\n\r\n", 400),
    ("paren-in-header-name", b"GET / HTTP/1.1\r\n" + H + b"X(A): x\r\n\r\n", 400),
    ("empty-header-name", b"GET / HTTP/1.1\r\n" + H + b": x\r\n\r\n", 400),
    ("header-without-colon", b"GET / HTTP/1.1\r\n" + H + b"NoColon\r\n\r\n", 400),
    ("ctl-in-value", b"GET / HTTP/1.1\r\n" + H + b"X-A: a\x01b\r\n\r\n", 400),
    ("nul-in-value", b"GET / HTTP/1.1\r\n" + H + b"X-A: a\x00b\r\n\r\n", 400),
    ("del-in-value", b"GET / HTTP/1.1\r\n" + H + b"X-A: a\x7fb\r\n\r\n", 400),
    ("bare-cr-in-value", b"GET / HTTP/1.1\r\n" + H + b"X-A: a\rb\r\n\r\n", 400),
    ("missing-host", b"GET / HTTP/1.1\r\nX-A: b\r\n\r\n", 400),
    ("two-hosts", b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
    ("two-hosts-same-value", b"GET / HTTP/1.1\r\nHost: a\r\nhost: a\r\n\r\n", 400),
    # Request line
    ("http-2.0", b"GET / HTTP/2.0\r\n" + H + b"\r\n", 505),
    ("http-3.0", b"GET / HTTP/3.0\r\n" + H + b"\r\n", 505),
    ("http-1.2", b"GET / HTTP/1.2\r\n" + H + b"\r\n", 505),
    ("h2-preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505),
    ("lowercase-version", b"GET / http/1.1\r\n" + H + b"\r\n", 400),
    ("no-version", b"GET /\r\n" + H + b"\r\n", 400),
    ("no-target", b"GET HTTP/1.1\r\n" + H + b"\r\n", 400),
    ("space-in-target", b"GET /a b HTTP/1.1\r\n" + H + b"\r\n", 400),
    ("ctl-in-target", b"GET /a\x01b HTTP/1.1\r\n" + H + b"\r\n", 400),
    ("garbage-text", b"hello there, server\r\n\r\n", 400),
    ("garbage-binary", bytes(range(256)) * 4, 400),
    ("tls-client-hello", bytes.fromhex("16030100a5010000a10303") + os.urandom(160), 400),
]


def assert_answered_and_closed(c: RawConnection, status: int) -> None:
    r = c.read_response()
    assert r.status == status, r
    assert r.header("Connection") == "close", r
    assert r.header("Content-Type") == "text/plain; charset=utf-8"
    assert r.header("Content-Length") == str(len(r.body))
    assert c.is_closed(), "the connection stays open after a framing error"


def assert_still_serving(server) -> None:
    assert fetch(server.port, "/").body == b"hello"


@pytest.mark.parametrize(
    ("data", "status"), [b[1:] for b in BAD_REQUESTS], ids=[b[0] for b in BAD_REQUESTS]
)
def test_bad_request(server, data, status):
    with server.connect() as c:
        c.send(data)
        assert_answered_and_closed(c, status)
    assert_still_serving(server)


@pytest.mark.parametrize(
    ("data", "status"), [b[1:] for b in BAD_REQUESTS], ids=[b[0] for b in BAD_REQUESTS]
)
def test_bad_request_after_good_ones(uv_server, data, status):
    """Pipelined after valid requests: those are answered first, in order."""
    with uv_server.connect() as c:
        c.send(build_request("GET", "/fast/1") + build_request("GET", "/afast/2") + data)
        assert c.read_response().body == b"fast 1"
        assert c.read_response().body == b"afast 2"
        assert_answered_and_closed(c, status)


@pytest.mark.parametrize(
    ("data", "status"),
    [
        (b"GET / HTTP/1.1\r\n" + H + b"X-A: a\r\n b\r\n\r\n", 400),
        (post_head(b"Transfer-Encoding: chunked") + b"\r\n5\r\nhelloXX", 400),
        (b"GET / HTTP/2.0\r\n" + H + b"\r\n", 505),
        (b"GET / HTTP/1.1\r\n" + H + b"X-Long: " + b"a" * 9000 + b"\r\n\r\n", 431),
    ],
    ids=["obs-fold", "chunk-crlf", "http2", "long-header"],
)
def test_bad_request_byte_by_byte(uv_server, data, status):
    with uv_server.connect() as c:
        c.send_pieces(data, 1)
        assert_answered_and_closed(c, status)


def test_exactly_at_the_limits_is_fine(server):
    """8 KiB request line and header line, 100 header fields, 1 MiB body: accepted."""
    target = "/echo?" + "a" * (8 * 1024 - len("GET /echo? HTTP/1.1") - 2)
    line = f"GET {target} HTTP/1.1\r\n".encode()
    assert len(line) == 8 * 1024
    value = "v" * (8 * 1024 - len("X-Big: ") - 2)
    with server.connect() as c:
        c.send(line + H + f"X-Big: {value}\r\n\r\n".encode())
        data = json.loads(c.read_response().body)
        assert data["headers"] == [["x-big", value]]
        headers = [(f"X-H{i}", "v") for i in range(99)]  # and Host: 100 fields
        assert c.request("GET", "/echo", headers=headers).status == 200
        body = os.urandom(1024 * 1024)
        r = c.request("POST", "/req/len", body=body)
        assert json.loads(r.body)["len"] == len(body)
        r = c.request("POST", "/req/len", body=body, chunked=True, chunk_size=65536)
        assert json.loads(r.body)["len"] == len(body)


def test_header_block_over_64k_in_small_fragments(server):
    """The 64 KiB header-block limit holds across reads: 10 fields of 7 KiB each,
    every one under the line limit, trickled in 1 KiB pieces."""
    data = b"GET / HTTP/1.1\r\n" + H
    data += b"".join(b"X-F%d: " % i + b"v" * 7000 + b"\r\n" for i in range(10)) + b"\r\n"
    with server.connect() as c:
        finished = c.send_pieces(data, 1024, pause=0.002)
        assert not finished, "the server read the whole 70 KiB header block without answering"
        assert_answered_and_closed(c, 431)
    assert_still_serving(server)


def test_body_over_1mib_chunked(server):
    body = os.urandom(1536 * 1024)
    data = post_head(b"Transfer-Encoding: chunked") + b"\r\n" + encode_chunked(body, 65536)
    with server.connect() as c:
        assert not c.send_pieces(data, 65536, pause=0.005)
        assert_answered_and_closed(c, 413)
    assert_still_serving(server)


def test_body_over_1mib_by_length_with_the_body_sent(server):
    """The 413 comes as soon as the head is read; the client still sending the
    body must get it (the server closes, which may reset the connection)."""
    body = os.urandom(2 * 1024 * 1024)
    with server.connect() as c:
        c.send_pieces(post_head(b"Content-Length: %d" % len(body)) + b"\r\n" + body, 65536)
        assert_answered_and_closed(c, 413)
    assert_still_serving(server)


def test_streamed_body_over_its_route_limit(server):
    # /req/upload streams with max_body_size=64 MiB.
    with server.connect() as c:
        c.send(post_head(b"Content-Length: %d" % (65 * 1024 * 1024), path=b"/req/upload") + b"\r\n")
        assert_answered_and_closed(c, 413)


def test_bad_chunk_in_streamed_body(server):
    with server.connect() as c:
        c.send(
            post_head(b"Transfer-Encoding: chunked", path=b"/req/upload")
            + b"\r\n5\r\nhello\r\nzz\r\n"
        )
        assert_answered_and_closed(c, 400)


# Deadlines (a server with header_timeout=1 s and keepalive_timeout=1 s) ---------------------
#
# Timeouts are checked once a second, so a 1 s deadline fires after 1 to 2 s.


def test_slowloris_gets_408(timeout_server):
    with timeout_server.connect() as c:
        head = b"GET / HTTP/1.1\r\nHost: t\r\nX-Slow: " + b"a" * 100
        start = time.monotonic()
        answered = c.send_pieces(head, 1, pause=0.1) is False
        elapsed = time.monotonic() - start
        assert answered, "trickled a whole header block without a response"
        assert 0.9 < elapsed < 3.5
        assert_answered_and_closed(c, 408)
    assert_still_serving(timeout_server)


def test_slowloris_on_a_second_request_gets_408(timeout_server):
    with timeout_server.connect() as c:
        assert c.request("GET", "/").status == 200
        assert not c.send_pieces(b"GET / HTTP/1.1\r\nHost: t\r\nX: " + b"b" * 100, 1, pause=0.1)
        assert_answered_and_closed(c, 408)


def test_idle_keep_alive_connection_is_closed(timeout_server):
    with timeout_server.connect() as c:
        assert c.request("GET", "/").status == 200
        start = time.monotonic()
        assert c.is_closed(timeout=5.0), "an idle keep-alive connection stayed open"
        assert 0.9 < time.monotonic() - start < 3.5


def test_connection_that_never_sends_is_closed(timeout_server):
    with timeout_server.connect() as c:
        assert c.is_closed(timeout=5.0)


def test_busy_keep_alive_connection_stays_open(timeout_server):
    with timeout_server.connect() as c:
        for i in range(8):
            assert c.request("GET", f"/fast/{i}").status == 200
            time.sleep(0.4)
        assert c.request("GET", "/").status == 200


def test_slow_handler_outlives_the_keep_alive_timeout(timeout_server):
    """A response still owed is not cut by the idle timer."""
    with timeout_server.connect() as c:
        assert c.request("GET", "/slow?s=2.5").body == b"slow 2.5"
        assert c.request("GET", "/").body == b"hello"


def test_header_deadline_does_not_count_while_the_server_is_not_reading(timeout_server):
    """40 pipelined slow requests fill the queue (max_pipeline is 32), so the server
    stops reading; the head of the 41st, cut in two by the client, waits unread in
    the socket longer than header_timeout. The delay is the server's, not the
    client's: every request must still be answered."""
    batch = b"".join(build_request("GET", "/slow?s=2.5") for _ in range(40))
    last = build_request("GET", "/fast/41")
    with timeout_server.connect(timeout=10) as c:
        c.send(batch + last[:10])
        time.sleep(0.2)
        c.send(last[10:])
        bodies = [c.read_response().body for _ in range(41)]
    assert bodies == [b"slow 2.5"] * 40 + [b"fast 41"]


def test_streamed_body_is_not_buffered_without_bound(server):
    """While a streaming handler does not read, the server stops reading after
    `stream_buffer` (1 MiB): a client can then push only what the kernel buffers
    hold, far from the 40 MiB body."""
    size = 40 * 1024 * 1024
    with server.connect(timeout=20) as c:
        c.send(post_head(b"Content-Length: %d" % size, path=b"/req/upload-stall?s=1.5") + b"\r\n")
        piece = b"z" * 65536
        sent = 0
        c.sock.setblocking(False)
        deadline = time.monotonic() + 1.0
        while sent < size and time.monotonic() < deadline:
            try:
                sent += c.sock.send(piece[: min(len(piece), size - sent)])
            except BlockingIOError:
                time.sleep(0.01)
        buffered = sent
        c.sock.setblocking(True)
        while sent < size:
            c.sock.sendall(piece[: min(len(piece), size - sent)])
            sent += min(len(piece), size - sent)
        r = c.read_response()
        assert (r.status, json.loads(r.body)) == (200, {"len": size})
    assert buffered < 16 * 1024 * 1024, f"the server took {buffered >> 20} MiB unread"


def test_idle_timer_does_not_count_while_a_stream_handler_lags(timeout_server):
    """A streaming handler that reads its body only after 2.5 s: the server stops
    reading once its buffer is full, so the client sends nothing for a while. The
    stall is the server's; the upload must complete."""
    body = os.urandom(3 * 1024 * 1024)
    with timeout_server.connect(timeout=10) as c:
        data = build_request("POST", "/req/upload-stall?s=2.5", body=body, chunk_size=65536)
        c.send(data[:100])
        time.sleep(0.1)
        c.send(data[100:])
        r = c.read_response()
        assert (r.status, json.loads(r.body)) == (200, {"len": len(body)})


def test_stalled_body_is_closed(timeout_server):
    with timeout_server.connect() as c:
        c.send(post_head(b"Content-Length: 100") + b"\r\n" + b"x" * 10)
        start = time.monotonic()
        assert c.is_closed(timeout=5.0)
        assert time.monotonic() - start < 3.5
    assert_still_serving(timeout_server)


# Clients that go away ------------------------------------------------------------------


def server_cpu_seconds(server) -> float:
    with open(f"/proc/{server.proc.pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def assert_server_quiet(server) -> None:
    """No busy loop left behind: the idle server uses (almost) no CPU for 0.5 s."""
    before = server_cpu_seconds(server)
    time.sleep(0.5)
    assert server_cpu_seconds(server) - before < 0.25


@pytest.mark.parametrize(
    "data",
    [
        b"GET /slow?s=0.3 HTTP/1.1\r\nHo",
        post_head(b"Content-Length: 1000") + b"\r\n" + b"x" * 10,
        post_head(b"Transfer-Encoding: chunked") + b"\r\n100\r\nabc",
        post_head(b"Transfer-Encoding: chunked", path=b"/req/upload") + b"\r\n100\r\nabc",
        post_head(b"Content-Length: 1000000", path=b"/req/upload") + b"\r\n" + b"x" * 300_000,
        build_request("GET", "/slow?s=0.3"),
        build_request("GET", "/blocking?s=0.3"),
    ],
    ids=[
        "mid-head",
        "mid-body",
        "mid-chunk",
        "mid-streamed-chunk",
        "mid-streamed-body",
        "before-async-answer",
        "before-threaded-answer",
    ],
)
@pytest.mark.parametrize("how", ["close", "reset"])
def test_client_disconnects_mid_request(server, data, how):
    c = server.connect()
    c.send(data)
    time.sleep(0.05)
    if how == "reset":  # RST instead of FIN
        c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    c.close()
    time.sleep(0.2)
    assert_still_serving(server)


@pytest.mark.parametrize(
    "path",
    ["/stream/endless", "/stream/sync-endless", "/file/data/random.bin", "/stream/big?n=64"],
)
def test_client_disconnects_mid_response(server, path):
    for _ in range(3):
        c = server.connect()
        c.send(build_request("GET", path))
        received = 0
        while received < 200_000:
            received += len(c.sock.recv(65536))
        c.close()
    assert_still_serving(server)
    time.sleep(0.2)
    assert_server_quiet(server)


def test_client_half_closes_mid_streamed_body(server):
    """EOF in the middle of a streamed body: the body can never complete, so the
    handler's stream must end and the connection close now, not at the idle timeout."""
    with server.connect() as c:
        c.send(post_head(b"Transfer-Encoding: chunked", path=b"/req/upload") + b"\r\n100\r\nabc")
        time.sleep(0.1)
        c.sock.shutdown(socket.SHUT_WR)
        assert c.drain_until_closed(timeout=3.0) is not None, "connection left open"
    assert_still_serving(server)


def test_half_close_after_a_whole_streamed_body(server):
    """The body arrived whole before the EOF: a slow reader still gets all of it."""
    body = os.urandom(3 * 1024 * 1024)
    with server.connect(timeout=20) as c:
        c.send(build_request("POST", "/req/upload-slow", body=body, chunked=True, chunk_size=65536))
        c.sock.shutdown(socket.SHUT_WR)
        r = c.read_response()
        assert (r.status, json.loads(r.body)) == (200, {"len": len(body)})
        assert c.is_closed()


def test_half_closed_client_still_gets_its_answers(server):
    """A client that shuts down its sending side after the requests is answered."""
    with server.connect() as c:
        c.send(build_request("GET", "/slow?s=0.2") + build_request("GET", "/fast/1"))
        c.sock.shutdown(socket.SHUT_WR)
        assert c.read_response().body == b"slow 0.2"
        assert c.read_response().body == b"fast 1"
        assert c.is_closed()
