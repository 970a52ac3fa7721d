"""What a request is made of before it is sent: its URL split, its headers checked."""

from __future__ import annotations

import re
from collections.abc import AsyncIterable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from .errors import InvalidHeader, InvalidURL, UnsupportedProtocol


@dataclass(slots=True)
class URL:
    scheme: str
    host: str
    port: int
    target: str
    authority: str  # the Host header

    def __str__(self) -> str:
        return f"{self.scheme}://{self.authority}{self.target}"


def split_url(url: str, params: Any) -> URL:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise InvalidURL(f"invalid URL {url!r}: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme == "https":
        raise UnsupportedProtocol(f"https is not supported (yet): {url!r}")
    if scheme != "http":
        raise UnsupportedProtocol(f"URL scheme must be http: {url!r}")
    host = parts.hostname
    if not host:
        raise InvalidURL(f"URL has no host: {url!r}")
    if port is None:
        port = 80
    path = quote(parts.path or "/", safe="/%:@!$&'()*+,;=-._~")
    query = quote(parts.query, safe="/?%:@!$&'()*+,;=-._~")
    if params:
        extra = urlencode(params if isinstance(params, Mapping) else list(params), doseq=True)
        query = f"{query}&{extra}" if query else extra
    target = f"{path}?{query}" if query else path
    shown = f"[{host}]" if ":" in host else host
    authority = shown if port == 80 else f"{shown}:{port}"
    return URL(scheme, host, port, target, authority)


#: Header pairs as the encoder takes them: values may be bytes, sent as they are.
HeaderList = list[tuple[str, str | bytes]]


_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_BAD_VALUE = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")


def header_list(headers: Any) -> HeaderList:
    """The caller's headers as pairs, checked here so that a bad one fails before
    a connection is even opened (the encoder checks again)."""
    if headers is None:
        return []
    items = headers.items() if hasattr(headers, "items") else headers
    out: HeaderList = []
    for k, v in items:
        name = str(k)
        value = v if isinstance(v, bytes) else str(v)
        raw = value if isinstance(value, bytes) else value.encode()
        if not _TOKEN.fullmatch(name) or _BAD_VALUE.search(raw):
            raise InvalidHeader(f"invalid header {name!r}: {value!r}")
        out.append((name, value))
    return out


def merge_headers(base: HeaderList, extra: HeaderList) -> HeaderList:
    if not extra:
        return list(base)
    override = {k.lower() for k, _ in extra}
    return [(k, v) for k, v in base if k.lower() not in override] + extra


async def gather_body(content: AsyncIterable[bytes] | Iterable[bytes]) -> bytes:
    if isinstance(content, AsyncIterable):
        return b"".join([bytes(c) async for c in content])
    return b"".join(bytes(c) for c in content)
