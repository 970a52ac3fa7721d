"""What handlers return, as it arrives on the wire: bodies, headers, framing."""

from __future__ import annotations

import json
import time
from email.utils import parsedate_to_datetime
from pathlib import Path

import pytest
from rawhttp import IncompleteResponse, build_request, fetch
from surge.http.response import content_disposition

pytestmark = pytest.mark.timeout(30)

APP_SOURCE = (Path(__file__).parent / "apps" / "httpapp.py").read_bytes()


# Plain return types ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "content_type", "body"),
    [
        ("/ret/str", "text/plain; charset=utf-8", "héllo wörld".encode()),
        ("/ret/bytes", "application/octet-stream", b"\x00\x01binary\xff"),
        ("/ret/async-str", "text/plain; charset=utf-8", b"async hello"),
    ],
)
def test_str_and_bytes(server, path, content_type, body):
    with server.connect() as c:
        r = c.request("GET", path)
    assert r.status == 200
    assert r.header("Content-Type") == content_type
    assert r.header("Content-Length") == str(len(body))
    assert r.body == body


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("/ret/dict", {"a": 1, "b": [True, None], "c": "ü"}),
        ("/ret/list", [1, "two", {"three": 3}]),
    ],
)
def test_dict_and_list_are_json(server, path, value):
    r = fetch(server.port, path)
    assert r.status == 200
    assert r.header("Content-Type") == "application/json"
    assert json.loads(r.body) == value


def test_response_object(server):
    with server.connect() as c:
        r = c.request("GET", "/ret/response")
    assert r.status == 201
    assert r.reason == "Created"
    assert r.header("Content-Type") == "text/csv"
    assert r.header("X-Custom") == "yes"
    assert r.header("X-Other") == "also"
    assert r.header("Content-Length") == "8"
    assert r.body == b"a,b\n1,2\n"


def test_response_headers_as_a_list_may_repeat(server):
    r = fetch(server.port, "/ret/response-list-headers")
    assert r.getall("X-Dup") == ["1", "2"]


def test_async_handler_returning_a_response(server):
    r = fetch(server.port, "/ret/async-response")
    assert (r.status, r.body, r.header("X-Async")) == (201, b"async made", "1")


def test_set_cookie(server):
    r = fetch(server.port, "/ret/cookie")
    assert r.getall("Set-Cookie") == [
        "session=abc123; Max-Age=3600; Path=/; HttpOnly; SameSite=Lax",
        "theme=dark; Path=/ui; Secure; SameSite=Strict",
    ]


def test_none_is_204_without_body(server):
    with server.connect() as c:
        r = c.request("GET", "/ret/none")
        assert r.status == 204
        assert r.header("Content-Length") is None
        assert r.header("Transfer-Encoding") is None
        assert r.raw.endswith(b"\r\n\r\n")
        # No stray body bytes: the next response starts right after.
        assert c.request("GET", "/").body == b"hello"


def test_304_has_no_body(server):
    with server.connect() as c:
        r = c.request("GET", "/ret/status-304")
        assert r.status == 304
        assert r.header("Content-Length") is None
        assert c.request("GET", "/").body == b"hello"


def test_json_response(server):
    r = fetch(server.port, "/ret/json")
    assert r.status == 202
    assert r.header("Content-Type") == "application/json"
    assert r.header("X-J") == "1"
    assert r.json() == {"created": True}


@pytest.mark.parametrize(
    ("path", "status", "location"),
    [
        ("/ret/redirect", 307, "/ret/str"),
        ("/ret/redirect-301", 301, "/a%20path/%C3%BC"),
    ],
)
def test_redirect_response(server, path, status, location):
    with server.connect() as c:
        r = c.request("GET", path)
    assert r.status == status
    assert r.header("Location") == location
    assert r.header("Content-Length") == "0"
    assert r.body == b""


def test_curl_follows_a_redirect(uv_server, run_curl):
    out = run_curl("-sSL", uv_server.url("/ret/redirect"))
    assert out.stdout == "héllo wörld".encode()


# Streaming responses ----------------------------------------------------------------


def test_streaming_async_iterator_framing(server):
    with server.connect() as c:
        r = c.request("GET", "/stream/async")
        assert r.status == 200
        assert r.header("Transfer-Encoding") == "chunked"
        assert r.header("Content-Length") is None
        assert r.header("Content-Type") == "text/plain"
        assert r.header("X-Stream") == "a"
        assert r.chunks == [b"part0;", b"part1;", b"part2;", b"part3;", b"part4;", b"end"]
        head_end = r.raw.index(b"\r\n\r\n") + 4
        assert r.raw[head_end:] == (
            b"6\r\npart0;\r\n6\r\npart1;\r\n6\r\npart2;\r\n6\r\npart3;\r\n6\r\npart4;\r\n"
            b"3\r\nend\r\n0\r\n\r\n"
        )
        # Still keep-alive after the terminal chunk.
        assert c.request("GET", "/").body == b"hello"


