"""`surge.http.Client`: an asyncio HTTP/1.1 client on surge's pipelining engine.

    async with surge.http.Client(base_url="http://127.0.0.1:8080", timeout=5) as client:
        r = await client.get("/users/1", params={"full": 1})
        r.raise_for_status()
        user = r.json()
        async with client.stream("GET", "/big") as r:
            async for chunk in r.aiter_bytes():
                ...

The API follows httpx (and aiohttp where they agree): `get`, `post(json=,
data=, content=)`, `put`, `patch`, `delete`, `head`, `options`, `request`,
`stream`; `response.status` (`status_code`), `.headers` (case-insensitive),
`.content`, `.text`, `.json()`, `await .read()`, `.raise_for_status()`.

Connections are kept alive and pooled per (scheme, host, port), at most
`ClientLimits.max_connections_per_host` each. With `pipelining=True` (or a
depth) the requests of many coroutines share one connection: every request
made in one loop iteration leaves in one write, and replies are matched in
order. Timeouts always hold: `connect` covers name resolution and the TCP
connect, `read` the wait for a response (and between pieces of a streamed
body), `pool` the wait for a free connection, `total` the whole call.

Redirects are not followed unless `follow_redirects=True`. Only plain `http://`
is supported: an `https://` URL raises `UnsupportedProtocol`. Response bodies
are not decompressed (the client does not send Accept-Encoding). Request
bodies are sent whole (an async iterable is gathered first).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode, urljoin, urlsplit

import orjson

from surge._core import HTTP_CLIENT_MAX_BODY
from surge._core import __version__ as _version
from surge.engine import DEFAULT_LIVENESS_INTERVAL, DEFAULT_LIVENESS_TIMEOUT, liveness
from surge.errors import (
    ClosedError,
    ConnectError,
    ConnectionLostError,
    ProtocolError,
    RequestTimeoutError,
)

from .client_errors import (
    ConnectTimeout,
    HTTPStatusError,
    InvalidHeader,
    InvalidURL,
    PoolTimeout,
    ReadTimeout,
    RemoteProtocolError,
    TooManyRedirects,
    UnsupportedProtocol,
)
from .client_pool import BodyStream, Connection, HostPool, Pools, PoolSettings
from .client_response import ClientResponse, ResponseNotRead

__all__ = [
    "Client",
    "ClientLimits",
    "ClientResponse",
    "ConnectTimeout",
    "HTTPStatusError",
    "InvalidHeader",
    "InvalidURL",
    "PoolTimeout",
    "ReadTimeout",
    "RemoteProtocolError",
    "ResponseNotRead",
    "Timeout",
    "TooManyRedirects",
    "UnsupportedProtocol",
]

#: Default seconds for each timeout but `total` (which is off by default).
DEFAULT_TIMEOUT = 5.0
#: Default most redirects followed per request.
DEFAULT_MAX_REDIRECTS = 20
#: Methods retried once on a fresh connection when a kept-alive one turns out
#: closed by the server before anything was answered (the request never ran).
IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE", "TRACE"})

_UNSET: Any = object()


class Timeout:
    """Timeouts in seconds (None: no limit). `Timeout(10)` sets connect, read and
    pool to 10; keywords set one each."""

    __slots__ = ("connect", "pool", "read", "total")

    def __init__(
        self,
        timeout: float | None = _UNSET,
        *,
        connect: float | None = _UNSET,
        read: float | None = _UNSET,
        pool: float | None = _UNSET,
        total: float | None = None,
    ) -> None:
        default = DEFAULT_TIMEOUT if timeout is _UNSET else timeout
        self.connect = default if connect is _UNSET else connect
        self.read = default if read is _UNSET else read
        self.pool = default if pool is _UNSET else pool
        self.total = total

    @classmethod
    def of(cls, value: Timeout | float | None) -> Timeout:
        if isinstance(value, Timeout):
            return value
        return cls(value)

    def __repr__(self) -> str:
        return (
            f"Timeout(connect={self.connect}, read={self.read}, "
            f"pool={self.pool}, total={self.total})"
        )


@dataclass(frozen=True, slots=True)
class ClientLimits:
    """Pool sizes and caps; every field has a default."""

    #: Most open connections, all hosts together.
    max_connections: int = 100
    #: Most open connections to one (scheme, host, port).
    max_connections_per_host: int = 10
    #: Idle keep-alive connections older than this (seconds) are closed, not reused.
    keepalive_expiry: float = 5.0
    #: Most requests in flight on one connection when pipelining (`pipelining=True`).
    max_pipeline: int = 32
    #: Largest buffered response body in bytes (streamed bodies have no limit).
    max_response_body: int = HTTP_CLIENT_MAX_BODY


@dataclass(slots=True)
class _URL:
    scheme: str
    host: str
    port: int
    target: str
    authority: str  # the Host header

    def __str__(self) -> str:
        return f"{self.scheme}://{self.authority}{self.target}"


def _split_url(url: str, params: Any) -> _URL:
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
    return _URL(scheme, host, port, target, authority)


#: Header pairs as the encoder takes them: values may be bytes, sent as they are.
_Headers = list[tuple[str, str | bytes]]


_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_BAD_VALUE = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")


def _header_list(headers: Any) -> _Headers:
    """The caller's headers as pairs, checked here so that a bad one fails before
    a connection is even opened (the encoder checks again)."""
    if headers is None:
        return []
    items = headers.items() if hasattr(headers, "items") else headers
    out: _Headers = []
    for k, v in items:
        name = str(k)
        value = v if isinstance(v, bytes) else str(v)
        raw = value if isinstance(value, bytes) else value.encode()
        if not _TOKEN.fullmatch(name) or _BAD_VALUE.search(raw):
            raise InvalidHeader(f"invalid header {name!r}: {value!r}")
        out.append((name, value))
    return out


def _merge_headers(base: _Headers, extra: _Headers) -> _Headers:
    if not extra:
        return list(base)
    override = {k.lower() for k, _ in extra}
    return [(k, v) for k, v in base if k.lower() not in override] + extra


async def _gather(content: AsyncIterable[bytes] | Iterable[bytes]) -> bytes:
    if isinstance(content, AsyncIterable):
        return b"".join([bytes(c) async for c in content])
    return b"".join(bytes(c) for c in content)


class Client:
    """An HTTP/1.1 client with a keep-alive connection pool; use as `async with`.

    Even with ``timeout=None``, a connection whose server goes silent while a
    response is owed is checked after ``liveness_interval`` seconds: the server is
    asked ``OPTIONS *`` on a new connection, and if that goes unanswered too
    (within ``liveness_timeout``), the request fails with
    `surge.errors.ConnectionDeadError` (within 20 s by default). A server that is
    alive but slow (a long poll) answers the probe and is waited for.
    ``liveness_interval=None`` turns the check off; TCP keepalive
    (``tcp_keepalive``) is on by default (see `surge.engine`).
    """

    def __init__(
        self,
        *,
        base_url: str | None = None,
        timeout: Timeout | float | None = DEFAULT_TIMEOUT,
        limits: ClientLimits | None = None,
        pipelining: bool | int = False,
        headers: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
        follow_redirects: bool = False,
        max_redirects: int = DEFAULT_MAX_REDIRECTS,
        liveness_interval: float | None = DEFAULT_LIVENESS_INTERVAL,
        liveness_timeout: float = DEFAULT_LIVENESS_TIMEOUT,
        tcp_keepalive: bool = True,
    ) -> None:
        liveness(liveness_interval, liveness_timeout)  # bad values raise here
        self.base_url = base_url.rstrip("/") if base_url else None
        self.timeout = Timeout.of(timeout)
        self.limits = limits or ClientLimits()
        depth = self.limits.max_pipeline if pipelining is True else int(pipelining)
        self.follow_redirects = follow_redirects
        self.max_redirects = max_redirects
        self.headers = _merge_headers(
            [("user-agent", f"surge/{_version}"), ("accept", "*/*")], _header_list(headers)
        )
        self._pools = Pools(
            PoolSettings(
                max_connections=self.limits.max_connections,
                max_connections_per_host=self.limits.max_connections_per_host,
                keepalive_expiry=self.limits.keepalive_expiry,
                pipeline=depth,
                max_response_body=self.limits.max_response_body,
                liveness_interval=liveness_interval,
                liveness_timeout=liveness_timeout,
                tcp_keepalive=tcp_keepalive,
            )
        )
        self._closed = False

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Closes every connection; the client cannot be used afterwards."""
        self._closed = True
        await self._pools.aclose()

    # -- the verbs ---------------------------------------------------------------

    async def get(self, url: str, **kwargs: Any) -> ClientResponse:
        """GET `url`; keywords as for `request`."""
        return await self.request("GET", url, **kwargs)

    async def head(self, url: str, **kwargs: Any) -> ClientResponse:
        """HEAD `url`."""
        return await self.request("HEAD", url, **kwargs)

    async def options(self, url: str, **kwargs: Any) -> ClientResponse:
        """OPTIONS `url`."""
        return await self.request("OPTIONS", url, **kwargs)

    async def delete(self, url: str, **kwargs: Any) -> ClientResponse:
        """DELETE `url`."""
        return await self.request("DELETE", url, **kwargs)

    async def post(self, url: str, **kwargs: Any) -> ClientResponse:
        """POST `url` with `json=`, `data=` or `content=`."""
        return await self.request("POST", url, **kwargs)

    async def put(self, url: str, **kwargs: Any) -> ClientResponse:
        """PUT `url` with `json=`, `data=` or `content=`."""
        return await self.request("PUT", url, **kwargs)

    async def patch(self, url: str, **kwargs: Any) -> ClientResponse:
        """PATCH `url` with `json=`, `data=` or `content=`."""
        return await self.request("PATCH", url, **kwargs)

    async def request(
        self,
        method: str,
        url: str,
        *,
        params: Any = None,
        headers: Any = None,
        content: bytes | str | Iterable[bytes] | AsyncIterable[bytes] | None = None,
        data: Any = None,
        json: Any = _UNSET,
        timeout: Timeout | float | None = _UNSET,
        follow_redirects: bool | None = None,
    ) -> ClientResponse:
        """Sends one request and reads the whole response."""
        t = self.timeout if timeout is _UNSET else Timeout.of(timeout)
        follow = self.follow_redirects if follow_redirects is None else follow_redirects
        method = method.upper()
        hdrs, body = await self._body(headers, content, data, json)
        try:
            async with asyncio.timeout(t.total):
                return await self._send_following(method, url, params, hdrs, body, t, follow)
        except TimeoutError as exc:
            if isinstance(exc, RequestTimeoutError | ConnectTimeout):
                raise
            raise ReadTimeout(f"{method} {url}: no response within {t.total} s (total)") from None

    @asynccontextmanager
    async def stream(
        self,
        method: str,
        url: str,
        *,
        params: Any = None,
        headers: Any = None,
        content: bytes | str | Iterable[bytes] | AsyncIterable[bytes] | None = None,
        data: Any = None,
        json: Any = _UNSET,
        timeout: Timeout | float | None = _UNSET,
    ) -> AsyncIterator[ClientResponse]:
        """Sends a request and yields the response once its head arrives; read
        the body with `aiter_bytes()`, `aiter_text()` or `read()`. `total`
        bounds the wait for the head; `read` each wait for a piece of body."""
        t = self.timeout if timeout is _UNSET else Timeout.of(timeout)
        method = method.upper()
        hdrs, body = await self._body(headers, content, data, json)
        u = self._url(url, params)
        try:
            async with asyncio.timeout(t.total):
                response = await self._send(method, u, hdrs, body, t, stream=True)
        except TimeoutError as exc:
            if isinstance(exc, RequestTimeoutError | ConnectTimeout):
                raise
            raise ReadTimeout(f"{method} {url}: no response within {t.total} s (total)") from None
        try:
            yield response
        finally:
            await response.aclose()

    # -- internals ------------------------------------------------------------------

    def _url(self, url: str, params: Any) -> _URL:
        if "://" not in url:
            if self.base_url is None:
                raise InvalidURL(f"relative URL {url!r} and no base_url")
            url = f"{self.base_url}/{url.lstrip('/')}" if url else self.base_url
        return _split_url(url, params)

    async def _body(
        self, headers: Any, content: Any, data: Any, json: Any
    ) -> tuple[list, bytes | None]:
        extra = _header_list(headers)
        body: bytes | None = None
        ctype = None
        if json is not _UNSET:
            body = orjson.dumps(json)
            ctype = "application/json"
        elif data is not None and isinstance(data, Mapping | list):
            body = urlencode(data, doseq=True).encode()
            ctype = "application/x-www-form-urlencoded"
        else:
            raw = content if content is not None else data
            if isinstance(raw, str):
                body = raw.encode()
            elif isinstance(raw, bytes | bytearray | memoryview):
                body = bytes(raw)
            elif raw is not None:
                body = await _gather(raw)
        hdrs = _merge_headers(self.headers, extra)
        if ctype and not any(k.lower() == "content-type" for k, _ in hdrs):
            hdrs.append(("content-type", ctype))
        return hdrs, body

    async def _send_following(
        self,
        method: str,
        url: str,
        params: Any,
        headers: list,
        body: bytes | None,
        t: Timeout,
        follow: bool,
    ) -> ClientResponse:
        u = self._url(url, params)
        history: list[ClientResponse] = []
        while True:
            response = await self._send(method, u, headers, body, t, stream=False)
            if not (follow and response.is_redirect):
                response.history = history
                return response
            if len(history) >= self.max_redirects:
                raise TooManyRedirects(f"more than {self.max_redirects} redirects from {url}")
            history.append(response)
            location = urljoin(str(u), response.headers["location"])
            status = response.status
            if (status == 303 and method != "HEAD") or (status in (301, 302) and method == "POST"):
                method, body = "GET", None
                headers = [(k, v) for k, v in headers if k.lower() != "content-type"]
            nu = _split_url(location, None)
            if (nu.host, nu.port) != (u.host, u.port):
                headers = [(k, v) for k, v in headers if k.lower() != "authorization"]
            u = nu

    async def _send(
        self,
        method: str,
        u: _URL,
        headers: list,
        body: bytes | None,
        t: Timeout,
        stream: bool,
    ) -> ClientResponse:
        if self._closed:
            raise ClosedError("client closed")
        pool = self._pools.get((u.scheme, u.host, u.port))
        wire_headers = [("host", u.authority), *headers]
        for attempt in (0, 1):
            conn = await pool.acquire(_connect_timeout(t), t.pool)
            reused = conn.sent > 0
            body_stream = BodyStream(t.read) if stream else None
            try:
                raw = await conn.send(method, u.target, wire_headers, body, body_stream, t.read)
            except ConnectionLostError:
                pool.release(conn, False)
                if attempt == 0 and reused and method in IDEMPOTENT:
                    continue  # the server closed a kept-alive connection first
                raise
            except BaseException as exc:
                # A reply still owed would sit in front of the next request on a
                # one-at-a-time connection; with pipelining the engine drops it.
                keep = bool(self._pools.settings.pipeline) and isinstance(exc, RequestTimeoutError)
                pool.release(conn, keep)
                err = _translate(exc, u, t)
                if err is exc:
                    raise
                raise err from exc
            if body_stream is None:
                pool.release(conn, raw.keep_alive)
                return ClientResponse(raw, method, str(u))
            return ClientResponse(
                raw,
                method,
                str(u),
                body_stream,
                _releaser(pool, conn, raw.keep_alive),
            )
        raise AssertionError("unreachable")


def _connect_timeout(t: Timeout) -> float:
    # The engine needs a number; "no connect timeout" is a long one.
    return t.connect if t.connect is not None else 3600.0


def _releaser(pool: HostPool, conn: Connection, keep_alive: bool) -> Any:
    def release(complete: bool) -> None:
        pool.release(conn, keep_alive and complete)

    return release


def _translate(exc: BaseException, u: _URL, t: Timeout) -> BaseException:
    """The client's error for an engine error."""
    where = f"{u.host}:{u.port}"
    if isinstance(exc, RequestTimeoutError) and not isinstance(exc, PoolTimeout | ReadTimeout):
        return ReadTimeout(f"{where}: no response within the read timeout ({t.read} s)")
    if isinstance(exc, ConnectError) and not isinstance(exc, ConnectTimeout):
        if isinstance(exc.__cause__, TimeoutError):
            return ConnectTimeout(f"{where}: not connected within {t.connect} s")
        return exc
    if isinstance(exc, ProtocolError) and not isinstance(exc, RemoteProtocolError):
        return RemoteProtocolError(str(exc))
    return exc
