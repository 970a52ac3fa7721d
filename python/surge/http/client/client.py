"""`Client`: requests over the pools, with timeouts, retries and redirects.

A request's URL and headers are checked (`request.py`) and its body encoded
before any connection is taken. `_send` takes a connection from the host's
pool (`pool.py`), retries once on a fresh one when a kept-alive connection
turns out closed by the server (idempotent methods only), and turns engine
errors into the client's (`errors.py`).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlencode, urljoin

import orjson

from surge._core import __version__ as _version
from surge.engine import DEFAULT_LIVENESS_INTERVAL, DEFAULT_LIVENESS_TIMEOUT, liveness
from surge.errors import (
    ClosedError,
    ConnectError,
    ConnectionLostError,
    ProtocolError,
    RequestTimeoutError,
)

from .config import DEFAULT_TIMEOUT, UNSET, ClientLimits, Timeout
from .errors import (
    ConnectTimeout,
    InvalidURL,
    PoolTimeout,
    ReadTimeout,
    RemoteProtocolError,
    TooManyRedirects,
)
from .pool import BodyStream, Connection, HostPool, Pools, PoolSettings
from .request import URL, gather_body, header_list, merge_headers, split_url
from .response import ClientResponse

__all__ = ["DEFAULT_MAX_REDIRECTS", "IDEMPOTENT", "Client"]

#: Default most redirects followed per request.
DEFAULT_MAX_REDIRECTS = 20
#: Methods retried once on a fresh connection when a kept-alive one turns out
#: closed by the server before anything was answered (the request never ran).
IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE", "TRACE"})


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
        self.headers = merge_headers(
            [("user-agent", f"surge/{_version}"), ("accept", "*/*")], header_list(headers)
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
        json: Any = UNSET,
        timeout: Timeout | float | None = UNSET,
        follow_redirects: bool | None = None,
    ) -> ClientResponse:
        """Sends one request and reads the whole response."""
        t = self.timeout if timeout is UNSET else Timeout.of(timeout)
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
        json: Any = UNSET,
        timeout: Timeout | float | None = UNSET,
    ) -> AsyncIterator[ClientResponse]:
        """Sends a request and yields the response once its head arrives; read
        the body with `aiter_bytes()`, `aiter_text()` or `read()`. `total`
        bounds the wait for the head; `read` each wait for a piece of body."""
        t = self.timeout if timeout is UNSET else Timeout.of(timeout)
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

    def _url(self, url: str, params: Any) -> URL:
        if "://" not in url:
            if self.base_url is None:
                raise InvalidURL(f"relative URL {url!r} and no base_url")
            url = f"{self.base_url}/{url.lstrip('/')}" if url else self.base_url
        return split_url(url, params)

    async def _body(
        self, headers: Any, content: Any, data: Any, json: Any
    ) -> tuple[list, bytes | None]:
        extra = header_list(headers)
        body: bytes | None = None
        ctype = None
        if json is not UNSET:
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
                body = await gather_body(raw)
        hdrs = merge_headers(self.headers, extra)
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
            nu = split_url(location, None)
            if (nu.host, nu.port) != (u.host, u.port):
                headers = [(k, v) for k, v in headers if k.lower() != "authorization"]
            u = nu

    async def _send(
        self,
        method: str,
        u: URL,
        headers: list,
        body: bytes | None,
        t: Timeout,
        stream: bool,
    ) -> ClientResponse:
        # In a trace (surge.tracing): a CLIENT span, propagated as `traceparent`. A
        # trace needs the application to have imported opentelemetry: until then
        # (or without the package) the check is this one lookup, and a worker does
        # not pay opentelemetry's import and memory for a client it may not use.
        span = (
            _client_span()(method, u.scheme, u.host, u.port, u.target)
            if "opentelemetry.trace" in sys.modules
            else None
        )
        if span is None:
            return await self._send_one(method, u, headers, body, t, stream)
        headers = list(headers)
        span.inject(headers)
        try:
            response = await self._send_one(method, u, headers, body, t, stream)
        except BaseException as exc:
            span.finish(None, exc)
            raise
        span.finish(response.status)
        return response

    async def _send_one(
        self,
        method: str,
        u: URL,
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


def _translate(exc: BaseException, u: URL, t: Timeout) -> BaseException:
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


def _client_span() -> Any:
    """`surge.tracing.client_span`, imported on the first request made in a trace."""
    from surge.tracing import client_span

    return client_span
