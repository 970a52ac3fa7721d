"""Response compression: `CompressionMiddleware` (zstd, brotli, gzip) and
`GZipMiddleware` (gzip only, as Starlette's of that name).

The coding is chosen from the request's ``Accept-Encoding`` (RFC 9110 12.5.3,
read by `surge.http.negotiation`):
the coding with the highest q-value among those this middleware has, ties
going to the middleware's order (``encodings``, zstd then br then gzip by
default); ``*`` stands for every coding the header does not name; ``q=0``
refuses one. No acceptable coding: the body goes out as it is (never 406).
brotli and zstd come from the ``brotli`` (Google's binding) and ``zstandard``
packages, the ``surge[compression]`` extra; without them only gzip is offered.

Compressed: a `Response` whose body is at least ``minimum_size`` bytes, and a
`StreamingResponse` chunk by chunk (each chunk flushed, so a client sees it as
soon as the handler yields it). Left alone: responses that already have a
``Content-Encoding`` (never compressed twice), partial content (206,
``Content-Range``), ``Cache-Control: no-transform``, media types that are
compressed already or must not be held back (`DEFAULT_EXCLUDED_CONTENT_TYPES`,
Starlette's list: images, audio, video, fonts, archives, gRPC, event streams), a
`FileResponse` (sent with sendfile as it is) and anything else written by the
server itself. Every response that could have been compressed gets ``Vary:
Accept-Encoding``, and a strong ``ETag`` of a compressed one becomes weak (the
bytes differ from the uncompressed ones).
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

from surge._core import Request, Response

from ..negotiation import accepted_codings, choose_encoding
from ..response import StreamingResponse
from .base import CallNext, HookMiddleware, add_vary, header_values, overrides

try:
    import brotli  # type: ignore[import-untyped,unused-ignore]
except ImportError:  # the optional extra is absent: gzip (and zstd if present) only
    brotli = None
try:
    import zstandard
except ImportError:
    zstandard = None  # type: ignore[assignment]

__all__ = [
    "DEFAULT_BROTLI_QUALITY",
    "DEFAULT_COMPRESSLEVEL",
    "DEFAULT_EXCLUDED_CONTENT_TYPES",
    "DEFAULT_MINIMUM_SIZE",
    "DEFAULT_ZSTD_LEVEL",
    "CompressionMiddleware",
    "GZipMiddleware",
    "accepted_codings",
    "accepts_gzip",
    "available_encodings",
    "choose_encoding",
]

#: Bodies shorter than this (bytes) are sent as they are (``minimum_size``'s default).
DEFAULT_MINIMUM_SIZE = 500
#: zlib level 1-9 (``compresslevel``'s default; Starlette's too).
DEFAULT_COMPRESSLEVEL = 9
#: brotli quality 0-11: 4 compresses better than gzip -9 at several times its
#: speed; 11 (brotli's own default) is meant for static assets compressed once.
DEFAULT_BROTLI_QUALITY = 4
#: zstd level 1-22 (zstd's own default, 3).
DEFAULT_ZSTD_LEVEL = 3
#: Media types never compressed (``type/*`` matches a whole type): Starlette's
#: defaults, so that an app moved between the two compresses the same bodies.
DEFAULT_EXCLUDED_CONTENT_TYPES = (
    "application/grpc",
    "application/gzip",
    "application/x-gzip",
    "application/zip",
    "audio/*",
    "font/woff",
    "font/woff2",
    "image/avif",
    "image/gif",
    "image/jpeg",
    "image/png",
    "image/webp",
    "text/event-stream",
    "video/*",
)


def available_encodings() -> tuple[str, ...]:
    """The codings this installation can produce, in the default order of preference."""
    return tuple(
        name
        for name, module in (("zstd", zstandard), ("br", brotli), ("gzip", gzip))
        if module is not None
    )


def accepts_gzip(accept_encoding: str) -> bool:
    """True when an ``Accept-Encoding`` value allows gzip (``gzip``, ``x-gzip`` or
    ``*``, with a q-value above 0; RFC 9110 12.5.3)."""
    return choose_encoding(accept_encoding, ("gzip",)) == "gzip"


# A coding: (compress the whole body, make a stream compressor), where a stream
# compressor is (compress one chunk and flush it, finish).
_Stream = tuple[Callable[[bytes], bytes], Callable[[], bytes]]
_Coder = tuple[Callable[[bytes], bytes], Callable[[], _Stream]]


def _gzip_coder(level: int) -> _Coder:
    def whole(data: bytes) -> bytes:
        return gzip.compress(data, level, mtime=0)

    def stream() -> _Stream:
        c = zlib.compressobj(level, zlib.DEFLATED, 31)
        return (lambda chunk: c.compress(chunk) + c.flush(zlib.Z_SYNC_FLUSH)), c.flush

    return whole, stream


def _brotli_coder(quality: int) -> _Coder:
    def whole(data: bytes) -> bytes:
        return brotli.compress(data, quality=quality)

    def stream() -> _Stream:
        c = brotli.Compressor(quality=quality)
        return (lambda chunk: c.process(chunk) + c.flush()), c.finish

    return whole, stream


def _zstd_coder(level: int) -> _Coder:
    def whole(data: bytes) -> bytes:
        # A compressor per body: a ZstdCompressor must not be shared by threads,
        # and a sync handler's response may be finished on one.
        return zstandard.ZstdCompressor(level=level).compress(data)

    def stream() -> _Stream:
        c = zstandard.ZstdCompressor(level=level).compressobj()
        block = zstandard.COMPRESSOBJ_FLUSH_BLOCK
        return (lambda chunk: c.compress(chunk) + c.flush(block)), c.flush

    return whole, stream


class CompressionMiddleware(HookMiddleware):
    """``app.add_middleware(CompressionMiddleware, minimum_size=500)``: zstd, br
    and gzip by the client's Accept-Encoding (see the module docstring).
    `encodings` names the codings to offer, most preferred first; one whose
    package is not installed raises ValueError."""

    def __init__(
        self,
        app: CallNext,
        minimum_size: int = DEFAULT_MINIMUM_SIZE,
        *,
        encodings: Iterable[str] | None = None,
        gzip_level: int = DEFAULT_COMPRESSLEVEL,
        brotli_quality: int = DEFAULT_BROTLI_QUALITY,
        zstd_level: int = DEFAULT_ZSTD_LEVEL,
        exclude_content_types: Iterable[str] = DEFAULT_EXCLUDED_CONTENT_TYPES,
    ) -> None:
        if minimum_size < 0:
            raise ValueError(f"minimum_size must be >= 0, got {minimum_size}")
        if not 0 <= gzip_level <= 9:
            raise ValueError(f"gzip_level must be 0-9, got {gzip_level}")
        if not 0 <= brotli_quality <= 11:
            raise ValueError(f"brotli_quality must be 0-11, got {brotli_quality}")
        if not 1 <= zstd_level <= 22:
            raise ValueError(f"zstd_level must be 1-22, got {zstd_level}")
        offered = tuple(available_encodings() if encodings is None else encodings)
        makers = {"gzip": lambda: _gzip_coder(gzip_level)}
        if brotli is not None:
            makers["br"] = lambda: _brotli_coder(brotli_quality)
        if zstandard is not None:
            makers["zstd"] = lambda: _zstd_coder(zstd_level)
        for name in offered:
            if name not in ("gzip", "br", "zstd"):
                raise ValueError(f"unknown coding {name!r} (gzip, br or zstd)")
            if name not in makers:
                package = "brotli" if name == "br" else "zstandard"
                raise ValueError(
                    f"coding {name!r} needs the {package} package "
                    "(pip install 'surge[compression]')"
                )
        if not offered:
            raise ValueError("encodings is empty")
        self.app = app
        self.minimum_size = minimum_size
        self.encodings = offered
        self._coders = {name: makers[name]() for name in offered}
        self.exclude_content_types = frozenset(t.strip().lower() for t in exclude_content_types)

    def _native_hooks(self) -> tuple[Any, ...] | None:
        # A body below the minimum size passed on natively, untouched.
        if overrides(self, CompressionMiddleware, "process_response"):
            return None
        return ("compression", self.minimum_size)

    def process_response(self, request: Request, response: Any) -> Any:
        """Compresses the response with the coding the request prefers, when it is worth it."""
        if isinstance(response, Response):
            if len(response.body) < self.minimum_size or not self._compressible(response):
                return response
            add_vary(response, "Accept-Encoding")
            coding = self._choose(request)
            if coding is not None:
                response.body = self._coders[coding][0](response.body)
                self._mark(response, coding)
        elif isinstance(response, StreamingResponse) and self._compressible(response):
            add_vary(response, "Accept-Encoding")
            coding = self._choose(request)
            if coding is not None:
                response.iterator = _compress_stream(response.iterator, self._coders[coding][1])
                self._mark(response, coding)
        return response

    def _choose(self, request: Request) -> str | None:
        accept = request.headers.get("accept-encoding")
        return choose_encoding(accept, self.encodings) if accept else None

    def _compressible(self, response: Any) -> bool:
        if response.status == 206 or response.status < 200 or response.status in (204, 304):
            return False
        if header_values(response, "Content-Encoding") or header_values(response, "Content-Range"):
            return False
        if any("no-transform" in v.lower() for v in header_values(response, "Cache-Control")):
            return False
        media_type = (response.content_type or "").partition(";")[0].strip().lower()
        excluded = self.exclude_content_types
        if media_type in excluded or media_type.partition("/")[0] + "/*" in excluded:
            return False
        return not (media_type.startswith("application/grpc+") and "application/grpc" in excluded)

    @staticmethod
    def _mark(response: Any, coding: str) -> None:
        response.set_header("Content-Encoding", coding)
        etags = header_values(response, "ETag")
        if etags and not etags[0].startswith("W/"):
            response.set_header("ETag", "W/" + etags[0])


class GZipMiddleware(CompressionMiddleware):
    """``app.add_middleware(GZipMiddleware, minimum_size=500, compresslevel=9)``:
    gzip only, as Starlette's `GZipMiddleware` (`CompressionMiddleware` offers
    zstd and brotli too)."""

    def __init__(
        self,
        app: CallNext,
        minimum_size: int = DEFAULT_MINIMUM_SIZE,
        compresslevel: int = DEFAULT_COMPRESSLEVEL,
        *,
        exclude_content_types: Iterable[str] = DEFAULT_EXCLUDED_CONTENT_TYPES,
    ) -> None:
        if not 0 <= compresslevel <= 9:
            raise ValueError(f"compresslevel must be 0-9, got {compresslevel}")
        super().__init__(
            app,
            minimum_size,
            encodings=("gzip",),
            gzip_level=compresslevel,
            exclude_content_types=exclude_content_types,
        )
        self.compresslevel = compresslevel


async def _compress_stream(iterator: Any, make: Callable[[], _Stream]) -> AsyncIterator[bytes]:
    chunk_out, finish = make()
    if hasattr(iterator, "__aiter__"):
        async for chunk in iterator:
            data = chunk_out(_bytes(chunk))
            if data:
                yield data
    else:
        for chunk in iterator:
            data = chunk_out(_bytes(chunk))
            if data:
                yield data
    yield finish()


def _bytes(chunk: str | bytes) -> bytes:
    return chunk.encode() if isinstance(chunk, str) else chunk
