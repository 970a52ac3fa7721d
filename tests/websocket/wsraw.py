"""A raw-socket WebSocket client for the tests: frames written by hand, so broken
ones can be sent, and frames read back one by one."""

from __future__ import annotations

import base64
import contextlib
import os
import socket
import struct
import zlib

KEY = base64.b64encode(b"0123456789abcdef").decode()
TEXT, BINARY, CONT, CLOSE, PING, PONG = 1, 2, 0, 8, 9, 10


def handshake_request(path: str = "/echo", extra: str = "", key: str = KEY) -> bytes:
    return (
        f"GET {path} HTTP/1.1\r\nHost: test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n{extra}\r\n"
    ).encode()


def frame(
    opcode: int,
    payload: bytes = b"",
    *,
    fin: bool = True,
    rsv: int = 0,
    mask: bool = True,
    length: int | None = None,
) -> bytes:
    """One frame; `rsv` is the RSV bits (4 = RSV1), `length` overrides the length field."""
    n = len(payload) if length is None else length
    head = bytes([(0x80 if fin else 0) | (rsv << 4) | opcode])
    m = 0x80 if mask else 0
    if n < 126:
        head += bytes([m | n])
    elif n < 65536:
        head += bytes([m | 126]) + struct.pack("!H", n)
    else:
        head += bytes([m | 127]) + struct.pack("!Q", n)
    if not mask:
        return head + payload
    key = os.urandom(4)
    masked = bytes(b ^ key[i % 4] for i, b in enumerate(payload))
    return head + key + masked


def close_payload(code: int, reason: bytes = b"") -> bytes:
    return struct.pack("!H", code) + reason


def deflate(data: bytes) -> bytes:
    """A permessage-deflate payload (raw DEFLATE, the trailing 00 00 ff ff removed)."""
    c = zlib.compressobj(6, zlib.DEFLATED, -15)
    out = c.compress(data) + c.flush(zlib.Z_SYNC_FLUSH)
    assert out.endswith(b"\x00\x00\xff\xff")
    return out[:-4]


class RawWebSocket:
    """A client connection after a successful handshake (or `response` for a refusal)."""

    def __init__(self, port: int, path: str = "/echo", extra: str = "", timeout: float = 5.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buf = b""
        self.sock.sendall(handshake_request(path, extra))
        self.response = self._read_head()
        self.status = int(self.response.split(b" ", 2)[1])

    def _read_head(self) -> bytes:
        while b"\r\n\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError(f"closed during the handshake: {self.buf!r}")
            self.buf += chunk
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        return head + b"\r\n\r\n"

    def header(self, name: str) -> str | None:
        for line in self.response.decode("latin-1").split("\r\n")[1:]:
            k, _, v = line.partition(":")
            if k.strip().lower() == name.lower():
                return v.strip()
        return None

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _need(self, n: int) -> bytes:
        while len(self.buf) < n:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("closed by the server")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def recv_frame(self) -> tuple[bool, int, int, bytes]:
        """(fin, rsv, opcode, payload) of the next frame (server frames are unmasked)."""
        b0, b1 = self._need(2)
        assert not b1 & 0x80, "server frames must not be masked"
        n = b1 & 0x7F
        if n == 126:
            (n,) = struct.unpack("!H", self._need(2))
        elif n == 127:
            (n,) = struct.unpack("!Q", self._need(8))
        return bool(b0 & 0x80), (b0 >> 4) & 7, b0 & 0x0F, self._need(n)

    def recv_message(self) -> tuple[int, bytes]:
        """(opcode, payload) of the next data or control message, fragments joined."""
        fin, _rsv, op, data = self.recv_frame()
        while not fin:
            fin, _rsv, cont, more = self.recv_frame()
            assert cont == CONT
            data += more
        return op, data

    def expect_close(self, answer: bool = True) -> tuple[int | None, bytes]:
        """Reads until the server's close frame: (code, reason), answers it (unless
        not `answer`), then reads until the server closes the TCP connection."""
        while True:
            op, data = self.recv_message()
            if op == CLOSE:
                break
        code = struct.unpack("!H", data[:2])[0] if len(data) >= 2 else None
        if answer:
            # OSError: the server closed first (it echoed our close).
            with contextlib.suppress(OSError):
                self.sock.sendall(frame(CLOSE, data[:2]))
        self.sock.settimeout(5.0)
        rest = b""
        try:
            while chunk := self.sock.recv(65536):
                rest += chunk
        except OSError:
            pass
        return code, data[2:]

    def close(self) -> None:
        self.sock.close()
