"""Misbehaving TCP servers for the load tests, in threads of the test process."""

from __future__ import annotations

import contextlib
import socket
import socketserver
import threading
from collections.abc import Callable


class RawServer:
    """A threaded TCP server on loopback whose handler is `handle(sock)`."""

    def __init__(self, handle: Callable[[socket.socket], None]) -> None:
        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                with contextlib.suppress(OSError):
                    handle(self.request)

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True
            # socketserver listens with a backlog of 5: a load test opening
            # hundreds of connections a second on a loaded machine, where this
            # thread accepts late, would see connects dropped (timeouts, not the
            # behaviour under test).
            request_queue_size = 1024

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def read_request(sock: socket.socket) -> bytes:
    """Read up to the end of one request head (the load tests send GETs)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk
    return data
