"""`surge.asgi.protocol.AsgiProtocol`: reads taken by the native `AsgiReader` and the
ones it hands to `HttpProtocol.data_received` answer alike, in order, on uvloop and
asyncio, over a real loopback connection to an in-process server; and a closed
connection's protocol is freed without the cycle collector."""

from __future__ import annotations

import asyncio
import gc
import socket
from typing import Any

import pytest
import uvloop
from surge.asgi.app import AsgiApp
from surge.asgi.protocol import AsgiProtocol
from surge.http.server import Server


async def echo(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Answers with the method, path and body it got."""
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    text = b"%s %s %s" % (scope["method"].encode(), scope["path"].encode(), body)
    headers = [(b"content-length", b"%d" % len(text))]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": text})


def _request(method: str, path: str, body: bytes = b"") -> bytes:
    head = f"{method} {path} HTTP/1.1\r\nHost: t\r\nContent-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


async def _responses(reader: asyncio.StreamReader, count: int) -> list[bytes]:
    bodies = []
    for _ in range(count):
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
        length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
        bodies.append(await asyncio.wait_for(reader.readexactly(length), 30))
    return bodies


async def _close(writer: asyncio.StreamWriter, server: Server) -> None:
    """Closes the client side and waits until the server has let the connection go."""
    writer.close()
    await writer.wait_closed()
    for _ in range(500):
        if not server.connections:
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)


async def _exchange() -> tuple[list[bytes], int]:
    server = Server(AsgiApp(echo))
    sock = socket.create_server(("127.0.0.1", 0))
    await server.serve(sock)
    reader, writer = await asyncio.open_connection(*sock.getsockname()[:2])
    got: list[bytes] = []
    # the connection's first request (Python's path), then reads the reader takes
    for i in range(3):
        writer.write(_request("GET", f"/{i}"))
        got += await _responses(reader, 1)
    # a body in two reads (streamed: handed to Python), then a plain one again
    writer.write(_request("POST", "/up", b"hello world")[:-5])
    await writer.drain()
    await asyncio.sleep(0.05)
    writer.write(b"world")
    got += await _responses(reader, 1)
    # three pipelined in one write (more than one request: Python's path)
    writer.write(b"".join(_request("GET", f"/p{i}") for i in range(3)))
    got += await _responses(reader, 3)
    writer.write(_request("GET", "/last"))
    got += await _responses(reader, 1)
    assert all(type(c) is AsgiProtocol for c in server.connections)
    await _close(writer, server)
    gc.collect()
    gc.disable()
    try:
        # a second connection, closed: its protocol must go with its references
        reader, writer = await asyncio.open_connection(*sock.getsockname()[:2])
        writer.write(_request("GET", "/a"))
        await _responses(reader, 1)
        writer.write(_request("GET", "/b"))
        await _responses(reader, 1)
        await _close(writer, server)
        alive = sum(type(o) is AsgiProtocol for o in gc.get_objects())
    finally:
        gc.enable()
    await server.shutdown(1.0)
    return got, alive


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
def test_native_and_python_reads_answer_alike_in_order(loop: str) -> None:
    run = uvloop.run if loop == "uvloop" else asyncio.run
    got, alive = run(_exchange())
    assert got == [
        b"GET /0 ",
        b"GET /1 ",
        b"GET /2 ",
        b"POST /up hello world",
        b"GET /p0 ",
        b"GET /p1 ",
        b"GET /p2 ",
        b"GET /last ",
    ]
    assert alive == 0
