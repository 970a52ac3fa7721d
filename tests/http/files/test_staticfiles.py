"""Static files (`App.static`, `surge.http.staticfiles`), conditional and range
requests (`surge.http.conditional`) for them and for `FileResponse`.

Live tests run against `apps/files_app.py` under `surge serve`, with raw sockets
and curl; the differential ones send the same requests to Starlette's
StaticFiles/FileResponse on uvicorn over the same directory and compare status,
key headers and bodies. Where surge answers differently on purpose (RFC 9110
over Starlette's choice) the test says so and checks surge's answer.
"""

from __future__ import annotations

import email
import email.policy
import gzip
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from files_servers import SECRET
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from peer_servers import PeerServer, surge_command
from rawhttp import RawConnection, build_request
from surge.http.conditional import MAX_RANGES, file_reply, parse_ranges
from surge.http.staticfiles import _segments, resolve_path

#: The servers and fixtures (`surge_port`, `starlette_files`, `files_root`).
pytest_plugins = ["files_servers"]
pytestmark = pytest.mark.timeout(60)


# Range parsing and the precondition table ---------------------------------------------


@pytest.mark.parametrize(
    ("header", "size", "expected"),
    [
        ("bytes=0-9", 100, [(0, 10)]),
        ("bytes=90-", 100, [(90, 10)]),
        ("bytes=-10", 100, [(90, 10)]),
        ("bytes=-1000", 100, [(0, 100)]),
        ("bytes=0-1000", 100, [(0, 100)]),
        ("BYTES = 0-0", 100, [(0, 1)]),
        ("bytes=0-4,2-9", 100, [(0, 10)]),  # overlapping: merged
        ("bytes=0-4,5-9", 100, [(0, 10)]),  # touching: merged
        ("bytes=50-59,0-9", 100, [(0, 10), (50, 10)]),  # sorted
        ("bytes=0-1, ,4-5", 100, [(0, 2), (4, 2)]),  # empty elements ignored
        ("bytes=100-", 100, []),  # unsatisfiable
        ("bytes=-0", 100, []),
        ("bytes=0-0", 0, []),
        ("bytes=5-1", 100, None),  # malformed: ignored
        ("bytes=abc", 100, None),
        ("bytes=-", 100, None),
        ("bytes=1", 100, None),
        ("bytes=\u0661-\u0662", 100, None),  # non-ASCII digits
        ("items=0-1", 100, None),
        ("0-1", 100, None),
        ("bytes=" + ",".join(f"{i}-{i}" for i in range(0, 2 * MAX_RANGES + 2, 2)), 1000, None),
    ],
)
def test_parse_ranges(header, size, expected):
    assert parse_ranges(header, size) == expected


@pytest.fixture(scope="module")
def stat_file(tmp_path_factory) -> os.stat_result:
    path = tmp_path_factory.mktemp("stat") / "f.bin"
    path.write_bytes(b"0123456789" * 10)
    os.utime(path, (1_700_000_000, 1_700_000_000))
    return os.stat(path)


LM = "Tue, 14 Nov 2023 22:13:20 GMT"  # 1_700_000_000
BEFORE = "Tue, 14 Nov 2023 22:13:19 GMT"


