"""Bare WSGI callables for the raw-socket tests: environ, wsgi.input, framing, errors."""

from __future__ import annotations

import json
import sys
import threading
import time

closed: list[str] = []
_lock = threading.Lock()


class Tracked:
    """A response iterable that records its close()."""

    def __init__(self, name: str, chunks: list[bytes]) -> None:
        self.name = name
        self.chunks = chunks

    def __iter__(self):
        return iter(self.chunks)

    def close(self) -> None:
        with _lock:
            closed.append(self.name)


def _json(start_response, data, status="200 OK"):
    body = json.dumps(data).encode()
    start_response(
        status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
    )
    return [body]


def app(environ, start_response):
    path = environ["PATH_INFO"]
    inp = environ["wsgi.input"]
    if path == "/environ":
        inp.read()
        keys = {
            k: [type(v).__name__, v if isinstance(v, str | int | bool | tuple) else None]
            for k, v in environ.items()
        }
        keys["wsgi.errors"] = [str(environ["wsgi.errors"] is sys.stderr), None]
        keys["wsgi.input"] = [str(hasattr(inp, "read") and hasattr(inp, "readline")), None]
        keys["wsgi.file_wrapper"] = [str(callable(environ["wsgi.file_wrapper"])), None]
        return _json(start_response, keys)
    if path == "/read1":
        parts = []
        while b := inp.read(1):
            parts.append(b)
        return _json(start_response, {"n": len(parts), "body": b"".join(parts).decode()})
    if path == "/readline":
        first = inp.readline()
        second = inp.readline(3)
        rest = inp.readlines()
        return _json(
            start_response,
            {
                "first": first.decode(),
                "second": second.decode(),
                "rest": [r.decode() for r in rest],
            },
        )
    if path == "/iterate":
        return _json(start_response, {"lines": [line.decode() for line in inp]})
    if path == "/gen":
        start_response("200 OK", [("Content-Type", "text/plain")])
        return (b"part%d;" % i for i in range(4))
    if path == "/sleep":
        time.sleep(float(environ["QUERY_STRING"] or 0))
        return _json(start_response, {"slept": environ["QUERY_STRING"]})
    if path == "/write":
        write = start_response("200 OK", [("Content-Type", "text/plain")])
        write(b"written;")
        return [b"returned"]
    if path == "/tracked":
        start_response("200 OK", [("Content-Length", "4")])
        return Tracked(environ["QUERY_STRING"], [b"ab", b"cd"])
    if path == "/tracked-big":  # 10 MiB: more than the socket buffers hold
        start_response("200 OK", [("Content-Length", str(160 * 65536))])
        return Tracked(environ["QUERY_STRING"], [b"x" * 65536] * 160)
    if path == "/closed":
        return _json(start_response, {"closed": closed})
    if path == "/exc-info":
        start_response("200 OK", [("Content-Type", "text/plain")])
        try:
            raise ValueError("late")
        except ValueError:
            start_response("500 Oops", [("Content-Type", "text/plain")], sys.exc_info())
        return [b"replaced"]
    if path == "/fail-after-headers":
        start_response("200 OK", [("Content-Type", "text/plain")])

        def gen():
            yield b"first;"
            raise RuntimeError("mid-stream")

        return gen()
    if path == "/fail-before":
        raise RuntimeError("before start_response")
    if path == "/hop":
        start_response("200 OK", [("Connection", "close")])
        return [b"x"]
    if path == "/big":
        n = int(environ["QUERY_STRING"])
        start_response("200 OK", [("Content-Length", str(n * 65536))])
        return (b"x" * 65536 for _ in range(n))
    if path == "/file":
        f = open(__file__.replace("raw_wsgi.py", "hello.txt"), "rb")  # noqa: SIM115
        start_response("200 OK", [("Content-Type", "text/plain")])
        return environ["wsgi.file_wrapper"](f, 4)
    start_response("404 Not Found", [("Content-Length", "0")])
    return []


def spin_app(environ, start_response):
    """A CPU-bound app: each request runs Python for about 2 ms, holding the GIL."""
    end = time.thread_time() + 0.002
    while time.thread_time() < end:
        pass
    start_response("200 OK", [("Content-Length", "4")])
    return [b"spun"]
