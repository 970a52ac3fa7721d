"""`wsgi_response_head`, the native check and encoding of a WSGI app's
`start_response(status, headers)`: a table of heads it writes and of the rules
it refuses (PEP 3333), with the error each one raises."""

from __future__ import annotations

import re
from typing import Any

import pytest
from surge._core import wsgi_response_head

NONE, LENGTH, CHUNKED, UNTIL_CLOSE = 0, 1, 2, 3


def head(
    status: Any,
    headers: Any,
    *,
    head_only: bool = False,
    http10: bool = False,
    keep_alive: bool = True,
) -> tuple[list[str], int, int, bool]:
    data, framing, length, reuse = wsgi_response_head(
        status, headers, head_only, http10, keep_alive
    )
    assert data.endswith(b"\r\n\r\n")
    lines = data[:-4].decode("latin-1").split("\r\n")
    # The date changes every second: check its form, then leave it out.
    dates = [x for x in lines if x.lower().startswith("date: ")]
    assert len(dates) == 1
    assert re.fullmatch(r"date: \w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d GMT", dates[0]) or (
        dates[0] == "Date: mine"
    )
    return [x for x in lines if not x.startswith("date: ")], framing, length, reuse


@pytest.mark.parametrize(
    ("args", "kwargs", "lines", "framing", "length", "reuse"),
    [
        (
            ("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "13")]),
            {},
            ["HTTP/1.1 200 OK", "server: surge", "Content-Type: text/plain", "Content-Length: 13"],
            LENGTH,
            13,
            True,
        ),
        # No length on HTTP/1.1: chunked; on HTTP/1.0: until the connection closes.
        (("200 OK", []), {}, ["HTTP/1.1 200 OK", "server: surge", "transfer-encoding: chunked"],
         CHUNKED, 0, True),
        (("200 OK", []), {"http10": True}, ["HTTP/1.1 200 OK", "server: surge",
         "connection: close"], UNTIL_CLOSE, 0, False),
        (("200 OK", [("Content-Length", " 5 ")]), {"http10": True}, ["HTTP/1.1 200 OK",
         "server: surge", "Content-Length:  5 ", "connection: keep-alive"], LENGTH, 5, True),
        # No body: HEAD, 204, 304, 1xx (a Content-Length given is passed on as it is).
        (("200 OK", [("Content-Length", "9")]), {"head_only": True}, ["HTTP/1.1 200 OK",
         "server: surge", "Content-Length: 9"], NONE, 0, True),
        (("204 No Content", []), {}, ["HTTP/1.1 204 No Content", "server: surge"], NONE, 0, True),
        (("304 Not Modified", []), {}, ["HTTP/1.1 304 Not Modified", "server: surge"], NONE, 0,
         True),
        # The app's own Server and Date replace the server's.
        (("200 OK", [("Server", "app"), ("Date", "mine"), ("Content-Length", "0")]), {},
         ["HTTP/1.1 200 OK", "Server: app", "Date: mine", "Content-Length: 0"], LENGTH, 0, True),
        (("404 Not Found", [("Content-Length", "0")]), {"keep_alive": False},
         ["HTTP/1.1 404 Not Found", "server: surge", "Content-Length: 0", "connection: close"],
         LENGTH, 0, False),
        # Values are "bytes as str": latin-1 characters go out as single bytes.
        (("200 OK", [("X-Name", "caf\xe9"), ("Content-Length", "0")]), {},
         ["HTTP/1.1 200 OK", "server: surge", "X-Name: caf\xe9", "Content-Length: 0"], LENGTH,
         0, True),
    ],
)  # fmt: skip
def test_heads(
    args: tuple[Any, Any],
    kwargs: dict[str, bool],
    lines: list[str],
    framing: int,
    length: int,
    reuse: bool,
) -> None:
    assert head(*args, **kwargs) == (lines, framing, length, reuse)


@pytest.mark.parametrize(
    ("status", "headers", "error", "message"),
    [
        (b"200 OK", [], ValueError, "invalid WSGI status b'200 OK'"),
        ("200", [], ValueError, "expected e.g. '200 OK'"),
        ("2xx OK", [], ValueError, "invalid WSGI status '2xx OK'"),
        ("200 OK\r\nX: y", [], ValueError, "invalid WSGI status"),
        ("200 \u20ac", [], ValueError, "not latin-1"),
        ("200 OK", (("A", "b"),), TypeError, "must be a list, got tuple"),
        ("200 OK", [("A", "b", "c")], TypeError, "is not a (name, value) tuple"),
        ("200 OK", [["A", "b"]], TypeError, "is not a (name, value) tuple"),
        ("200 OK", [("A", 1)], TypeError, "name and value must be str"),
        ("200 OK", [(b"A", "b")], TypeError, "name and value must be str"),
        ("200 OK", [("", "b")], ValueError, "invalid response header name ''"),
        ("200 OK", [("A B", "b")], ValueError, "invalid response header name 'A B'"),
        ("200 OK", [("A", "b\r\nSet-Cookie: x")], ValueError, "may not contain CR, LF or NUL"),
        ("200 OK", [("A", "b\0")], ValueError, "may not contain CR, LF or NUL"),
        ("200 OK", [("A", "\u20ac")], ValueError, "value is not latin-1"),
        ("200 OK", [("Connection", "close")], ValueError, "hop-by-hop header 'Connection'"),
        ("200 OK", [("transfer-encoding", "chunked")], ValueError, "hop-by-hop header"),
        ("200 OK", [("Content-Length", "-1")], ValueError, "invalid Content-Length '-1'"),
        ("200 OK", [("Content-Length", "1_0")], ValueError, "invalid Content-Length"),
        ("200 OK", [("Content-Length", "")], ValueError, "invalid Content-Length"),
    ],
)
def test_refused(status: Any, headers: Any, error: type[Exception], message: str) -> None:
    with pytest.raises(error) as info:
        wsgi_response_head(status, headers, False, False, True)
    assert message in str(info.value)
