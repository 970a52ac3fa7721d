"""`WsgiApp`: a WSGI (PEP 3333) application served over surge's connections.

A dispatcher like `surge.asgi.AsgiApp`: `freeze()` yields a `Plan` whose router
sends every method and path to one deferred, streaming route. Its dispatcher
(`surge._core.WsgiDispatch`) runs on the event loop: it builds the environ
(cheap, no I/O) and returns a `WsgiCycle`, which runs the app in the plan's
bounded thread pool and is written by the connection in request order. The loop
never waits on the app.
"""

from __future__ import annotations

import asyncio
import sys
from typing import TYPE_CHECKING, Any

from surge._core import WsgiDispatch, WsgiWakeups
from surge.http.app import catch_all_plan
from surge.http.config import DEFAULT_THREADS, Limits
from surge.http.plan import Plan

from .cycle import _NO_BODY, WSGIApp, WsgiCycle, body_input
from .input import FileWrapper
from .pool import WsgiPool

if TYPE_CHECKING:
    from surge.http.protocol import HttpProtocol


class WsgiApp:
    """Serves the WSGI callable `app` (mounted at `root_path`) in `threads` threads."""

    def __init__(
        self,
        app: WSGIApp,
        *,
        root_path: str = "",
        threads: int = DEFAULT_THREADS,
        workers: int = 1,
        limits: Limits | None = None,
        debug: bool = False,
    ) -> None:
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        self.app = app
        self.root_path = root_path.rstrip("/")
        self.threads = threads
        self.workers = workers
        self.limits = limits or Limits()
        self.debug = debug
        self._plan: Plan | None = None
        self._pool = WsgiPool(threads)
        self._wakeups: WsgiWakeups | None = None
        # The environ's constant part, copied into every request's environ.
        self._base: dict[str, Any] = {
            "SCRIPT_NAME": _bytes_as_str(self.root_path),
            "wsgi.version": (1, 0),
            "wsgi.errors": sys.stderr,
            "wsgi.multithread": True,
            "wsgi.multiprocess": workers > 1,
            "wsgi.run_once": False,
            "wsgi.file_wrapper": FileWrapper,
            # The body's end is signalled by read() returning b"" even without
            # CONTENT_LENGTH (chunked requests): werkzeug and gunicorn use this key.
            "wsgi.input_terminated": True,
        }

    def freeze(self) -> Plan:
        """The serving plan: one catch-all streaming route for every method."""
        if self._plan is None:
            self._plan = catch_all_plan(
                None,
                self.limits,
                # Native (`surge._core.WsgiDispatch`): builds the environ, makes
                # the cycle and submits it; its `dispatch_read` takes the usual
                # read (one request, nothing queued) from the protocol whole.
                dispatch=WsgiDispatch(
                    owner=self,
                    app=self.app,
                    cycle_type=WsgiCycle,
                    submit=self._pool.submit,
                    no_body=_NO_BODY,
                    body_input=body_input,
                    high_water=self.limits.write_high_water,
                ),
                debug=self.debug,
                executor=self._pool,
            )
        return self._plan

    def _connection_data(self, conn: HttpProtocol) -> tuple[dict[str, Any], WsgiWakeups]:
        """What every request of a connection shares: the environ's constant part,
        and its loop's `Wakeups` (looked up once: `asyncio.get_running_loop()`
        makes a getpid() system call each time on Python 3.11)."""
        loop = asyncio.get_running_loop()
        wakeups = self._wakeups
        if wakeups is None or wakeups.loop is not loop:
            wakeups = self._wakeups = WsgiWakeups(loop)
        return {**self._base, **_connection_environ(conn)}, wakeups


def _connection_environ(conn: HttpProtocol) -> dict[str, Any]:
    """The environ keys that are the same for every request of a connection."""
    scheme = "https" if conn.extra_info("sslcontext") is not None else "http"
    out: dict[str, Any] = {"wsgi.url_scheme": scheme}
    sock = conn.extra_info("sockname")
    if isinstance(sock, tuple) and len(sock) >= 2:
        out["SERVER_NAME"], out["SERVER_PORT"] = str(sock[0]), str(sock[1])
    else:  # a Unix socket: no port to give
        out["SERVER_NAME"], out["SERVER_PORT"] = str(sock or "localhost"), ""
    peer = conn.extra_info("peername")
    if isinstance(peer, tuple) and len(peer) >= 2:
        out["REMOTE_ADDR"], out["REMOTE_PORT"] = str(peer[0]), str(peer[1])
    else:
        out["REMOTE_ADDR"] = ""
    return out


def _bytes_as_str(text: str) -> str:
    """A str as PEP 3333's "bytes as str": its UTF-8 bytes, decoded as latin-1."""
    return text.encode().decode("latin-1")
