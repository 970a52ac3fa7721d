"""A scripted IPROTO server of Tarantool >= 2.10, for what Debian's 2.6 cannot run.

It speaks the protocol's bytes as the IPROTO reference gives them (greeting,
IPROTO_ID, BEGIN/COMMIT/ROLLBACK in streams, WATCH/UNWATCH/EVENT, the
`box.shutdown` event) with its own small MessagePack, so the driver is not
checked against its own codec. Its "database" is one space (id 512) of tuples
by first field, with per-stream transactions buffered until COMMIT. It records
every request as (session, type, sync, stream id, body) for the tests to read.
This stands in for a live server only because none >= 2.10 can be installed here.
"""

from __future__ import annotations

import asyncio
import base64
import struct
from typing import Any

# -- a small MessagePack (enough for IPROTO) -----------------------------------------


def pack(v: Any) -> bytes:
    if v is None:
        return b"\xc0"
    if v is True:
        return b"\xc3"
    if v is False:
        return b"\xc2"
    if isinstance(v, int):
        if 0 <= v < 128:
            return bytes([v])
        if 0 <= v < 1 << 32:
            return b"\xce" + struct.pack(">I", v)
        if v >= 0:
            return b"\xcf" + struct.pack(">Q", v)
        return b"\xd3" + struct.pack(">q", v)
    if isinstance(v, float):
        return b"\xcb" + struct.pack(">d", v)
    if isinstance(v, str):
        b = v.encode()
        return (bytes([0xA0 | len(b)]) if len(b) < 32 else b"\xda" + struct.pack(">H", len(b))) + b
    if isinstance(v, bytes):
        return b"\xc4" + bytes([len(v)]) + v
    if isinstance(v, list | tuple):
        head = bytes([0x90 | len(v)]) if len(v) < 16 else b"\xdc" + struct.pack(">H", len(v))
        return head + b"".join(pack(x) for x in v)
    if isinstance(v, dict):
        head = bytes([0x80 | len(v)]) if len(v) < 16 else b"\xde" + struct.pack(">H", len(v))
        return head + b"".join(pack(k) + pack(x) for k, x in v.items())
    raise TypeError(type(v))


def unpack(b: bytes, p: int = 0) -> tuple[Any, int]:
    t = b[p]
    p += 1
    if t < 0x80:
        return t, p
    if t >= 0xE0:
        return t - 256, p
    if 0x80 <= t <= 0x8F:
        return _map(b, p, t & 0x0F)
    if 0x90 <= t <= 0x9F:
        return _arr(b, p, t & 0x0F)
    if 0xA0 <= t <= 0xBF:
        n = t & 0x1F
        return b[p : p + n].decode(), p + n
    simple = {0xC0: None, 0xC2: False, 0xC3: True}
    if t in simple:
        return simple[t], p
    fixed = {0xCC: ">B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q", 0xD0: ">b", 0xD1: ">h"}
    fixed |= {0xD2: ">i", 0xD3: ">q", 0xCA: ">f", 0xCB: ">d"}
    if t in fixed:
        size = struct.calcsize(fixed[t])
        return struct.unpack(fixed[t], b[p : p + size])[0], p + size
    if t in (0xD9, 0xDA, 0xDB, 0xC4, 0xC5, 0xC6):
        w = {0xD9: 1, 0xDA: 2, 0xDB: 4, 0xC4: 1, 0xC5: 2, 0xC6: 4}[t]
        n = int.from_bytes(b[p : p + w], "big")
        p += w
        raw = b[p : p + n]
        return (raw.decode() if t in (0xD9, 0xDA, 0xDB) else raw), p + n
    if t in (0xDC, 0xDD):
        w = 2 if t == 0xDC else 4
        return _arr(b, p + w, int.from_bytes(b[p : p + w], "big"))
    if t in (0xDE, 0xDF):
        w = 2 if t == 0xDE else 4
        return _map(b, p + w, int.from_bytes(b[p : p + w], "big"))
    raise ValueError(f"msgpack type {t:#x} not handled by the fake server")