@pytest.mark.parametrize(
    ("method", "headers", "status"),
    [
        ("GET", {}, 200),
        ("GET", {"if-none-match": "ETAG"}, 304),
        ("GET", {"if-none-match": 'W/ETAG, "other"'}, 304),  # weak comparison
        ("GET", {"if-none-match": '"other"'}, 200),
        ("HEAD", {"if-none-match": "*"}, 304),
        ("POST", {"if-none-match": "ETAG"}, 412),
        ("GET", {"if-modified-since": LM}, 304),
        ("GET", {"if-modified-since": BEFORE}, 200),
        ("GET", {"if-modified-since": "garbage"}, 200),
        # If-None-Match wins over If-Modified-Since (RFC 9110 13.2.2 step 3 before 4).
        ("GET", {"if-none-match": '"other"', "if-modified-since": LM}, 200),
        ("GET", {"if-match": "ETAG"}, 200),
        ("GET", {"if-match": '"other"'}, 412),
        ("GET", {"if-match": "W/ETAG"}, 412),  # strong comparison
        ("GET", {"if-unmodified-since": BEFORE}, 412),
        ("GET", {"if-unmodified-since": LM}, 200),
        # If-Match is evaluated before and instead of If-Unmodified-Since.
        ("GET", {"if-match": "ETAG", "if-unmodified-since": BEFORE}, 200),
        ("GET", {"if-match": '"other"', "if-none-match": "ETAG"}, 412),
        ("GET", {"range": "bytes=0-9"}, 206),
        ("POST", {"range": "bytes=0-9"}, 200),  # Range is for GET only
        ("GET", {"range": "bytes=0-9", "if-range": "ETAG"}, 206),
        ("GET", {"range": "bytes=0-9", "if-range": "W/ETAG"}, 200),
        ("GET", {"range": "bytes=0-9", "if-range": '"other"'}, 200),
        ("GET", {"range": "bytes=0-9", "if-range": LM}, 206),
        ("GET", {"range": "bytes=0-9", "if-range": BEFORE}, 200),
        ("GET", {"range": "bytes=500-"}, 416),
        ("GET", {"range": "bytes=500-", "if-range": '"other"'}, 200),
        ("GET", {"range": "bytes=0-1,5-6"}, 206),
    ],
)
def test_preconditions_in_rfc_order(stat_file, method, headers, status):
    etag = f'"{stat_file.st_mtime_ns:x}-{stat_file.st_size:x}"'
    headers = {k: v.replace("ETAG", etag) for k, v in headers.items()}
    reply = file_reply(method, headers, stat_file, "application/octet-stream", [])
    assert reply.status == status
    names = {n.lower(): v for n, v in reply.headers}
    if status in (200, 206, 304):
        assert names["etag"] == etag and names["last-modified"] == LM
    if status == 416:
        assert names["content-range"] == "bytes */100"


# Path resolution ---------------------------------------------------------------------

#: Pieces that make traversal attempts likely: dots, both slashes, their percent
#: encodings (any case), NUL, names in and out of the root, links.
PIECES = st.sampled_from(
    [
        ".", "..", "/", "\\", "%2e", "%2E", "%2f", "%2F", "%5c", "%5C", "%00", "\0", "%",
        "%25", "%c0%ae", "~", "secret.txt", "secretdir", "public", "public-evil", "hello.txt",
        "link-out.txt", "linkdir-out", "sub", "rel-out.txt", "a", ":", "%2e%2e", "..%2f",
    ]
)  # fmt: skip


def _inside(root: str, path: str) -> bool:
    return os.path.commonpath([root, os.path.realpath(path)]) == root


@settings(max_examples=1500, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(PIECES, max_size=12), st.text(max_size=8))
def test_random_paths_never_resolve_outside(files_root, pieces, noise):
    root = os.path.realpath(files_root / "public")
    raw = ("".join(pieces) + noise).encode("utf-8", "surrogatepass")
    path = resolve_path(root, raw)
    if path is not None:
        assert _inside(root, path), (raw, path)
        # What it names, followed through every link, is inside too.
        assert not os.path.exists(path) or _inside(root, os.path.realpath(path))
    followed = resolve_path(root, raw, follow_symlinks=True)
    if followed is not None and not _inside(root, followed):
        # Links may point out (that is the option), the path as written may not.
        segments = _segments(raw)
        assert segments is not None
        lexical = os.path.join(root, *segments)
        assert os.path.commonpath([root, os.path.abspath(lexical)]) == root, (raw, followed)
        assert lexical != os.path.realpath(lexical)  # a link was followed


