"""`TestClient`: requests through the real server, in-process, with no port.

Each connection is a socketpair: one end is served by the same `Server`, frozen
`Plan` and `HttpProtocol` as ``surge serve`` (so middleware, hooks, limits,
pipelining and the native parser all run as in production); the other end is
the client, speaking HTTP/1.1 with h11 and WebSocket with the sans-I/O protocol
of `websockets`. The API is httpx's (`TestClient` is an ``httpx.Client``,
`AsyncTestClient` an ``httpx.AsyncClient``): ``get/post/put/patch/delete/
options/head/request/stream`` with ``params``, ``headers``, ``cookies``,
``json``, ``data``, ``content`` and ``files``, and cookies kept between
requests; plus ``websocket_connect(path)``.

``with TestClient(app) as client:`` runs the app's startup hooks (or an ASGI
app's lifespan) on entry and its shutdown hooks on exit; without ``with``, the
requests are served all the same and no hook runs. The sync client serves the
app from an event loop on a thread of its own; the async one on the running
loop. Works for a surge `App` and for ASGI and WSGI apps (served by surge's
dispatchers, as ``surge serve`` would).

Differences from a TCP client: ``request.client`` is what a Unix socketpair
reports for its peer (no address), and the ``Host`` is httpx's (``testserver``
by default, from ``base_url``).

Needs the ``testing`` extra (httpx, h11, websockets).
"""

from __future__ import annotations

import asyncio
import json as jsonlib
import socket
import threading
from collections.abc import AsyncIterator, Awaitable, Coroutine, Iterator
from typing import Any, TypeVar
from urllib.parse import urlsplit

try:
    import h11
    import httpx
except ImportError as exc:  # the extra is not installed: say which one
    raise ImportError(
        "surge.testing needs the testing extra: pip install 'surge[testing]'"
    ) from exc

from surge.http.protocol import HttpProtocol
from surge.http.server import Server
from surge.serve.loader import load_app
from surge.serve.worker import start_lifespan
from surge.websocket.errors import WebSocketDisconnect

__all__ = [
    "AsyncTestClient",
    "AsyncWebSocketSession",
    "TestClient",
    "WebSocketDenied",
    "WebSocketDisconnect",
    "WebSocketSession",
]

T = TypeVar("T")

#: Bytes read from the socket at a time.
READ_SIZE = 64 * 1024
#: Largest response head h11 accepts (bytes), as the server's own limit.
MAX_HEAD = 64 * 1024


class WebSocketDenied(Exception):
    """The server answered the WebSocket handshake with an HTTP response: `status`."""

    def __init__(self, status: int, body: bytes) -> None:
        super().__init__(f"WebSocket handshake answered with {status}")
        self.status = status
        self.body = body


class _Connection:
    """The client end of one socketpair, speaking HTTP/1.1 with h11."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.h11 = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD)

    async def send(self, *events: Any) -> None:
        self.writer.write(b"".join(self.h11.send(e) or b"" for e in events))
        await self.writer.drain()

    async def next_event(self) -> Any:
        while True:
            event = self.h11.next_event()
            if event is not h11.NEED_DATA:
                return event
            self.h11.receive_data(await self.reader.read(READ_SIZE))

    def reusable(self) -> bool:
        return self.h11.our_state is h11.DONE and self.h11.their_state is h11.DONE

    def close(self) -> None:
        self.writer.close()


class _ServedApp:
    """The app served over socketpairs by a real `Server`."""

    def __init__(self, app: Any, root_path: str, lifespan: str) -> None:
        self.servable = load_app(app, "auto", root_path=root_path)
        self.lifespan_mode = lifespan
        self.server: Server | None = None
        self._lifespan: Any = None
        self._idle: list[_Connection] = []

    def _server(self) -> Server:
        if self.server is None:
            self.server = Server(self.servable)
        return self.server

    async def start(self, lifespan: bool) -> None:
        self._server()
        if lifespan:
            self._lifespan = await start_lifespan(self.servable, self.lifespan_mode)

    async def stop(self) -> None:
        for conn in self._idle:
            conn.close()
        self._idle.clear()
        lifespan, self._lifespan = self._lifespan, None
        if lifespan is not None:
            await lifespan.shutdown()

    async def connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A new connection to the server: its reader and writer."""
        server = self._server()
        ours, theirs = socket.socketpair()
        loop = asyncio.get_running_loop()
        await loop.connect_accepted_socket(lambda: HttpProtocol(server), ours)
        return await asyncio.open_connection(sock=theirs, limit=MAX_HEAD)

    async def acquire(self) -> _Connection:
        if self._idle:
            return self._idle.pop()
        return _Connection(*await self.connect())

    def release(self, conn: _Connection) -> None:
        if conn.reusable():
            conn.h11.start_next_cycle()
            self._idle.append(conn)
        else:
            conn.close()


