"""The shared pipelined client connection, for every driver.

Theory of operation
-------------------
A driver supplies a *codec* (sans-IO, usually in Rust) and a few hooks. A call
encodes its request straight into the codec's write buffer and gets a future
keyed by a request id. The first call in an event-loop iteration schedules one
flush with ``loop.call_soon``, so every request made in that iteration leaves in
ONE ``transport.write`` (and a flush happens early when the buffer passes
``FLUSH_SIZE``, and once, with half of the requests the last read's replies
woke up, when nothing is on the wire: see `EARLY_FLUSH`). While replies are
due after a write or a read, the loop polls rather than sleeps for up to
`SPIN_WINDOW` (waking a sleeping process costs more than the polling). Every
read hands the bytes to ``codec.feed``, which parses all complete replies at
once and returns ``(id, ok, value)`` triples (or ``EngineReader.feed_resolve``
for the native codecs, which resolves the plain ones itself); futures are
resolved in that same pass. Codecs that match replies in order (PostgreSQL,
Redis) simply number their requests and replies; Tarantool matches by sync id.
Replies with id ``None`` are out of band (greetings, pushes, watcher events).

Bounds: in-flight requests and unflushed bytes are limited (callers wait, they
do not fail); ``pause_writing`` holds new requests back; each request may carry a
timeout (one timer per connection over a heap of deadlines); connecting has a
timeout, within which refused attempts are retried with backoff unless
``retry_connect`` is false (a pool that opens connections on demand wants the
first refusal at once). A cancelled or timed-out request stays in the server's queue, so its id
stays known until its reply arrives and is dropped; the stream stays in sync.

Graceful close (a server's shutdown notice): `drain` stops new requests from
going out on the current connection (they wait, as while connecting), lets the
ones in flight finish (bounded by ``DRAIN_TIMEOUT``), closes it and reconnects.
Requests that must stay on one connection (a Tarantool stream's transaction)
use `request_pinned` with the connection's `generation`: they still go out while
draining and fail at once if that connection is gone.

The object may be created outside a running loop: the first request connects.
When the connection is lost, every pending request fails at once with
`ConnectionLostError` (and the ``on_lost`` hook hears of it, for state kept
beyond single replies, such as a streamed body); the next request reconnects
(with backoff). When the peer closes its side, a codec with ``feed_eof`` may
finish a reply that the end of the stream completes. A connection that must
stay up with nothing pending (a LISTEN, a pub/sub subscription: ``keep_connected``
says so) reconnects by itself, with backoff, until it is closed.

Addresses and TLS
-----------------
A connection has one or more `Endpoint`s (a TCP host and port or a Unix socket,
each with its own `Tls` settings), tried in order on every (re)connect, so a
reconnect after a failover walks the list again. An endpoint that cannot be
reached, fails its TLS handshake or is turned down by the driver's ``on_connect``
hook (`EndpointRejectedError`: a standby where a primary is wanted) makes way for
the next one; an address that could not be reached at all is not tried again in
that round. Other handshake errors (a wrong password) end the connect at once.

TLS: either from the first byte, or after a plaintext request the server answers
with one byte (PostgreSQL's SSLRequest: ``S`` yes, ``N`` no, then
``loop.start_tls``); a byte more before the handshake is refused (a man in the
middle could have injected it). The engine writes to the TLS transport exactly
as to a plain one, so requests still leave in one write per loop iteration (the
TLS layer turns that write into records and one socket write), and the liveness
probe opens its side connection the same way, with the same ``ssl.SSLContext``
(`Endpoint`, `Tls` and the opening steps live in `surge.endpoint`).

Liveness (a dead path is found without any timeout set)
-------------------------------------------------------
Two layers, both on by default:

* TCP keepalive (`TCP_KEEPALIVE_IDLE` + `TCP_KEEPALIVE_INTERVAL` x
  `TCP_KEEPALIVE_COUNT` = 25 s) and ``TCP_USER_TIMEOUT`` (`TCP_USER_TIMEOUT`,
  25 s): the kernel drops a flow whose peer stopped answering at the TCP level
  (a NAT that forgot the flow, a host that vanished), idle or not.
* An application-level watchdog (`Liveness`), which also finds what TCP cannot
  see (a proxy or load balancer that accepts and then forwards nothing, a hung
  server process behind a live kernel). While requests are pending (or the
  connection keeps itself connected) and nothing has arrived for ``interval``
  seconds, it sends the protocol's in-band ping (Redis PING, Tarantool
  IPROTO_PING, PostgreSQL Sync; HTTP has none). If nothing arrives within
  ``timeout``, it probes the server on a NEW connection (a greeting, a PING, an
  SSLRequest, ``OPTIONS *``): in-order protocols answer the ping only after the
  requests in front of it, so a long query or a blocking command would look
  dead; the probe tells "busy" (it answers) from "dead" (it does not). A path
  found dead fails every pending caller with `ConnectionDeadError` at once and
  the connection is dropped (and reconnected). Worst case: ``interval +
  2 x timeout`` = 20 s by default, within the 30 s the drivers promise.
"""

from __future__ import annotations

import asyncio
import asyncio.selector_events
import contextlib
import functools
import heapq
import logging
import socket
import ssl
import time
import weakref
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from surge._core import EngineReader, EngineState
from surge.endpoint import Endpoint, NativeTlsTransport, Upgradable, connect_error, start_tls
from surge.endpoint import Tls as Tls  # re-exported: drivers build endpoints from here
from surge.errors import (
    ClosedError,
    ConnectError,
    ConnectionDeadError,
    ConnectionLostError,
    ProtocolError,
    RequestTimeoutError,
    SurgeError,
)