@pytest.mark.parametrize(
    "rel",
    [
        b"../secret.txt", b"%2e%2e/secret.txt", b"%2E%2E/secret.txt", b"sub/../../secret.txt",
        b"sub%2f..%2f..%2fsecret.txt", b"..%5csecret.txt", b"..\\secret.txt", b"hello.txt%00",
        b"link-out.txt", b"linkdir-out/inner.txt", b"sub/rel-out.txt", b"../public-evil/x.txt",
        b"%2fetc%2fpasswd", b"..", b"%ff.txt",
    ],
)  # fmt: skip
def test_escapes_resolve_to_nothing(files_root, rel):
    assert resolve_path(os.path.realpath(files_root / "public"), rel) is None


# Live: traversal over real sockets ------------------------------------------------------

TRAVERSALS = [
    "/static/../secret.txt",
    "/static/%2e%2e/secret.txt",
    "/static/%2E%2E/%2E%2E/secret.txt",
    "/static/.%2e/secret.txt",
    "/static/sub/..%2f..%2fsecret.txt",
    "/static/sub%2f..%2f..%2fsecret.txt",
    "/static/..%5csecret.txt",
    "/static/..\\secret.txt",
    "/static/hello.txt%00.png",
    "/static/link-out.txt",
    "/static/linkdir-out/inner.txt",
    "/static/sub/rel-out.txt",
    "/static/..%2fpublic-evil/x.txt",
    "/static//etc/passwd",
    "/static/%2fetc%2fpasswd",
    "/static/fifo.txt",
    "/static/evil.js",  # its .gz sibling links out: never chosen
    "/site/../secret.txt",
    "/linked/../secret.txt",
    "/linked/%2e%2e/secret.txt",
    "http://test/static/../secret.txt",
]


@pytest.mark.parametrize("target", TRAVERSALS)
def test_no_request_reaches_outside(surge_port, target):
    with RawConnection(surge_port) as c:
        r = c.request("GET", target, headers={"Accept-Encoding": "gzip, br"})
    assert SECRET not in r.body
    if target == "/static/evil.js":
        assert (r.status, r.body, r.header("content-encoding")) == (200, b"fine\n", None)
    else:
        assert r.status in (400, 404), r


def test_follow_symlinks_is_an_opt_in(surge_port):
    with RawConnection(surge_port) as c:
        assert c.request("GET", "/static/link-in.txt").body == b"hello, world\n"
        assert c.request("GET", "/static/link-out.txt").status == 404
        r = c.request("GET", "/linked/link-out.txt")  # follow_symlinks=True
        assert (r.status, r.body) == (200, SECRET)


def test_curl_path_as_is(surge_port):
    curl = shutil.which("curl")
    assert curl, "curl is installed by scripts/install-system-deps.sh"
    for path in ("/static/../secret.txt", "/static/%2e%2e/%2e%2e/secret.txt", "/static/./x.txt"):
        url = f"http://127.0.0.1:{surge_port}{path}"
        out = subprocess.run(
            [curl, "-s", "--path-as-is", "-w", "\n%{http_code}", url],
            capture_output=True,
            check=True,
            timeout=10,
        ).stdout
        assert SECRET not in out
        assert out.endswith(b"404"), (path, out)


# Live: conditional, range, HEAD, precompressed -------------------------------------------


def test_etag_round_trip_and_304(surge_port):
    with RawConnection(surge_port) as c:
        r = c.request("GET", "/static/hello.txt")
        etag, lm = r.header("etag"), r.header("last-modified")
        assert r.status == 200 and etag and lm
        r304 = c.request("GET", "/static/hello.txt", headers={"If-None-Match": etag})
        assert (r304.status, r304.body, r304.header("etag")) == (304, b"", etag)
        assert r304.header("content-length") is None
        r304 = c.request("GET", "/static/hello.txt", headers={"If-Modified-Since": lm})
        assert r304.status == 304
        # The large-file path (sendfile) answers the same way.
        big = c.request("GET", "/static/large.bin")
        r304 = c.request("GET", "/static/large.bin", headers={"If-None-Match": big.header("etag")})
        assert r304.status == 304
        assert c.request("GET", "/static/hello.txt").body == b"hello, world\n"  # still in step


