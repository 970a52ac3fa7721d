"""Property tests over a raw socket.

1. Random valid requests give the same responses pipelined and cut at random
   points as they do sent one at a time; and each response reflects its request
   (the `/echo` routes send back what the server parsed).
2. Random mutations of valid requests never hang or break the server: every
   answer is a well-formed response, the connection ends once the client stops
   sending, and the server goes on serving.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import re
import socket
import time
from urllib.parse import quote, unquote_to_bytes, urlencode

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rawhttp import IncompleteResponse, RawResponse, build_request, fetch

pytestmark = pytest.mark.timeout(300)

#: Examples per property: enough to find framing bugs, few enough to stay quick;
#: the `thorough` profile (tests/conftest.py) runs many more.
EXAMPLES = settings(max_examples=max(60, settings.default.max_examples // 2))

METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
TOKEN = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-"
VALUE = st.text(
    alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E) | st.just(" "), max_size=40
).map(str.strip)

segments = st.lists(
    st.text(
        alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x2FF), min_size=1, max_size=8
    ),
    max_size=4,
)


@st.composite
def requests(draw) -> dict:
    method = draw(st.sampled_from(METHODS))
    base = draw(st.sampled_from(["/echo", "/aecho"]))
    path = base + "".join("/" + quote(s, safe="") for s in draw(segments))
    query = draw(st.lists(st.tuples(st.text(TOKEN, max_size=5), VALUE), max_size=4))
    target = path + ("?" + urlencode(query) if query else "")
    headers = draw(
        st.lists(
            st.tuples(st.text(TOKEN, min_size=1, max_size=10).map("X-".__add__), VALUE), max_size=6
        )
    )
    body = draw(st.none() | st.binary(max_size=3000))
    chunked = body is not None and draw(st.booleans())
    chunk_size = draw(st.integers(1, 1500))
    raw = build_request(method, target, headers, body, chunked=chunked, chunk_size=chunk_size)
    return {
        "method": method,
        "path": path,
        "target": target,
        "headers": headers,
        "body": body,
        "raw": raw,
    }


def normalized(r: RawResponse) -> bytes:
    """The response bytes without the Date header (it may tick between runs)."""
    return re.sub(rb"(?i)\r\ndate: [^\r]*", b"", r.raw)


def check_reflects(req: dict, r: RawResponse) -> None:
    assert r.status == 200, r
    if req["method"] == "HEAD":
        assert r.body == b""
        return
    data = json.loads(r.body)
    assert data["method"] == req["method"]
    assert data["path"] == unquote_to_bytes(req["path"]).decode()
    assert data["query"] == req["target"].partition("?")[2]
    assert data["headers"] == [[k.lower(), v] for k, v in req["headers"]]
    body = req["body"] or b""
    assert data["body_len"] == len(body)
    assert data["body_sha"] == hashlib.sha256(body).hexdigest()[:16]


@EXAMPLES
@given(
    batch=st.lists(requests(), min_size=1, max_size=8),
    cuts=st.lists(st.floats(0, 1), max_size=8),
)
def test_pipelined_and_fragmented_equals_one_by_one(server, batch, cuts):
    methods = [req["method"] for req in batch]
    with server.connect() as c:
        one_by_one = []
        for req in batch:
            c.send(req["raw"])
            one_by_one.append(c.read_response(req["method"]))
    for req, r in zip(batch, one_by_one, strict=True):
        check_reflects(req, r)

    data = b"".join(req["raw"] for req in batch)
    points = sorted({int(f * len(data)) for f in cuts} | {0, len(data)})
    with server.connect() as c:
        for a, b in itertools.pairwise(points):
            c.send(data[a:b])
            time.sleep(0.001)  # separate reads on the server, most of the time
        pipelined = [c.read_response(m) for m in methods]
    assert [normalized(r) for r in pipelined] == [normalized(r) for r in one_by_one]


SEED = (
    build_request("POST", "/echo/a%20b?x=1&y=2", [("X-A", "1"), ("X-B", "two")], b"hello world")
    + build_request(
        "PUT", "/aecho", [("X-C", "3")], b"0123456789" * 30, chunked=True, chunk_size=64
    )
    + build_request("GET", "/items/5")
)


@st.composite
def mutated(draw) -> bytes:
    data = bytearray(SEED)
    for _ in range(draw(st.integers(1, 6))):
        i = draw(st.integers(0, len(data)))
        op = draw(st.sampled_from(["flip", "insert", "delete", "dup"]))
        if op == "flip" and i < len(data):
            data[i] = draw(st.integers(0, 255))
        elif op == "insert":
            data[i:i] = draw(
                st.sampled_from(
                    [b"\r\n", b"\n", b"\r", b" ", b":", b"\x00", b"0", b"f", b";", b"\t"]
                )
                | st.binary(min_size=1, max_size=4)
            )
        elif op == "delete":
            del data[i : i + draw(st.integers(1, 4))]
        elif op == "dup":
            j = draw(st.integers(i, min(len(data), i + 40)))
            data[j:j] = data[i:j]
    return bytes(data)


KNOWN_STATUSES = {200, 400, 404, 405, 408, 413, 414, 431, 500, 501, 505}


@EXAMPLES
@given(data=mutated(), piece=st.integers(1, 2000))
def test_mutated_requests_never_hang_or_break_the_server(uv_server, data, piece):
    with uv_server.connect() as c:
        c.send_pieces(data, piece)
        with contextlib.suppress(OSError):  # the server may have closed already
            c.sock.shutdown(socket.SHUT_WR)  # nothing more is coming
        closed_by_error = False
        deadline = time.monotonic() + 5
        while True:
            assert time.monotonic() < deadline, "the server neither answered nor closed"
            try:
                r = c.read_response()
            except IncompleteResponse as e:
                # Only a clean end between responses is fine.
                assert str(e) == "connection closed before a response", e
                break
            assert r.status in KNOWN_STATUSES, r
            assert r.version == "HTTP/1.1"
            if r.status >= 400 and r.status != 404 and r.status != 405:
                closed_by_error = True
                assert r.header("Connection") == "close", r
        if closed_by_error:
            assert not c.buf
    assert fetch(uv_server.port, "/").body == b"hello"