def _arr(b: bytes, p: int, n: int) -> tuple[list, int]:
    out = []
    for _ in range(n):
        v, p = unpack(b, p)
        out.append(v)
    return out, p


def _map(b: bytes, p: int, n: int) -> tuple[dict, int]:
    out = {}
    for _ in range(n):
        k, p = unpack(b, p)
        out[k], p = unpack(b, p)
    return out, p


# -- IPROTO numbers, from the protocol reference -------------------------------------

SELECT, INSERT, CALL = 0x01, 0x02, 0x0A
BEGIN, COMMIT, ROLLBACK = 0x0E, 0x0F, 0x10
PING, ID, WATCH, UNWATCH, EVENT = 0x40, 0x49, 0x4A, 0x4B, 0x4C
TYPE, SYNC, SCHEMA_VERSION, STREAM_ID = 0x00, 0x01, 0x05, 0x0A
SPACE_ID, KEY, TUPLE, FUNCTION_NAME = 0x10, 0x20, 0x21, 0x22
DATA, ERROR_24 = 0x30, 0x31
VERSION, FEATURES, TIMEOUT, EVENT_KEY, EVENT_DATA, TXN_ISOLATION = range(0x54, 0x5A)
ER_UNKNOWN_REQUEST_TYPE = 48
ER_ACTIVE_TRANSACTION = 79
SPACE = 512


def frame(header: dict, body: dict) -> bytes:
    payload = pack(header) + pack(body)
    return b"\xce" + struct.pack(">I", len(payload)) + payload


class Session:
    def __init__(self, server: FakeTarantool, no: int, writer: asyncio.StreamWriter) -> None:
        self.server, self.no, self.writer = server, no, writer
        self.sent_version: dict[str, int] = {}  # watched key -> version last sent
        self.armed: dict[str, bool] = {}
        self.tx: dict[int, dict[int, list]] = {}  # stream id -> uncommitted tuples
        self.closed = asyncio.Event()

    def reply(self, sync: int, body: dict, code: int = 0) -> None:
        self.writer.write(frame({TYPE: code, SYNC: sync, SCHEMA_VERSION: 80}, body))

    def error(self, sync: int, code: int, msg: str) -> None:
        self.reply(sync, {ERROR_24: msg}, 0x8000 | code)

    def notify(self, key: str) -> None:
        body: dict = {EVENT_KEY: key}
        if self.server.values.get(key) is not None:
            body[EVENT_DATA] = self.server.values[key]
        self.writer.write(frame({TYPE: EVENT, SYNC: 0}, body))
        self.sent_version[key] = self.server.versions.get(key, 0)
        self.armed[key] = False

    def watch(self, key: str) -> None:
        if (
            key not in self.sent_version
            or self.server.versions.get(key, 0) > self.sent_version[key]
        ):
            self.notify(key)  # unconditionally after registration; or the missed change
        else:
            self.armed[key] = True