@pytest.mark.parametrize("name", ["small.bin", "large.bin"])  # inline read / sendfile
def test_ranges_over_real_sockets(surge_port, files_root, name):
    data = (files_root / "public" / name).read_bytes()
    size = len(data)
    with RawConnection(surge_port) as c:
        r = c.request("GET", f"/static/{name}", headers={"Range": "bytes=1000-1999"})
        assert (r.status, r.body) == (206, data[1000:2000])
        assert r.header("content-range") == f"bytes 1000-1999/{size}"
        r = c.request("GET", f"/static/{name}", headers={"Range": "bytes=-7"})
        assert (r.status, r.body) == (206, data[-7:])
        r = c.request("GET", f"/static/{name}", headers={"Range": f"bytes={size}-"})
        assert (r.status, r.header("content-range")) == (416, f"bytes */{size}")
        r = c.request("GET", f"/static/{name}", headers={"Range": "bytes=0-9,20-29,-5"})
        assert r.status == 206
        parts = _byteranges(r.header("content-type"), r.body)
        assert parts == [
            (f"bytes 0-9/{size}", data[0:10]),
            (f"bytes 20-29/{size}", data[20:30]),
            (f"bytes {size - 5}-{size - 1}/{size}", data[-5:]),
        ]
        head = c.request("HEAD", f"/static/{name}", headers={"Range": "bytes=0-9"})
        assert (head.status, head.body, head.header("content-length")) == (206, b"", "10")
        head = c.request("HEAD", f"/static/{name}")
        assert (head.status, head.body, head.header("content-length")) == (200, b"", str(size))
        assert c.request("GET", f"/static/{name}").body == data


def _byteranges(content_type: str, body: bytes) -> list[tuple[str, bytes]]:
    assert content_type.startswith("multipart/byteranges; boundary=")
    msg = email.message_from_bytes(
        b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + body, policy=email.policy.HTTP
    )
    return [(p["Content-Range"], p.get_payload(decode=True)) for p in msg.iter_parts()]


def test_file_response_ranges_and_conditionals(surge_port, files_root):
    data = (files_root / "public" / "large.bin").read_bytes()
    with RawConnection(surge_port) as c:
        r = c.request("GET", "/file/large.bin", headers={"Range": "bytes=100-"})
        assert (r.status, r.body) == (206, data[100:])
        etag = r.header("etag")
        r = c.request("GET", "/file/large.bin", headers={"If-Range": etag, "Range": "bytes=5-9"})
        assert (r.status, r.body) == (206, data[5:10])
        r = c.request("GET", "/file/large.bin", headers={"If-Range": '"old"', "Range": "bytes=5-9"})
        assert (r.status, r.body) == (200, data)
        r = c.request("GET", "/file/large.bin", headers={"If-None-Match": etag})
        assert r.status == 304
        r = c.request("GET", "/download/hello.txt")
        assert r.header("content-disposition").startswith('attachment; filename="hello.txt"')
        assert c.request("GET", "/file/missing.bin").status == 404