#: Flush before the end of the loop iteration when this many bytes are buffered.
FLUSH_SIZE = 1 << 20
#: When requests are buffered and none is on the wire (the server has nothing to
#: do), the first ones leave at once rather than at the end of the loop iteration:
#: the server starts on them while the iteration's other callers are still
#: encoding, so client and server work side by side instead of in turn. How many:
#: half of the replies the last read brought (the callers it woke are the ones
#: sending now), from `EARLY_FLUSH` (also the count before the first read) to
#: `EARLY_FLUSH_MAX`. An iteration thus makes at most two writes, and a few
#: callers settle into two equal groups that take turns, one on the wire while
#: the other is encoded, each group's requests in one write and its replies in
#: one read. Tarantool, 1.5 KB tuples, uvloop, A/B against a fixed 6: 10
#: coroutines (seed 000) +17-47 % ops/s and 9.2 -> 7.4 us of client CPU per
#: request (asyncio +53-115 %, 14.6 -> 9.0 us: the fixed split kept falling back
#: to all replies in one read, then client and server in turn); 50 coroutines
#: +25-74 %; 1 and 1000 unchanged within noise. With one caller nothing leaves
#: early (one write per iteration, as without this). Letting the first ones leave
#: early also while a few requests are still on the wire (so each group splits in
#: two and a server core that halts between groups gets work sooner) was measured
#: and dropped: 10 coroutines, uvloop, 5 alternating rounds with asynctnt as a
#: third side, "few" = 6 gave 0.93x ops/s on a quiet machine (1.57x vs 1.46x
#: asynctnt per round, client 7.6 -> 8.3 and server 4.8 -> 5.4 us CPU per request)
#: and 0.96x with the server's core kept awake; 0.83x on a busy one (0.20 -> 0.32
#: writes and 4.8 -> 6.0 us server CPU per request).
EARLY_FLUSH = 2
#: The cap: with hundreds of callers a half (up to 81 replies per 256 KB read)
#: made the groups break up into small ones, more writes and reads per request
#: (1000 coroutines: 0.63-0.83x ops/s, 4.2 -> 5.6 us per request).
EARLY_FLUSH_MAX = 32
#: Busy polling. After a write, while requests are pending, the connection keeps
#: the event loop polling its sockets instead of sleeping (the loop's `_Poller`, a
#: callback that queues itself once per loop iteration for all of the loop's
#: connections that poll), for at most this many seconds since the last
#: write or read: a reply that comes within it is read at once. A read that leaves
#: replies due starts polling too: a large reply comes in pieces (PostgreSQL
#: sends 8 KB at a time), and a client that decodes a piece faster than the next
#: comes would otherwise sleep, and pay the wake-up, at almost every piece.
#: Measured (old/new alternated, 3 rounds, uvloop, load 6-9): PostgreSQL with 1000
#: coroutines on one connection, bytea 1.19x and int_array 1.10x queries/s,
#: voluntary switches 3.9 -> 0.0 per query, backend CPU per query -9 to -16 % (a
#: backend that wakes a sleeping reader pays for the wake-up); Redis GET of 100 KB
#: at 10 coroutines 1.29x (client CPU 65 -> 51 us per GET), of 64 B 1.00x;
#: Tarantool 10 coroutines 1.08x.
#: Why: on a VM an idle core halts, and waking a process that sleeps on another
#: core costs 10-20 us each way (a blocking ping-pong between two cores here: 26-46
#: us per round trip, 6 us when the reader spins). At 10 coroutines each round trip
#: of a group of requests paid it on both sides, and throughput hung on it, not on
#: CPU. Tarantool, 1.5 KB tuples, alternating A/B (benchmarks.tarantool.ab, 5
#: rounds, medians): 10 coroutines uvloop 84-95k -> 146k ops/s, client 8.0-8.3 ->
#: 5.9-6.3 us and server 7.8 -> 5.6-5.9 us CPU per request (sleeping and being
#: woken cost both sides more than the polling does); asyncio 1.07-1.25x (its
#: client is bound by its own CPU); 1 coroutine 1.9x; 1000
#: coroutines unchanged (the loop never idles there); Redis GET/SET at 10
#: coroutines 1.4-1.5x. 100 us beat 50 and 30 us (1 coroutine: a round trip here
#: is 50-70 us).
#: A window that ends with no read in it and replies still out (a server slower
#: than the window, between replies or between the pieces of one, or one that
#: shares the client's core and gets no CPU while the client polls) turns polling
#: off for the next 2, 4, ... `SPIN_BACKOFF` writes or reads that would start it,
#: until a poll sees bytes come: a slow server costs at most one window per
#: `SPIN_BACKOFF` of them, and with the server on the client's core throughput
#: stays as without polling (0.96-1.02x; without the backoff 0.4-0.5x). Yielding
#: the core on every poll (``sched_yield``) was tried for that case and dropped:
#: on a loaded machine it handed the client's core to other processes (0.7-0.8x).
#: 0: off.
SPIN_WINDOW = 100e-6
#: The longest run of writes (or reads) that do not poll after a wasted window.
SPIN_BACKOFF = 64
#: Read pacing, for connections that ask for it (``read_pacing``: PostgreSQL's).
#: A server that streams a large reply writes it in small pieces (PostgreSQL: 8 KB
#: per send), and a client that reads each piece as soon as it comes acknowledges
#: every few of them: the server's kernel sends one TCP segment per piece and takes
#: an ACK back for every few, on the server's core. So when a read brings less than
#: `PACE_READ` bytes and at most one finished reply while more than `PACE_DEPTH`
#: replies are due (a deep pipeline of large replies), the connection stops reading
#: for `PACE_DELAY` seconds (the event loops' timer floor, 1 ms): the reply keeps
#: coming meanwhile, the server's pieces leave in larger segments, and the next read
#: takes them at once. Many small replies (SELECT 1) finish several per read and
#: are never paced; a pool's connections have few replies due and are not either.
#: PostgreSQL, 1000 coroutines on one connection, off/on alternated (3 rounds
#: per loop, medians, load 4-7): 100 x 1 KB bytea uvloop 10.2k -> 12.3k
#: queries/s, backend CPU per query 96 -> 76 us; asyncio 8.1k -> 14.5k, 121 -> 67
#: us; TCP segments per query 11-13 -> 5-8, ACKs 5-6.5 -> 0.6-1.0. pg_type,
#: int_array, generate_series within +-5 %; SELECT 1 146-170k -> 177-283k.
#: The decision is the native reader's (`surge._core.EngineReader.set_pacing`),
#: made from what it knows of each read: no Python call is added to any read (it
#: was a Python closure around ``buffer_updated``). Callgrind, client
#: instructions per query, uvloop: SELECT 1 on a pool of 10 79.8k -> 79.5k, 1000
#: coroutines on one connection 29.5k -> 29.1k; generate_series(1000) there
#: 775k -> 762k.
PACE_DELAY = 1e-3
PACE_READ = 128 * 1024
PACE_DEPTH = 64
#: Pace reads over native TLS too (`NATIVE_TLS_READ`; the reader then counts the
#: bytes of TLS records, not of plaintext). Replies stay intact with it
#: (tests/postgres/test_pg_read_path.py). Measured on 100 x 1 KB bytea replies,
#: 1000 coroutines on one connection, sslmode=require, uvloop, off/on alternated
#: (5 rounds, medians, quiet machine): 5,870 -> 7,105 queries/s, client CPU per
#: query 170 -> 102 us, server 169 -> 139 us. False turns it off over TLS.
PACE_TLS = True
#: Bytes asked of the socket per read on asyncio's own (selector) transports. Their
#: default, 256 KiB, is above glibc's mmap threshold (128 KiB), so every read
#: mapped a new buffer, shrank it with mremap and unmapped it: three more syscalls
#: and fresh pages to fault in per read. Tarantool, 10 coroutines, asyncio:
#: client system CPU 3.0-3.6 -> 1.4-1.7 s per 400k requests, +30-80 % ops/s;
#: 1000 coroutines unchanged within noise (reads there are as large as the cap
#: either way). uvloop reads into one buffer of its own and is not concerned.
READ_SIZE = 64 * 1024
#: Plaintext connections whose codec has a native read path (Tarantool's,
#: Redis's and PostgreSQL's) read through `surge._core.EngineReader`: the protocol is a buffered
#: one, the loop reads into the reader's buffer (no bytes object per read) and
#: ``buffer_updated`` parses the read, resolves its futures and does the engine's
#: bookkeeping in one native call, Python only for error replies, out-of-band
#: messages and the driver's hook when it has work (a schema reload due, a broken
#: stream). False: every read through `PipelinedConnection._on_data` (for A/B
#: measurements). Tarantool, 10 coroutines, uvloop: see the commits that added it.
NATIVE_READ = True
#: The same over native TLS (rustls, `surge.endpoint.NativeTlsTransport`), for the
#: codecs that decrypt into their own buffer (``feed_tls``: PostgreSQL's): once the
#: handshake is done the connection takes a buffered protocol whose reader
#: decrypts each read and goes on as above. False: TLS reads through
#: `_StreamProtocol` and `_on_tls_data` (for A/B measurements). PostgreSQL over
#: TLS, a pool of 10, uvloop, callgrind (polling off) client instructions per
#: query: generate_series(1000) 1.30M -> 0.85M, 100 x 1 KB bytea 752k -> 645k,
#: pg_type 2.42M -> 2.37M.
NATIVE_TLS_READ = True
#: Default cap on requests awaiting a reply on one connection (more callers wait).
DEFAULT_MAX_IN_FLIGHT = 65536
#: Default cap on bytes written but not yet taken by the kernel (more callers wait).
DEFAULT_MAX_IN_FLIGHT_BYTES = 64 << 20
#: Connect (and handshake) timeout in seconds.
DEFAULT_CONNECT_TIMEOUT = 5.0
#: First and largest delay between reconnect attempts, in seconds.
RECONNECT_DELAY_MIN = 0.05
RECONNECT_DELAY_MAX = 2.0
#: Longest wait for in-flight work to finish when draining before a graceful close
#: (Tarantool's own default ``on_shutdown`` timeout is 3 s too).
DRAIN_TIMEOUT = 3.0
#: Liveness watchdog: seconds of silence (with requests pending) before the in-band
#: ping. 10 s: far above any healthy reply gap on a pipelined connection (replies
#: stream back as the server works), short enough that the whole check ends
#: within 30 s.
DEFAULT_LIVENESS_INTERVAL = 10.0
#: Liveness watchdog: seconds to wait for the ping's reply, then for the probe's.
DEFAULT_LIVENESS_TIMEOUT = 5.0
#: TCP keepalive: idle seconds before the first probe, seconds between probes,
#: probes unanswered before the kernel drops the flow (10 + 5 x 3 = 25 s). Linux's
#: defaults (7200 + 75 x 9 s) find a dead peer after two hours and 11 minutes.
TCP_KEEPALIVE_IDLE = 10
TCP_KEEPALIVE_INTERVAL = 5
TCP_KEEPALIVE_COUNT = 3
#: TCP_USER_TIMEOUT in milliseconds: sent data unacknowledged this long drops the
#: flow (keepalive does not probe while data waits for an ACK; Linux retransmits
#: for ~15 minutes by default).
TCP_USER_TIMEOUT = 25_000

log = logging.getLogger("surge.engine")

#: asyncio's own socket transport, whose read size `READ_SIZE` sets (its attribute
#: ``max_size``; a class without it reads as it does).
_SELECTOR_TRANSPORT: type = getattr(
    asyncio.selector_events, "_SelectorSocketTransport", None
) or type(None)

_DEFAULT: Any = object()


