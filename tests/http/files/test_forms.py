"""`await request.form()` (`surge.http.forms`) against Starlette's `request.form()`
on uvicorn: the same bodies to both, the parsed forms compared; limits,
malformed bodies and a 10 MB streamed upload with bounded memory on surge."""

from __future__ import annotations

import hashlib
import json
import random

import pytest
from rawhttp import RawConnection, build_request

#: The servers and fixtures (`surge_port`, `starlette_files`, `files_root`).
pytest_plugins = ["files_servers"]
pytestmark = pytest.mark.timeout(60)

BOUNDARY = "surgeboundary7MA4YWxk"


def multipart(
    parts: list[tuple[str, str | None, str | None, bytes]], boundary: str = BOUNDARY
) -> bytes:
    """A multipart/form-data body from (name, filename, content type, data) parts."""
    out = b""
    for name, filename, ctype, data in parts:
        disposition = f'form-data; name="{name}"'
        if filename is not None:
            disposition += f'; filename="{filename}"'
        head = f"--{boundary}\r\nContent-Disposition: {disposition}\r\n"
        if ctype:
            head += f"Content-Type: {ctype}\r\n"
        out += head.encode() + b"\r\n" + data + b"\r\n"
    return out + f"--{boundary}--\r\n".encode()


MP = f"multipart/form-data; boundary={BOUNDARY}"
UE = "application/x-www-form-urlencoded"


def post(port: int, path: str, body: bytes, content_type: str, **kw):
    with RawConnection(port, timeout=30) as c:
        c.send(build_request("POST", path, {"Content-Type": content_type}, body, **kw))
        return c.read_response()


def _strip(form: list) -> list:
    """Drops surge-only keys (`rolled`) so both sides compare."""
    return [
        [k, {n: v for n, v in x.items() if n != "rolled"} if isinstance(x, dict) else x]
        for k, x in form
    ]


DIFFERENTIAL = [
    ("urlencoded", UE, b"a=1&b=h%C3%A9llo+w%26rld&a=2&empty=&c=%F0%9F%98%80"),
    ("urlencoded-blank-name", UE, b"=x&k"),
    ("urlencoded-empty", UE, b""),
    (
        "fields-and-files",
        MP,
        multipart(
            [
                ("title", None, None, "été ☀".encode()),
                ("doc", "report.pdf", "application/pdf", b"%PDF-1.4 " + bytes(range(256)) * 40),
                ("doc", "notes.txt", "text/plain", b"line 1\r\nline 2\r\n--not a boundary\r\n"),
                ("empty-file", "", "application/octet-stream", b""),
                ("title", None, None, b"second"),
            ]
        ),
    ),
    ("unicode-filename", MP, multipart([("f", "résumé 履歴書.txt", "text/plain", b"x")])),
    ("no-content-type-part", MP, multipart([("f", "raw.bin", None, b"\x00\x01")])),
    ("not-a-form", "application/json", b'{"a": 1}'),
]


@pytest.mark.parametrize(("label", "ctype", "body"), DIFFERENTIAL, ids=[d[0] for d in DIFFERENTIAL])
def test_same_form_as_starlette(surge_port, starlette_files, label, ctype, body):
    ours = post(surge_port, "/form", body, ctype)
    theirs = post(starlette_files.port, "/form", body, ctype)
    assert (ours.status, theirs.status) == (200, 200), (ours, theirs)
    assert _strip(json.loads(ours.body)) == json.loads(theirs.body)


def test_chunked_multipart_to_a_streaming_route(surge_port):
    files = [("f", "a.bin", "application/octet-stream", random.Random(1).randbytes(300_000))]
    body = multipart([("x", None, None, b"1"), *files])
    r = post(surge_port, "/upload", body, MP, chunked=True, chunk_size=7_777)
    assert r.status == 200
    (x, f) = json.loads(r.body)
    assert x == ["x", "1"]
    assert f[1]["size"] == 300_000
    assert f[1]["sha256"] == hashlib.sha256(files[0][3]).hexdigest()


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        (
            multipart([("f", f"{i}.txt", "text/plain", b"x") for i in range(3)]),
            400,
            "too many files",
        ),
        (multipart([(f"k{i}", None, None, b"v") for i in range(4)]), 400, "too many form fields"),
        (multipart([("k", None, None, b"v" * 101)]), 413, "over 100 bytes"),
        (multipart([("f", "big.bin", None, b"v" * 1001)]), 413, "over 1000 bytes"),
        (b"a=1&b=2&c=3&d=4", 400, "too many form fields"),
    ],
)
def test_limits(surge_port, body, status, message):
    ctype = UE if body.startswith(b"a=") else MP
    r = post(surge_port, "/small-limits", body, ctype)
    assert r.status == status, r
    assert message in r.body.decode()
    # Within the limits, the same route answers.
    ok = post(surge_port, "/small-limits", multipart([("k", None, None, b"v")]), MP)
    assert json.loads(ok.body) == [["k", "v"]]