def test_precompressed_siblings(surge_port, files_root):
    public = files_root / "public"
    js, gz, br = ((public / n).read_bytes() for n in ("app.js", "app.js.gz", "app.js.br"))
    with RawConnection(surge_port) as c:
        plain = c.request("GET", "/static/app.js")
        assert (plain.body, plain.header("content-encoding")) == (js, None)
        assert plain.header("vary") == "Accept-Encoding"
        r = c.request("GET", "/static/app.js", headers={"Accept-Encoding": "gzip, deflate"})
        assert (r.body, r.header("content-encoding")) == (gz, "gzip")
        assert gzip.decompress(r.body) == js
        assert r.header("content-type") == plain.header("content-type")
        assert r.header("etag") != plain.header("etag")
        assert r.header("vary") == "Accept-Encoding"
        r = c.request("GET", "/static/app.js", headers={"Accept-Encoding": "gzip, br"})
        assert (r.body, r.header("content-encoding")) == (br, "br")
        r = c.request("GET", "/static/app.js", headers={"Accept-Encoding": "br;q=0, gzip;q=0.5"})
        assert r.header("content-encoding") == "gzip"
        r = c.request("GET", "/static/app.js", headers={"Accept-Encoding": "*;q=1, br;q=0"})
        assert r.header("content-encoding") == "gzip"
        r = c.request("GET", "/static/app.js", headers={"Accept-Encoding": "gzip;q=0"})
        assert (r.body, r.header("content-encoding")) == (js, None)
        # The header is read as the compression middleware reads it
        # (surge.http.negotiation): x-gzip is gzip, the client's weights rank the
        # siblings, and a q-value outside RFC 9110's grammar refuses its coding.
        for accept, coding in [
            ("x-gzip", "gzip"),
            ("br;q=0.5, gzip", "gzip"),
            ("br;q=2, gzip;q=0.1", "gzip"),
            ("br;q=-1", None),
            ("gzip;q=1.5, br;q=0.5000", None),
        ]:
            r = c.request("GET", "/static/app.js", headers={"Accept-Encoding": accept})
            assert r.header("content-encoding") == coding, accept
            assert r.body == {"gzip": gz, None: js}[coding], accept
        # Ranges count the encoded bytes (the selected representation).
        r = c.request(
            "GET", "/static/app.js", headers={"Accept-Encoding": "gzip", "Range": "bytes=0-9"}
        )
        assert (r.status, r.body) == (206, gz[:10])
        assert r.header("content-range") == f"bytes 0-9/{len(gz)}"
        # 304 keeps Vary; a path with no sibling has no Vary.
        r = c.request("GET", "/static/app.js", headers={"If-None-Match": plain.header("etag")})
        assert (r.status, r.header("vary")) == (304, "Accept-Encoding")
        assert c.request("GET", "/static/hello.txt").header("vary") is None
        # The sibling asked for by name is a gzip file, not text.
        r = c.request("GET", "/static/only.css.gz")
        assert (r.header("content-type"), r.header("content-encoding")) == (
            "application/gzip",
            None,
        )


def test_html_mode(surge_port):
    with RawConnection(surge_port) as c:
        r = c.request("GET", "/site/site")
        assert (r.status, r.header("location")) == (307, "/site/site/")
        r = c.request("GET", "/site/site/")
        assert (r.status, r.body) == (200, b"<h1>index</h1>\n")
        r = c.request("GET", "/site/nothere")
        assert (r.status, r.body) == (404, b"<h1>custom 404</h1>\n")
        assert c.request("GET", "/static/site/").status == 404  # html=False: no index


# Differential: Starlette's StaticFiles / FileResponse on uvicorn ------------------------

SAME = [
    ("/static/hello.txt", {}),
    ("/static/style.css", {}),
    ("/static/page.html", {}),
    ("/static/data.json", {}),
    ("/static/empty.txt", {}),
    ("/static/%C3%A9%20%C3%BC.txt", {}),
    ("/static/small.bin", {"Range": "bytes=0-9"}),
    ("/static/small.bin", {"Range": "bytes=-10"}),
    ("/static/small.bin", {"Range": "bytes=100-"}),
    ("/static/small.bin", {"Range": "bytes=0-5,3-9"}),
    ("/static/small.bin", {"Range": "bytes=999999-"}),
    ("/static/small.bin", {"Range": "bytes=0-9", "If-Range": '"stale"'}),
    ("/static/large.bin", {"Range": "bytes=1000-2000"}),
    ("/static/large.bin", {}),
    ("/static/hello.txt", {"If-None-Match": "*"}),
    ("/static/hello.txt", {"If-Modified-Since": "Sun, 06 Nov 2050 08:49:37 GMT"}),
    ("/static/hello.txt", {"If-Modified-Since": "Sun, 06 Nov 1994 08:49:37 GMT"}),
    ("/static/link-in.txt", {}),
    ("/static/link-out.txt", {}),
    ("/static/fifo.txt", {}),
    ("/static/sub", {}),
    ("/static/nothere", {}),
    ("/static/../secret.txt", {}),
    ("/static/%2e%2e/secret.txt", {}),
    ("/static/sub%2f..%2f..%2fsecret.txt", {}),
    ("/static/..%5csecret.txt", {}),
    ("/site/site/", {}),
    ("/site/nothere", {}),
    ("/file/large.bin", {"Range": "bytes=0-9"}),
    ("/file/large.bin", {}),
]
KEY_HEADERS = ("content-type", "content-length", "content-range", "accept-ranges")


