"""Finding where each HTTP/1.1 response ends, and its status, in a byte stream.

The load generator needs no more than that: a status code per response and the
framing (Content-Length, chunked, 1xx, bodiless statuses, read-until-close).
Headers are scanned, not parsed into objects. Anything that cannot be framed is
a `MalformedReply`; the connection is then dropped and its requests counted as
"malformed".
"""

from __future__ import annotations

#: Longest response head accepted before the reply counts as malformed.
MAX_HEAD = 64 * 1024
#: Longest chunk-size line accepted.
MAX_CHUNK_LINE = 1024

_HEAD, _BODY, _CHUNK_SIZE, _CHUNK_DATA, _CHUNK_END, _TRAILERS, _UNTIL_CLOSE = range(7)


class MalformedReply(Exception):
    """The server's bytes are not an HTTP/1.x response."""


class ResponseFramer:
    """Feed bytes, get the status codes of the responses they complete."""

    __slots__ = ("_buf", "_left", "_state", "_status", "close_after", "head_only")

    def __init__(self, *, head_only: bool = False) -> None:
        self._buf = bytearray()
        self._state = _HEAD
        self._left = 0
        self._status = 0
        #: The last complete response asked to close the connection.
        self.close_after = False
        #: Responses to HEAD have no body whatever their headers say.
        self.head_only = head_only

    def feed(self, data: bytes) -> list[int]:
        """Status codes of the responses completed by `data` (1xx interim ones skipped)."""
        buf = self._buf
        buf += data
        out: list[int] = []
        pos = 0
        n = len(buf)
        while pos < n:
            state = self._state
            if state == _HEAD:
                i = buf.find(b"\r\n\r\n", pos)
                if i < 0:
                    if n - pos > MAX_HEAD:
                        raise MalformedReply(f"response head longer than {MAX_HEAD} bytes")
                    break
                status, length, chunked, close = _parse_head(bytes(buf[pos:i]))
                pos = i + 4
                if status < 200:
                    continue  # 100 Continue and friends: the real response follows
                self._status = status
                self.close_after = close
                if self.head_only or status in (204, 304):
                    out.append(status)
                elif chunked:
                    self._state = _CHUNK_SIZE
                elif length >= 0:
                    if length == 0:
                        out.append(status)
                    else:
                        self._left = length
                        self._state = _BODY
                else:
                    self._state = _UNTIL_CLOSE
            elif state == _BODY:
                take = min(self._left, n - pos)
                pos += take
                self._left -= take
                if self._left:
                    break
                out.append(self._status)
                self._state = _HEAD
            elif state == _CHUNK_SIZE:
                i = buf.find(b"\r\n", pos)
                if i < 0:
                    if n - pos > MAX_CHUNK_LINE:
                        raise MalformedReply("chunk size line too long")
                    break
                line = bytes(buf[pos:i]).split(b";", 1)[0].strip()
                try:
                    size = int(line, 16)
                except ValueError:
                    raise MalformedReply(f"bad chunk size {line[:20]!r}") from None
                if size < 0:
                    raise MalformedReply("negative chunk size")
                pos = i + 2
                if size == 0:
                    self._state = _TRAILERS
                else:
                    self._left = size
                    self._state = _CHUNK_DATA
            elif state == _CHUNK_DATA:
                take = min(self._left, n - pos)
                pos += take
                self._left -= take
                if self._left:
                    break
                self._state = _CHUNK_END
            elif state == _CHUNK_END:
                if n - pos < 2:
                    break
                if buf[pos : pos + 2] != b"\r\n":
                    raise MalformedReply("chunk data not followed by CRLF")
                pos += 2
                self._state = _CHUNK_SIZE
            elif state == _TRAILERS:
                if n - pos < 2:
                    break
                if buf[pos : pos + 2] == b"\r\n":
                    pos += 2
                else:
                    i = buf.find(b"\r\n\r\n", pos)
                    if i < 0:
                        if n - pos > MAX_HEAD:
                            raise MalformedReply("trailer section too long")
                        break
                    pos = i + 4
                out.append(self._status)
                self._state = _HEAD
            else:  # _UNTIL_CLOSE: the body ends with the connection
                pos = n
        del buf[:pos]
        return out

    def eof(self) -> int | None:
        """The connection ended: the status of a response it completes, if any."""
        if self._state == _UNTIL_CLOSE:
            self._state = _HEAD
            return self._status
        return None

    @property
    def mid_response(self) -> bool:
        """True when part of a response has arrived."""
        return self._state != _HEAD or bool(self._buf)


def _parse_head(head: bytes) -> tuple[int, int, bool, bool]:
    """(status, content-length or -1, chunked, connection: close) of a response head."""
    if not head.startswith(b"HTTP/1.") or len(head) < 12 or head[8:9] != b" ":
        raise MalformedReply(f"not an HTTP/1.x status line: {head[:40]!r}")
    code = head[9:12]
    if not code.isdigit() or (len(head) > 12 and head[12:13] not in (b" ", b"\r")):
        raise MalformedReply(f"bad status code in {head[:40]!r}")
    status = int(code)
    lower = head.lower()
    length = -1
    i = lower.find(b"\r\ncontent-length:")
    if i >= 0:
        j = lower.find(b"\r\n", i + 2)
        value = lower[i + 17 : j if j >= 0 else len(lower)].strip()
        if not value.isdigit():
            raise MalformedReply(f"bad Content-Length {value[:20]!r}")
        length = int(value)
    chunked = False
    i = lower.find(b"\r\ntransfer-encoding:")
    if i >= 0:
        j = lower.find(b"\r\n", i + 2)
        chunked = b"chunked" in lower[i : j if j >= 0 else len(lower)]
    close = b"\r\nconnection: close" in lower or (
        head.startswith(b"HTTP/1.0") and b"\r\nconnection: keep-alive" not in lower
    )
    return status, length, chunked, close
