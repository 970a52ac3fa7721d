"""Forms: ``await request.form()`` for urlencoded and multipart bodies.

Theory of operation: the body is fed to python-multipart's push parsers (the
library Starlette uses) chunk by chunk as it arrives: on a route declared
``stream=True`` straight from the connection's body stream, with its read
back-pressure, so a 10 MB upload is never held in memory whole; on any other
route the body was read before the handler ran (up to the route's
``max_body_size``) and is fed in one piece. Fields are collected in memory up
to `DEFAULT_MAX_PART_SIZE` each; file parts go to a `SpooledTemporaryFile`
that moves to disk past `DEFAULT_SPOOL_MAX_SIZE`. File writes are plain
synchronous writes: they land in the page cache, and a thread hop per chunk
(what Starlette pays once a file is on disk) costs more than the write.

Limits, each a keyword of ``request.form()`` with the default below: parts
that are files (`DEFAULT_MAX_FILES`) and fields (`DEFAULT_MAX_FIELDS`), more
give 400; a field's size (`DEFAULT_MAX_PART_SIZE`) and a file's size
(`DEFAULT_MAX_FILE_SIZE`, None: only the route's body limit), more give 413.
A malformed body (no boundary, a part without a name, a truncated body, a
field that is not UTF-8) gives 400 with a message saying what is wrong; files
spooled so far are closed. Part headers are bounded by python-multipart
itself (a few KiB, a handful of lines).

Differences from Starlette, on purpose: a body that ends before its closing
boundary, and a field that is not valid UTF-8, are 400 rather than a partial
form or a latin-1 guess (no data is changed silently); size limits answer 413.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Generator, ItemsView, Iterator, Mapping
from typing import TYPE_CHECKING, Any, BinaryIO
from urllib.parse import unquote_to_bytes

from .errors import HTTPException

if TYPE_CHECKING:
    from surge._core import Request

__all__ = [
    "DEFAULT_MAX_FIELDS",
    "DEFAULT_MAX_FILES",
    "DEFAULT_MAX_FILE_SIZE",
    "DEFAULT_MAX_PART_SIZE",
    "DEFAULT_SPOOL_MAX_SIZE",
    "FormData",
    "UploadFile",
    "form",
]

#: Most file parts in one multipart body (Starlette's default); more is 400.
DEFAULT_MAX_FILES = 1000
#: Most non-file fields in one body (Starlette's default); more is 400.
DEFAULT_MAX_FIELDS = 1000
#: Largest non-file field value, in bytes (Starlette's default); larger is 413.
DEFAULT_MAX_PART_SIZE = 1024 * 1024
#: Largest file part, in bytes; None leaves only the route's ``max_body_size``.
DEFAULT_MAX_FILE_SIZE: int | None = None
#: File parts up to this size stay in memory; larger ones move to a temporary file.
DEFAULT_SPOOL_MAX_SIZE = 1024 * 1024

_URLENCODED = "application/x-www-form-urlencoded"
_MULTIPART = "multipart/form-data"


class FormHeaders(Mapping[str, str]):
    """A part's headers: case-insensitive names, the first value of each."""

    __slots__ = ("_items",)

    def __init__(self, items: list[tuple[str, str]]) -> None:
        self._items = items

    def __getitem__(self, name: str) -> str:
        lower = name.lower()
        for n, v in self._items:
            if n.lower() == lower:
                return v
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys(n.lower() for n, _ in self._items))

    def __len__(self) -> int:
        return len({n.lower() for n, _ in self._items})

    def getlist(self, name: str) -> list[str]:
        """Every value of `name`, in order."""
        lower = name.lower()
        return [v for n, v in self._items if n.lower() == lower]

    def raw(self) -> list[tuple[str, str]]:
        """The (name, value) pairs as received."""
        return list(self._items)

    def __repr__(self) -> str:
        return f"FormHeaders({self._items!r})"