@pytest.mark.parametrize(("target", "headers"), SAME)
def test_same_answers_as_starlette(surge_port, starlette_files, target, headers):
    answers = []
    for port in (surge_port, starlette_files.port):
        with RawConnection(port) as c:
            answers.append(c.request("GET", target, headers=headers))
    ours, theirs = answers
    assert ours.status == theirs.status, (ours, theirs)
    if ours.status in (200, 206):
        assert ours.body == theirs.body
        for name in KEY_HEADERS:
            assert ours.header(name) == theirs.header(name), name
        assert bool(ours.header("etag")) == bool(theirs.header("etag"))
    if ours.status == 416:
        assert ours.header("content-range") == theirs.header("content-range")


@pytest.mark.parametrize(
    ("headers", "ours", "starlettes"),
    [
        # RFC 9110 14.2: a Range header that does not parse is ignored; Starlette says 400.
        ({"Range": "bytes=5-1"}, 200, 400),
        ({"Range": "items=0-1"}, 200, 400),
        # RFC 9110 13.1.1: If-Match that fails is 412; Starlette ignores If-Match.
        ({"If-Match": '"not-it"'}, 412, 200),
    ],
)
def test_where_surge_follows_the_rfc_over_starlette(
    surge_port, starlette_files, headers, ours, starlettes
):
    with RawConnection(surge_port) as c:
        assert c.request("GET", "/static/small.bin", headers=headers).status == ours
    with RawConnection(starlette_files.port) as c:
        assert c.request("GET", "/static/small.bin", headers=headers).status == starlettes


# The in-memory copy of small files ------------------------------------------------------


class _Request:
    """What `StaticFiles.serve` reads of a request."""

    def __init__(self, raw_path: bytes, headers: dict[str, str] | None = None) -> None:
        self.method = "GET"
        self.raw_path = raw_path
        self.query_string = ""
        self.headers = {k.lower(): v for k, v in (headers or {}).items()}


def test_a_changed_file_is_seen_at_once(tmp_path, monkeypatch):
    from surge.http import staticfiles

    f = tmp_path / "a.txt"
    f.write_bytes(b"one")
    files = staticfiles.StaticFiles(tmp_path)
    assert files.serve(_Request(b"/a.txt"), b"/a.txt").body == b"one"
    # Just written: not kept, since a rewrite within the same clock tick would
    # leave size and times as they are.
    assert not files._cache
    f.write_bytes(b"two")
    assert files.serve(_Request(b"/a.txt"), b"/a.txt").body == b"two"
    old = time.time() - 60
    os.utime(f, (old, old))
    os.utime(tmp_path, (old, old))
    time.sleep(1.1)  # the ctime too must have settled
    assert files.serve(_Request(b"/a.txt"), b"/a.txt").body == b"two"
    assert files._cache  # kept now
    f.write_bytes(b"six")  # same size, rewritten in place
    assert files.serve(_Request(b"/a.txt"), b"/a.txt").body == b"six"
    os.replace(tmp_path / "a.txt", tmp_path / "b.txt")
    (tmp_path / "a.txt").write_bytes(b"three")  # another inode
    assert files.serve(_Request(b"/a.txt"), b"/a.txt").body == b"three"
    # A symlink put in its place is checked like any other (out of the root: 404).
    (tmp_path / "a.txt").unlink()
    os.symlink("/etc/hostname", tmp_path / "a.txt")
    assert files.serve(_Request(b"/a.txt"), b"/a.txt").status == 404
    # A sibling that appears is served once the recheck time has passed.
    (tmp_path / "c.css").write_bytes(b"p{}")
    ask = _Request(b"/c.css", {"Accept-Encoding": "gzip"})
    assert files.serve(ask, b"/c.css").body == b"p{}"
    (tmp_path / "c.css.gz").write_bytes(gzip.compress(b"p{}"))
    monkeypatch.setattr(staticfiles, "SIBLING_RECHECK", 0.0)
    files._no_siblings.clear()
    r = files.serve(ask, b"/c.css")
    assert gzip.decompress(r.body) == b"p{}"
    assert ("Content-Encoding", "gzip") in r.headers


