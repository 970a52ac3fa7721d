"""`GZipMiddleware`: gzip response bodies for clients that accept it.

Only gzip: no brotli or zstd binding is a dependency of surge (static files may
serve precompressed ``.br`` siblings instead). Compressed: a `Response` whose
body is at least ``minimum_size`` bytes, and a `StreamingResponse` chunk by
chunk (each chunk flushed, so a client sees it as soon as the handler yields
it). Left alone: responses that already have a ``Content-Encoding``, partial
content (206, ``Content-Range``), ``text/event-stream``, a `FileResponse` (sent
with sendfile as it is) and anything else written by the server itself.
Compressed responses get ``Vary: Accept-Encoding``, and a strong ``ETag``
becomes weak (the bytes differ from the uncompressed ones).
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import AsyncIterator
from typing import Any

from surge._core import Request, Response

from ..response import StreamingResponse
from .base import CallNext, HookMiddleware, add_vary, header_values

#: Bodies shorter than this (bytes) are sent as they are (``minimum_size``'s default).
DEFAULT_MINIMUM_SIZE = 500
#: zlib level 1-9 (``compresslevel``'s default; Starlette's too).
DEFAULT_COMPRESSLEVEL = 9


def accepts_gzip(accept_encoding: str) -> bool:
    """True when an ``Accept-Encoding`` value allows gzip (``gzip``, ``x-gzip`` or
    ``*``, with a q-value above 0; RFC 9110 12.5.3)."""
    star = None
    for item in accept_encoding.split(","):
        coding, _, params = item.partition(";")
        coding = coding.strip().lower()
        q = 1.0
        for param in params.split(";"):
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if coding in ("gzip", "x-gzip"):
            return q > 0
        if coding == "*":
            star = q > 0
    return bool(star)


class GZipMiddleware(HookMiddleware):
    """``app.add_middleware(GZipMiddleware, minimum_size=500, compresslevel=9)``."""

    def __init__(
        self,
        app: CallNext,
        minimum_size: int = DEFAULT_MINIMUM_SIZE,
        compresslevel: int = DEFAULT_COMPRESSLEVEL,
    ) -> None:
        if not 0 <= compresslevel <= 9:
            raise ValueError(f"compresslevel must be 0-9, got {compresslevel}")
        if minimum_size < 0:
            raise ValueError(f"minimum_size must be >= 0, got {minimum_size}")
        self.app = app
        self.minimum_size = minimum_size
        self.compresslevel = compresslevel

    def process_response(self, request: Request, response: Any) -> Any:
        """Compresses the response when the request accepts gzip and it is worth it."""
        if isinstance(response, Response):
            if len(response.body) < self.minimum_size or not self._compressible(response):
                return response
            add_vary(response, "Accept-Encoding")
            if accepts_gzip(request.headers.get("accept-encoding", "")):
                response.body = gzip.compress(response.body, self.compresslevel, mtime=0)
                self._mark(response)
        elif isinstance(response, StreamingResponse) and self._compressible(response):
            add_vary(response, "Accept-Encoding")
            if accepts_gzip(request.headers.get("accept-encoding", "")):
                response.iterator = self._compress_stream(response.iterator)
                self._mark(response)
        return response

    @staticmethod
    def _compressible(response: Any) -> bool:
        if response.status == 206 or response.status < 200 or response.status in (204, 304):
            return False
        if header_values(response, "Content-Encoding") or header_values(response, "Content-Range"):
            return False
        content_type = response.content_type or ""
        return not content_type.startswith("text/event-stream")

    @staticmethod
    def _mark(response: Any) -> None:
        response.set_header("Content-Encoding", "gzip")
        etags = header_values(response, "ETag")
        if etags and not etags[0].startswith("W/"):
            response.set_header("ETag", "W/" + etags[0])

    async def _compress_stream(self, iterator: Any) -> AsyncIterator[bytes]:
        compressor = zlib.compressobj(self.compresslevel, zlib.DEFLATED, 31)
        if hasattr(iterator, "__aiter__"):
            async for chunk in iterator:
                data = compressor.compress(_bytes(chunk)) + compressor.flush(zlib.Z_SYNC_FLUSH)
                if data:
                    yield data
        else:
            for chunk in iterator:
                data = compressor.compress(_bytes(chunk)) + compressor.flush(zlib.Z_SYNC_FLUSH)
                if data:
                    yield data
        yield compressor.flush()


def _bytes(chunk: str | bytes) -> bytes:
    return chunk.encode() if isinstance(chunk, str) else chunk