class FakeTarantool:
    """`await FakeTarantool().start()`; `.port`, `.requests`, `.broadcast`, `.shutdown`."""

    def __init__(self, *, supports_id: bool = True, features: tuple = (0, 1, 2, 3)) -> None:
        self.supports_id = supports_id
        self.features = list(features)
        self.requests: list[tuple[int, int, int, int, dict]] = []
        self.raw: list[tuple[int, bytes]] = []
        self.sessions: list[Session] = []
        self.store: dict[int, list] = {}
        self.values: dict[str, Any] = {}
        self.versions: dict[str, int] = {}
        self.port = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task] = set()

    async def start(self) -> FakeTarantool:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        for s in self.sessions:
            s.writer.transport.abort()
        if self._server is not None:
            self._server.close()
        for t in list(self._tasks):
            t.cancel()

    def of(self, code: int) -> list[tuple[int, int, int, int, dict]]:
        """Recorded requests of one type."""
        return [r for r in self.requests if r[1] == code]

    def broadcast(self, key: str, value: Any) -> None:
        """`box.broadcast(key, value)`: notify every armed watcher of the key."""
        self.values[key] = value
        self.versions[key] = self.versions.get(key, 0) + 1
        for s in self.sessions:
            if s.armed.get(key) and not s.closed.is_set():
                s.notify(key)

    async def shutdown(self, timeout: float = 3.0) -> None:
        """Graceful shutdown as 2.10+ does it: broadcast box.shutdown = true, then wait
        for the clients that watch it to close their connections."""
        watching = [s for s in self.sessions if "box.shutdown" in s.sent_version]
        self.broadcast("box.shutdown", True)
        await asyncio.wait_for(asyncio.gather(*(s.closed.wait() for s in watching)), timeout)
        self.values.pop("box.shutdown")  # the "restarted" server is not shutting down

    async def _serve(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        s = Session(self, len(self.sessions) + 1, w)
        self.sessions.append(s)
        line1 = b"Tarantool 2.11.1 (Binary) 7d6e5b2c-0000-4000-8000-000000000001"
        salt = base64.b64encode(bytes(range(32)))
        w.write(line1.ljust(63) + b"\n" + salt.ljust(63) + b"\n")
        try:
            while True:
                head = await r.readexactly(5)
                assert head[0] == 0xCE, head
                payload = await r.readexactly(struct.unpack(">I", head[1:])[0])
                self.raw.append((s.no, head + payload))
                header, p = unpack(payload)
                body = unpack(payload, p)[0] if p < len(payload) else {}
                code, sync, sid = header[TYPE], header[SYNC], header.get(STREAM_ID, 0)
                self.requests.append((s.no, code, sync, sid, body))
                task = asyncio.ensure_future(self._handle(s, code, sync, sid, body))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            s.closed.set()
            w.close()

    async def _handle(self, s: Session, code: int, sync: int, sid: int, body: dict) -> None:
        if code == ID:
            if not self.supports_id:
                s.error(sync, ER_UNKNOWN_REQUEST_TYPE, "Unknown request type 73")
            else:
                s.reply(sync, {VERSION: 3, FEATURES: self.features})
        elif code == WATCH:
            s.watch(body[EVENT_KEY])
        elif code == UNWATCH:
            s.sent_version.pop(body[EVENT_KEY], None)
            s.armed.pop(body[EVENT_KEY], None)
        elif code == PING:
            s.reply(sync, {})
        elif code == BEGIN:
            if sid in s.tx:
                s.error(
                    sync,
                    ER_ACTIVE_TRANSACTION,
                    "Operation is not permitted when there is an active transaction",
                )
            else:
                s.tx[sid] = {}
                s.reply(sync, {})
        elif code in (COMMIT, ROLLBACK):
            writes = s.tx.pop(sid, {})
            if code == COMMIT:
                self.store.update(writes)
            s.reply(sync, {})
        elif code == SELECT:
            if body[SPACE_ID] != SPACE:
                s.reply(sync, {DATA: []})  # empty _vspace / _vindex: no names
                return
            k = body[KEY][0]
            view = {**self.store, **s.tx.get(sid, {})}
            s.reply(sync, {DATA: [view[k]] if k in view else []})
        elif code == INSERT:
            t = body[TUPLE]
            s.tx.get(sid, self.store)[t[0]] = t
            s.reply(sync, {DATA: [t]})
        elif code == CALL:
            fn, args = body[FUNCTION_NAME], body[TUPLE]
            if fn == "slow":
                await asyncio.sleep(args[0])
                args = args[1:]
            s.reply(sync, {DATA: list(args)})
        else:
            s.error(sync, ER_UNKNOWN_REQUEST_TYPE, f"Unknown request type {code}")
