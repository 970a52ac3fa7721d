"""`wsgi.input` and `wsgi.file_wrapper`: the thread's side of the request and file bodies.

`InputStream` is read in the app's thread. Body bytes still to come are pulled
from the connection's `BodyStream` on the event loop, one `read_some` per
refill, and the thread waits for them: the client is read at the app's pace
(the connection pauses reading once its stream buffer is full), and the loop
never waits on the thread. A body that had fully arrived when the request was
dispatched is handed over whole, so reading it costs no trip to the loop.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from surge.http.protocol import BodyStream

#: Seconds a thread waits for the loop to hand it more body bytes; the body's
#: own deadlines (header timeout, keep-alive, the client leaving) end it sooner.
_READ_TIMEOUT = 300.0


class InputStream:
    """A file-like `wsgi.input` streaming the request body (PEP 3333's methods)."""

    __slots__ = ("_buf", "_loop", "_more", "_pos", "_stream")

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop | None,
        stream: BodyStream | None,
        data: bytes,
        more: bool,
    ) -> None:
        self._loop = loop
        self._stream = stream
        self._buf = data
        self._pos = 0
        self._more = more

    @property
    def exhausted(self) -> bool:
        """True once the whole body has been taken from the connection."""
        return not self._more

    def _fill(self) -> bool:
        """Pulls what has arrived (waiting for some); False at the end of the body."""
        if not self._more:
            return False
        # `more` is False without a stream (and a loop to read it on)
        assert self._stream is not None and self._loop is not None
        future = asyncio.run_coroutine_threadsafe(self._stream.read_some(), self._loop)
        data, self._more = future.result(_READ_TIMEOUT)
        # Keep only the unread tail: a body read in pieces is not copied over and over.
        self._buf = self._buf[self._pos :] + data if self._pos < len(self._buf) else data
        self._pos = 0
        return True

    def read(self, size: int | None = -1) -> bytes:
        """Up to `size` bytes (all that is left when `size` is None or negative)."""
        if size is None or size < 0:
            while self._fill():
                pass
            out = self._buf[self._pos :]
            self._buf, self._pos = b"", 0
            return out
        while len(self._buf) - self._pos < size and self._fill():
            pass
        out = self._buf[self._pos : self._pos + size]
        self._pos += len(out)
        return out

    def readline(self, size: int | None = -1) -> bytes:
        """One line, with its b"\\n" (at most `size` bytes when `size` >= 0)."""
        limit = -1 if size is None else size
        while True:
            end = self._buf.find(b"\n", self._pos)
            have = len(self._buf) - self._pos
            if end >= 0:
                n = end + 1 - self._pos
                break
            if 0 <= limit <= have or not self._fill():
                n = have
                break
        if 0 <= limit < n:
            n = limit
        out = self._buf[self._pos : self._pos + n]
        self._pos += n
        return out

    def readlines(self, hint: int | None = -1) -> list[bytes]:
        """The remaining lines (stopping once `hint` bytes were read, when given)."""
        lines: list[bytes] = []
        total = 0
        while line := self.readline():
            lines.append(line)
            total += len(line)
            if hint is not None and 0 < hint <= total:
                break
        return lines

    def __iter__(self) -> Iterator[bytes]:
        return self

    def __next__(self) -> bytes:
        line = self.readline()
        if not line:
            raise StopIteration
        return line


class FileWrapper:
    """`wsgi.file_wrapper`: a file-like object served block by block, then closed."""

    __slots__ = ("blksize", "close", "filelike")

    def __init__(self, filelike: Any, blksize: int = 8192) -> None:
        self.filelike = filelike
        self.blksize = blksize
        # PEP 3333: the wrapper's close() is the file's (the server always calls it).
        if hasattr(filelike, "close"):
            self.close = filelike.close

    def __iter__(self) -> Iterator[bytes]:
        read = self.filelike.read
        while data := read(self.blksize):
            yield data

    def size_left(self) -> int | None:
        """Bytes from the file's position to its end, for a regular file; else None."""
        try:
            fd = self.filelike.fileno()
            st = os.fstat(fd)
            pos = self.filelike.tell()
        except (AttributeError, OSError, ValueError):
            return None
        import stat

        return max(st.st_size - pos, 0) if stat.S_ISREG(st.st_mode) else None
