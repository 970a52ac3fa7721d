"""`LiveServer`: a surge server for the WebSocket tests, on its own loop in a thread."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import uvloop
from surge.http.server import Server, serve
from surge.services import free_port
from ws_apps import make_app


class LiveServer:
    """A surge server on a loop in a thread."""

    def __init__(self, loop: str = "uvloop", **limits: Any) -> None:
        self.port = free_port()
        self.loop = uvloop.new_event_loop() if loop == "uvloop" else asyncio.new_event_loop()
        self.server: Server | None = None
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(self.loop)
            self.server = self.loop.run_until_complete(serve(make_app(**limits), port=self.port))
            ready.set()
            self.loop.run_forever()

        self.thread = threading.Thread(target=run, daemon=True, name=f"ws-server-{self.port}")
        self.thread.start()
        assert ready.wait(10), "server did not start"

    def call(self, coro: Any, timeout: float = 10.0) -> Any:
        """Runs `coro` on the server's loop and returns its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self) -> None:
        if self.server is not None and not self.server.closing:
            self.call(self.server.shutdown(grace=1.0))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