def test_streaming_sync_iterator(server):
    with server.connect() as c:
        r = c.request("GET", "/stream/sync")
        assert r.status == 206
        assert r.header("Content-Type") == "application/octet-stream"
        assert r.chunks == [b"one,", b"two,", b"three"]
        assert r.raw.endswith(b"4\r\none,\r\n4\r\ntwo,\r\n5\r\nthree\r\n0\r\n\r\n")
        assert c.request("GET", "/").body == b"hello"


def test_streaming_many_megabytes(server):
    with server.connect(timeout=20) as c:
        r = c.request("GET", "/stream/big?n=64")
    assert len(r.body) == 64 * 65536
    assert r.chunks is not None and len(r.chunks) == 64
    assert all(chunk == bytes([i % 256]) * 65536 for i, chunk in enumerate(r.chunks))


def test_streaming_over_http10_is_framed_by_close(server):
    with server.connect() as c:
        r = c.request("GET", "/stream/async", version="HTTP/1.0")
        assert r.status == 200
        assert r.header("Transfer-Encoding") is None
        assert r.header("Connection") == "close"
        assert r.until_close
        assert r.body == b"part0;part1;part2;part3;part4;end"
        assert c.is_closed()


def test_streaming_head_sends_no_body(server):
    with server.connect() as c:
        r = c.request("HEAD", "/stream/async")
        assert r.status == 200
        assert r.header("Content-Length") is None
        assert c.request("GET", "/").body == b"hello"


def test_streaming_error_cuts_the_connection(server):
    """Once the head is out, the only honest signal of a failed stream is to cut."""
    with server.connect() as c:
        c.send(build_request("GET", "/stream/fails"))
        with pytest.raises(IncompleteResponse):
            c.read_response()
        assert c.is_closed()
    assert "error while streaming a response to GET /stream/fails" in server.log()
    assert fetch(server.port, "/").body == b"hello"


def test_curl_reads_a_stream(uv_server, run_curl):
    out = run_curl("-sS", "--raw", uv_server.url("/stream/sync"))
    assert out.stdout == b"4\r\none,\r\n4\r\ntwo,\r\n5\r\nthree\r\n0\r\n\r\n"
    out = run_curl("-sS", uv_server.url("/stream/sync"))
    assert out.stdout == b"one,two,three"


# Files -----------------------------------------------------------------------------


def test_file_response(server):
    with server.connect() as c:
        r = c.request("GET", "/file/self")
        assert r.status == 200
        assert r.header("Content-Type") == "text/x-python"
        assert r.header("Content-Length") == str(len(APP_SOURCE))
        assert r.body == APP_SOURCE
        assert c.request("GET", "/").body == b"hello"


def test_large_file_response(server, data_dir):
    expected = (data_dir / "random.bin").read_bytes()
    with server.connect(timeout=20) as c:
        r = c.request("GET", "/file/data/random.bin")
        assert r.header("Content-Length") == str(len(expected))
        assert r.body == expected
        assert c.request("GET", "/").body == b"hello"


def test_empty_file_response(server):
    with server.connect() as c:
        r = c.request("GET", "/file/data/empty.txt")
        assert (r.status, r.header("Content-Length"), r.body) == (200, "0", b"")
        # Text gets its charset, as Starlette's FileResponse gives it.
        assert r.header("Content-Type") == "text/plain; charset=utf-8"
        assert c.request("GET", "/").body == b"hello"


def test_file_download_sets_content_disposition(server):
    r = fetch(server.port, "/file/download")
    # Both RFC 6266 forms: the plain one for clients that know only it.
    assert r.header("Content-Disposition") == (
        "attachment; filename=\"app source.py\"; filename*=utf-8''app%20source.py"
    )
    assert r.body == APP_SOURCE


def test_curl_saves_a_download_under_its_name(uv_server, run_curl, tmp_path):
    url = f"http://127.0.0.1:{uv_server.port}/file/download"
    run_curl("-sS", "-OJ", "--output-dir", str(tmp_path), url)
    assert (tmp_path / "app source.py").read_bytes() == APP_SOURCE


