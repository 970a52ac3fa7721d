"""`surge.http.protocol._Batched`: an ASGI/WSGI connection's writes leave together at
the end of the loop iteration, in order, over a real loopback TCP connection."""

from __future__ import annotations

import asyncio
import socket
import ssl

import pytest
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


def test_a_flush_never_overtakes_what_the_transport_holds(arun) -> None:
    """A flush sends straight to the socket only while the transport's buffer is
    empty; with bytes buffered there (a client not reading), it queues behind them."""

    async def main() -> tuple[int, bytes]:
        server, client = _pair()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        real = await _transport(server)
        batched = _Batched(real, asyncio.get_running_loop())
        big = bytes(range(256)) * (16 * 1024)  # 4 MiB: more than the socket buffers take
        real.write(big)
        held = real.get_write_buffer_size()
        batched.write(b"after")
        await asyncio.sleep(0.05)  # the batch's flush runs
        got = await asyncio.to_thread(_read_all, client, len(big) + 5)
        batched.close()
        client.close()
        return held, got

    held, got = arun(main())
    assert held > 0
    assert got[-5:] == b"after"
    assert got == bytes(range(256)) * (16 * 1024) + b"after"


def test_a_tls_transport_is_never_written_around(arun) -> None:
    """Over TLS the batched bytes go through the TLS transport: the client reads
    them decrypted (plaintext sent to the socket would break its TLS stream)."""
    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_ctx)
    client_ctx = ssl.create_default_context()
    ca.configure_trust(client_ctx)

    def client_side(client: socket.socket) -> bytes:
        client.settimeout(10)
        with client_ctx.wrap_socket(client, server_hostname="127.0.0.1") as tls:
            data = b""
            while len(data) < 11:
                chunk = tls.recv(100)
                if not chunk:
                    break
                data += chunk
            return data

    async def main() -> bytes:
        server, client = _pair()
        loop = asyncio.get_running_loop()
        real = await _transport(server)
        real.pause_reading()  # the ClientHello waits in the kernel for start_tls
        reading = asyncio.ensure_future(asyncio.to_thread(client_side, client))
        tls = await loop.start_tls(real, real.get_protocol(), server_ctx, server_side=True)
        assert tls is not None
        batched = _Batched(tls, loop)
        batched.write(b"secret ")
        batched.write(b"data")
        got = await asyncio.wait_for(reading, 20)
        batched.close()
        return got

    assert arun(main()) == b"secret data"