class _ResponseStream(httpx.AsyncByteStream):
    def __init__(self, served: _ServedApp, conn: _Connection) -> None:
        self._served = served
        self._conn: _Connection | None = conn

    async def __aiter__(self) -> AsyncIterator[bytes]:
        conn = self._conn
        if conn is None:
            return
        while True:
            event = await conn.next_event()
            if isinstance(event, h11.Data):
                yield bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                return
            else:
                raise httpx.RemoteProtocolError(f"connection closed mid-response ({event!r})")

    async def aclose(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            self._served.release(conn)


class _AsyncTransport(httpx.AsyncBaseTransport):
    def __init__(self, served: _ServedApp) -> None:
        self._served = served

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        conn = await self._served.acquire()
        try:
            events: list[Any] = [
                h11.Request(
                    method=request.method,
                    target=request.url.raw_path,
                    headers=list(request.headers.raw),
                )
            ]
            if body:
                events.append(h11.Data(data=body))
            events.append(h11.EndOfMessage())
            await conn.send(*events)
            while True:
                event = await conn.next_event()
                if isinstance(event, h11.Response):
                    break
                if not isinstance(event, h11.InformationalResponse):
                    raise httpx.RemoteProtocolError(f"no response, got {event!r}")
        except h11.RemoteProtocolError as exc:
            conn.close()
            raise httpx.RemoteProtocolError(str(exc)) from exc
        except BaseException:
            conn.close()
            raise
        return httpx.Response(
            status_code=event.status_code,
            headers=event.headers,
            stream=_ResponseStream(self._served, conn),
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": event.reason},
        )


class AsyncWebSocketSession:
    """A WebSocket to the app (see `AsyncTestClient.websocket_connect`)."""

    def __init__(
        self,
        served: _ServedApp,
        url: str,
        headers: dict[str, str] | None,
        subprotocols: list[str] | None,
    ) -> None:
        self._served = served
        self._url = url
        self._headers = headers or {}
        self._subprotocols = subprotocols
        self._messages: list[str | bytes] = []
        self._parts: list[bytes] = []
        self._text = False
        self._closed: WebSocketDisconnect | None = None
        self.accepted_subprotocol: str | None = None
        self.response_headers: dict[str, str] = {}

    async def __aenter__(self) -> AsyncWebSocketSession:
        from websockets.client import ClientProtocol
        from websockets.http11 import Response as HandshakeResponse
        from websockets.uri import parse_uri

        self._reader, self._writer = await self._served.connect()
        self._ws = ws = ClientProtocol(
            parse_uri(self._url),
            subprotocols=self._subprotocols,  # type: ignore[arg-type]
            max_size=None,
        )
        request = ws.connect()
        for name, value in self._headers.items():
            request.headers[name] = value
        ws.send_request(request)
        self._flush()
        opened = False
        while not opened:
            await self._read()
            for event in ws.events_received():
                if isinstance(event, HandshakeResponse):
                    if ws.handshake_exc is not None:
                        self._writer.close()
                        raise WebSocketDenied(event.status_code, bytes(event.body or b""))
                    self.response_headers = dict(event.headers.raw_items())
                    self.accepted_subprotocol = ws.subprotocol
                    opened = True
                else:  # frames that came with the handshake's answer
                    self._on_event(event)
            if not opened and self._reader.at_eof():
                raise WebSocketDenied(0, b"")
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _flush(self) -> None:
        data = self._ws.data_to_send()
        if data and not self._writer.is_closing():
            self._writer.write(b"".join(data))

    async def _read(self) -> None:
        data = await self._reader.read(READ_SIZE)
        if data:
            self._ws.receive_data(data)
        else:
            self._ws.receive_eof()
        self._flush()

    def _on_event(self, frame: Any) -> None:
        from websockets.frames import Opcode

        if frame.opcode in (Opcode.TEXT, Opcode.BINARY):
            self._text = frame.opcode is Opcode.TEXT
            self._parts = [frame.data]
        elif frame.opcode is Opcode.CONT:
            self._parts.append(frame.data)
        elif frame.opcode is Opcode.CLOSE:
            close = self._ws.close_rcvd
            code, reason = (close.code, close.reason) if close is not None else (1005, "")
            self._closed = WebSocketDisconnect(code, reason)
            return
        else:
            return
        if frame.fin:
            data = b"".join(self._parts)
            self._messages.append(data.decode() if self._text else data)
            self._parts = []

    async def receive(self) -> str | bytes:
        """The next message; raises `WebSocketDisconnect` once the server closed."""
        while not self._messages:
            if self._closed is not None:
                raise self._closed
            if self._reader.at_eof():
                raise WebSocketDisconnect(1006, "connection lost")
            await self._read()
            for event in self._ws.events_received():
                self._on_event(event)
        return self._messages.pop(0)

    async def receive_text(self) -> str:
        """The next message, which must be text."""
        message = await self.receive()
        if not isinstance(message, str):
            raise TypeError("expected a text message, got a binary one")
        return message

    async def receive_bytes(self) -> bytes:
        """The next message, which must be binary."""
        message = await self.receive()
        if not isinstance(message, bytes):
            raise TypeError("expected a binary message, got a text one")
        return message

    async def receive_json(self) -> Any:
        """The next message, decoded as JSON."""
        return jsonlib.loads(await self.receive())

    async def send_text(self, data: str) -> None:
        """Sends a text message."""
        self._ws.send_text(data.encode())
        self._flush()

    async def send_bytes(self, data: bytes) -> None:
        """Sends a binary message."""
        self._ws.send_binary(data)
        self._flush()

    async def send_json(self, data: Any) -> None:
        """Sends `data` as a JSON text message."""
        await self.send_text(jsonlib.dumps(data))

    async def close(self, code: int = 1000, reason: str = "") -> None:
        """Closes the WebSocket (waiting briefly for the server's close frame)."""
        from websockets.protocol import State

        if self._writer.is_closing():
            return
        if self._ws.state is State.OPEN:
            self._ws.send_close(code, reason)
            self._flush()
            try:
                async with asyncio.timeout(5):
                    while self._ws.state is not State.CLOSED and not self._reader.at_eof():
                        await self._read()
            except TimeoutError:
                pass
        self._writer.close()


class AsyncTestClient(httpx.AsyncClient):
    """An ``httpx.AsyncClient`` whose requests `app` serves in-process (see the module
    docstring); ``async with`` runs its startup and shutdown hooks."""

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        app: Any,
        base_url: str = "http://testserver",
        *,
        root_path: str = "",
        lifespan: str = "auto",
        **kwargs: Any,
    ) -> None:
        self._served = _ServedApp(app, root_path, lifespan)
        super().__init__(base_url=base_url, transport=_AsyncTransport(self._served), **kwargs)

    async def __aenter__(self) -> AsyncTestClient:
        await self._served.start(lifespan=True)
        await super().__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await super().__aexit__(*exc)
        await self._served.stop()

    def websocket_connect(
        self,
        path: str,
        *,
        headers: dict[str, str] | None = None,
        subprotocols: list[str] | None = None,
    ) -> AsyncWebSocketSession:
        """``async with client.websocket_connect("/ws") as ws:`` a WebSocket to `path`."""
        return AsyncWebSocketSession(self._served, _ws_url(self, path), headers, subprotocols)


