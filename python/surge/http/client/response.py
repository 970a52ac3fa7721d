"""`ClientResponse`: what `surge.http.Client` returns.

A buffered response (the default) holds its whole body; a streamed one
(`client.stream(...)`) holds only its head until the body is read with
`read()`, `aiter_bytes()` or `aiter_text()`, and gives its connection back to the
pool once the body has been read to the end or the response is closed.
"""

from __future__ import annotations

import codecs
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

import orjson

from surge._core import Headers, HttpResponse
from surge.errors import InterfaceError

from .errors import HTTPStatusError

if TYPE_CHECKING:
    from .pool import BodyStream

__all__ = ["ClientResponse", "ResponseNotRead"]


class ResponseNotRead(InterfaceError):
    """`.content`, `.text` or `.json()` on a streamed response before `await read()`."""


def _charset(content_type: str | None) -> str | None:
    if not content_type:
        return None
    for param in content_type.split(";")[1:]:
        key, _, value = param.partition("=")
        if key.strip().lower() == "charset":
            value = value.strip().strip('"').strip("'")
            try:
                return codecs.lookup(value).name
            except LookupError:
                return None
    return None


class ClientResponse:
    """An HTTP response: `status`, `headers`, and the body as `content`, `text` or `json()`."""

    __slots__ = ("_content", "_raw", "_release", "_stream", "history", "method", "url")

    def __init__(
        self,
        raw: HttpResponse,
        method: str,
        url: str,
        stream: BodyStream | None = None,
        release: Callable[[bool], None] | None = None,
    ) -> None:
        self._raw = raw
        self.method = method
        #: The URL requested (after redirects, the last one).
        self.url = url
        #: Responses of the redirects followed to reach this one, oldest first.
        self.history: list[ClientResponse] = []
        self._stream = stream
        self._release = release
        self._content: bytes | None = None if stream is not None else raw.body

    # -- head ------------------------------------------------------------------

    @property
    def status(self) -> int:
        """The status code, e.g. 200."""
        return self._raw.status

    @property
    def status_code(self) -> int:
        """The status code (httpx's name)."""
        return self._raw.status

    @property
    def reason(self) -> str:
        """The reason phrase as sent, e.g. "OK" (may be empty)."""
        return self._raw.reason

    reason_phrase = reason

    @property
    def http_version(self) -> str:
        """ "HTTP/1.1" or "HTTP/1.0"."""
        return "HTTP/" + self._raw.version

    @property
    def headers(self) -> Headers:
        """Case-insensitive, read-only; `getall(name)` for repeated fields."""
        return self._raw.headers

    @property
    def content_type(self) -> str | None:
        """The Content-Type header, or None."""
        return self._raw.headers.get("content-type")

    @property
    def encoding(self) -> str:
        """The charset of Content-Type, UTF-8 when there is none."""
        return _charset(self.content_type) or "utf-8"

    @property
    def is_success(self) -> bool:
        """True for 2xx."""
        return 200 <= self._raw.status < 300

    @property
    def ok(self) -> bool:
        """True below 400 (aiohttp's name)."""
        return self._raw.status < 400

    @property
    def is_redirect(self) -> bool:
        """True for a 3xx with a Location header."""
        return 300 <= self._raw.status < 400 and "location" in self._raw.headers

    # -- body --------------------------------------------------------------------

    @property
    def content(self) -> bytes:
        """The whole body (a streamed response must be `await read()` first)."""
        if self._content is None:
            raise ResponseNotRead("streamed response: call `await response.read()` first")
        return self._content

    @property
    def text(self) -> str:
        """The body decoded with `encoding` (undecodable bytes replaced)."""
        return self.content.decode(self.encoding, errors="replace")

    def json(self, **kwargs: Any) -> Any:
        """The body parsed as JSON (with orjson; keyword arguments go to json.loads)."""
        if kwargs:
            import json

            return json.loads(self.content, **kwargs)
        return orjson.loads(self.content)

    async def read(self) -> bytes:
        """Reads the rest of the body (all of it for a streamed response) and returns it."""
        if self._content is None:
            self._content = b"".join([chunk async for chunk in self.aiter_bytes()])
        return self._content

    aread = read

    async def aiter_bytes(self, chunk_size: int | None = None) -> AsyncIterator[bytes]:
        """The body as it arrives, in pieces (of `chunk_size` bytes, but the last, if given)."""
        if self._stream is None:
            content = self.content
            if chunk_size is None:
                if content:
                    yield content
                return
            for i in range(0, len(content), chunk_size):
                yield content[i : i + chunk_size]
            return
        stream = self._stream
        pending = b""
        try:
            while True:
                chunk = await stream.next()
                if chunk is None:
                    break
                if chunk_size is None:
                    yield chunk
                    continue
                pending += chunk
                while len(pending) >= chunk_size:
                    yield pending[:chunk_size]
                    pending = pending[chunk_size:]
            if pending:
                yield pending
        finally:
            self._finish(stream.complete)

    async def aiter_text(self) -> AsyncIterator[str]:
        """The body as it arrives, decoded with `encoding`."""
        decoder = codecs.getincrementaldecoder(self.encoding)(errors="replace")
        async for chunk in self.aiter_bytes():
            text = decoder.decode(chunk)
            if text:
                yield text
        tail = decoder.decode(b"", final=True)
        if tail:
            yield tail

    def raise_for_status(self) -> ClientResponse:
        """Raises `HTTPStatusError` for 4xx and 5xx; returns the response otherwise."""
        status = self._raw.status
        if status >= 400:
            kind = "Client error" if status < 500 else "Server error"
            raise HTTPStatusError(
                f"{kind} '{status} {self._raw.reason}' for {self.method} {self.url}",
                response=self,
            )
        return self

    # -- lifetime ----------------------------------------------------------------

    def _finish(self, complete: bool) -> None:
        release, self._release = self._release, None
        if release is not None:
            release(complete)

    async def aclose(self) -> None:
        """Gives the connection back (or closes it, if the body was not read to the end)."""
        stream = self._stream
        self._finish(stream is None or stream.complete)

    async def __aenter__(self) -> ClientResponse:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"<ClientResponse [{self.status} {self.reason}] {self.method} {self.url}>"