def test_the_copy_is_bounded(tmp_path):
    from surge.http.staticfiles import StaticFiles

    for i in range(10):
        (tmp_path / f"{i}.bin").write_bytes(bytes([i]) * 1000)
    time.sleep(1.1)  # written long enough ago to be kept
    files = StaticFiles(tmp_path, cache_max_bytes=3500)
    for i in range(10):
        assert files.serve(_Request(b"/x"), f"/{i}.bin".encode()).body == bytes([i]) * 1000
    assert files._cache_bytes <= 3500 and len(files._cache) == 3
    none = StaticFiles(tmp_path, cache_max_bytes=0)
    assert none.serve(_Request(b"/x"), b"/1.bin").body == b"\x01" * 1000
    assert not none._cache


def test_static_mounts_are_named_for_url_for(tmp_path):
    from surge.http import App

    app = App()
    app.static("/static", tmp_path)
    app.static("/assets/v1", tmp_path, name="assets")
    app.static("/", tmp_path, name="site")
    assert app.url_for("static", path="css/app.css") == "/static/css/app.css"
    assert app.url_for("assets", path="a b.js") == "/assets/v1/a%20b.js"
    assert app.url_for("site", path="index.html") == "/index.html"
    # "/" and "/static" together need no names: "/" is "root" by default.
    both = App()
    both.static("/static", tmp_path)
    both.static("/", tmp_path)
    assert both.url_for("root", path="a.css") == "/a.css"
    assert both.url_for("static", path="a.css") == "/static/a.css"
    # A second mount whose default name is taken is refused, with the fix named.
    with pytest.raises(ValueError, match="route name"):
        app.static("/other", tmp_path, name="static")


# The prepared answer of a cached file (the hot path) and its shared body ---------------


def _settle(*paths) -> None:
    """Waits until the files' times are old enough for their bytes to be kept."""
    newest = max(max(os.stat(p).st_mtime, os.stat(p).st_ctime) for p in paths)
    time.sleep(max(0.0, newest + 1.1 - time.time()))