class _Poller:
    """Keeps one event loop polling (see `SPIN_WINDOW`) for all of its connections
    that wait for replies: ONE callback queued per loop iteration, however many
    connections poll, which asks each of them (`PipelinedConnection._spin`) with
    one clock read. A ready callback is what makes the loop poll its sockets
    instead of sleeping; one is enough for every socket. A pool of 10 connections
    used to queue 10 callbacks and read the clock 10 times per iteration.
    Callgrind, 10 connections polling, instructions per loop iteration: uvloop
    37.1k -> 18.9k, asyncio 109k -> 40k; one connection 7.3k -> 8.4k (the
    poller's own call). PostgreSQL at 10 connections, A/B alternated on a loaded
    machine: queries/s and server CPU per query unchanged within the noise (the
    backends, not the client, set the rate there).
    The loop has a window of its own (`until`), renewed by a read on any of its
    connections: a pool's connections wait on one server, whose replies to
    them all come more often than any one's (generate_series at 10 connections:
    every ~150 us, each one's after ~1.5 ms). With windows per connection only,
    each outlasted its own and backed off, and the loop slept between replies;
    with the loop's, client voluntary switches per query 0.39 -> 0.06, 1.07x
    queries/s (asyncio, A/B alternated, 3 rounds). Polling costs the loop, not
    the connection: one more connection kept in the list costs only its check."""

    __slots__ = ("__weakref__", "_conns", "_loop", "_queued", "until")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._conns: list[PipelinedConnection] = []
        self._queued = False
        #: The loop's window: until when the last read on ANY of its connections
        #: keeps them all polling (see `PipelinedConnection._spin`).
        self.until = 0.0

    def add(self, conn: PipelinedConnection) -> None:
        """Poll for `conn` from the next loop iteration on, until its `_spin` says no."""
        self._conns.append(conn)
        if not self._queued:
            self._queued = True
            self._loop.call_soon(self._tick)

    def _tick(self) -> None:
        now = time.perf_counter()
        conns = self._conns
        done = False
        for c in conns:  # `_spin` never adds a connection: the list stays as it is
            if not c._spin(now):
                done = True
        if done:  # the list is rebuilt only when a connection stops polling
            self._conns = conns = [c for c in conns if c._spinning]
        if conns:
            self._loop.call_soon(self._tick)
        else:
            self._queued = False


#: The `_Poller` of each event loop (weak: a closed, dropped loop leaves it).
_POLLERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Poller] = (
    weakref.WeakKeyDictionary()
)


def _poller(loop: asyncio.AbstractEventLoop) -> _Poller:
    poller = _POLLERS.get(loop)
    if poller is None:
        poller = _POLLERS[loop] = _Poller(loop)
    return poller


#: Every live connection, read by `surge.stats` (weak: a dropped connection leaves it).
CONNECTIONS: weakref.WeakSet[PipelinedConnection] = weakref.WeakSet()
#: Set by `surge.tracing.trace_drivers`: called with every connection made after
#: that, to wrap its `request` and `request_pinned` in a CLIENT span each. Decided
#: once per connection: while None, requests carry no tracing check at all.
REQUEST_TRACER: Callable[[PipelinedConnection], None] | None = None


@dataclass(frozen=True, slots=True)
class Liveness:
    """How the engine finds a dead path (see the module's theory of operation)."""

    #: Seconds of silence with requests pending before the check starts.
    interval: float = DEFAULT_LIVENESS_INTERVAL
    #: Seconds to wait for the in-band ping's reply, then for the side probe's.
    timeout: float = DEFAULT_LIVENESS_TIMEOUT
    #: Encodes the protocol's in-band ping into the codec (returns its request id).
    ping: Callable[[], int] | None = None
    #: Bytes sent on a new connection to ask the server for any byte back (b"":
    #: the server speaks first, e.g. Tarantool's greeting); None: no probe.
    probe: bytes | None = None

    def bound(self) -> float:
        """The longest a dead path can go unnoticed with requests pending."""
        return self.interval + 2 * self.timeout


def liveness(
    interval: float | None,
    timeout: float,
    ping: Callable[[], int] | None = None,
    probe: bytes | None = None,
) -> Liveness | None:
    """The watchdog settings a driver passes on (None: ``interval`` None turns it off);
    checks the user's numbers."""
    if interval is None:
        return None
    if not interval > 0 or not timeout > 0:
        raise ValueError(
            f"liveness_interval and liveness_timeout must be > 0, not {interval!r}, {timeout!r}"
        )
    return Liveness(float(interval), float(timeout), ping, probe)


def set_tcp_keepalive(transport: asyncio.BaseTransport) -> None:
    """Turn on TCP keepalive with `TCP_KEEPALIVE_*` and `TCP_USER_TIMEOUT` (Linux
    names; where the platform lacks one, it is left at the system's default)."""
    sock = transport.get_extra_info("socket")
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return
    opts = [(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)]
    for name, value in (
        ("TCP_KEEPIDLE", TCP_KEEPALIVE_IDLE),
        ("TCP_KEEPINTVL", TCP_KEEPALIVE_INTERVAL),
        ("TCP_KEEPCNT", TCP_KEEPALIVE_COUNT),
        ("TCP_USER_TIMEOUT", TCP_USER_TIMEOUT),
    ):
        opt = getattr(socket, name, None)
        if opt is not None:
            opts.append((socket.IPPROTO_TCP, opt, value))
    for level, opt, value in opts:
        with contextlib.suppress(OSError):
            sock.setsockopt(level, opt, value)


class Codec(Protocol):
    """What a driver's codec offers the engine."""

    def feed(self, data: bytes) -> list[tuple[int | None, bool, Any]]: ...
    # Optional: ``feed_tls(session, data) -> (replies, out, error)`` (see
    # `PipelinedConnection._feed_tls`).
    def take(self) -> bytes: ...
    def pending(self) -> int: ...
    def reset(self) -> None: ...


class _EngineEvents:
    """The connection events every engine protocol hands to its engine, as long as
    it is the engine's current one: a protocol left behind (a connect cancelled or
    timed out after the transport came up) must never reach the next one's state."""

    __slots__ = ()
    _engine: PipelinedConnection
    transport: asyncio.Transport | None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment, misc]

    def eof_received(self) -> None:
        if self._engine._protocol is self:
            self._engine._on_eof()

    def pause_writing(self) -> None:
        if self._engine._protocol is self:
            self._engine._paused = True

    def resume_writing(self) -> None:
        if self._engine._protocol is self:
            self._engine._paused = False
            self._engine._wake_waiters()


