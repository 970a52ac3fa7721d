"""Response types. `Response` itself is native (encoded without Python on the
fast path); streaming and file responses are written by the protocol."""

from __future__ import annotations

import mimetypes
import os
import unicodedata
from collections.abc import AsyncIterable, Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import quote

from surge._core import Response

from .cookies import delete_cookie_header, set_cookie_header

if TYPE_CHECKING:
    from surge._core import HeadDefaults

    from .protocol import HttpProtocol

__all__ = [
    "FileResponse",
    "HTMLResponse",
    "JSONResponse",
    "RedirectResponse",
    "Response",
    "StreamingResponse",
    "WriterResponse",
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


_TCHARS = frozenset(
    b"!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
)


def _check_header(name: str, value: str) -> None:
    if not name or not set(name.encode("latin-1", "replace")) <= _TCHARS:
        raise ValueError(f"invalid header name {name!r}")
    if any(c in value for c in "\r\n\0"):
        raise ValueError(f"header {name!r}: value may not contain CR, LF or NUL")


def _header_list(headers: HeadersArg) -> list[tuple[str, str]]:
    pairs = list(headers.items()) if isinstance(headers, Mapping) else list(headers or [])
    for name, value in pairs:
        _check_header(name, value)
    return pairs


class _HeadersMixin:
    """`add_header`/`set_header` as on `Response`, for the Python-written responses."""

    __slots__ = ()
    headers: list[tuple[str, str]]

    def get_header(self, name: str, default: str | None = None) -> str | None:
        """The value of the first header `name` (any case), or `default`."""
        lower = name.lower()
        return next((v for n, v in self.headers if n.lower() == lower), default)

    def add_header(self, name: str, value: str) -> None:
        """Adds a header (kept alongside any of the same name)."""
        _check_header(name, value)
        self.headers.append((name, value))

    def set_header(self, name: str, value: str) -> None:
        """Sets a header, replacing those of the same name."""
        _check_header(name, value)
        lower = name.lower()
        self.headers[:] = [(n, v) for n, v in self.headers if n.lower() != lower]
        self.headers.append((name, value))

    def set_cookie(
        self,
        key: str,
        value: str = "",
        max_age: int | None = None,
        expires: datetime | str | int | None = None,
        path: str | None = "/",
        domain: str | None = None,
        secure: bool = False,
        httponly: bool = False,
        samesite: str | None = "lax",
        partitioned: bool = False,
    ) -> None:
        """Adds a Set-Cookie header (see `surge.http.cookies`)."""
        header = set_cookie_header(
            key, value, max_age, expires, path, domain, secure, httponly, samesite, partitioned
        )
        self.headers.append(("Set-Cookie", header))

    def delete_cookie(
        self,
        key: str,
        path: str = "/",
        domain: str | None = None,
        secure: bool = False,
        httponly: bool = False,
        samesite: str | None = "lax",
    ) -> None:
        """Adds a Set-Cookie header that removes the cookie `key`."""
        header = delete_cookie_header(key, path, domain, secure, httponly, samesite)
        self.headers.append(("Set-Cookie", header))


class StreamingResponse(_HeadersMixin):
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
        self.headers = _header_list(headers)
        self.content_type = content_type


class FileResponse(_HeadersMixin):
    """A file, its body sent with sendfile (`HttpProtocol.sendfile`).

    With status 200 it answers conditional and range requests like a static
    file (`surge.http.conditional`): ETag and Last-Modified from the file,
    304 / 412 on If-None-Match, If-Modified-Since, If-Match,
    If-Unmodified-Since, 206 (one range, or several as multipart/byteranges)
    and 416 on Range / If-Range, and ``Accept-Ranges: bytes``. Another status
    sends the whole file as it is. A missing file or one that is not a regular
    file gets 404.
    """

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
        self.headers = _header_list(headers)
        self.content_type = guess_content_type(self.path) if content_type is None else content_type
        self.filename = filename
        if filename is not None:
            self.headers.append(("Content-Disposition", content_disposition(filename)))


#: Codings `mimetypes` recognises as a file's encoding, and the type of such a
#: file served as it is (``a.txt.gz`` is a gzip file, not text).
_ENCODED_TYPES = {
    "gzip": "application/gzip",
    "br": "application/x-brotli",
    "bzip2": "application/x-bzip2",
    "xz": "application/x-xz",
    "compress": "application/x-compress",
}


def guess_content_type(path: str) -> str:
    """The Content-Type for a file name: by extension (`mimetypes`), with
    ``charset=utf-8`` for text; ``application/octet-stream`` when unknown."""
    guessed, encoding = mimetypes.guess_type(path, strict=False)
    if encoding is not None:
        return _ENCODED_TYPES.get(encoding, "application/octet-stream")
    if guessed is None:
        return "application/octet-stream"
    if guessed.startswith("text/") or guessed == "application/javascript":
        return f"{guessed}; charset=utf-8"
    return guessed


def content_disposition(filename: str) -> str:
    """`attachment` with the name in both RFC 6266 forms: ``filename="..."`` (an
    ASCII fallback, for clients that know only that one, such as ``curl -OJ``)
    and ``filename*=utf-8''...`` (the exact name, which newer clients prefer)."""
    ascii_name = unicodedata.normalize("NFKD", filename).encode("ascii", "ignore").decode("ascii")
    # A quoted-string holds no control characters; `\` and `"` are escaped.
    ascii_name = "".join(c for c in ascii_name if " " <= c < "\x7f")
    ascii_name = ascii_name.replace("\\", "\\\\").replace('"', '\\"') or "download"
    return f"attachment; filename=\"{ascii_name}\"; filename*=utf-8''{quote(filename, safe='')}"


class WriterResponse:
    """A response that writes itself through the connection when its turn comes.

    Other dispatchers (ASGI, WSGI) return one from their handler: the slot is
    queued like a `StreamingResponse`, and once every response before it has
    left, `write` runs with the connection (``conn.write``, ``await
    conn.drain()``) and returns whether the connection may stay open.
    """

    __slots__ = ()

    #: True when the class implements `begin` (no writer task is spent on it).
    inline: ClassVar[bool] = False

    async def write(self, conn: HttpProtocol) -> bool:
        """Writes the whole response; True to keep the connection alive."""
        raise NotImplementedError

    def begin(self, conn: HttpProtocol) -> bool | None:
        """Instead of `write` when `inline`: called (synchronously) when its turn
        comes, it writes what it has and returns whether the connection may stay
        open if the response is complete; None when it goes on writing by itself,
        in which case it calls ``conn.writer_done(keep_alive)`` exactly once, when
        it is complete."""
        raise NotImplementedError


_SERVER_ERROR = b"Internal Server Error"


def server_error_answer(ours: HeadDefaults) -> bytes:
    """A whole 500 response that closes the connection, for a dispatcher whose app
    failed before its response began (`ours`: the plan's `head_defaults`)."""
    return (
        b"HTTP/1.1 500 Internal Server Error\r\n%scontent-type: text/plain; charset=utf-8\r\n"
        b"content-length: %d\r\nconnection: close\r\n\r\n%s"
        % (ours.lines(), len(_SERVER_ERROR), _SERVER_ERROR)
    )
