"""Conditional and range requests for files (RFC 9110 sections 13 and 14).

Theory of operation: `file_reply` takes what the client sent (method and
headers) and what the file is (its `os.stat_result`, content type, extra
headers) and decides the whole answer without touching the file's bytes: the
status, the head's headers, and the body as a list of pieces, each either
literal bytes (a multipart boundary, an error text) or a ``(offset, count)``
slice of the file. The writer (`surge.http.files`) then sends the literal
pieces with `transport.write` and the slices with sendfile, or, for a small
file, reads them into one buffer.

Precedence (RFC 9110 13.2.2): If-Match, else If-Unmodified-Since (412 when
false); then If-None-Match, else If-Modified-Since for GET/HEAD (304 when the
client's copy is current); then Range, honoured only for GET (and HEAD), and
only when If-Range, if sent, still names this representation (a strong ETag
or exactly the Last-Modified date; otherwise the whole file is sent).

Ranges: a malformed Range header, or a unit other than ``bytes``, is ignored
(200 with the whole file, as RFC 9110 14.2 allows and nginx does); one
satisfiable range gives 206 with Content-Range; several are sorted and merged
where they overlap or touch, and if more than one remains they are sent as
``multipart/byteranges``; none satisfiable gives 416 with ``Content-Range:
bytes */size``. More than `MAX_RANGES` ranges in one header are ignored
(200), so a client cannot make one small file cost thousands of parts.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from datetime import UTC
from typing import Any

__all__ = [
    "MAX_RANGES",
    "FileReply",
    "etag_for",
    "file_reply",
    "http_date",
    "parse_ranges",
]

#: Most ranges honoured in one Range header; more and the header is ignored (200).
MAX_RANGES = 32

#: `parse_ranges` result when no range in the header can be satisfied (416).
UNSATISFIABLE: list[tuple[int, int]] = []

Piece = bytes | tuple[int, int]


@dataclass(slots=True)
class FileReply:
    """What to answer: status, head headers, content type and the body's pieces."""

    status: int
    headers: list[tuple[str, str]]
    content_type: str | None
    pieces: list[Piece] = field(default_factory=list)

    @property
    def length(self) -> int:
        """The body's length in bytes (the Content-Length)."""
        return sum(len(p) if isinstance(p, bytes) else p[1] for p in self.pieces)


def etag_for(st: os.stat_result, suffix: str = "") -> str:
    """A strong ETag from the file's modification time (ns) and size; `suffix`
    tells apart representations stored in different files (``.gz``, ``.br``)."""
    return f'"{st.st_mtime_ns:x}-{st.st_size:x}{suffix}"'


_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def http_date(timestamp: float) -> str:
    """An IMF-fixdate (``Sun, 06 Nov 1994 08:49:37 GMT``), locale-independent
    (formatted by hand: `email.utils.formatdate` costs several times more, once
    per static file served)."""
    t = time.gmtime(timestamp)
    return (
        f"{_DAYS[t.tm_wday]}, {t.tm_mday:02d} {_MONTHS[t.tm_mon - 1]} {t.tm_year:04d} "
        f"{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d} GMT"
    )


def _parse_date(value: str) -> int | None:
    # Imported here: only conditional requests need it (~1 MB per worker).
    import email.utils

    try:
        parsed = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if parsed.tzinfo is None:  # an asctime date is GMT by definition
        return int(parsed.replace(tzinfo=UTC).timestamp())
    return int(parsed.timestamp())


def _entity_tags(value: str) -> list[str] | None:
    """The entity tags of an If-Match / If-None-Match list; None for ``*``."""
    if value.strip() == "*":
        return None
    tags = []
    for part in value.split(","):
        part = part.strip()
        if part:
            tags.append(part)
    return tags


def _weak_match(tags: list[str] | None, etag: str) -> bool:
    if tags is None:
        return True
    opaque = etag.removeprefix("W/")
    return any(t.removeprefix("W/") == opaque for t in tags)


def _strong_match(tags: list[str] | None, etag: str) -> bool:
    if tags is None:
        return True
    return not etag.startswith("W/") and etag in tags


