"""Watchers: server-side state changes (`box.broadcast`) delivered to callbacks.

Theory of operation (IPROTO_WATCH, Tarantool >= 2.10): the client sends
IPROTO_WATCH with a key; the server answers nothing, but sends an IPROTO_EVENT
with the key's current value at once and then whenever the value changes -
provided the client acknowledged the previous event by sending IPROTO_WATCH for
that key again. So every event is answered with a WATCH (the re-arm), in the
same write as the rest of that loop iteration. The protocol allows one
registration per key and connection: several watchers of one key share it, and
IPROTO_UNWATCH goes out when the last one leaves. A new connection knows no
watches, so the handshake sends WATCH for every key again (each callback then
hears the key's current value once more, as net.box does).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

from surge.tarantool.faults import log

#: A callback gets the key and its value (None when the key has none).
WatchCallback = Callable[[str, Any], Any]


class Watcher:
    """One `watch` registration; `unregister()` stops its callbacks."""

    __slots__ = ("_registry", "callback", "key")

    def __init__(self, registry: Watches, key: str, callback: WatchCallback) -> None:
        self._registry: Watches | None = registry
        self.key = key
        self.callback = callback

    @property
    def active(self) -> bool:
        """False once unregistered."""
        return self._registry is not None

    def unregister(self) -> None:
        """Stop watching; the key's IPROTO_UNWATCH is sent when no watcher is left."""
        if self._registry is not None:
            self._registry.remove(self)
            self._registry = None

    def __repr__(self) -> str:
        return f"<Watcher key={self.key!r} active={self.active}>"


class Watches:
    """Watchers of one connection, by key; sends WATCH/UNWATCH through `send`."""

    def __init__(self, send: Callable[[str, bool], bool]) -> None:
        # send(key, watch) puts IPROTO_WATCH (or UNWATCH) on the wire; False when offline.
        self._send = send
        self.by_key: dict[str, list[Watcher]] = {}
        self.last: dict[str, Any] = {}
        self._tasks: set[asyncio.Task] = set()

    def add(self, key: str, callback: WatchCallback) -> Watcher:
        """Register `callback` for `key` (sends WATCH if the key is new here)."""
        w = Watcher(self, key, callback)
        watchers = self.by_key.get(key)
        if watchers is None:
            self.by_key[key] = [w]
            self._send(key, True)
        else:
            watchers.append(w)
            if key in self.last:
                # The server will not repeat the value for a key already watched.
                asyncio.get_running_loop().call_soon(self._call, w, key, self.last[key])
        return w

    def remove(self, w: Watcher) -> None:
        """Forget a watcher; UNWATCH the key when it was the last."""
        watchers = self.by_key.get(w.key)
        if watchers is None or w not in watchers:
            return
        watchers.remove(w)
        if not watchers:
            del self.by_key[w.key]
            self.last.pop(w.key, None)
            self._send(w.key, False)

    def on_event(self, key: str, value: Any) -> None:
        """An IPROTO_EVENT arrived: run the key's callbacks, then re-arm the key."""
        watchers = self.by_key.get(key)
        if watchers is None:
            return  # unwatched meanwhile
        self.last[key] = value
        for w in list(watchers):
            self._call(w, key, value)
        if key in self.by_key:
            self._send(key, True)

    def resubscribe(self) -> None:
        """Register every key on a fresh connection (from the handshake)."""
        self.last.clear()
        for key in self.by_key:
            self._send(key, True)

    def _call(self, w: Watcher, key: str, value: Any) -> None:
        if not w.active:
            return
        try:
            r = w.callback(key, value)
        except Exception:
            log.exception("watch callback for %r raised", key)
            return
        if inspect.isawaitable(r):
            task = asyncio.ensure_future(r)
            self._tasks.add(task)
            task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("watch callback raised", exc_info=task.exception())