class _StreamProtocol(_EngineEvents, Upgradable):
    """Hands a connection's bytes (decrypted, when it runs native TLS) to its engine."""

    __slots__ = ("_engine", "lost")

    def __init__(self, engine: PipelinedConnection) -> None:
        super().__init__()
        self._engine = engine
        #: The connection is gone (it may go before `create_connection` returns).
        self.lost = False

    def data_received(self, data: bytes) -> None:
        if self.tls is not None:
            eng = self._engine
            if eng._feed_tls is not None and self.reply is None and eng._protocol is self:
                eng._on_tls_data(self.tls, data)
                return
            plain = self.decrypt(data)
            if not plain:
                return
            data = plain
        self.plain_received(data)

    def plain_received(self, data: bytes) -> None:
        if self.reply is not None:
            reply, self.reply = self.reply, None
            if not reply.done():
                reply.set_result(data)
            return
        if self._engine._protocol is self:
            self._engine._on_data(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        if exc is None and self.tls is not None and self.tls.error is not None:
            exc = ConnectionLostError(f"TLS stream broken: {self.tls.error}")
        if self.reply is not None and not self.reply.done():
            self.reply.set_exception(
                ConnectionLostError(f"connection lost before the TLS answer: {exc!r}")
                if exc
                else ConnectionLostError("the server closed the connection before its TLS answer")
            )
        self._engine._on_lost(self, exc)


class _NativeReadProtocol(_EngineEvents, asyncio.BufferedProtocol):
    """A connection whose codec has a native read path (see `NATIVE_READ`): an
    `asyncio.BufferedProtocol` whose ``get_buffer`` and ``buffer_updated`` are an
    `EngineReader`'s, so the event loop reads straight into the reader's buffer and
    calls into the codec, and Python runs only for what is not a plain result. Its
    ``data_received`` (the same path) serves a loop that does not read into buffers.

    Not an `asyncio.Protocol`: uvloop takes a protocol for a buffered one only then.
    Never upgraded to TLS: a TLS connection opens with `_StreamProtocol` and, its
    handshake done over native TLS, takes one of these whose reader decrypts
    (``tls``: its `NativeTlsTransport`)."""

    __slots__ = (
        "_engine",
        "buffer_updated",
        "data_received",
        "get_buffer",
        "lost",
        "tls",
        "transport",
    )
    data_received: Callable[[bytes], None]

    def __init__(self, engine: PipelinedConnection) -> None:
        self._engine = engine
        self.lost = False
        self.transport = None
        self.tls: NativeTlsTransport | None = None

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        if exc is None and self.tls is not None and self.tls.error is not None:
            exc = ConnectionLostError(f"TLS stream broken: {self.tls.error}")
        self._engine._on_lost(self, exc)


_T = TypeVar("_T")


def started(coro: Coroutine[Any, Any, _T]) -> Awaitable[_T]:
    """``coro`` as a task running on the current loop, so what it does happens
    whether or not anyone awaits it; outside a running loop (``asyncio.run(conn.
    ping())`` builds it first), the coroutine itself."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return coro
    return loop.create_task(coro)


def chain(
    src: asyncio.Future, dst: asyncio.Future, convert: Callable[[Any], Any] | None = None
) -> None:
    """``dst`` gets ``src``'s outcome (its result through ``convert``); cancelling
    ``dst`` cancels ``src``. A future for a future, with no task between them."""

    def done(f: asyncio.Future) -> None:
        if dst.done():
            return
        if f.cancelled():
            dst.cancel()
        elif (e := f.exception()) is not None:
            dst.set_exception(e)
        else:
            dst.set_result(f.result() if convert is None else convert(f.result()))

    def cancelled(f: asyncio.Future) -> None:
        if f.cancelled():
            src.cancel()

    src.add_done_callback(done)
    dst.add_done_callback(cancelled)


class PipelinedConnection(EngineState):
    """One pipelined connection shared by any number of coroutines.

    The state read per request and per read (``_ready``, ``_pending``,
    ``_flush_scheduled``, ...) lives in `EngineState`'s slots, where the native
    lanes and reader reach it without a dict lookup; Python sees plain attributes.
    """

    def __init__(
        self,
        host: str,
        port: int,
        codec: Codec,
        *,
        on_connect: Callable[[PipelinedConnection], Awaitable[None]] | None = None,
        on_out_of_band: Callable[[Any], None] | None = None,
        make_error: Callable[[Any], BaseException] = lambda v: Exception(v),
        on_batch: Callable[[], None] | None = None,
        on_lost: Callable[[BaseException], None] | None = None,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        request_timeout: float | None = None,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        max_in_flight_bytes: int = DEFAULT_MAX_IN_FLIGHT_BYTES,
        reconnect: bool = True,
        retry_connect: bool = True,
        reconnect_on_request: bool = True,
        tcp_keepalive: bool = True,
        liveness: Liveness | None = None,
        keep_connected: Callable[[], bool] | None = None,
        endpoints: Sequence[Endpoint] | None = None,
        driver: str = "unknown",
        spin_window: float | None = None,
        read_pacing: bool = False,
    ) -> None:
        #: Which driver made this connection ("postgres", "redis", "tarantool",
        #: "http"): the ``driver`` label of its metrics (`surge.stats`).
        self.driver = driver
        #: Where to connect, tried in order on every connect (default: host:port).
        self.endpoints: tuple[Endpoint, ...] = tuple(endpoints or (Endpoint(host, port),))
        if not self.endpoints:
            raise ValueError("no endpoint to connect to")
        #: The endpoint connected to (or tried last); ``host`` and ``port`` name it.
        self.endpoint = self.endpoints[0]
        self.host = self.endpoint.host
        self.port = self.endpoint.port
        #: True while the current connection runs over TLS.
        self.tls_active = False
        self.codec = codec
        #: ``feed_resolve(data, pending, deadlines) -> (resolved, rest)`` for a native
        #: codec (`EngineReader.feed_resolve`): it parses a read AND sets its futures'
        #: results in one native call, leaving to `_resolve` only what is not a plain
        #: result (error replies, out-of-band messages), in order. The per-reply Python loop and its
        #: (id, ok, value) tuples were ~10 % of a pipelined Redis client's CPU.
        self._feed_resolve: Callable[..., tuple[int, list[tuple[int | None, bool, Any]]]] | None
        self._feed_resolve = (
            functools.partial(EngineReader.feed_resolve, codec)
            if EngineReader.supports(codec)
            else None
        )
        #: The codec's ``feed_tls(session, data) -> (replies, out, error)`` when it has
        #: one: a native TLS read decrypted straight into the codec's buffer and parsed
        #: in the same call (no plaintext bytes object in between; see PgCodec).
        self._feed_tls: Callable[..., tuple[list[Any], bytes | None, str | None]] | None
        self._feed_tls = getattr(codec, "feed_tls", None)
        self.connect_timeout = connect_timeout
        self.request_timeout = request_timeout
        self.max_in_flight = max_in_flight
        self.max_in_flight_bytes = max_in_flight_bytes
        self.reconnect = reconnect
        self.retry_connect = retry_connect
        #: False: once a connection is lost nothing reconnects until `connect` is
        #: called, and requests fail at once with `ConnectionLostError` (asynctnt's
        #: ``reconnect_timeout=0``). True: the next request reconnects.
        self.reconnect_on_request = reconnect_on_request
        # Why requests fail while a lost connection is held down (see above).
        self._held: str | None = None
        #: True: a request that must wait (to connect, for capacity) is returned as
        #: a running task (`started`), so it goes out whether or not it is
        #: awaited, as one on the fast path does (a driver whose peer returns
        #: futures, asynctnt, sets it); False: as a coroutine.
        self.start_waiting = False
        self.tcp_keepalive = tcp_keepalive
        #: The watchdog's settings; None turns it off (see the module docstring).
        self.liveness = liveness
        self._keep_connected = keep_connected
        #: Asked for the endpoints at the start of every connect round, when set
        #: (Sentinel: where the master is now); an error there fails the round.
        self.resolve: Callable[[], Awaitable[Sequence[Endpoint]]] | None = None
        self._on_connect_hook = on_connect
        self._oob = on_out_of_band or (lambda v: None)
        self._make_error = make_error
        self._on_batch = on_batch
        self._on_lost_hook = on_lost
        self._loop: asyncio.AbstractEventLoop | None = None
        self._transport: asyncio.Transport | None = None
        self._protocol: _StreamProtocol | _NativeReadProtocol | None = None
        self._ready = False
        self._closed = False
        self._paused = False
        self._pending: dict[int, asyncio.Future] = {}
        self._flush_scheduled = False
        #: Requests encoded since the last flush, and how many leave early when
        #: none is on the wire (see `EARLY_FLUSH`).
        self._nbuf = 0
        self._early = EARLY_FLUSH
        #: This connection's `SPIN_WINDOW` (a driver whose server takes longer
        #: per request may ask for a longer one; ``SPIN_WINDOW = 0`` still turns
        #: polling off for every connection).
        self.spin_window = SPIN_WINDOW if spin_window is None else spin_window
        #: Pause reading briefly while a large reply streams in (see `PACE_DELAY`).
        self.read_pacing = read_pacing
        #: Busy polling after a write or a read (see `SPIN_WINDOW`): until when,
        #: whether the poll is queued, whether bytes were read since the last poll
        #: (set by reads while it polls), writes or reads left that do not poll, and
        #: the backoff's doubling.
        self._spin_until = 0.0
        self._spinning = False
        self._spin_read = False
        self._spin_skip = 0
        self._spin_misses = 0
        #: The loop's `_Poller` (cached: looked up again if the loop changes).
        self._poller: _Poller | None = None
        self._waiters: deque[asyncio.Future] = deque()
        self._connecting: asyncio.Future | None = None
        # Per-request timeouts: the deadline of each pending request that has one,
        # and a heap over them for the timer. A finished request leaves the dict at
        # once; its heap entry is dropped lazily, and the heap is rebuilt whenever
        # stale entries outnumber live ones, so memory follows the requests in
        # flight, not the timeout's length.
        self._deadline_of: dict[int, float] = {}
        self._deadlines: list[tuple[float, int]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        self._lost_waiter: asyncio.Future | None = None
        self._ever_connected = False
        self._draining = False
        self._drain_waiter: asyncio.Future | None = None
        self._busy: Callable[[], bool] | None = None
        #: Loop time of the last bytes received (the liveness watchdog reads it).
        self._rx_at = 0.0
        self._watchdog: asyncio.Task | None = None
        self._dead: ConnectionDeadError | None = None
        self._keeper: asyncio.Task | None = None
        self._unreached = False
        #: Counts connections made; a request pinned to one names it (see `request_pinned`).
        self.generation = 0
        #: Counters for benchmarks, tests and `surge.stats`: writes made, requests sent,
        #: connects, request timeouts, error replies, connections lost, reads paced.
        self._counts = dict.fromkeys(
            ("writes", "connects", "timeouts", "errors", "lost", "dead", "paced"), 0
        )
        # Requests sent, by encoder: a plain dict bump per request; names and the
        # total are worked out only when someone reads `stats` or `ops`.
        self._sent: dict[Callable[..., int], int] = {}
        # The same counts for the requests a driver's native lane made, one
        # `surge._core.LaneCounts` per lane (each counts its own, natively).
        self._lane_sent: list[Any] = []
        # The transport's write buffer as of the last flush or reply batch: checking
        # it there rather than per request keeps the byte limit off the hot path.
        self._tbuf = 0
        CONNECTIONS.add(self)
        if REQUEST_TRACER is not None:
            REQUEST_TRACER(self)

    # -- public -------------------------------------------------------------------

    @property
    def is_connected(self) -> bool:
        """True when requests go straight out (connected and handshaken)."""
        return self._ready

    @property
    def is_connecting(self) -> bool:
        """True while a connection is being made (its handshake included)."""
        return self._connecting is not None

    @property
    def is_closed(self) -> bool:
        """True once `close` or `terminate` was called."""
        return self._closed

    @property
    def is_draining(self) -> bool:
        """True while closing gracefully: only pinned requests go out (see `drain`)."""
        return self._draining and self._transport is not None

    @property
    def in_flight(self) -> int:
        """Requests sent (or buffered) whose replies have not arrived."""
        return len(self._pending)

    @property
    def stats(self) -> dict[str, int]:
        """Counters for benchmarks, tests and `surge.stats`: writes made, requests
        sent, connects, request timeouts, error replies, connections lost, paths
        found dead by the liveness check."""
        return {**self._counts, "requests": sum(n for _, n in self._sent_items())}

    def _sent_items(self) -> list[tuple[Callable[..., int], int]]:
        """(encoder, requests sent) over the engine's own path and its lanes'."""
        items = list(self._sent.items())
        for counts in self._lane_sent:
            items += counts.items()
        return items

    @property
    def ops(self) -> dict[str, int]:
        """Requests sent by operation (the encoder's name: insert, select, ...)."""
        out: dict[str, int] = {}
        for encode, n in self._sent_items():
            op = getattr(encode, "__name__", "request")
            out[op] = out.get(op, 0) + n
        return out

    def request(self, encode: Callable[..., int], *args: Any, timeout: Any = _DEFAULT) -> Any:
        """Encode a request now (bad input raises here, before anything is sent) or,
        when not connected or over a limit, once possible; return an awaitable."""
        # The hot path of every driver: `_must_wait` and `_submit` written out inline.
        if (
            not self._ready
            or self._paused
            or len(self._pending) >= self.max_in_flight
            or (buffered := self.codec.pending()) + self._tbuf >= self.max_in_flight_bytes
        ):
            slow = self._request_slow(encode, args, timeout)
            return started(slow) if self.start_waiting else slow
        rid = encode(*args)
        fut = self._loop.create_future()  # type: ignore[union-attr]
        self._pending[rid] = fut
        sent = self._sent
        sent[encode] = sent.get(encode, 0) + 1
        nbuf = self._nbuf = self._nbuf + 1
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)  # type: ignore[union-attr]
        elif buffered >= FLUSH_SIZE or (  # bytes as of before this request: one call less
            nbuf == self._early and len(self._pending) <= nbuf
        ):
            self._flush()
        if timeout is _DEFAULT:
            timeout = self.request_timeout
        if timeout is not None:
            self._add_deadline(self._loop.time() + timeout, rid)  # type: ignore[union-attr]
        return fut

    def request_pinned(
        self, generation: int, encode: Callable[..., int], *args: Any, timeout: Any = _DEFAULT
    ) -> Any:
        """Like `request`, but only on connection `generation`: raises
        `ConnectionLostError` if that one is gone, and goes out while draining."""
        if self._transport is None or generation != self.generation:
            raise ConnectionLostError(f"connection to {self.endpoint} was lost since this began")
        if not self._must_wait():
            return self._submit(encode, args, timeout)
        return self._pinned_slow(generation, encode, args, timeout)

    async def _pinned_slow(
        self, generation: int, encode: Callable[..., int], args: tuple, timeout: Any
    ) -> Any:
        if timeout is _DEFAULT:
            timeout = self.request_timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._must_wait():
            await self._wait_capacity(deadline)
            if self._transport is None or generation != self.generation:
                raise ConnectionLostError(
                    f"connection to {self.endpoint} was lost since this began"
                )
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        return await self._submit(encode, args, left)

    def send_no_reply(self, encode: Callable[..., int], *args: Any) -> bool:
        """Send a message the server does not answer (a watch); False when not connected
        (a driver re-sends such state in its handshake)."""
        if self._transport is None:
            return False
        encode(*args)
        assert self._loop is not None
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)
        return True

    def flush(self) -> None:
        """Write what the codec holds now rather than at the end of the loop
        iteration (a driver streaming data that is no request of its own, such as a
        PostgreSQL COPY's, so the server starts on it while the next part is made)."""
        self._flush()

    async def writable(self, timeout: float | None = None) -> None:
        """Wait until the connection takes more bytes (its transport not paused and
        below the byte limit): the back-pressure a stream of data minds between its
        parts, as requests do. Returns at once when it does; `ConnectionLostError`
        when the connection is gone, `RequestTimeoutError` after ``timeout`` s."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if self._transport is None:
                raise ConnectionLostError(f"connection to {self.endpoint} lost")
            if not self._must_wait():
                return
            await self._wait_capacity(deadline)

    def drain(self, busy: Callable[[], bool] | None = None, timeout: float = DRAIN_TIMEOUT) -> None:
        """Close gracefully and reconnect: new requests wait, those in flight (and while
        ``busy()`` is true, pinned ones) finish first, within ``timeout`` seconds."""
        if self._closed or self._draining or self._transport is None or self._loop is None:
            return
        self._ready = False
        self._draining = True
        self._busy = busy
        task = self._loop.create_task(self._drain_then_reconnect(timeout))
        # Requests made meanwhile wait on this, exactly as on a connect.
        self._connecting = task
        task.add_done_callback(_retrieve)

    def check_drained(self) -> None:
        """Tell a drain in progress that ``busy()`` may have become false."""
        w = self._drain_waiter
        if w is not None and not w.done() and self._idle():
            w.set_result(None)

    def _idle(self) -> bool:
        if self._transport is None:
            return True
        if self._busy is not None and self._busy():
            return False
        return all(f.done() for f in self._pending.values())

    async def _drain_then_reconnect(self, timeout: float) -> None:
        assert self._loop is not None
        try:
            if not self._idle():
                self._drain_waiter = self._loop.create_future()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._drain_waiter, timeout)
            t = self._transport
            if t is not None:
                waiter = self._lost_waiter
                t.close()
                if waiter is not None and not waiter.done():
                    try:
                        await asyncio.wait_for(asyncio.shield(waiter), 1.0)
                    except TimeoutError:
                        t.abort()
            # Anything still pending (over the timeout) failed in _on_lost.
        finally:
            self._draining = False
            self._drain_waiter = None
            self._busy = None
            self._drop_transport()
        if self._closed or not self.reconnect:
            self._connecting = None
            if self._closed:
                raise ClosedError("connection closed")
            raise ConnectionLostError(f"{self.endpoint} closed gracefully")
        await self._connect()

    async def connect(self) -> None:
        """Connect now instead of on the first request (also after a loss that
        ``reconnect_on_request=False`` holds down)."""
        self._held = None
        await self._ensure_ready()

    async def ensure_connected(self, deadline: float | None = None) -> None:
        """Wait until connected, connecting if need be, as a request does (a loss
        held down by ``reconnect_on_request=False`` raises `ConnectionLostError`);
        `RequestTimeoutError` if not connected by ``deadline`` (`time.monotonic`)."""
        if deadline is None or self._ready:
            await self._ensure_ready()
            return
        try:
            await asyncio.wait_for(self._ensure_ready(), max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            # (The connect goes on, shielded, for whoever waits next.)
            raise RequestTimeoutError(
                f"not connected to {self.endpoint} within the request's timeout"
            ) from None

    async def close(self) -> None:
        """Close the connection; pending requests fail with `ClosedError`."""
        await self.closing()()

    def closing(self) -> Callable[[], Awaitable[None]]:
        """`close`, its first step done now (nothing goes out after it; pending
        requests fail with `ClosedError`); returns the rest to await: the wait
        until the connection is gone (a driver whose close need not be awaited
        may drop it: the transport closes by itself)."""
        self._closed = True
        try:
            current = asyncio.current_task()
        except RuntimeError:  # called with no loop running (a driver's plain close())
            current = None
        for task in (self._keeper, self._watchdog):
            if task is not None and task is not current:
                task.cancel()
        self._fail_all(ClosedError("connection closed"))
        t = self._transport
        waiter = self._lost_waiter
        if t is not None:
            t.close()
            # Until its connection_lost, nothing more goes out on it (a request
            # now fails with ClosedError rather than with the loss to come).
            self._ready = False

        async def gone() -> None:
            if t is not None and waiter is not None and not waiter.done():
                try:
                    await asyncio.wait_for(asyncio.shield(waiter), 1.0)
                except (TimeoutError, asyncio.CancelledError):
                    t.abort()

        return gone

    def reopen(self) -> None:
        """Take requests again after `close`: the next request, or `connect`,
        connects anew (asynctnt's ``connect()`` after ``disconnect()``)."""
        if self._transport is not None:
            # Closed but not yet gone (its close was not awaited): gone now, and
            # its late connection_lost is not this connection's news.
            self._drop_transport()
            self._protocol = None
        self._closed = False
        self._held = None

    def abort(self) -> None:
        """Drop the connection at once (pending requests fail with ConnectionLostError)."""
        if self._transport is not None:
            self._transport.abort()

    def terminate(self) -> None:
        """Drop the connection at once and for good: pending requests fail with
        `ClosedError` and later ones are refused, as after `close`."""
        self._closed = True
        try:
            current = asyncio.current_task()
        except RuntimeError:  # called with no loop running (a driver's plain close())
            current = None
        for task in (self._keeper, self._watchdog):
            if task is not None and task is not current:
                task.cancel()
        self._fail_all(ClosedError("connection closed"))
        if self._transport is not None:
            self._transport.abort()

    # -- handshake helpers (for on_connect hooks) -----------------------------------

    def submit_raw(self, encode: Callable[..., int], *args: Any) -> asyncio.Future:
        """Send a request during the handshake (before the connection is ready)."""
        if self._transport is None:
            raise ConnectionLostError(f"connection to {self.endpoint} lost")
        fut = self._submit(encode, args, None)
        self._flush()
        return fut

    # -- internals ----------------------------------------------------------------

    def _must_wait(self) -> bool:
        if self._paused or len(self._pending) >= self.max_in_flight:
            return True
        t = self._transport
        self._tbuf = t.get_write_buffer_size() if t else 0
        return self.codec.pending() + self._tbuf >= self.max_in_flight_bytes

    def _submit(self, encode: Callable[..., int], args: tuple, timeout: Any) -> asyncio.Future:
        rid = encode(*args)
        loop = self._loop
        assert loop is not None
        fut = loop.create_future()
        self._pending[rid] = fut
        sent = self._sent
        sent[encode] = sent.get(encode, 0) + 1
        nbuf = self._nbuf = self._nbuf + 1
        if not self._flush_scheduled:
            self._flush_scheduled = True
            loop.call_soon(self._flush)
        elif self.codec.pending() >= FLUSH_SIZE or (
            nbuf == self._early and len(self._pending) <= nbuf
        ):
            self._flush()
        if timeout is _DEFAULT:
            timeout = self.request_timeout
        if timeout is not None:
            self._add_deadline(loop.time() + timeout, rid)
        return fut

    async def _request_slow(self, encode: Callable[..., int], args: tuple, timeout: Any) -> Any:
        # A timeout given with the call bounds its wait for a (re)connect too; the
        # connection's default does not (that wait has `connect_timeout`).
        given = timeout is not _DEFAULT
        if timeout is _DEFAULT:
            timeout = self.request_timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        # Connecting has its own bound: a peer that accepts and then drops every
        # connection before the request can go out must not keep it forever.
        give_up = time.monotonic() + self.connect_timeout
        delay = RECONNECT_DELAY_MIN
        while True:
            if not self._ready:
                if self._ever_connected and self._transport is None and time.monotonic() >= give_up:
                    raise ConnectError(
                        f"cannot connect to {self.endpoint}: the connection"
                        " was lost each time right after it opened"
                    )
                await self.ensure_connected(deadline if given else None)
                # The connection may be gone again by the time this runs: the
                # loop looks once more before anything is encoded.
                if not self._ready:
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, RECONNECT_DELAY_MAX)
            elif self._must_wait():
                await self._wait_capacity(deadline)
            else:
                break
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        return await self._submit(encode, args, left)

    async def _wait_capacity(self, deadline: float | None) -> None:
        assert self._loop is not None
        fut = self._loop.create_future()
        self._waiters.append(fut)
        try:
            if deadline is None:
                await fut
            else:
                await asyncio.wait_for(fut, max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            raise RequestTimeoutError("timed out waiting for in-flight capacity") from None

    def _wake_waiters(self) -> None:
        if self._must_wait():
            return
        # Wake as many as there are free slots; each re-checks before encoding.
        room = self.max_in_flight - len(self._pending)
        while self._waiters and room > 0:
            w = self._waiters.popleft()
            if not w.done():
                w.set_result(None)
                room -= 1

    def _flush(self) -> None:
        self._flush_scheduled = False
        self._nbuf = 0
        t = self._transport
        if t is None or self.codec.pending() == 0:
            return
        t.write(self.codec.take())
        self._tbuf = t.get_write_buffer_size()
        self._counts["writes"] += 1
        if SPIN_WINDOW and self.spin_window and self._loop is not None:
            self._poll()
        if self._watchdog is None and self.liveness is not None and self._ready:
            self._start_watchdog()

    def _poll(self) -> None:
        """Polls for the replies due for `spin_window` from now, unless a wasted
        window's backoff skips this one."""
        if self._spin_skip:
            self._spin_skip -= 1
            return
        self._spin_until = time.perf_counter() + self.spin_window
        if not self._spinning:
            self._spinning = True
            self._spin_read = False
            poller = self._poller
            if poller is None or poller._loop is not self._loop:
                poller = self._poller = _poller(self._loop)  # type: ignore[arg-type]
            poller.add(self)

    def _poll_read(self) -> None:
        """A read left replies due while the loop was not polling (the native read
        path calls it; `_resolve` for the others): poll for the rest."""
        if SPIN_WINDOW and self.spin_window and self._loop is not None and not self._spinning:
            self._poll()

    def _spin(self, now: float) -> bool:
        """One loop iteration's check, by the loop's `_Poller`: whether this
        connection still wants the loop polling (see `SPIN_WINDOW`)."""
        due = self._pending and self._transport is not None
        if self._spin_read:
            # Bytes came while polling (a reply or a piece of one): it pays, and
            # the window runs from this read, for the loop's other connections too
            # (also when it was the last reply due here).
            self._spin_read = False
            self._spin_misses = 0
            self._spin_until = until = now + self.spin_window
            poller = self._poller
            if poller is not None and until > poller.until:
                poller.until = until
            if due:
                return True
        elif due:
            if now < self._spin_until or now < self._poller.until:  # type: ignore[union-attr]
                return True
            # Neither this connection's window nor the loop's (see `_Poller`) runs.
            self._spin_off()  # the server is slower than the window
            return False
        self._spinning = False
        self._spin_misses = 0
        return False

    def _spin_off(self) -> None:
        self._spinning = False
        self._spin_misses = misses = min(self._spin_misses + 1, SPIN_BACKOFF.bit_length() - 1)
        self._spin_skip = 1 << misses

    def _add_deadline(self, at: float, rid: int) -> None:
        live = self._deadline_of
        live[rid] = at
        heap = self._deadlines
        if len(heap) > 2 * len(live) + 64:
            # Mostly finished requests: rebuild from the live ones (amortised O(1)).
            heap = self._deadlines = [(d, r) for r, d in live.items()]
            heapq.heapify(heap)
        else:
            heapq.heappush(heap, (at, rid))
        if self._timer is None or at < self._timer_at:
            if self._timer is not None:
                self._timer.cancel()
            assert self._loop is not None
            self._timer_at = at
            self._timer = self._loop.call_at(at, self._expire)

    def _expire(self) -> None:
        self._timer = None
        assert self._loop is not None
        now = self._loop.time()
        dl = self._deadlines
        live = self._deadline_of
        while dl and dl[0][0] <= now:
            at, rid = heapq.heappop(dl)
            if live.get(rid) != at:
                continue  # finished already (or a reused id with a new deadline)
            del live[rid]
            fut = self._pending.get(rid)
            if fut is not None and not fut.done():
                # The reply may still come: keep the id so it is recognised and dropped.
                self._counts["timeouts"] += 1
                fut.set_exception(RequestTimeoutError(f"no reply within the timeout (id {rid})"))
        if dl:
            self._timer_at = dl[0][0]
            self._timer = self._loop.call_at(self._timer_at, self._expire)
        if self._drain_waiter is not None:
            self.check_drained()

    async def _ensure_ready(self) -> None:
        if self._closed:
            raise ClosedError("connection closed")
        if self._ready:
            return
        if self._held is not None:
            raise ConnectionLostError(f"{self._held}; not reconnecting until connect() is called")
        loop = asyncio.get_running_loop()
        if self._loop is not loop and self._transport is None:
            self._loop = loop
            self._connecting = None
        if self._connecting is None:
            task = self._connecting = loop.create_task(self._connect())
            # Its waiters may all be cancelled (wait_for): the error is read here
            # then, not reported as never retrieved.
            task.add_done_callback(_retrieve)
        await asyncio.shield(self._connecting)

    async def _connect(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.connect_timeout
        delay = RECONNECT_DELAY_MIN
        first_round = True
        failures: list[tuple[Endpoint, BaseException]] = []
        try:
            while True:
                # The last round's reasons are reported if this one has no time left.
                tried, failures = failures, []
                unreachable: set[tuple[str, int, str | None]] = set()
                if self.resolve is not None:
                    try:
                        self.endpoints = tuple(await self.resolve())
                    except (OSError, TimeoutError, SurgeError) as exc:
                        failures.append((self.endpoint, exc))
                for ep in self.endpoints:
                    if self._closed:
                        raise ClosedError("connection closed")
                    if ep.address in unreachable:
                        continue
                    # Each endpoint gets the whole connect timeout in the first round
                    # (libpq's connect_timeout is per host: one blackholed host must
                    # not starve the next); retries share what is left of it.
                    bound = self.connect_timeout if first_round else deadline - loop.time()
                    if bound <= 0:
                        break
                    try:
                        await self._attempt(ep, bound)
                        return
                    except (OSError, TimeoutError, ConnectionLostError) as exc:
                        # EndpointRejectedError is a ConnectionError, so an OSError.
                        self._drop_transport()
                        if self._closed:
                            raise ClosedError("connection closed") from exc
                        failures.append((ep, exc))
                        if self._unreached:
                            unreachable.add(ep.address)
                first_round = False
                left = deadline - loop.time()
                if (
                    left <= 0
                    or not self.retry_connect
                    or (self._ever_connected and not self.reconnect)
                    # A certificate refused now is refused on a retry too.
                    or (
                        failures
                        and all(isinstance(e, ssl.SSLCertVerificationError) for _, e in failures)
                    )
                ):
                    raise connect_error(failures or tried)
                await asyncio.sleep(min(delay, left))
                delay = min(delay * 2, RECONNECT_DELAY_MAX)
        finally:
            self._connecting = None

    async def _attempt(self, ep: Endpoint, bound: float) -> None:
        self.endpoint = ep
        self.host, self.port = ep.host, ep.port
        try:
            await asyncio.wait_for(self._open(ep), max(0.001, bound))
            if self._closed:  # closed while the handshake ran
                self._drop_transport()
                raise ClosedError("connection closed")
            self._ever_connected = True
        except TimeoutError as exc:
            raise TimeoutError(f"no connection within {bound:.3g} s") from exc
        except BaseException:
            self._drop_transport()
            raise

    async def _open(self, ep: Endpoint) -> None:
        loop = asyncio.get_running_loop()
        self.codec.reset()
        self._pending.clear()
        self._lost_waiter = loop.create_future()
        self._dead = None
        self.tls_active = False
        #: True until the socket is up: a failure then means "unreachable".
        self._unreached = True

        native = NATIVE_READ and EngineReader.supports(self.codec)

        def make_protocol() -> _StreamProtocol | _NativeReadProtocol:
            # Known before connection_made: a peer that accepts and resets at once
            # may lose the connection before create_connection returns.
            if native and ep.tls is None:
                fast = self._protocol = self._native_protocol()
                return fast
            p = self._protocol = _StreamProtocol(self)
            return p

        transport: asyncio.Transport
        try:
            if ep.path is not None:
                transport, protocol = await loop.create_unix_connection(make_protocol, ep.path)
            else:
                transport, protocol = await loop.create_connection(make_protocol, ep.host, ep.port)
            self._unreached = False
            if isinstance(transport, _SELECTOR_TRANSPORT):
                transport.max_size = READ_SIZE  # type: ignore[attr-defined]
            if self.tcp_keepalive:
                set_tcp_keepalive(transport)
            if ep.tls is not None:
                assert isinstance(protocol, _StreamProtocol)  # never native over TLS
                transport, self.tls_active = await start_tls(loop, transport, protocol, ep)
                if native and not self.tls_active and not protocol.lost:
                    # TLS was optional and the server declined it (PostgreSQL's
                    # default sslmode=prefer against a server without ssl): the
                    # connection is plaintext after all, so it reads natively too.
                    # Nothing is in flight here (the server waits for the startup).
                    fast = self._protocol = self._native_protocol()
                    fast.transport = transport
                    transport.set_protocol(fast)
                    protocol = fast
                elif (
                    native
                    and NATIVE_TLS_READ
                    and self._feed_tls is not None
                    and isinstance(transport, NativeTlsTransport)
                    and not protocol.lost
                    and not protocol.early_plain
                ):
                    # Native TLS: the reads decrypt natively too (`EngineReader`).
                    # Nothing is in flight (the handshake just ended, the server
                    # waits for the startup). Bytes read past the handshake are
                    # still in rustls, decrypted with the next read.
                    fast = self._protocol = self._native_protocol(transport)
                    fast.transport = transport
                    transport.raw.set_protocol(fast)
                    protocol = fast
        except BaseException:
            # Cancelled (connect timeout) or failed after the transport came up:
            # abort what was made, and forget the protocol so nothing it still
            # receives reaches the codec.
            p = self._protocol
            self._protocol = None
            if p is not None and p.transport is not None:
                p.transport.abort()
            raise
        if protocol.lost or transport.is_closing():
            transport.abort()
            raise ConnectionLostError(f"{self.endpoint} closed the connection at once")
        self._transport = transport  # type: ignore[assignment]
        self._protocol = protocol
        self._rx_at = loop.time()
        self._paused = False
        self.generation += 1
        self._counts["connects"] += 1
        if self._on_connect_hook is not None:
            await self._on_connect_hook(self)
        if self._transport is None or self._protocol is not protocol:
            raise ConnectionLostError("connection lost during handshake")
        self._ready = True
        self._wake_waiters()
        if (
            self.liveness is not None
            and self._keep_connected is not None
            and self._keep_connected()
        ):
            self._start_watchdog()

    def _native_protocol(self, tls: NativeTlsTransport | None = None) -> _NativeReadProtocol:
        """A protocol whose reads go through an `EngineReader` (see `NATIVE_READ`),
        decrypted first over native TLS (``tls``)."""
        fast = _NativeReadProtocol(self)
        reader = EngineReader(self, fast, EARLY_FLUSH, EARLY_FLUSH_MAX)
        if tls is not None:
            reader.set_tls(tls)
            fast.tls = tls
        fast.get_buffer = reader.get_buffer  # type: ignore[method-assign, assignment]
        fast.buffer_updated = reader.buffer_updated  # type: ignore[method-assign]
        if self.read_pacing and PACE_DELAY and (tls is None or PACE_TLS):
            # Decided in the reader, per read (no Python call added to any read).
            reader.set_pacing(PACE_DELAY, PACE_READ, PACE_DEPTH)
        fast.data_received = reader.feed
        return fast

    def _drop_transport(self) -> None:
        if self._transport is not None:
            self._transport.abort()
        self._transport = None
        self._ready = False

    def _on_data(self, data: bytes) -> None:
        self._rx_at = self._loop.time()  # type: ignore[union-attr]
        resolved = 0
        try:
            if self._feed_resolve is not None:
                resolved, replies = self._feed_resolve(data, self._pending, self._deadline_of)
            else:
                replies = self.codec.feed(data)
        except Exception as exc:
            self._on_bad_reply(exc)
            return
        self._resolve(replies, resolved)

    def _on_tls_data(self, tls: NativeTlsTransport, data: bytes) -> None:
        """`_on_data` for a read over native TLS, through the codec's ``feed_tls``."""
        self._rx_at = self._loop.time()  # type: ignore[union-attr]
        try:
            replies, out, err = self._feed_tls(tls.session, data)  # type: ignore[misc]
        except Exception as exc:
            self._on_bad_reply(exc)
            return
        if out is not None:
            tls.raw.write(out)
        self._resolve(replies)
        if err is not None:
            tls.error = err
            tls.raw.abort()  # connection_lost follows: every caller hears of it

    def _on_tls_extra(self, tls: NativeTlsTransport, out: bytes | None, err: str | None) -> None:
        """What a native TLS read left besides plaintext (`EngineReader`): records
        to send (an alert), a broken stream (connection_lost then fails every caller)."""
        if out is not None:
            tls.raw.write(out)
        if err is not None:
            tls.error = err
            tls.raw.abort()

    def _on_eof(self) -> None:
        # A codec whose replies may end with the stream (an HTTP body delimited
        # by the close) finishes them here; the others have no `feed_eof`.
        feed_eof = getattr(self.codec, "feed_eof", None)
        if feed_eof is None:
            return
        try:
            replies = feed_eof()
        except Exception as exc:
            self._on_bad_reply(exc)
            return
        self._resolve(replies)

    def _on_bad_reply(self, exc: Exception) -> None:
        self._fail_all(ProtocolError(f"{self.endpoint}: {exc}"))
        if self._transport is not None:
            self._transport.abort()

    def _resolve(self, replies: list[tuple[int | None, bool, Any]], resolved: int = 0) -> None:
        """Hands each reply to its future (or out of band); ``resolved``: replies the
        codec's ``feed_resolve`` already handed over in this read."""
        pending = self._pending
        timed = self._deadline_of
        for rid, ok, value in replies:
            if rid is None:
                self._oob(value)
                continue
            fut = pending.pop(rid, None)
            if fut is None:
                continue
            if timed:
                timed.pop(rid, None)
            if ok:
                try:  # noqa: SIM105 (suppress() costs an object per reply)
                    fut.set_result(value)
                except asyncio.InvalidStateError:
                    pass  # cancelled or timed out: the reply is dropped
            elif not fut.done():
                self._counts["errors"] += 1
                fut.set_exception(self._make_error(value))
        if (n := len(replies) + resolved) > 1:
            self._early = min(max(n >> 1, EARLY_FLUSH), EARLY_FLUSH_MAX)
        if n and not self._flush_scheduled and self._loop is not None:
            # Queue the flush behind the wakeups the replies just scheduled: the
            # requests their coroutines make next then leave in that same loop
            # iteration, not one later (a round trip saves a loop iteration).
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)
        if self._tbuf and self._transport is not None:
            self._tbuf = self._transport.get_write_buffer_size()
        if self._on_batch is not None:
            self._on_batch()
        if self._drain_waiter is not None:
            self.check_drained()
        if self._waiters:
            self._wake_waiters()
        if self._spinning:
            self._spin_read = True
        elif self._pending:
            self._poll_read()

    def _on_lost(self, protocol: _EngineEvents, exc: Exception | None) -> None:
        if protocol is not self._protocol:
            return
        self._transport = None
        self._protocol = None
        self._ready = False
        self._paused = False
        self._tbuf = 0
        self._counts["lost"] += 1
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        msg = f"connection to {self.endpoint} lost"
        err: ConnectionLostError = self._dead or ConnectionLostError(
            f"{msg}: {exc!r}" if exc else f"{msg}: the server closed it"
        )
        if not self.reconnect_on_request and not self._closed:
            self._held = str(err)
        self._fail_all(err)
        if self._lost_waiter is not None and not self._lost_waiter.done():
            self._lost_waiter.set_result(None)
        self.check_drained()
        if self._on_lost_hook is not None:
            self._on_lost_hook(err)
        if (
            self._ever_connected
            and self._ready is False
            and self._connecting is None
            and self.reconnect
            and not self._closed
            and self._keep_connected is not None
            and self._keep_connected()
        ):
            self._keep_up(err)

    def _fail_all(self, err: BaseException) -> None:
        pending, self._pending = self._pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(err)
        self._deadlines.clear()
        self._deadline_of.clear()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        waiters, self._waiters = self._waiters, deque()
        for w in waiters:
            if not w.done():
                w.set_result(None)  # they re-check readiness and reconnect or fail
        self.codec.reset()

    # -- liveness -----------------------------------------------------------------

    def _start_watchdog(self) -> None:
        assert self._loop is not None
        task = self._watchdog = self._loop.create_task(self._watch(self.generation))
        task.add_done_callback(_retrieve)

    def _wanted(self) -> bool:
        return bool(self._pending) or (self._keep_connected is not None and self._keep_connected())

    async def _watch(self, generation: int) -> None:
        """Runs while connection `generation` has work outstanding: see Liveness."""
        live = self.liveness
        assert live is not None and self._loop is not None
        loop = self._loop
        # Silence counts from the last byte received or the last proof of life,
        # whichever is later (a connection idle for an hour is not "silent" the
        # moment a request goes out).
        since = loop.time()
        try:
            while (
                self._transport is not None
                and self.generation == generation
                and not self._closed
                and self._wanted()
            ):
                quiet = loop.time() - max(self._rx_at, since)
                if quiet < live.interval:
                    await asyncio.sleep(live.interval - quiet)
                    continue
                rx = self._rx_at
                if live.ping is not None and self._transport is not None:
                    self._submit(live.ping, (), None).add_done_callback(_retrieve)
                    self._flush()
                    await asyncio.sleep(live.timeout)
                    if self._rx_at != rx or self.generation != generation:
                        continue
                if live.probe is not None and await self._probe(live.probe, live.timeout):
                    since = loop.time()  # busy, not dead: another interval of patience
                    continue
                if self._rx_at != rx or self.generation != generation:
                    continue
                self._declare_dead(loop.time() - max(rx, since))
                return
        finally:
            if self._watchdog is asyncio.current_task():
                self._watchdog = None

    async def _probe(self, probe: bytes, timeout: float) -> bool:
        """True if the server answers a new connection, opened as the current one
        (same address, same TLS request and ``ssl.SSLContext``), with a byte.

        With a plaintext TLS request (PostgreSQL's SSLRequest), the server's answer
        to it is the byte; when the connection runs TLS the handshake must then
        succeed too (the probe bytes are not sent: after the handshake the server
        expects a login)."""
        ep = self.endpoint
        tls = ep.tls
        writer = None
        try:
            async with asyncio.timeout(timeout):
                if ep.path is not None:
                    reader, writer = await asyncio.open_unix_connection(ep.path)
                else:
                    reader, writer = await asyncio.open_connection(ep.host, ep.port)
                if tls is not None and tls.request is not None:
                    writer.write(tls.request)
                    answer = await reader.read(1)
                    if answer == tls.accept and self.tls_active:
                        await writer.start_tls(tls.context, server_hostname=tls.server_hostname)
                    return bool(answer)
                if tls is not None and self.tls_active:
                    await writer.start_tls(tls.context, server_hostname=tls.server_hostname)
                if probe:
                    writer.write(probe)
                return bool(await reader.read(1))
        except (OSError, TimeoutError):
            return False
        finally:
            if writer is not None:
                writer.transport.abort()

    def _declare_dead(self, quiet: float) -> None:
        live = self.liveness
        assert live is not None
        self._counts["dead"] += 1
        self._dead = ConnectionDeadError(
            f"{self.endpoint} sent nothing for {quiet:.1f} s with requests pending"
            f" and answered neither a ping nor a probe within {live.timeout} s: the path"
            f" is dead, the connection was dropped (liveness interval {live.interval} s)"
        )
        log.warning("%s", self._dead)
        self._fail_all(self._dead)
        if self._transport is not None:
            self._transport.abort()  # _on_lost follows, with the same error

    def _keep_up(self, err: BaseException) -> None:
        """Reconnect in the background (a listening connection has no request that
        would do it), with backoff, until connected, closed or no longer needed."""
        if self._keeper is not None or self._loop is None or self._loop.is_closed():
            return
        log.warning("%s; reconnecting", err)
        task = self._keeper = self._loop.create_task(self._keep_trying())
        task.add_done_callback(_retrieve)

    async def _keep_trying(self) -> None:
        delay = RECONNECT_DELAY_MIN
        try:
            while (
                not self._closed
                and not self._ready
                and self._keep_connected is not None
                and self._keep_connected()
            ):
                try:
                    await self._ensure_ready()
                except (OSError, ConnectError, ConnectionLostError, TimeoutError):
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, RECONNECT_DELAY_MAX)
                else:
                    log.info("reconnected to %s", self.endpoint)
        finally:
            self._keeper = None


def _retrieve(task: asyncio.Future) -> None:
    # A background task or a ping may fail with nobody waiting; the next request
    # reconnects (or fails) on its own.
    if not task.cancelled():
        task.exception()