class _Portal:
    """An event loop on a thread of its own, for the sync client."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                self._thread = threading.Thread(
                    target=loop.run_forever, name="surge-testclient", daemon=True
                )
                self._thread.start()
                self._loop = loop
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def stop(self) -> None:
        with self._lock:
            loop, thread, self._loop, self._thread = self._loop, self._thread, None, None
        if loop is not None and thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            thread.join()
            loop.close()


_DONE: Any = object()


async def _next(iterator: AsyncIterator[bytes]) -> Any:
    try:
        return await iterator.__anext__()
    except StopAsyncIteration:
        return _DONE


async def _await(awaitable: Awaitable[T]) -> T:
    return await awaitable


class _SyncStream(httpx.SyncByteStream):
    def __init__(self, portal: _Portal, stream: httpx.AsyncByteStream) -> None:
        self._portal = portal
        self._stream = stream

    def __iter__(self) -> Iterator[bytes]:
        iterator = self._stream.__aiter__()
        while True:
            chunk = self._portal.call(_next(iterator))
            if chunk is _DONE:
                return
            yield chunk

    def close(self) -> None:
        self._portal.call(self._stream.aclose())


class _SyncTransport(httpx.BaseTransport):
    def __init__(self, portal: _Portal, served: _ServedApp) -> None:
        self._portal = portal
        self._async = _AsyncTransport(served)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.read()
        response = self._portal.call(self._async.handle_async_request(request))
        stream = response.stream
        assert isinstance(stream, httpx.AsyncByteStream)
        return httpx.Response(
            status_code=response.status_code,
            headers=response.headers,
            stream=_SyncStream(self._portal, stream),
            extensions=response.extensions,
        )


class WebSocketSession:
    """A WebSocket to the app, sync (see `TestClient.websocket_connect`)."""

    def __init__(self, portal: _Portal, session: AsyncWebSocketSession) -> None:
        self._portal = portal
        self._session = session

    def __enter__(self) -> WebSocketSession:
        self._portal.call(_await(self._session.__aenter__()))
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def accepted_subprotocol(self) -> str | None:
        """The subprotocol the server chose, if any."""
        return self._session.accepted_subprotocol

    def receive(self) -> str | bytes:
        """The next message; raises `WebSocketDisconnect` once the server closed."""
        return self._portal.call(self._session.receive())

    def receive_text(self) -> str:
        """The next message, which must be text."""
        return self._portal.call(self._session.receive_text())

    def receive_bytes(self) -> bytes:
        """The next message, which must be binary."""
        return self._portal.call(self._session.receive_bytes())

    def receive_json(self) -> Any:
        """The next message, decoded as JSON."""
        return self._portal.call(self._session.receive_json())

    def send_text(self, data: str) -> None:
        """Sends a text message."""
        self._portal.call(self._session.send_text(data))

    def send_bytes(self, data: bytes) -> None:
        """Sends a binary message."""
        self._portal.call(self._session.send_bytes(data))

    def send_json(self, data: Any) -> None:
        """Sends `data` as a JSON text message."""
        self._portal.call(self._session.send_json(data))

    def close(self, code: int = 1000, reason: str = "") -> None:
        """Closes the WebSocket."""
        self._portal.call(self._session.close(code, reason))


class TestClient(httpx.Client):
    """An ``httpx.Client`` whose requests `app` serves in-process (see the module
    docstring); ``with`` runs its startup and shutdown hooks."""

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        app: Any,
        base_url: str = "http://testserver",
        *,
        root_path: str = "",
        lifespan: str = "auto",
        **kwargs: Any,
    ) -> None:
        self._served = _ServedApp(app, root_path, lifespan)
        self._portal = _Portal()
        transport = _SyncTransport(self._portal, self._served)
        super().__init__(base_url=base_url, transport=transport, **kwargs)

    def __enter__(self) -> TestClient:
        self._portal.call(self._served.start(lifespan=True))
        super().__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        super().__exit__(*exc)
        self._portal.call(self._served.stop())
        self._portal.stop()

    def close(self) -> None:
        """Closes the client's connections and stops its event loop."""
        super().close()
        self._portal.stop()

    def websocket_connect(
        self,
        path: str,
        *,
        headers: dict[str, str] | None = None,
        subprotocols: list[str] | None = None,
    ) -> WebSocketSession:
        """``with client.websocket_connect("/ws") as ws:`` a WebSocket to `path`."""
        session = AsyncWebSocketSession(self._served, _ws_url(self, path), headers, subprotocols)
        return WebSocketSession(self._portal, session)


def _ws_url(client: httpx.Client | httpx.AsyncClient, path: str) -> str:
    url = client.base_url.join(path)
    scheme = "wss" if url.scheme == "https" else "ws"
    parts = urlsplit(str(url))
    return f"{scheme}://{parts.netloc}{parts.path or '/'}" + (
        f"?{parts.query}" if parts.query else ""
    )
