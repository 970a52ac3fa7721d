"""The ASGI lifespan protocol: `lifespan.startup` before serving, `lifespan.shutdown` after.

Modes (uvicorn's): ``on`` runs it and fails startup when the app does not
support it; ``auto`` runs it but carries on when the app raises before
answering (many apps do not speak lifespan); ``off`` skips it. In every mode
that runs it, `lifespan.startup.failed` fails startup. The `state` dict the
app fills is copied into every request's scope.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from surge.serve.errors import StartupError

from .cycle import ASGIApp, Message

log = logging.getLogger("surge.asgi")

MODES = ("auto", "on", "off")


class LifespanError(StartupError):
    """The app's lifespan startup failed: surge does not start serving."""


class Lifespan:
    """Runs one app's lifespan task (see the module docstring)."""

    def __init__(self, app: ASGIApp, mode: str, state: dict[str, Any]) -> None:
        if mode not in MODES:
            raise ValueError(f"lifespan must be one of {', '.join(MODES)}, got {mode!r}")
        self.app = app
        self.mode = mode
        self.state = state
        self._inbox: asyncio.Queue[Message] = asyncio.Queue()
        self._started = asyncio.Event()
        self._stopped = asyncio.Event()
        self._failed: str | None = None
        self._error: BaseException | None = None
        self._task: asyncio.Task[None] | None = None

    async def startup(self) -> None:
        """Sends `lifespan.startup` and waits for the answer; raises LifespanError on failure."""
        if self.mode == "off":
            return
        scope = {
            "type": "lifespan",
            "asgi": {"version": "3.0", "spec_version": "2.0"},
            "state": self.state,
        }
        self._task = asyncio.get_running_loop().create_task(self._main(scope))
        await self._inbox.put({"type": "lifespan.startup"})
        await self._started.wait()
        if self._failed is not None:
            raise LifespanError(f"ASGI lifespan startup failed: {self._failed or 'no message'}")
        if self._error is not None and self.mode == "on":
            error = self._error
            raise LifespanError(
                "ASGI lifespan startup failed: the app raised "
                f"{type(error).__name__}: {error} (--lifespan on)"
            )

    async def shutdown(self) -> None:
        """Sends `lifespan.shutdown` and waits for the app to finish it."""
        if self._task is None or self._task.done():
            return
        await self._inbox.put({"type": "lifespan.shutdown"})
        await self._stopped.wait()
        if self._failed is not None:
            log.error("ASGI lifespan shutdown failed: %s", self._failed)

    async def _main(self, scope: dict[str, Any]) -> None:
        try:
            await self.app(scope, self._receive, self._send)
        except BaseException as exc:
            self._error = exc
            if self._started.is_set() or self.mode == "on":
                log.error("Exception in the ASGI 'lifespan' protocol", exc_info=exc)
            else:
                log.info("ASGI 'lifespan' protocol appears unsupported (%s)", type(exc).__name__)
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            self._started.set()
            self._stopped.set()

    async def _receive(self) -> Message:
        return await self._inbox.get()

    async def _send(self, message: Message) -> None:
        kind = message["type"]
        if kind == "lifespan.startup.complete":
            self._started.set()
        elif kind == "lifespan.startup.failed":
            self._failed = str(message.get("message", ""))
            self._started.set()
        elif kind == "lifespan.shutdown.complete":
            self._stopped.set()
        elif kind == "lifespan.shutdown.failed":
            self._failed = str(message.get("message", ""))
            self._stopped.set()
        else:
            raise RuntimeError(f"unexpected ASGI lifespan message {kind!r}")