@pytest.mark.parametrize(
    ("name", "header"),
    [
        ("café.pdf", "attachment; filename=\"cafe.pdf\"; filename*=utf-8''caf%C3%A9.pdf"),
        ('a"b\\c', 'attachment; filename="a\\"b\\\\c"; filename*=utf-8\'\'a%22b%5Cc'),
        ("日本", "attachment; filename=\"download\"; filename*=utf-8''%E6%97%A5%E6%9C%AC"),
        ("x\r\ny", "attachment; filename=\"xy\"; filename*=utf-8''x%0D%0Ay"),
    ],
)
def test_content_disposition_forms(name, header):
    assert content_disposition(name) == header


def test_missing_file_is_404(server):
    with server.connect() as c:
        r = c.request("GET", "/file/missing")
        assert r.status == 404
        assert r.body == b"Not Found"
    assert fetch(server.port, "/file/data/hello.txt").body == b"hello from a file\n"


def test_head_on_file(server):
    with server.connect() as c:
        r = c.request("HEAD", "/file/self")
        assert r.status == 200
        assert r.header("Content-Length") == str(len(APP_SOURCE))
        assert c.request("GET", "/").body == b"hello"


def test_file_stream_and_plain_responses_pipelined(server):
    methods_paths = [
        ("GET", "/file/data/hello.txt"),
        ("GET", "/"),
        ("GET", "/stream/sync"),
        ("HEAD", "/file/self"),
        ("GET", "/ret/dict"),
        ("HEAD", "/stream/async"),
        ("GET", "/file/data/hello.txt"),
        ("GET", "/stream/async"),
        ("GET", "/ret/async-str"),
    ]
    with server.connect() as c:
        c.send(b"".join(build_request(m, p) for m, p in methods_paths))
        responses = [c.read_response(m) for m, _ in methods_paths]
    bodies = [r.body for r in responses]
    assert bodies == [
        b"hello from a file\n",
        b"hello",
        b"one,two,three",
        b"",
        b'{"a":1,"b":[true,null],"c":"\xc3\xbc"}',
        b"",
        b"hello from a file\n",
        b"part0;part1;part2;part3;part4;end",
        b"async hello",
    ]
    assert [r.status for r in responses] == [200, 200, 206, 200, 200, 200, 200, 200, 200]


# Headers every response carries --------------------------------------------------------


@pytest.mark.parametrize(
    "path", ["/", "/ret/dict", "/ret/async-str", "/nope", "/stream/sync", "/file/self"]
)
def test_date_and_server_headers(server, path):
    r = fetch(server.port, path)
    date = r.header("Date")
    assert date is not None and date.endswith(" GMT")
    assert abs(parsedate_to_datetime(date).timestamp() - time.time()) < 5
    assert r.header("Server") == "surge"


# Header safety ---------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/ret/header-injection", "/ret/cookie-injection"])
def test_crlf_in_a_header_value_is_refused(server, path):
    with server.connect() as c:
        r = c.request("GET", path)
        assert (r.status, r.body) == (500, b"Internal Server Error")
        assert r.header("Set-Cookie") is None
        assert c.request("GET", "/").body == b"hello"


def test_crlf_in_a_streaming_header_is_refused(server):
    # Refused when the response is made, before its head is out: a 500, not a cut.
    with server.connect() as c:
        r = c.request("GET", "/stream/header-injection")
        assert r.status == 500
        assert b"pwned" not in r.raw
        assert c.request("GET", "/").body == b"hello"


def test_redirect_location_is_percent_encoded(server):
    r = fetch(server.port, "/ret/redirect-to?to=/x%0D%0ASet-Cookie:%20a=1%20%C3%BC")
    assert r.status == 307
    assert r.header("Location") == "/x%0D%0ASet-Cookie:%20a=1%20%C3%BC"
    assert r.header("Set-Cookie") is None


def test_handler_cannot_override_framing_headers(server):
    with server.connect() as c:
        r = c.request("GET", "/ret/framing-headers")
        assert r.getall("Content-Length") == ["3"]
        assert r.header("Transfer-Encoding") is None
        assert (r.body, r.header("X-Ok")) == (b"abc", "1")
        assert c.request("GET", "/").body == b"hello"


def test_streaming_response_never_has_both_framing_headers(server):
    with server.connect() as c:
        r = c.request("GET", "/stream/framing-headers")
        assert r.header("X-Ok") == "1"
        assert not (r.header("Content-Length") and r.header("Transfer-Encoding"))
        assert r.body == b"abc"


def test_file_response_has_one_content_length(server):
    with server.connect() as c:
        r = c.request("GET", "/file/framing-headers")
        assert r.header("X-Ok") == "1"
        assert r.getall("Content-Length") == [str(len(b"hello from a file\n"))]


def test_async_handler_runs_in_a_task(server):
    # asyncio.timeout() and current_task() need a task from the first line on.
    r = fetch(server.port, "/ret/async-in-task")
    assert r.status == 200
    assert r.json() == {"task": True}
