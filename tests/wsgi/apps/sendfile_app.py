"""Files through `wsgi.file_wrapper` for the sendfile tests, served by `surge serve`
and by gunicorn: a Flask app whose `send_file` hands an open file to the server.

The big file is made (the same bytes in every process) in the temporary directory
on import. Reads of the files this app opens are counted: a server that sends them
with sendfile reads nothing through the file object.
"""

from __future__ import annotations

import io
import os
import random
import tempfile
from pathlib import Path

from flask import Flask, request, send_file

#: 6 MiB and a bit: many socket buffers, and not a multiple of any block size.
SIZE = 6 * 1024 * 1024 + 12345
BIG = Path(tempfile.gettempdir()) / f"surge-sendfile-{SIZE}.bin"
READS = {"count": 0}


def _make_big() -> None:
    data = random.Random(20261123).randbytes(SIZE)
    if BIG.exists() and BIG.read_bytes() == data:
        return
    part = BIG.with_suffix(f".{os.getpid()}")
    part.write_bytes(data)
    os.replace(part, BIG)  # both servers may write it at once: same bytes, whole


_make_big()


class CountingFile(io.FileIO):
    """A file whose reads are counted (sendfile does not call read)."""

    def read(self, size: int = -1) -> bytes:
        READS["count"] += 1
        return super().read(size)

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def]
        READS["count"] += 1
        return super().readinto(buffer)


app = Flask(__name__)


@app.get("/big")
def big():
    # The usual call: a path, so werkzeug sets Content-Length.
    return send_file(BIG, mimetype="application/octet-stream", etag=False, last_modified=None)


@app.get("/counted")
def counted():
    """An open file from `skip`; with Content-Length unless `chunked` is asked."""
    skip = int(request.args.get("skip", 0))
    f = CountingFile(BIG, "r")
    f.seek(skip)
    resp = send_file(f, mimetype="application/octet-stream", etag=False, last_modified=None)
    if "chunked" not in request.args:
        resp.content_length = SIZE - skip
    return resp


@app.get("/read-through")
def read_through():
    """The file read in Python, not wrapped: what every read of it counts as."""
    f = CountingFile(BIG, "r")
    return app.response_class(iter(lambda: f.read(1 << 20), b""), mimetype="text/plain")


@app.get("/bytes")
def some_bytes():
    """The first `n` bytes of the file as an ordinary body (written by the loop)."""
    n = int(request.args["n"])
    return app.response_class(BIG.read_bytes()[:n], mimetype="application/octet-stream")


@app.get("/reads")
def reads():
    return {"reads": READS["count"]}


@app.get("/small")
def small():
    return "small"


def longer_than_file(environ, start_response):
    """Plain WSGI: a Content-Length 10 bytes longer than the file it sends."""
    start_response(
        "200 OK",
        [("Content-Type", "application/octet-stream"), ("Content-Length", str(SIZE + 10))],
    )
    return environ["wsgi.file_wrapper"](open(BIG, "rb"), 32768)