def parse_ranges(value: str, size: int) -> list[tuple[int, int]] | None:
    """The byte ranges of a Range header as ``(offset, count)``, sorted and merged;
    None when the header is to be ignored (malformed, another unit, too many
    ranges); `UNSATISFIABLE` (empty) when none fits a file of `size` bytes."""
    unit, sep, specs = value.partition("=")
    if not sep or unit.strip().lower() != "bytes":
        return None
    parts = specs.split(",")
    if len(parts) > MAX_RANGES:
        return None
    spans: list[tuple[int, int]] = []  # (first, last) inclusive
    for spec in parts:
        spec = spec.strip()
        if not spec:
            continue  # RFC 9110 5.6.1: empty list elements are ignored
        first_s, dash, last_s = spec.partition("-")
        first_s, last_s = first_s.strip(), last_s.strip()
        if (
            not dash
            or not (first_s.isdigit() or first_s == "")
            or not (last_s.isdigit() or last_s == "")
        ):
            return None
        if not first_s.isascii() or not last_s.isascii():
            return None
        if first_s == "":
            if last_s == "":
                return None
            suffix = int(last_s)
            if suffix > 0 and size > 0:
                spans.append((max(size - suffix, 0), size - 1))
            continue
        first = int(first_s)
        if last_s != "":
            last = int(last_s)
            if last < first:
                return None  # invalid syntax: the whole header is ignored
            last = min(last, size - 1)
        else:
            last = size - 1
        if first < size:
            spans.append((first, last))
    if not spans:
        return UNSATISFIABLE
    spans.sort()
    merged = [spans[0]]
    for first, last in spans[1:]:
        prev_first, prev_last = merged[-1]
        if first <= prev_last + 1:
            merged[-1] = (prev_first, max(prev_last, last))
        else:
            merged.append((first, last))
    return [(first, last - first + 1) for first, last in merged]


def _if_range_holds(value: str, etag: str, mtime: int) -> bool:
    value = value.strip()
    if value.startswith(('"', "W/")):
        return _strong_match([value], etag)
    date = _parse_date(value)
    return date is not None and date == mtime


def file_reply(
    method: str,
    headers: Any,
    st: os.stat_result,
    content_type: str | None,
    extra_headers: list[tuple[str, str]],
    etag: str | None = None,
) -> FileReply:
    """The answer to `method` with request `headers` (anything with ``get``) for a
    file of stat `st` served with `content_type` and `extra_headers`."""
    size = st.st_size
    mtime = int(st.st_mtime)
    if etag is None:
        # A representation stored encoded (a .gz or .br sibling) has a tag of its own.
        coding = next((v for n, v in extra_headers if n.lower() == "content-encoding"), "")
        etag = etag_for(st, f"-{coding}" if coding else "")
    validators = [("ETag", etag), ("Last-Modified", http_date(mtime))]
    get_or_head = method in ("GET", "HEAD")

    if_match = headers.get("if-match")
    if if_match is not None:
        if not _strong_match(_entity_tags(if_match), etag):
            return _precondition_failed(extra_headers)
    else:
        ius = headers.get("if-unmodified-since")
        if ius is not None:
            date = _parse_date(ius)
            if date is not None and mtime > date:
                return _precondition_failed(extra_headers)

    if_none_match = headers.get("if-none-match")
    if if_none_match is not None:
        if _weak_match(_entity_tags(if_none_match), etag):
            if get_or_head:
                return FileReply(304, [*extra_headers, *validators], None)
            return _precondition_failed(extra_headers)
    elif get_or_head:
        ims = headers.get("if-modified-since")
        if ims is not None:
            date = _parse_date(ims)
            if date is not None and mtime <= date:
                return FileReply(304, [*extra_headers, *validators], None)

    base = [*extra_headers, *validators, ("Accept-Ranges", "bytes")]
    range_header = headers.get("range") if get_or_head else None
    if range_header is not None:
        if_range = headers.get("if-range")
        if if_range is None or _if_range_holds(if_range, etag, mtime):
            ranges = parse_ranges(range_header, size)
            if ranges is not None:
                return _partial(ranges, size, content_type, base)
    return FileReply(200, base, content_type, [(0, size)] if size else [])


def _precondition_failed(extra_headers: list[tuple[str, str]]) -> FileReply:
    return FileReply(
        412, list(extra_headers), "text/plain; charset=utf-8", [b"Precondition Failed"]
    )


def _partial(
    ranges: list[tuple[int, int]],
    size: int,
    content_type: str | None,
    base: list[tuple[str, str]],
) -> FileReply:
    if not ranges:
        headers = [*base, ("Content-Range", f"bytes */{size}")]
        return FileReply(416, headers, "text/plain; charset=utf-8", [b"Range Not Satisfiable"])
    if len(ranges) == 1:
        offset, count = ranges[0]
        headers = [*base, ("Content-Range", f"bytes {offset}-{offset + count - 1}/{size}")]
        return FileReply(206, headers, content_type, [(offset, count)])
    import secrets  # only several ranges need it

    boundary = secrets.token_hex(16)
    pieces: list[Piece] = []
    part_type = f"Content-Type: {content_type}\r\n" if content_type else ""
    for i, (offset, count) in enumerate(ranges):
        head = (
            f"{'' if i == 0 else chr(13) + chr(10)}--{boundary}\r\n{part_type}"
            f"Content-Range: bytes {offset}-{offset + count - 1}/{size}\r\n\r\n"
        )
        pieces.append(head.encode("latin-1"))
        pieces.append((offset, count))
    pieces.append(f"\r\n--{boundary}--\r\n".encode("latin-1"))
    return FileReply(206, base, f"multipart/byteranges; boundary={boundary}", pieces)
