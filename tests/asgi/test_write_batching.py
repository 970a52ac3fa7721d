"""`surge.http.protocol._Batched`: an ASGI/WSGI connection's writes leave together at
the end of the loop iteration, in order, over a real loopback TCP connection."""

from __future__ import annotations

import asyncio
import socket

import uvloop
from surge.http.protocol import _BATCH_LIMIT, _Batched


def _pair() -> tuple[socket.socket, socket.socket]:
    listener = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(listener.getsockname())
    server, _ = listener.accept()
    listener.close()
    return server, client


async def _transport(sock: socket.socket) -> asyncio.Transport:
    loop = asyncio.get_running_loop()
    transport, _ = await loop.connect_accepted_socket(asyncio.Protocol, sock)
    return transport


def _read_all(client: socket.socket, size: int) -> bytes:
    client.settimeout(5)
    data = b""
    while len(data) < size:
        chunk = client.recv(1 << 20)
        if not chunk:
            break
        data += chunk
    return data


def test_writes_wait_for_the_iteration_end_then_leave_in_order() -> None:
    async def main() -> tuple[int, int, bytes]:
        server, client = _pair()
        real = await _transport(server)
        batched = _Batched(real, asyncio.get_running_loop())
        for part in (b"one ", b"two ", b"three"):
            batched.write(part)
        # nothing handed to the transport yet; the back-pressure budget sees it
        waiting = batched.get_write_buffer_size()
        client.setblocking(False)
        try:
            early = client.recv(100)
        except BlockingIOError:
            early = b""
        await asyncio.sleep(0.05)  # the iteration ends: one write
        got = await asyncio.to_thread(_read_all, client, 13)
        batched.close()
        client.close()
        return waiting, len(early), got

    waiting, early, got = uvloop.run(main())
    assert waiting == 13
    assert early == 0
    assert got == b"one two three"


def test_close_flushes_and_a_large_write_leaves_at_once() -> None:
    async def main() -> tuple[int, bytes]:
        server, client = _pair()
        real = await _transport(server)
        batched = _Batched(real, asyncio.get_running_loop())
        big = b"x" * _BATCH_LIMIT
        batched.write(b"head ")
        batched.write(big)  # reaches the limit: handed to the transport now
        pending_after_big = batched._size
        batched.write(b" tail")
        batched.close()  # what still waits goes before the close
        got = await asyncio.to_thread(_read_all, client, 5 + len(big) + 5)
        client.close()
        return pending_after_big, got

    pending_after_big, got = uvloop.run(main())
    assert pending_after_big == 0
    assert got == b"head " + b"x" * _BATCH_LIMIT + b" tail"


def test_abort_drops_what_waits() -> None:
    async def main() -> bytes:
        server, client = _pair()
        real = await _transport(server)
        batched = _Batched(real, asyncio.get_running_loop())
        batched.write(b"never sent")
        batched.abort()
        await asyncio.sleep(0.05)
        got = await asyncio.to_thread(_read_all, client, 1)
        client.close()
        return got

    assert uvloop.run(main()) == b""


def test_bytes_like_writes_and_a_large_first_write_keep_their_order() -> None:
    async def main() -> bytes:
        server, client = _pair()
        real = await _transport(server)
        batched = _Batched(real, asyncio.get_running_loop())
        big = b"y" * (_BATCH_LIMIT + 1)
        batched.write(big)  # nothing waits before it: straight to the transport
        batched.write(bytearray(b" array"))
        batched.write(memoryview(b" view"))
        batched.write(b"")  # nothing to send
        size = len(big) + len(b" array view")
        got = await asyncio.to_thread(_read_all, client, size)
        batched.close()
        client.close()
        return got

    assert uvloop.run(main()) == b"y" * (_BATCH_LIMIT + 1) + b" array view"
