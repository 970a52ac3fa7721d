"""A tiny HTTP/1.1 client on a raw socket, for the tests that need control over
every byte: pipelining, fragmented and malformed input, exact response framing.

`RawConnection.read_response()` frames a response itself (Content-Length,
chunked or until close) and keeps the bytes exactly as received, so tests can
check the framing, not only the payload.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass, field

CRLF = b"\r\n"


def build_request(
    method: str = "GET",
    target: str = "/",
    headers: list[tuple[str, str]] | dict[str, str] | None = None,
    body: bytes | None = None,
    *,
    chunked: bool = False,
    chunk_size: int = 1000,
    version: str = "HTTP/1.1",
    host: str | None = "test",
) -> bytes:
    """A request as bytes; adds Host, and Content-Length or chunked framing for a body."""
    pairs = list(headers.items()) if isinstance(headers, dict) else list(headers or [])
    lines = [f"{method} {target} {version}".encode("latin-1")]
    if host is not None and not any(k.lower() == "host" for k, _ in pairs):
        lines.append(f"Host: {host}".encode())
    for name, value in pairs:
        lines.append(f"{name}: {value}".encode("latin-1"))
    payload = b""
    if body is not None:
        if chunked:
            lines.append(b"Transfer-Encoding: chunked")
            payload = encode_chunked(body, chunk_size)
        else:
            lines.append(b"Content-Length: %d" % len(body))
            payload = body
    return CRLF.join(lines) + CRLF + CRLF + payload


def encode_chunked(body: bytes, chunk_size: int = 1000) -> bytes:
    parts = []
    for i in range(0, len(body), chunk_size):
        chunk = body[i : i + chunk_size]
        parts.append(b"%x\r\n%b\r\n" % (len(chunk), chunk))
    parts.append(b"0\r\n\r\n")
    return b"".join(parts)


@dataclass
class RawResponse:
    version: str
    status: int
    reason: str
    headers: list[tuple[str, str]]
    body: bytes
    #: The response exactly as received, head and framed body.
    raw: bytes
    #: The chunk payloads as framed on the wire (None unless chunked).
    chunks: list[bytes] | None = None
    #: Whether the body was framed by the connection closing.
    until_close: bool = False
    received_at: float = field(default_factory=time.monotonic)

    def header(self, name: str) -> str | None:
        values = self.getall(name)
        return values[0] if values else None

    def getall(self, name: str) -> list[str]:
        name = name.lower()
        return [v for k, v in self.headers if k.lower() == name]

    @property
    def text(self) -> str:
        return self.body.decode()

    def __repr__(self) -> str:
        return f"<RawResponse {self.status} {self.headers} {self.body[:200]!r}>"


class IncompleteResponse(AssertionError):
    """The connection closed before a whole response arrived."""


class RawConnection:
    """A client socket with a read buffer that frames responses."""

    def __init__(self, port: int, host: str = "127.0.0.1", timeout: float = 5.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.timeout = timeout
        self.buf = bytearray()
        self.eof = False

    # Sending ---------------------------------------------------------------------------

    def send(self, data: bytes) -> bool:
        """Sends everything; False if the server closed the connection first."""
        try:
            self.sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            return False
        return True

    def send_pieces(self, data: bytes, size: int, pause: float = 0.0) -> bool:
        """Sends `data` in pieces of `size`, stopping early once the server answered."""
        for i in range(0, len(data), size):
            if not self.send(data[i : i + size]):
                return False
            if self.readable(pause):
                return False
        return True

    def readable(self, timeout: float = 0.0) -> bool:
        """True when bytes (or EOF) are waiting."""
        import select

        if self.buf or self.eof:
            return True
        r, _, _ = select.select([self.sock], [], [], timeout)
        return bool(r)

    # Receiving -------------------------------------------------------------------------

    def _fill(self) -> bool:
        if self.eof:
            return False
        try:
            data = self.sock.recv(1 << 20)
        except ConnectionResetError:
            data = b""
        if not data:
            self.eof = True
            return False
        self.buf += data
        return True

    def _take(self, n: int) -> bytes:
        while len(self.buf) < n:
            if not self._fill():
                raise IncompleteResponse(f"closed after {len(self.buf)} of {n} bytes")
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def _take_line(self) -> bytes:
        while True:
            i = self.buf.find(CRLF)
            if i >= 0:
                return self._take(i + 2)
            if not self._fill():
                raise IncompleteResponse(f"closed in the middle of a line: {bytes(self.buf)!r}")

    def read_head(self) -> tuple[bytes, str, int, str, list[tuple[str, str]]]:
        while True:
            i = self.buf.find(b"\r\n\r\n")
            if i >= 0:
                raw = self._take(i + 4)
                break
            if not self._fill():
                if not self.buf:
                    raise IncompleteResponse("connection closed before a response")
                raise IncompleteResponse(f"closed inside a response head: {bytes(self.buf)!r}")
        lines = raw[:-4].decode("latin-1").split("\r\n")
        version, _, rest = lines[0].partition(" ")
        status, _, reason = rest.partition(" ")
        headers = []
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            assert sep, f"malformed response header line {line!r}"
            headers.append((name, value.strip()))
        return raw, version, int(status), reason, headers

    def read_response(self, method: str = "GET") -> RawResponse:
        """Reads one response (a 1xx counts as one); `method` tells if a body follows."""
        raw, version, status, reason, headers = self.read_head()
        resp = RawResponse(version, status, reason, headers, b"", raw)
        if method == "HEAD" or status < 200 or status in (204, 304):
            return resp
        te = resp.header("Transfer-Encoding")
        length = resp.header("Content-Length")
        if te is not None:
            assert te.lower() == "chunked", te
            assert length is None, "both Content-Length and Transfer-Encoding in a response"
            resp.chunks = []
            framed = bytearray()
            while True:
                line = self._take_line()
                framed += line
                size = int(line.split(b";")[0].strip(), 16)
                if size == 0:
                    while True:  # trailers, then the empty line
                        line = self._take_line()
                        framed += line
                        if line == CRLF:
                            break
                    break
                data = self._take(size + 2)
                framed += data
                assert data.endswith(CRLF), f"chunk not followed by CRLF: {data[-10:]!r}"
                resp.chunks.append(data[:-2])
            resp.body = b"".join(resp.chunks)
            resp.raw += bytes(framed)
        elif length is not None:
            resp.body = self._take(int(length))
            resp.raw += resp.body
        else:
            while self._fill():
                pass
            resp.body = bytes(self.buf)
            self.buf.clear()
            resp.raw += resp.body
            resp.until_close = True
        resp.received_at = time.monotonic()
        return resp

    def read_responses(self, methods: list[str]) -> list[RawResponse]:
        return [self.read_response(m) for m in methods]

    def request(self, method: str = "GET", target: str = "/", **kw) -> RawResponse:
        """Sends one request and reads its response."""
        self.send(build_request(method, target, **kw))
        return self.read_response(method)

    def is_closed(self, timeout: float = 2.0) -> bool:
        """Waits up to `timeout` for EOF (or a reset); True if the server closed.

        Bytes arriving instead fail the test: nothing may follow the last response.
        """
        if self.buf:
            raise AssertionError(f"unexpected bytes after the response: {bytes(self.buf)!r}")
        if self.eof:
            return True
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(65536)
        except TimeoutError:
            return False
        except ConnectionResetError:
            data = b""
        finally:
            self.sock.settimeout(self.timeout)
        if data:
            raise AssertionError(f"unexpected bytes after the response: {data[:300]!r}")
        self.eof = True
        return True

    def drain_until_closed(self, timeout: float = 2.0) -> bytes | None:
        """Reads whatever comes until EOF; the bytes, or None if still open after `timeout`."""
        deadline = time.monotonic() + timeout
        while not self.eof:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self.sock.settimeout(left)
            try:
                self._fill()
            except TimeoutError:
                return None
            finally:
                self.sock.settimeout(self.timeout)
        data = bytes(self.buf)
        self.buf.clear()
        return data

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def tcp_segments_in(sock: socket.socket) -> int:
    """tcpi_segs_in from TCP_INFO (Linux >= 4.2): segments received on `sock`."""
    import struct

    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256)
    return struct.unpack_from("I", info, 140)[0]


@dataclass
class Reply:
    """A response read with http.client."""

    status: int
    reason: str
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> str | None:
        name = name.lower()
        return next((v for k, v in self.headers if k.lower() == name), None)

    def getall(self, name: str) -> list[str]:
        name = name.lower()
        return [v for k, v in self.headers if k.lower() == name]

    @property
    def text(self) -> str:
        return self.body.decode()

    def json(self):
        import json

        return json.loads(self.body)


def fetch(
    port: int,
    path: str = "/",
    method: str = "GET",
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
    timeout: float = 10.0,
) -> Reply:
    """One request over a new http.client connection."""
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        return Reply(r.status, r.reason, r.getheaders(), r.read())
    finally:
        conn.close()
