"""Response compression: `CompressionMiddleware` (zstd, br, gzip by q-value) and
`GZipMiddleware` through `surge.testing.TestClient`, every body decompressed with
the reference libraries (gzip, Google's brotli, zstandard); and `GZipMiddleware`
against Starlette's on uvicorn (apps/compression_apps.py), where the two overlap."""

from __future__ import annotations

import gzip

import brotli
import pytest
import zstandard
from surge.http import App, Response, StreamingResponse
from surge.http.middleware import CompressionMiddleware, GZipMiddleware
from surge.http.middleware.compression import accepted_codings, choose_encoding
from surge.testing import TestClient

BIG = "compress me, compress me well. " * 100
LINES = [f"event {i}: " + "x" * (i % 50) + "\n" for i in range(400)]


def decompress(coding: str | None, data: bytes) -> bytes:
    """`data` decoded with the reference library for `coding`."""
    if coding is None:
        return data
    if coding == "gzip":
        return gzip.decompress(data)
    if coding == "br":
        return brotli.decompress(data)
    assert coding == "zstd", coding
    # A streamed frame has no content size: decompress it as a stream.
    return zstandard.ZstdDecompressor().decompressobj().decompress(data)


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("gzip", "gzip"),
        ("gzip, deflate, br", "br"),
        ("gzip, deflate, br, zstd", "zstd"),
        ("br;q=0.5, gzip;q=0.8", "gzip"),
        ("zstd;q=0.1, br;q=0.1, gzip;q=0.1", "zstd"),  # a tie: the server's order
        ("*", "zstd"),
        ("*;q=0.5, gzip", "gzip"),
        ("*, zstd;q=0", "br"),
        ("x-gzip", "gzip"),
        ("GZIP;Q=1.0", "gzip"),
        ("gzip;q=0", None),
        ("gzip;q=bad", None),
        ("gzip;q=2", None),  # out of range: refused rather than guessed
        ("gzip;q=-1", None),
        ("br;q=1.0001, gzip;q=0.2", "gzip"),  # more decimals than RFC 9110 12.4.2 allows
        ("gzip;q=1e0", None),
        ("gzip;q=nan", None),
        ("gzip;q=0.125", "gzip"),
        ("identity", None),
        ("deflate, compress", None),
        ("", None),
        (" , ;q=1,", None),
    ],
)
def test_choose_encoding(header, expected):
    assert choose_encoding(header, ("zstd", "br", "gzip")) == expected


def test_accepted_codings_keeps_the_highest_q():
    assert accepted_codings("gzip;q=0.2, gzip;q=0.7, br") == {"gzip": 0.7, "br": 1.0}


def compression_app(**options) -> App:
    app = App()
    app.add_middleware(CompressionMiddleware, minimum_size=200, **options)

    @app.get("/big")
    def big(request):
        return Response(BIG, headers={"ETag": '"v1"'})

    @app.get("/small")
    def small(request):
        return "tiny"

    @app.get("/png")
    def png(request):
        return Response(BIG.encode(), content_type="image/png")

    @app.get("/no-transform")
    def no_transform(request):
        return Response(BIG, headers={"Cache-Control": "public, no-transform"})

    @app.get("/encoded")
    def encoded(request):
        return Response(gzip.compress(BIG.encode()), headers={"Content-Encoding": "gzip"})

    @app.get("/partial")
    def partial(request):
        return Response(BIG[:300], 206, headers={"Content-Range": f"bytes 0-299/{len(BIG)}"})

    @app.get("/stream")
    def stream(request):
        return StreamingResponse(iter(LINES), content_type="text/plain")

    @app.get("/events")
    def events(request):
        return StreamingResponse(iter(LINES), content_type="text/event-stream")

    return app