class UploadFile:
    """A file part of a multipart form (Starlette's `UploadFile` shape).

    ``file`` is a `SpooledTemporaryFile`: in memory up to the spool size, on disk
    above it. The async methods do the file's work inline (see the module
    docstring) and exist so code written for Starlette runs unchanged.
    """

    __slots__ = ("content_type", "file", "filename", "headers", "size")

    def __init__(
        self,
        file: BinaryIO,
        *,
        filename: str | None = None,
        headers: FormHeaders | None = None,
        size: int | None = None,
    ) -> None:
        self.file = file
        self.filename = filename
        self.headers = headers or FormHeaders([])
        self.content_type: str | None = self.headers.get("content-type")
        self.size = size

    async def read(self, size: int = -1) -> bytes:
        """Up to `size` bytes from the current position (all by default)."""
        return self.file.read(size)

    async def write(self, data: bytes) -> None:
        """Appends `data` at the current position."""
        self.file.write(data)
        if self.size is not None:
            self.size += len(data)

    async def seek(self, offset: int) -> None:
        """Moves the position to `offset`."""
        self.file.seek(offset)

    async def close(self) -> None:
        """Closes the file (a spooled file on disk is deleted)."""
        self.file.close()

    def __repr__(self) -> str:
        return f"UploadFile(filename={self.filename!r}, size={self.size!r})"


FormValue = str | UploadFile


class FormData(Mapping[str, FormValue]):
    """An immutable multi-dict of a form's fields and files.

    As Starlette's: ``form[key]`` is the LAST value sent for `key`, `getlist`
    every one in order, `multi_items` every pair.
    """

    __slots__ = ("_dict", "_items")

    def __init__(self, items: list[tuple[str, FormValue]] | None = None) -> None:
        self._items = list(items or [])
        self._dict = dict(self._items)

    def __getitem__(self, key: str) -> FormValue:
        return self._dict[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._dict)

    def __len__(self) -> int:
        return len(self._dict)

    def items(self) -> ItemsView[str, FormValue]:
        """(key, last value) pairs."""
        return self._dict.items()

    def getlist(self, key: str) -> list[FormValue]:
        """Every value of `key`, in order."""
        return [v for k, v in self._items if k == key]

    def multi_items(self) -> list[tuple[str, FormValue]]:
        """Every (key, value) pair, repeats included, in order."""
        return list(self._items)

    async def close(self) -> None:
        """Closes every file in the form."""
        for _, value in self._items:
            if isinstance(value, UploadFile):
                await value.close()

    def __repr__(self) -> str:
        return f"FormData({self._items!r})"


class _Limits:
    __slots__ = ("max_fields", "max_file_size", "max_files", "max_part_size", "spool_max_size")

    def __init__(
        self,
        max_files: int,
        max_fields: int,
        max_part_size: int,
        max_file_size: int | None,
        spool_max_size: int,
    ) -> None:
        self.max_files = max_files
        self.max_fields = max_fields
        self.max_part_size = max_part_size
        self.max_file_size = max_file_size
        self.spool_max_size = spool_max_size


class FormCall:
    """What ``request.form()`` returns: await it for the `FormData`, or use it as
    ``async with request.form() as form:`` to have its files closed after."""

    __slots__ = ("_form", "_limits", "_request")

    def __init__(self, request: Request, limits: _Limits) -> None:
        self._request = request
        self._limits = limits
        self._form: FormData | None = None

    def __await__(self) -> Generator[Any, None, FormData]:
        return self._get().__await__()

    async def _get(self) -> FormData:
        cached = getattr(self._request, "_form", None)
        if cached is None:
            cached = await _parse(self._request, self._limits)
            self._request._form = cached
        self._form = cached
        return cached

    async def __aenter__(self) -> FormData:
        return await self._get()

    async def __aexit__(self, *exc: object) -> None:
        if self._form is not None:
            await self._form.close()