MALFORMED = [
    (
        "no-boundary",
        "multipart/form-data",
        multipart([("a", None, None, b"1")]),
        "without a boundary",
    ),
    (
        "truncated",
        MP,
        multipart([("a", None, None, b"1")])[:-20],
        "ends before its closing boundary",
    ),
    ("garbage", MP, b"this is not multipart at all", "malformed multipart body"),
    ("wrong-boundary", MP, multipart([("a", None, None, b"1")], boundary="other"), "malformed"),
    (
        "no-name",
        MP,
        f"--{BOUNDARY}\r\nContent-Disposition: form-data\r\n\r\nx\r\n--{BOUNDARY}--\r\n".encode(),
        'has no "name"',
    ),
    (
        "no-disposition",
        MP,
        f"--{BOUNDARY}\r\nContent-Type: text/plain\r\n\r\nx\r\n--{BOUNDARY}--\r\n".encode(),
        "no Content-Disposition",
    ),
    ("field-not-utf8", MP, multipart([("a", None, None, b"\xff\xfe")]), "not valid UTF-8"),
    ("urlencoded-not-utf8", UE, b"a=%FF%FE", "not valid UTF-8"),
    (
        "huge-part-header",
        MP,
        f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=a\r\nX: {'y' * 20000}\r\n\r\n"
        f"x\r\n--{BOUNDARY}--\r\n".encode(),
        "malformed",
    ),
]


@pytest.mark.parametrize(
    ("label", "ctype", "body", "message"), MALFORMED, ids=[m[0] for m in MALFORMED]
)
def test_malformed_bodies_get_400(surge_port, label, ctype, body, message):
    with RawConnection(surge_port) as c:
        c.send(build_request("POST", "/form", {"Content-Type": ctype}, body))
        r = c.read_response()
        assert r.status == 400, r
        assert message in r.body.decode(), r.body
        # The connection and the process are fine afterwards.
        c.send(build_request("POST", "/form", {"Content-Type": UE}, b"ok=1"))
        assert json.loads(c.read_response().body) == [["ok", "1"]]


def test_body_over_the_route_limit_is_413(surge_port):
    # /form is not a streaming route: its body is read first, up to 1 MiB.
    body = multipart([("f", "big.bin", None, b"x" * (2 * 1024 * 1024))])
    assert post(surge_port, "/form", body, MP).status == 413


def test_ten_megabyte_upload_in_bounded_memory(surge_port, starlette_files):
    data = random.Random(10).randbytes(10 * 1024 * 1024)
    body = multipart(
        [("meta", None, None, b"ten"), ("f", "ten.bin", "application/octet-stream", data)]
    )
    with RawConnection(surge_port) as c:
        # Warm up (imports, first spool file) before measuring.
        c.send(
            build_request(
                "POST", "/upload", {"Content-Type": MP}, multipart([("w", "w", None, b"w")])
            )
        )
        assert c.read_response().status == 200
        before = json.loads(c.request("GET", "/rss?reset=1").body)
        c.send(build_request("POST", "/upload", {"Content-Type": MP}, body))
        r = c.read_response()
        after = json.loads(c.request("GET", "/rss").body)
    assert r.status == 200, r
    meta, f = json.loads(r.body)
    assert meta == ["meta", "ten"]
    assert f[1]["size"] == len(data)
    assert f[1]["sha256"] == hashlib.sha256(data).hexdigest()
    assert f[1]["rolled"]  # spooled to disk past 1 MiB
    # The peak grew by far less than the upload: about the stream buffer plus the
    # spool threshold (1 MiB each), not 10 MiB.
    growth_kib = after["peak"] - before["current"]
    assert growth_kib < 5 * 1024, (before, after)
    theirs = post(starlette_files.port, "/upload", body, MP)
    assert _strip(json.loads(r.body)) == json.loads(theirs.body)


def test_streamed_uploads_leave_nothing_behind(surge_port):
    # Each streamed request once stayed alive with its BodyStream (a reference
    # cycle through the native Request, which the collector cannot see), and with
    # it the read buffer its head shares: ~256 KB per upload, for ever.
    body = multipart([("f", "two.bin", None, random.Random(2).randbytes(2 * 1024 * 1024))])
    with RawConnection(surge_port, timeout=30) as c:
        for _ in range(5):  # warm up: spool files, buffers at their working size
            c.send(build_request("POST", "/upload", {"Content-Type": MP}, body))
            assert c.read_response().status == 200
        before = json.loads(c.request("GET", "/rss").body)["current"]
        for _ in range(40):
            c.send(build_request("POST", "/upload", {"Content-Type": MP}, body))
            assert c.read_response().status == 200
        after = json.loads(c.request("GET", "/rss").body)["current"]
    assert after - before < 4 * 1024, (before, after)