def test_the_prepared_answer_is_checked_like_the_full_path(tmp_path):
    from surge._core import Response
    from surge.http.conditional import etag_for
    from surge.http.staticfiles import StaticFiles

    root = tmp_path / "root"
    (root / "d").mkdir(parents=True)
    big = root / "d" / "big.bin"
    big.write_bytes(b"b" * 20_000)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "big.bin").write_bytes(SECRET)
    _settle(big, root / "d")
    files = StaticFiles(root)
    first = files.serve(_Request(b"/d/big.bin"), b"/d/big.bin")
    assert b"/d/big.bin" in files._hot
    again = files.serve(_Request(b"/d/big.bin"), b"/d/big.bin")
    assert again.body == b"b" * 20_000 and again.headers == first.headers
    # The bytes are shared (one cached object), the response is a copy of its own.
    assert again.body is first.body and again is not first
    with pytest.raises(ValueError, match="8 KiB"):
        Response(b"small").send_file(0)
    again.add_header("X-Hook", "1")
    assert ("X-Hook", "1") not in files.serve(_Request(b"/d/big.bin"), b"/d/big.bin").headers
    # Conditional and range requests take the full path.
    etag = etag_for(os.stat(big))
    conditional = _Request(b"/d/big.bin", {"If-None-Match": etag})
    assert files.serve(conditional, b"/d/big.bin").status == 304
    ranged = files.serve(_Request(b"/d/big.bin", {"Range": "bytes=0-9"}), b"/d/big.bin")
    assert ranged.status == 206 and ranged.body == b"b" * 10
    # A directory on the way swapped for a symlink out of the root: 404, not the copy.
    os.rename(root / "d", root / "d-old")
    os.symlink(tmp_path / "out", root / "d")
    assert files.serve(_Request(b"/d/big.bin"), b"/d/big.bin").status == 404
    assert b"/d/big.bin" not in files._hot
    # The file replaced: the new bytes at once.
    os.unlink(root / "d")
    os.rename(root / "d-old", root / "d")
    assert files.serve(_Request(b"/d/big.bin"), b"/d/big.bin").body == b"b" * 20_000
    big.write_bytes(b"c" * 20_000)
    assert files.serve(_Request(b"/d/big.bin"), b"/d/big.bin").body == b"c" * 20_000


def test_shared_bodies_pipelined_and_logged(files_root, tmp_path):
    """Cached files sent from shared buffers (one writelines per read) arrive whole
    and in order, HEAD and ranges among them, and the access log counts their bytes."""

    body = (files_root / "public" / "small.bin").read_bytes()
    hello = (files_root / "public" / "hello.txt").read_bytes()
    _settle(files_root / "public" / "small.bin", files_root / "public" / "hello.txt")
    log = tmp_path / "access.log"

    def command(kind, target, port):
        return [*surge_command(target, port), "--access-log", str(log)]

    os.environ["SURGE_FILES_ROOT"] = str(files_root)
    server = PeerServer("surge", "files_app:app", tmp_path, Path(__file__).parent / "apps", command)
    try:
        methods = ["GET", "GET", "HEAD", "GET", "GET", "GET", "GET"]
        paths = ["small.bin"] * 3 + ["hello.txt", "small.bin", "small.bin", "small.bin"]
        extra = [{}, {}, {}, {}, {"Range": "bytes=10-19"}, {}, {}]
        with RawConnection(server.port) as c:
            c.request("GET", "/static/small.bin")  # prepares the answer
            c.send(
                b"".join(
                    build_request(m, f"/static/{p}", headers=h)
                    for m, p, h in zip(methods, paths, extra, strict=True)
                )
            )
            got = c.read_responses(methods)
        assert [r.status for r in got] == [200, 200, 200, 200, 206, 200, 200]
        assert got[0].body == got[1].body == got[5].body == got[6].body == body
        assert got[2].body == b"" and got[2].header("Content-Length") == str(len(body))
        assert got[3].body == hello and got[4].body == body[10:20]
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and log.read_text().count("\n") < 8:
            time.sleep(0.05)
        sizes = [line.split('"')[2].split() for line in log.read_text().splitlines()]
        assert [s[1] for s in sizes] == [
            str(len(body)), str(len(body)), str(len(body)), "0", str(len(hello)), "10",
            str(len(body)), str(len(body)),
        ]  # fmt: skip
        # More than the socket takes at once (sendfile stops short; the rest
        # goes through the transport, in order), from a client reading late.
        with RawConnection(server.port) as c:
            c.send(build_request("GET", "/static/small.bin") * 60)
            time.sleep(0.3)
            many = c.read_responses(["GET"] * 60)
        assert all(r.status == 200 and r.body == body for r in many)
        server.check_health()
    finally:
        server.stop()