def form(
    request: Request,
    *,
    max_files: int = DEFAULT_MAX_FILES,
    max_fields: int = DEFAULT_MAX_FIELDS,
    max_part_size: int = DEFAULT_MAX_PART_SIZE,
    max_file_size: int | None = DEFAULT_MAX_FILE_SIZE,
    spool_max_size: int = DEFAULT_SPOOL_MAX_SIZE,
) -> FormCall:
    """The form of `request` (what ``request.form()`` calls); see the module docstring."""
    limits = _Limits(max_files, max_fields, max_part_size, max_file_size, spool_max_size)
    return FormCall(request, limits)


async def _chunks(request: Request) -> AsyncIterator[bytes]:
    stream = request._stream
    if stream is not None:  # a streaming route: as it arrives
        async for chunk in stream:
            yield chunk
        return
    body = request.body
    if body:
        yield body


async def _parse(request: Request, limits: _Limits) -> FormData:
    content_type = request.headers.get("content-type") or ""
    media = content_type.partition(";")[0].strip().lower()
    if media == _MULTIPART:
        return await _parse_multipart(request, content_type, limits)
    if media == _URLENCODED:
        return await _parse_urlencoded(request, limits)
    return FormData()  # as Starlette: another body is no form at all


def _bad(message: str) -> HTTPException:
    return HTTPException(400, message)


def _too_large(message: str) -> HTTPException:
    return HTTPException(413, message)