@pytest.mark.parametrize(
    ("accept", "coding"),
    [
        ("zstd", "zstd"),
        ("br", "br"),
        ("gzip", "gzip"),
        ("br;q=0.9, zstd;q=0.8", "br"),
        ("", None),
        ("x-gzip", "gzip"),
        ("zstd;q=2, br;q=-1, gzip;q=0.5", "gzip"),  # invalid q-values refuse
    ],
)
def test_each_coding_round_trips(accept, coding):
    with TestClient(compression_app()) as client:
        headers = {"Accept-Encoding": accept}
        r = client.get("/big", headers=headers)
        assert r.headers.get("content-encoding") == coding
        assert r.headers["vary"] == "Accept-Encoding"
        raw = r.content if coding is None else None
        # httpx decodes gzip/br/zstd itself where it can: compare the wire bytes.
        with client.stream("GET", "/big", headers=headers) as s:
            wire = b"".join(s.iter_raw())
        assert decompress(coding, wire) == BIG.encode()
        if coding is not None:
            assert int(r.headers["content-length"]) == len(wire) < len(BIG)
            assert r.headers["etag"] == 'W/"v1"'
        else:
            assert raw == BIG.encode() and r.headers["etag"] == '"v1"'
        with client.stream("GET", "/stream", headers=headers) as s:
            assert s.headers.get("content-encoding") == coding
            assert "content-length" not in s.headers
            wire = b"".join(s.iter_raw())
        assert decompress(coding, wire) == "".join(LINES).encode()


def test_what_is_left_alone():
    with TestClient(compression_app()) as client:
        everything = {"Accept-Encoding": "zstd, br, gzip"}
        small = client.get("/small", headers=everything)
        assert "content-encoding" not in small.headers and "vary" not in small.headers
        for path in ("/png", "/no-transform", "/partial"):
            with client.stream("GET", path, headers=everything) as s:
                assert "content-encoding" not in s.headers, path
                body = b"".join(s.iter_raw())
            assert body in (BIG.encode(), BIG[:300].encode()), path
        # Never compressed twice: the handler's own coding goes out as it is.
        with client.stream("GET", "/encoded", headers=everything) as s:
            assert s.headers["content-encoding"] == "gzip"
            assert gzip.decompress(b"".join(s.iter_raw())) == BIG.encode()
        with client.stream("GET", "/events", headers=everything) as s:
            assert "content-encoding" not in s.headers
        # HEAD: the compressed length, no body.
        head = client.head("/big", headers={"Accept-Encoding": "br"})
        get = client.get("/big", headers={"Accept-Encoding": "br"})
        assert head.headers["content-length"] == get.headers["content-length"]
        assert head.content == b""


def test_offered_codings_and_their_checks():
    with TestClient(compression_app(encodings=("gzip", "br"))) as client:
        r = client.get("/big", headers={"Accept-Encoding": "zstd, br, gzip"})
        assert r.headers["content-encoding"] == "gzip"  # the app's order wins a tie
        r = client.get("/big", headers={"Accept-Encoding": "zstd"})
        assert "content-encoding" not in r.headers
    for bad in ({"encodings": ("deflate",)}, {"encodings": ()}, {"zstd_level": 0}):
        with pytest.raises(ValueError):
            CompressionMiddleware(None, **bad)  # type: ignore[arg-type]


def test_gzip_middleware_offers_only_gzip():
    app = App()
    app.add_middleware(GZipMiddleware, minimum_size=100)

    @app.get("/")
    def index(request):
        return BIG

    with TestClient(app) as client:
        with client.stream("GET", "/", headers={"Accept-Encoding": "zstd, br"}) as s:
            assert "content-encoding" not in s.headers
        with client.stream("GET", "/", headers={"Accept-Encoding": "br, gzip;q=0.5"}) as s:
            assert s.headers["content-encoding"] == "gzip"
            assert gzip.decompress(b"".join(s.iter_raw())) == BIG.encode()


# Against Starlette's GZipMiddleware on uvicorn --------------------------------------------

#: Accept-Encoding values both read the same way (Starlette looks for "gzip" in
#: the header and ignores q-values, so refusals by q are surge's alone).
SHARED_ACCEPTS = [None, "gzip", "gzip, deflate, br", "deflate", "br"]


def _view(response) -> dict:
    coding = response.header("Content-Encoding")
    body = response.body
    if coding == "gzip":
        body = gzip.decompress(body)
    return {
        "status": response.status,
        "coding": coding,
        "vary": response.header("Vary"),
        "body": body,
    }


@pytest.mark.parametrize("path", ["/big", "/small", "/png", "/encoded", "/stream"])
def test_gzip_answers_as_starlette(servers, path):
    ours = servers.get("surge", "compression_apps:surge")
    theirs = servers.get("uvicorn", "compression_apps:starlette_app")
    for accept in SHARED_ACCEPTS:
        headers = {} if accept is None else {"Accept-Encoding": accept}
        assert _view(ours.fetch("GET", path, headers)) == _view(
            theirs.fetch("GET", path, headers)
        ), (path, accept)
