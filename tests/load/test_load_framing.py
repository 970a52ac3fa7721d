"""Response framing: byte tables, split at every byte, malformed input."""

from __future__ import annotations

import pytest
from surge.load.http_framing import MalformedReply, ResponseFramer

CASES = [
    (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", [200]),
    (b"HTTP/1.1 204 No Content\r\n\r\n", [204]),
    (b"HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n", [304]),
    (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\ncontent-length: 0\r\n\r\n", [201]),
    (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"3;ext=1\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\nX-Trailer: 1\r\n\r\n",
        [200],
    ),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", [200]),
    (
        b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx"
        b"HTTP/1.1 503 Busy\r\nContent-Length: 3\r\n\r\nbad"
        b"HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\nConnection: keep-alive\r\n\r\n",
        [200, 503, 404],
    ),
]


@pytest.mark.parametrize(("data", "statuses"), CASES)
def test_whole_and_byte_by_byte(data: bytes, statuses: list[int]) -> None:
    assert ResponseFramer().feed(data) == statuses
    f = ResponseFramer()
    got = []
    for i in range(len(data)):
        got += f.feed(data[i : i + 1])
    assert got == statuses
    assert not f.mid_response


def test_head_responses_have_no_body() -> None:
    f = ResponseFramer(head_only=True)
    data = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" * 2
    assert f.feed(data) == [200, 200]


def test_body_until_close() -> None:
    f = ResponseFramer()
    assert f.feed(b"HTTP/1.1 200 OK\r\n\r\nsome body") == []
    assert f.eof() == 200


def test_connection_close_is_seen() -> None:
    f = ResponseFramer()
    f.feed(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
    assert f.close_after
    f.feed(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n")
    assert f.close_after


@pytest.mark.parametrize(
    "data",
    [
        b"HELLO WORLD\r\n\r\n",
        b"HTTP/1.1 2x0 OK\r\n\r\n",
        b"HTTP/2 200\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: nope\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabXX",
    ],
)
def test_malformed(data: bytes) -> None:
    with pytest.raises(MalformedReply):
        ResponseFramer().feed(data)


def test_endless_head_is_malformed() -> None:
    f = ResponseFramer()
    with pytest.raises(MalformedReply):
        for _ in range(100):
            f.feed(b"HTTP/1.1 200 OK\r\nX: " + b"a" * 1000)