def _decode(raw: bytes, what: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _bad(f"{what} is not valid UTF-8") from None


def _unquote_plus(raw: bytes, what: str) -> str:
    return _decode(unquote_to_bytes(raw.replace(b"+", b" ")), what)


async def _parse_urlencoded(request: Request, limits: _Limits) -> FormData:
    from python_multipart.multipart import QuerystringParser

    items: list[tuple[str, FormValue]] = []
    name = bytearray()
    value = bytearray()

    def on_field_start() -> None:
        name.clear()
        value.clear()

    def on_field_name(data: bytes, start: int, end: int) -> None:
        name.extend(data[start:end])
        if len(name) > limits.max_part_size:
            raise _too_large(f"a form field name is over {limits.max_part_size} bytes")

    def on_field_data(data: bytes, start: int, end: int) -> None:
        value.extend(data[start:end])
        if len(value) > limits.max_part_size:
            raise _too_large(f"a form field is over {limits.max_part_size} bytes")

    def on_field_end() -> None:
        if len(items) >= limits.max_fields:
            raise _bad(f"too many form fields (at most {limits.max_fields})")
        items.append(
            (_unquote_plus(bytes(name), "a field name"), _unquote_plus(bytes(value), "a field"))
        )

    parser = QuerystringParser(
        {
            "on_field_start": on_field_start,
            "on_field_name": on_field_name,
            "on_field_data": on_field_data,
            "on_field_end": on_field_end,
        }
    )
    async for chunk in _chunks(request):
        parser.write(chunk)
    parser.finalize()
    return FormData(items)


class _Multipart:
    """The callbacks that build a form from python-multipart's events."""

    def __init__(self, limits: _Limits) -> None:
        self.limits = limits
        self.items: list[tuple[str, FormValue]] = []
        self.files = 0
        self.fields = 0
        self.header_name = bytearray()
        self.header_value = bytearray()
        self.headers: list[tuple[str, str]] = []
        self.disposition: bytes | None = None
        self.name = ""
        self.upload: UploadFile | None = None
        self.data = bytearray()
        self.ended = False

    def on_part_begin(self) -> None:
        self.headers = []
        self.disposition = None
        self.upload = None
        self.data.clear()

    def on_header_field(self, data: bytes, start: int, end: int) -> None:
        self.header_name.extend(data[start:end])

    def on_header_value(self, data: bytes, start: int, end: int) -> None:
        self.header_value.extend(data[start:end])

    def on_header_end(self) -> None:
        # Kept as latin-1 text (as Starlette's part headers); Content-Disposition's
        # bytes are parsed as they are, its name and filename are UTF-8 (RFC 7578).
        name = bytes(self.header_name).decode("latin-1")
        raw = bytes(self.header_value)
        if name.lower() == "content-disposition" and self.disposition is None:
            self.disposition = raw
        self.headers.append((name, raw.decode("latin-1")))
        self.header_name.clear()
        self.header_value.clear()

    def on_headers_finished(self) -> None:
        from python_multipart.multipart import parse_options_header

        headers = FormHeaders(self.headers)
        if self.disposition is None:
            raise _bad("a multipart part has no Content-Disposition header")
        _, options = parse_options_header(self.disposition)
        if b"name" not in options:
            raise _bad('a multipart part\'s Content-Disposition has no "name"')
        self.name = _decode(options[b"name"], "a part name")
        if b"filename" in options:
            self.files += 1
            if self.files > self.limits.max_files:
                raise _bad(f"too many files in the form (at most {self.limits.max_files})")
            # Closed by FormData.close, or by `close` here when parsing fails.
            import tempfile  # the first file part (tempfile weighs ~0.7 MB)

            spool = tempfile.SpooledTemporaryFile(max_size=self.limits.spool_max_size)  # noqa: SIM115
            filename = _decode(options[b"filename"], "a file name")
            self.upload = UploadFile(spool, filename=filename, headers=headers, size=0)  # type: ignore[arg-type]
            self.items.append((self.name, self.upload))
        else:
            self.fields += 1
            if self.fields > self.limits.max_fields:
                raise _bad(f"too many form fields (at most {self.limits.max_fields})")

    def on_part_data(self, data: bytes, start: int, end: int) -> None:
        # A view, not a slice: the part's bytes are copied once, into the field or file.
        view = memoryview(data)[start:end]
        upload = self.upload
        if upload is None:
            self.data.extend(view)
            if len(self.data) > self.limits.max_part_size:
                raise _too_large(
                    f"form field {self.name!r} is over {self.limits.max_part_size} bytes"
                )
            return
        upload.file.write(view)
        upload.size = (upload.size or 0) + (end - start)
        cap = self.limits.max_file_size
        if cap is not None and upload.size > cap:
            raise _too_large(f"file {upload.filename!r} is over {cap} bytes")

    def on_part_end(self) -> None:
        if self.upload is not None:
            self.upload.file.seek(0)
        else:
            self.items.append((self.name, _decode(bytes(self.data), f"form field {self.name!r}")))

    def on_end(self) -> None:
        self.ended = True

    def callbacks(self) -> dict[str, Any]:
        return {
            name: getattr(self, name)
            for name in (
                "on_part_begin",
                "on_part_data",
                "on_part_end",
                "on_header_field",
                "on_header_value",
                "on_header_end",
                "on_headers_finished",
                "on_end",
            )
        }

    def close(self) -> None:
        for _, value in self.items:
            if isinstance(value, UploadFile):
                value.file.close()


async def _parse_multipart(request: Request, content_type: str, limits: _Limits) -> FormData:
    from python_multipart.exceptions import FormParserError
    from python_multipart.multipart import MultipartParser, parse_options_header

    _, params = parse_options_header(content_type)
    boundary = params.get(b"boundary")
    if not boundary:
        raise _bad("multipart/form-data without a boundary")
    sink = _Multipart(limits)
    try:
        parser = MultipartParser(boundary, sink.callbacks())  # type: ignore[arg-type]
        async for chunk in _chunks(request):
            parser.write(chunk)
        parser.finalize()
        if not sink.ended:
            raise _bad("the multipart body ends before its closing boundary")
    except FormParserError as exc:
        sink.close()
        raise _bad(f"malformed multipart body: {exc}") from None
    except BaseException:
        sink.close()
        raise
    return FormData(sink.items)
