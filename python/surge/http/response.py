"""Response types. `Response` itself is native (encoded without Python on the
fast path); streaming and file responses are written by the protocol."""

from __future__ import annotations

import mimetypes
import os
from collections.abc import AsyncIterable, Iterable, Mapping
from typing import Any
from urllib.parse import quote

from surge._core import Response

__all__ = [
    "FileResponse",
    "HTMLResponse",
    "JSONResponse",
    "RedirectResponse",
    "Response",
    "StreamingResponse",
]

HeadersArg = Mapping[str, str] | list[tuple[str, str]] | None


class JSONResponse(Response):
    """A response whose body is `data` serialised with orjson."""

    def __new__(cls, data: Any, status: int = 200, headers: HeadersArg = None) -> JSONResponse:
        import orjson

        return super().__new__(
            cls, orjson.dumps(data), status, headers, content_type="application/json"
        )


class HTMLResponse(Response):
    """A text/html response."""

    def __new__(cls, body: str | bytes, status: int = 200, headers: HeadersArg = None):
        return super().__new__(cls, body, status, headers, content_type="text/html; charset=utf-8")


class RedirectResponse(Response):
    """A redirect to `url` (307 by default, like Starlette)."""

    def __new__(cls, url: str, status: int = 307, headers: HeadersArg = None):
        pairs = list(headers.items()) if isinstance(headers, Mapping) else list(headers or [])
        pairs.append(("Location", quote(url, safe=":/%#?=@[]!$&'()*+,;")))
        return super().__new__(cls, None, status, pairs)


class StreamingResponse:
    """A body produced by an (async) iterator of str or bytes, sent chunked."""

    __slots__ = ("content_type", "headers", "iterator", "status")

    def __init__(
        self,
        iterator: AsyncIterable[str | bytes] | Iterable[str | bytes],
        status: int = 200,
        headers: HeadersArg = None,
        content_type: str = "application/octet-stream",
    ) -> None:
        self.iterator = iterator
        self.status = status
        self.headers = list(headers.items()) if isinstance(headers, Mapping) else headers or []
        self.content_type = content_type


class FileResponse:
    """A file sent with sendfile where the loop supports it."""

    __slots__ = ("content_type", "filename", "headers", "path", "status")

    def __init__(
        self,
        path: str | os.PathLike[str],
        status: int = 200,
        headers: HeadersArg = None,
        content_type: str | None = None,
        filename: str | None = None,
    ) -> None:
        self.path = os.fspath(path)
        self.status = status
        self.headers = list(headers.items()) if isinstance(headers, Mapping) else headers or []
        if content_type is None:
            guessed, _ = mimetypes.guess_type(self.path)
            content_type = guessed or "application/octet-stream"
        self.content_type = content_type
        self.filename = filename
        if filename is not None:
            self.headers.append(
                ("Content-Disposition", f"attachment; filename*=utf-8''{quote(filename)}")
            )
