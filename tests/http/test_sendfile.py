"""`HttpProtocol.sendfile`: a file sent after what was written before it, on uvloop
and on plain asyncio, by a real server in the test's loop and a real client socket.

The listening socket gets a small send buffer (accepted sockets inherit it), so
the bytes written before the file stay in the transport's buffer while the
client does not read: sendfile must wait for them rather than write past them.
"""

from __future__ import annotations

import asyncio
import os
import random
import socket
from pathlib import Path
from typing import Any

import pytest
from surge._core import encode_response_head
from surge.http import App
from surge.http.response import WriterResponse
from surge.http.server import Server

pytestmark = pytest.mark.timeout(60)

FILE_SIZE = 3 * 1024 * 1024 + 17
#: Written before the file: under the 256 KiB write high-water mark, so nothing
#: pauses, and far over the small send buffer, so most of it stays buffered.
PREFIX = bytes(range(256)) * 800


class _FileAfterPrefix(WriterResponse):
    """Writes a head, `PREFIX`, then `count` bytes of the file from `offset` with
    `conn.sendfile`; keeps what happened in `outcome`."""

    def __init__(self, path: Path, offset: int, count: int, outcome: dict[str, Any]) -> None:
        self.path, self.offset, self.count, self.outcome = path, offset, count, outcome

    async def write(self, conn: Any) -> bool:
        length = len(PREFIX) + self.count
        conn.write(encode_response_head(200, None, "application/octet-stream", length, True))
        conn.write(PREFIX)
        try:
            with open(self.path, "rb") as f:
                await conn.sendfile(f, self.offset, self.count)
        except asyncio.CancelledError as exc:  # the connection was lost: its writer is cancelled
            self.outcome["error"] = exc
            raise
        except Exception as exc:
            self.outcome["error"] = exc
            return False
        self.outcome["sent"] = True
        return True


async def _serve(app: App) -> tuple[Server, int]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16 * 1024)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    server = Server(app)
    await server.serve(sock, backlog=16)
    return server, sock.getsockname()[1]


async def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    loop = asyncio.get_running_loop()
    out = bytearray()
    while len(out) < n:
        data = await loop.sock_recv(sock, min(n - len(out), 1 << 16))
        if not data:
            break
        out += data
    return bytes(out)


@pytest.fixture(scope="module")
def data_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bytes]:
    data = random.Random(7).randbytes(FILE_SIZE)
    path = tmp_path_factory.mktemp("sendfile") / "data.bin"
    path.write_bytes(data)
    return path, data


def _app(path: Path, outcome: dict[str, Any]) -> App:
    app = App()

    @app.get("/file/{offset:int}/{count:int}")
    def send(request, offset, count):
        return _FileAfterPrefix(path, offset, count, outcome)

    @app.get("/small")
    def small(request):
        return "small"

    return app


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_sendfile_waits_for_what_was_written_before(arun, data_file) -> None:
    path, data = data_file
    offset, count = 1001, FILE_SIZE - 2000

    async def main() -> None:
        outcome: dict[str, Any] = {}
        server, port = await _serve(_app(path, outcome))
        loop = asyncio.get_running_loop()
        fds = _fds()
        client = socket.create_connection(("127.0.0.1", port))
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
        client.setblocking(False)
        request = (
            b"GET /file/%d/%d HTTP/1.1\r\nHost: t\r\n\r\nGET /small HTTP/1.1\r\nHost: t\r\n\r\n"
        )
        await loop.sock_sendall(client, request % (offset, count))
        await asyncio.sleep(0.3)  # reading nothing: the prefix waits in the transport
        head = bytearray()
        while b"\r\n\r\n" not in head:
            head += await loop.sock_recv(client, 1)
        body = await _recv_exactly(client, len(PREFIX) + count)
        assert body[: len(PREFIX)] == PREFIX
        assert body[len(PREFIX) :] == data[offset : offset + count]
        tail = b""
        while not tail.endswith(b"small"):  # the next response, after the file
            tail += await loop.sock_recv(client, 4096)
        assert tail.startswith(b"HTTP/1.1 200") and tail.endswith(b"small")
        assert outcome == {"sent": True}
        client.close()
        for _ in range(100):
            if not server.connections:
                break
            await asyncio.sleep(0.02)
        assert _fds() == fds  # the duplicate descriptor was closed too
        await server.shutdown(1.0)

    arun(main())


def test_sendfile_client_gone(arun, data_file) -> None:
    path, _ = data_file

    async def main() -> None:
        outcome: dict[str, Any] = {}
        server, port = await _serve(_app(path, outcome))
        loop = asyncio.get_running_loop()
        fds = _fds()
        client = socket.create_connection(("127.0.0.1", port))
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
        client.setblocking(False)
        await loop.sock_sendall(client, b"GET /file/0/%d HTTP/1.1\r\nHost: t\r\n\r\n" % FILE_SIZE)
        await loop.sock_recv(client, 100)
        await asyncio.sleep(0.2)
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        client.close()  # a reset with megabytes unsent
        for _ in range(100):
            if outcome:
                break
            await asyncio.sleep(0.02)
        # Ended, not hung: by the reset, or by the connection's loss cancelling its writer.
        assert isinstance(outcome.get("error"), ConnectionResetError | asyncio.CancelledError)
        await asyncio.sleep(0.05)
        assert not server.connections
        assert _fds() == fds
        await server.shutdown(1.0)

    arun(main())


def test_sendfile_file_shorter_than_count(arun, data_file) -> None:
    path, data = data_file

    async def main() -> None:
        outcome: dict[str, Any] = {}
        server, port = await _serve(_app(path, outcome))
        loop = asyncio.get_running_loop()
        client = socket.create_connection(("127.0.0.1", port))
        client.setblocking(False)
        await loop.sock_sendall(
            client, b"GET /file/%d/100 HTTP/1.1\r\nHost: t\r\n\r\n" % (FILE_SIZE - 40)
        )
        received = bytearray()
        while chunk := await loop.sock_recv(client, 1 << 16):
            received += chunk  # until the server closes
        assert received.endswith(PREFIX + data[-40:])
        assert isinstance(outcome.get("error"), RuntimeError)
        client.close()
        await server.shutdown(1.0)

    arun(main())
