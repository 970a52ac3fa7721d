"""`Connection`: Tarantool requests over one pipelined connection.

On connect the client sends IPROTO_ID with the features it speaks (streams,
transactions, error extension, watchers); a server >= 2.10 answers with its own,
kept in `Connection.features`. An older server (Debian's 2.6) answers "unknown
request type": `features` is then empty, and `transaction()` / `watch()` raise
`FeatureNotSupportedError` instead of sending what the server cannot take.
With watchers the client also watches ``box.shutdown``: when the server says it
is shutting down, the connection stops sending new requests, lets those in
flight (and open transactions) finish, closes and reconnects (graceful shutdown).
Features of 2.10+ were tested against a scripted IPROTO server, not a live one.

A connection may drop at any step of the handshake (greeting, IPROTO_ID, auth,
schema): every reply the handshake asked for is awaited, whichever fails first,
and the greeting belongs to the connection it came on, so the engine's next
attempt starts clean and no future is left holding an exception nobody reads.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import operator
import time
import types
from collections.abc import Awaitable, Generator, Mapping, Sequence
from typing import Any

from surge._core import IprotoCodec, IprotoConnState, IprotoLane
from surge.endpoint import Endpoint
from surge.engine import (
    _DEFAULT,  # the engine's "use request_timeout"
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_LIVENESS_INTERVAL,
    DEFAULT_LIVENESS_TIMEOUT,
    DEFAULT_MAX_IN_FLIGHT,
    FLUSH_SIZE,
    RECONNECT_DELAY_MAX,
    RECONNECT_DELAY_MIN,
    PipelinedConnection,
    chain,
    liveness,
    started,
)
from surge.errors import ConnectError, ConnectionLostError, InterfaceError, RequestTimeoutError
from surge.tarantool import transaction as _tx
from surge.tarantool.asynctnt_names import ASYNCTNT_RECONNECT_TIMEOUT, AsynctntNames
from surge.tarantool.errors import (
    DatabaseError,
    FeatureNotSupportedError,
    SchemaError,
    UpdateOperationError,
    UpdateOperationLengthError,
    make_error,
)
from surge.tarantool.faults import describe, is_expected, log, traceback_of
from surge.tarantool.push import PushFuture, encode_subscribed
from surge.tarantool.schema import VINDEX_ID, VSPACE_ID, Schema, SpaceInfo
from surge.tarantool.sql import PreparedStatement, SQLResult
from surge.tarantool.transaction import FEATURE_STREAMS, FEATURE_TRANSACTIONS, Transaction
from surge.tarantool.types import ConnectionState, IProtoFeatures, Iterator
from surge.tarantool.watch import WatchCallback, Watcher, Watches

#: Select iterators by name, as box.index has them.
ITERATORS = {it.name: it.value for it in Iterator}

#: "No limit" for select.
MAX_LIMIT = 0xFFFFFFFF

#: IPROTO_FEATURES bits, as Tarantool numbers them (streams and transactions: see
#: `surge.tarantool.transaction`).
FEATURE_ERROR_EXTENSION = 2
FEATURE_WATCHERS = 3
#: What this client tells the server it speaks, in IPROTO_ID.
CLIENT_FEATURES = [FEATURE_STREAMS, FEATURE_TRANSACTIONS, FEATURE_ERROR_EXTENSION, FEATURE_WATCHERS]
#: The key a server >= 2.10 sets to true when it begins a graceful shutdown.
SHUTDOWN_KEY = "box.shutdown"
#: True: `select`, `insert`, `replace`, `update`, `upsert` and `delete` make a plain
#: request in one native call (`surge._core.IprotoLane`: the methods and the engine's
#: request path step for step) and take the Python methods whenever that is not all
#: the call needs; False: the Python methods (a switch for comparisons).
NATIVE_LANE = True
#: call's and eval's first argument under surge's name and asynctnt's.
_CALL_NAMES = ("function", "func_name")
_EVAL_NAMES = ("expr", "expression")
#: The methods the lane serves.
_LANE_METHODS = ("select", "insert", "replace", "update", "upsert", "delete")


def parse_address(address: str) -> tuple[str, int]:
    """`host:port`, `:port`, `port` or `tarantool://user:pass@host:port` -> (host, port)."""
    if "://" in address:
        address = address.split("://", 1)[1]
    if "@" in address:
        address = address.rsplit("@", 1)[1]
    if ":" not in address:
        return "127.0.0.1", int(address)
    host, port = address.rsplit(":", 1)
    return host or "127.0.0.1", int(port)


def _key(key: Any) -> Any:
    if key is None:
        return ()
    if isinstance(key, list | tuple):
        return key
    if isinstance(key, Mapping):  # by field names: `_key_for` lays it out
        return dict(key)
    return (key,)


def _key_for(info: SpaceInfo, index: int | str, key: Any) -> Any:
    """The key to send: a dict (by field names) laid out by the index's parts."""
    return info.key_by_names(index, key) if key.__class__ is dict else key


class Connection(AsynctntNames, IprotoConnState):
    """A Tarantool connection; made outside a loop, it connects on first use.

    Request methods return awaitables. Bad input (a value MessagePack cannot hold)
    raises at the call, before anything is sent. A space, index or field name the
    cached schema lacks makes the call wait for one schema reload and look again;
    if the name is still unknown, awaiting raises `SchemaError` (nothing was sent).

    Replies are `surge.tarantool.Response`s: the list of rows (or of a call's
    return values) with asynctnt's `Response` attributes (``body``, ``code``,
    ``schema_id``, ``sync``, ``rowcount``, ``done()``, ...); ``responses=False``
    gives plain lists, and None for `ping`.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int | str = 3301,
        *,
        user: str | None = None,
        password: str | None = None,
        username: str | None = None,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        request_timeout: float | None = None,
        fetch_schema: bool = True,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        reconnect: bool = True,
        retry_connect: bool = True,
        liveness_interval: float | None = DEFAULT_LIVENESS_INTERVAL,
        liveness_timeout: float = DEFAULT_LIVENESS_TIMEOUT,
        tcp_keepalive: bool = True,
        responses: bool = True,
        # asynctnt's names, so its Connection(...) calls port as they are:
        reconnect_timeout: float | None = None,
        ping_timeout: float | None = None,
        auto_refetch_schema: bool = True,
        encoding: str | None = None,
        initial_read_buffer_size: int | None = None,
    ) -> None:
        # asynctnt's options map onto surge's: its request_timeout <= 0 means none;
        # its ping_timeout is the liveness check's interval (0 turns it off). A lost
        # connection is reconnected by the next request (no reconnect_timeout wait);
        # the schema is always reloaded when it changes (a stale one would send
        # requests to the wrong space).
        if request_timeout is not None and request_timeout <= 0:
            request_timeout = None
        reconnect_on_request = True
        if reconnect_timeout is not None and reconnect_timeout <= 0:
            # asynctnt's "do not reconnect": a refused connect fails at once, not
            # after retrying for connect_timeout, and a lost connection stays down
            # (requests fail at once) until connect() is called.
            retry_connect = False
            reconnect_on_request = False
        if ping_timeout is not None:
            liveness_interval = ping_timeout or None
        if encoding is not None and codecs.lookup(encoding).name != "utf-8":
            raise InterfaceError(f"only encoding='utf-8' is supported, not {encoding!r}")
        if username is not None:  # asynctnt's name
            if user is not None and user != username:
                raise InterfaceError("give user= or username=, not both")
            user = username
        # asynctnt's Unix socket: host "unix/", port the socket's path.
        unix = str(port) if host.startswith("unix/") else None
        port = 0 if unix is not None else int(port)  # asynctnt takes "3301" too
        self._asynctnt_opts = {
            "reconnect_timeout": (
                (ASYNCTNT_RECONNECT_TIMEOUT if reconnect_timeout is None else reconnect_timeout)
                if reconnect
                else 0
            ),
            "initial_read_buffer_size": initial_read_buffer_size,
        }
        self.user = user
        self.password = password or ""
        self.fetch_schema = fetch_schema
        self.schema = Schema()
        self.greeting: dict | None = None
        #: IPROTO_FEATURES bits of the server (empty before 2.10 or before connecting).
        self.features = IProtoFeatures()
        #: The server's IPROTO protocol version (None when it does not know IPROTO_ID).
        self.protocol_version: int | None = None
        self._watches = Watches(self._send_watch)
        self._rewatch: asyncio.Task | None = None
        # True while the watch reconnector sleeps between attempts: only then may
        # close() cancel it (see `close`).
        self._rewatch_idle = False
        self._closing = False
        self._tx_open: set[Transaction] = set()
        #: Requests made with ``push_subscribe=True`` until answered, by sync.
        self._pushes: dict[int, PushFuture] = {}
        self._stream_ids = 0
        # The greeting of the connection being made, if it came before the
        # handshake asked for it (with the engine's protocol it came on); else the
        # handshake's wait for it.
        self._early_greeting: tuple[object, dict] | None = None
        self._greeting_waiter: asyncio.Future | None = None
        # Bumped by every loss of the current connection: the handshake compares it
        # after each wait, since what it sends next would go nowhere.
        self._losses = 0
        #: How many times the schema was loaded (on each connect and each reload).
        self.schema_loads = 0
        # The name table the request methods look in: the schema's own while it is
        # fresh, an empty one while a reload is due (see "schema" below).
        self._names: dict[int | str, SpaceInfo] = self.schema.by_name
        self._reload: asyncio.Task | None = None
        self._reload_sent = False
        self._codec = IprotoCodec()
        # Replies as `Response`s: lists with asynctnt's Response attributes (see
        # `surge._core.Response`); False gives plain lists (and None for ping).
        self._codec.responses = responses
        self._engine = PipelinedConnection(
            host,
            port,
            self._codec,
            on_connect=self._handshake,
            on_out_of_band=self._out_of_band,
            make_error=make_error,
            on_batch=self._check_schema,
            on_lost=self._on_lost,
            connect_timeout=connect_timeout,
            request_timeout=request_timeout,
            max_in_flight=max_in_flight,
            reconnect=reconnect,
            retry_connect=retry_connect,
            reconnect_on_request=reconnect_on_request,
            tcp_keepalive=tcp_keepalive,
            # Tarantool answers IPROTO_PING at once even while a long call runs
            # (requests run in fibers); the probe reads a new connection's greeting.
            liveness=liveness(liveness_interval, liveness_timeout, self._codec.ping, b""),
            endpoints=None if unix is None else [Endpoint(host, 0, path=unix)],
            driver="tarantool",
        )
        # A request that must wait runs as a task: it goes out even if not awaited,
        # as asynctnt's requests (futures) do.
        self._engine.start_waiting = True
        c = self._codec
        self._req = self._engine.request
        self._select, self._insert, self._update = c.select, c.insert, c.update
        self._delete, self._upsert = c.delete, c.upsert
        # A traced connection wraps its own `request`: the lane would bypass it.
        if NATIVE_LANE and "request" not in vars(self._engine):
            self._use_lane()

    def _use_lane(self) -> None:
        """The hot path: the request methods as `IprotoLane`'s, which calls this
        class's own whenever it cannot serve a call (see `NATIVE_LANE`)."""
        cls = type(self)

        def py(name: str) -> Any:
            return types.MethodType(getattr(Connection, name), self)

        lane = IprotoLane(
            self._codec,
            self._engine,
            self,
            py("select"),
            py("insert"),
            py("replace"),
            py("update"),
            py("upsert"),
            py("delete"),
            FLUSH_SIZE,
        )
        for name in _LANE_METHODS:
            if getattr(cls, name) is getattr(Connection, name):  # not a subclass's own
                self.__dict__[name] = getattr(lane, name)

    # -- lifecycle --------------------------------------------------------------------

    def __repr__(self) -> str:
        where = f"host={self.host} port={self.port}"
        return f"<surge.tarantool.Connection {where} state={self.state!r}>"

    @property
    def engine(self) -> PipelinedConnection:
        """The pipelined connection underneath (stats, limits)."""
        return self._engine

    @property
    def is_connected(self) -> bool:
        """True once connected, authenticated and the schema is loaded."""
        return self._engine.is_connected

    @property
    def is_fully_connected(self) -> bool:
        """asynctnt's name for `is_connected` (authenticated, schema loaded)."""
        return self._engine.is_connected

    @property
    def state(self) -> ConnectionState:
        """Where the connection stands, as asynctnt's `ConnectionState` (a lazy
        connection not yet used is DISCONNECTED; after a loss, until the next
        request reconnects it, too)."""
        e = self._engine
        if self._closing:
            return ConnectionState.DISCONNECTED if e.is_closed else ConnectionState.DISCONNECTING
        if e.is_connected:
            return ConnectionState.CONNECTED
        if e.is_connecting:
            return ConnectionState.RECONNECTING if self._losses else ConnectionState.CONNECTING
        return ConnectionState.DISCONNECTED

    @property
    def schema_id(self) -> int | None:
        """The server's schema version the cached schema was read at (asynctnt's
        name); None while not connected."""
        return self.schema.version if self._engine.is_connected and self.schema_loads else None

    @property
    def version(self) -> tuple[int, int, int] | None:
        """The server version from its greeting, once connected."""
        return self.greeting["version_tuple"] if self.greeting else None

    async def connect(self) -> Connection:
        """Connect (authenticate, load the schema) now rather than on first use;
        after `close`, connect anew (asynctnt's ``connect()`` after ``disconnect()``)."""
        e = self._engine
        if e.is_closed:
            e.reopen()
            self._closing = False
        await e.connect()
        return self

    def __await__(self) -> Generator[Any, None, Connection]:
        return self.connect().__await__()

    def close(self) -> Awaitable[None]:
        """Close; pending requests fail with ClosedError. Done at once, as asynctnt's
        ``close()`` (a plain call); awaiting it also waits until the connection is gone."""
        self._closing = True
        if self._reload is not None:
            self._reload.cancel()
        if self._rewatch is not None and self._rewatch_idle:
            # Only while it sleeps: cancelled inside engine.connect(), the engine's
            # own connect task would fail later with nobody to read its error. Out
            # of the sleep, it sees `_closing` and stops.
            self._rewatch.cancel()
        return _Closing(self._engine.closing())

    async def disconnect(self) -> None:
        """`close` under asynctnt's name."""
        await self.close()

    async def __aenter__(self) -> Connection:
        return await self.connect()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _handshake(self, engine: PipelinedConnection) -> None:
        losses = self._losses
        self.greeting = await self._greeting()
        self._check_alive(losses)
        # IPROTO_ID may precede authentication; both go out before either answer.
        sent = [engine.submit_raw(self._codec.id, CLIENT_FEATURES)]
        if self.user:
            sent.append(
                engine.submit_raw(self._codec.auth, self.user, self.password, self.greeting["salt"])
            )
        # All replies are awaited even when one fails: a dropped connection fails
        # them all, and one left unawaited would be logged as never retrieved.
        id_reply, *auth = await asyncio.gather(*sent, return_exceptions=True)
        if isinstance(id_reply, DatabaseError):
            # ER_UNKNOWN_REQUEST_TYPE from a server older than 2.10: no features.
            self.protocol_version = None
            self.features = IProtoFeatures()
        elif isinstance(id_reply, BaseException):
            raise id_reply
        else:
            self.protocol_version = id_reply["version"]
            self.features = IProtoFeatures(id_reply["features"])
        if auth and isinstance(auth[0], BaseException):
            raise auth[0]
        if self.fetch_schema:
            self._check_alive(losses)
            await self._load_schema(engine.submit_raw)
        if FEATURE_WATCHERS in self.features:
            self._watches.resubscribe()
            if SHUTDOWN_KEY not in self._watches.by_key:
                self._watches.add(SHUTDOWN_KEY, self._on_shutdown)

    async def _greeting(self) -> dict:
        """The greeting of the connection being made (the first thing on the wire;
        the codec hands it over out of band, maybe before the handshake began)."""
        early, self._early_greeting = self._early_greeting, None
        # A connect cancelled inside create_connection (its timeout) may have had a
        # greeting, and no connection_lost to say that it is gone (uvloop): its salt
        # would fail this connection's auth. Only this connection's greeting counts.
        if early is not None and early[0] is self._engine._protocol:
            return early[1]
        waiter = self._greeting_waiter = asyncio.get_running_loop().create_future()
        try:
            return await waiter
        finally:
            self._greeting_waiter = None

    def _check_alive(self, losses: int) -> None:
        # A request submitted on a connection already gone would be neither answered
        # nor failed: the handshake would sit out the whole connect timeout.
        if self._losses != losses:
            e = self._engine
            raise ConnectionLostError(f"connection to {e.host}:{e.port} lost during the handshake")

    def _out_of_band(self, value: Any) -> None:
        kind = value[0]
        if kind == "push":
            sub = self._pushes.get(value[1])
            if sub is not None:  # (else nobody subscribed: dropped, as in asynctnt)
                sub.push(value[2])
        elif kind == "event":
            self._watches.on_event(value[1], value[2])
        elif kind == "greeting":
            waiter = self._greeting_waiter
            if waiter is not None and not waiter.done():
                waiter.set_result(value[1])
            else:
                self._early_greeting = (self._engine._protocol, value[1])

    # -- 2.10+ features -----------------------------------------------------------------

    def require_feature(self, bit: int, what: str) -> None:
        """Raise `FeatureNotSupportedError` unless the server announced feature `bit`."""
        if bit in self.features:
            return
        e = self._engine
        version = self.greeting["version"] if self.greeting else "?"
        why = (
            "it does not know IPROTO_ID (Tarantool < 2.10)"
            if self.protocol_version is None
            else f"its IPROTO_ID reply lists features {sorted(self.features)}, not {bit}"
        )
        raise FeatureNotSupportedError(
            f"Tarantool {version} at {e.host}:{e.port} does not support {what}: {why}"
        )

    def transaction(
        self, *, isolation: str | int = "default", timeout: float | None = None
    ) -> Transaction:
        """An interactive transaction on a new stream: ``async with conn.transaction() as tx``.

        Needs Tarantool >= 2.10 (else `FeatureNotSupportedError` at begin). `isolation`
        is one of `ISOLATION_LEVELS`; `timeout` (seconds) makes the server roll back a
        transaction open longer. Tested against a scripted server, not a live 2.10+.
        """
        self._stream_ids += 1
        return Transaction(self, self._stream_ids, isolation=isolation, timeout=timeout)

    def stream(self) -> Transaction:
        """asynctnt's name for `transaction` (its `Stream`): ``async with conn.stream()
        as s`` begins, then commits or rolls back; ``s.insert(...)``, ``s.begin()``,
        ``s.commit()``, ``s.stream_id`` (isolation and timeout are `transaction`'s
        keywords here, not `begin`'s)."""
        return self.transaction()

    async def watch(self, key: str, callback: WatchCallback) -> Watcher:
        """Call ``callback(key, value)`` with the key's value now and on each
        `box.broadcast` of it; returns a `Watcher` (``.unregister()`` stops it).

        Watches survive reconnects (registered again, so the callback hears the
        current value again). Needs Tarantool >= 2.10 (else `FeatureNotSupportedError`).
        Tested against a scripted server, not a live 2.10+.
        """
        if not isinstance(key, str):
            raise InterfaceError(f"watch key must be a str, not {type(key).__name__}")
        await self._engine.ensure_connected()
        self.require_feature(FEATURE_WATCHERS, "watchers")
        return self._watches.add(key, callback)

    def _send_watch(self, key: str, watch: bool) -> bool:
        return self._engine.send_no_reply(self._codec.watch, key, watch)

    def _on_shutdown(self, key: str, value: Any) -> None:
        if value is True:
            self._engine.drain(busy=lambda: bool(self._tx_open))

    def _on_lost(self, err: BaseException) -> None:
        self._losses += 1
        # A greeting that arrived is that connection's; the next one brings its own.
        self._early_greeting = None
        waiter = self._greeting_waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(err)  # the handshake awaits it: read there
        # Nothing else would reconnect a connection nobody sends requests on, yet
        # user watchers expect their events: reconnect in the background.
        idle = self._rewatch is None or self._rewatch.done()
        e = self._engine
        wanted = e.reconnect and e.reconnect_on_request and not self._closing
        if wanted and idle and self._user_watches():
            self._rewatch = asyncio.get_running_loop().create_task(self._reconnect_for_watches(err))

    def _user_watches(self) -> bool:
        return any(k != SHUTDOWN_KEY for k in self._watches.by_key)

    async def _reconnect_for_watches(self, err: BaseException) -> None:
        # Nobody awaits this task, so it never raises, and it reports the outage
        # once (down, then up) rather than per attempt.
        e = self._engine
        log.warning(
            "tarantool %s:%s: %s; reconnecting for its watchers", e.host, e.port, describe(err)
        )
        delay = RECONNECT_DELAY_MIN
        while self._user_watches() and not self._closing:
            try:
                await e.connect()
            except ConnectError:
                pass  # still down: try again after a pause
            except Exception as exc:
                if not self._closing:
                    log.warning(
                        "tarantool %s:%s: watchers stay offline until the next request: %s",
                        e.host,
                        e.port,
                        describe(exc),
                        exc_info=traceback_of(exc),
                    )
                return
            else:
                if not self._closing:  # a connect under way when close() came may still succeed
                    log.info("tarantool %s:%s is back; watchers registered again", e.host, e.port)
                return
            self._rewatch_idle = True
            try:
                await asyncio.sleep(delay)
            finally:
                self._rewatch_idle = False
            delay = min(delay * 2, RECONNECT_DELAY_MAX)

    def _tx_begun(self, tx: Transaction) -> None:
        self._tx_open.add(tx)

    def _tx_ended(self, tx: Transaction) -> None:
        self._tx_open.discard(tx)
        if not self._tx_open:
            self._engine.check_drained()

    def _sender(self) -> Any:
        """How this call sends: on the current task's transaction stream, or plainly."""
        tx = _tx.CURRENT.get()
        if tx is None or tx.conn is not self:
            return self._req
        return tx.send

    # -- schema ---------------------------------------------------------------------
    #
    # Theory of operation. `_names` is what the request methods look names up in:
    # the current schema's table while it is fresh, an empty table while a reload
    # is due. So the fast path stays one dict lookup, and a request made while a
    # reload is due misses and waits for that reload (`_later`) instead of going
    # out with an id that may be stale. A reload is due when
    #   * a reply carries a schema version other than the cached one (DDL ran, on
    #     this connection or another): `_check_schema`, run after each batch of
    #     replies and before any caller of that batch resumes, so the request a
    #     caller makes right after its `eval` of DDL already waits;
    #   * a space, index or field name is not in the cached schema: the request
    #     waits for a reload, then looks once more, then raises `SchemaError`.
    # There is at most one reload in flight and every caller that needs one waits
    # for that one (`_reloading`). A caller whose miss came after the in-flight
    # reload had already sent its selects waits for it and then for one more, so
    # its retry always sees a schema read after its miss.
    #
    # Requests carry no IPROTO_SCHEMA_VERSION (asynctnt sends none either), so the
    # server never answers ER_WRONG_SCHEMA_VERSION: a space dropped and re-created
    # by ANOTHER connection between our reload and our request fails that one
    # request with the server's NoSuchSpaceError, and its reply triggers the reload.

    def _set_schema(self, schema: Schema) -> None:
        self.schema = schema
        # Replies of this version need no `_check_schema` (the engine's native
        # read path skips it while they match).
        self._codec.known_schema_version = schema.version
        self._names = schema.by_name
        self.schema_loads += 1

    def _schema_due(self) -> bool:
        return self._names is not self.schema.by_name

    async def _load_schema(self, submit: Any) -> None:
        all_ = ITERATORS["ALL"]
        # gather, not one await after the other: when the first fails, the second's
        # failure is still read (and a coroutine from `request` still runs).
        spaces, indexes = await asyncio.gather(
            submit(self._codec.select, VSPACE_ID, 0, (), MAX_LIMIT, 0, all_),
            submit(self._codec.select, VINDEX_ID, 0, (), MAX_LIMIT, 0, all_),
        )
        self._set_schema(Schema.from_rows(self._codec.schema_version, spaces, indexes))

    def _check_schema(self) -> None:
        # Every reply carries the server's schema version; a new one means DDL ran.
        if (
            self._codec.schema_version != self.schema.version
            and self.fetch_schema
            and self._engine.is_connected
        ):
            self._reloading()

    def _reloading(self) -> asyncio.Task:
        """The reload under way, or a new one; until it ends requests wait for it."""
        task = self._reload
        if task is None or task.done():
            self._names = {}
            self._reload_sent = False
            task = self._reload = asyncio.get_running_loop().create_task(self._reload_loop())
            task.add_done_callback(self._reload_done)
        return task

    async def _reload_loop(self) -> None:
        # The version stored is the last one the selects' replies carried. DDL
        # landing between the server's answers to the two selects would leave
        # names of two versions under the later one: rare, and never silent (a
        # name that then misses reloads again, a stale id gets the server's error).
        loading = self._load_schema(self._req)
        self._reload_sent = True
        await loading

    def _reload_done(self, task: asyncio.Task) -> None:
        # Read its outcome here (a reload started by a reply may have no waiter). A
        # lost connection needs no word (the next connection loads the schema anew).
        if task.cancelled():
            return
        exc = task.exception()
        if exc is None or is_expected(exc):
            return
        e = self._engine
        log.warning(
            "tarantool %s:%s: reloading the schema failed: %s",
            e.host,
            e.port,
            describe(exc),
            exc_info=traceback_of(exc),
        )

    async def reload_schema(self) -> None:
        """Fetch space, index and field names again (one load shared by concurrent calls)."""
        await self._engine.ensure_connected()
        await self._fresh_reload()

    async def refetch_schema(self) -> None:
        """`reload_schema` under asynctnt's name."""
        await self.reload_schema()

    async def _fresh_reload(self) -> None:
        """Wait for a reload that sends its selects after this call."""
        task = self._reload
        if task is not None and not task.done() and self._reload_sent:
            with contextlib.suppress(Exception):
                await asyncio.shield(task)
        await asyncio.shield(self._reloading())

    def _space(self, space: int | str) -> SpaceInfo | None:
        """The space's info, or None when we must connect (or reload the schema) first."""
        e = self._engine
        if (not e._ready and not e.is_draining) or self._schema_due():
            return None
        if space.__class__ is str:
            return self.schema.by_name.get(space)  # type: ignore[arg-type]
        return self.schema.space(space)

    def _later(self, space: int | str, build: Any, timeout: Any) -> Awaitable[Any]:
        """`_wait_then_send`, running already: it goes out whether or not it is
        awaited (asynctnt's requests are futures; a port may not await one)."""
        return started(self._wait_then_send(space, build, timeout))

    async def _wait_then_send(self, space: int | str, build: Any, timeout: Any) -> Any:
        """A request that must wait for the connection or the schema first.

        ``build(info, timeout)`` sends the request, or raises `SchemaError` for a
        name the schema lacks: then the names are reloaded once and it is tried
        once more. The wait for a reload counts against ``timeout``.
        """
        e = self._engine
        t = e.request_timeout if timeout is _DEFAULT else timeout
        # A per-call timeout bounds the wait for a connection too (the default
        # one starts once connected, as for any request).
        given = None if timeout is _DEFAULT or t is None else time.monotonic() + t
        if not e._ready and not e.is_draining:
            await e.ensure_connected(given)
        deadline = given if given is not None or t is None else time.monotonic() + t
        fresh = False  # waited for a reload that read the schema after this call
        if self._schema_due() and self.fetch_schema:
            task = self._reload
            fresh = task is None or task.done() or not self._reload_sent
            await self._wait_reload(self._reloading(), deadline)
        try:
            reply = build(self.schema.space(space), _left(deadline, timeout))
        except SchemaError:
            if fresh or not self.fetch_schema:
                raise
            await self._wait_reload(self._fresh_reload(), deadline)
            reply = build(self.schema.space(space), _left(deadline, timeout))
        return await reply

    async def _wait_reload(self, reload: Awaitable[None], deadline: float | None) -> None:
        # Shielded: the reload is shared, a caller that gives up must not cancel it.
        if deadline is None:
            await asyncio.shield(reload)
            return
        try:
            await asyncio.wait_for(asyncio.shield(reload), max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            raise RequestTimeoutError("timed out waiting for the schema reload") from None

    # -- requests -------------------------------------------------------------------
    #
    # Every request method takes ``timeout``, asynctnt's way: None or < 0 is the
    # connection's ``request_timeout``, 0 is no timeout, > 0 is seconds. On expiry
    # the awaitable raises `RequestTimeoutError` (a `TimeoutError`, which is
    # `asyncio.TimeoutError`); the late reply is recognised by its sync and dropped.

    def ping(self, *, timeout: float | None = None) -> Any:
        """Round trip to the server; an empty `Response` whose ``body`` is None."""
        return self._req(self._codec.ping, timeout=_timeout(timeout))

    def select(
        self,
        space: int | str,
        key: Any = None,
        *,
        index: int | str = 0,
        limit: int | None = None,
        offset: int = 0,
        iterator: int | str | None = None,
        timeout: float | None = None,
    ) -> Any:
        """Tuples of `space` matching `key` in `index` (all tuples when key is None)."""
        if index.__class__ is not int and index.__class__ is not str:
            _check_index(index)
        if offset.__class__ is not int:
            offset = _check_offset(offset)
        if key.__class__ is not list and key.__class__ is not tuple:
            key = _key(key)
        if iterator is None:
            it = 0 if key else 2
        elif isinstance(iterator, str):
            try:
                it = ITERATORS[iterator.upper()]
            except KeyError:
                raise InterfaceError(f"unknown iterator {iterator!r}") from None
        else:
            it = int(iterator)
        lim = MAX_LIMIT if limit is None else limit
        send = self._sender() if self._tx_open else self._req
        tmo = _DEFAULT if timeout is None else _timeout(timeout)
        # The fast path builds nothing per call: no closure unless we must wait.
        info = self._names.get(space) if self._engine._ready else None
        if info is None:
            info = self._space(space)
        if info is not None and key.__class__ is not dict:
            idx = index if index.__class__ is int else info.indexes.get(index)  # type: ignore[arg-type]
            if idx is not None:
                return send(
                    self._select, info.id, idx, key, lim, offset, it, info.field_names, timeout=tmo
                )
        return self._later(
            space,
            lambda i, t: send(
                self._select,
                i.id,
                i.index_id(index),
                _key_for(i, index, key),
                lim,
                offset,
                it,
                i.field_names,
                timeout=t,
            ),
            tmo,
        )

    def insert(
        self,
        space: int | str,
        t: Sequence[Any],
        *,
        replace: bool = False,
        timeout: float | None = None,
    ) -> Any:
        """Insert a tuple; returns [inserted tuple] (``replace=True``: `replace`,
        asynctnt's way)."""
        return self._store(space, t, bool(replace), timeout)

    def replace(self, space: int | str, t: Sequence[Any], *, timeout: float | None = None) -> Any:
        """Insert or replace a tuple; returns [tuple]."""
        return self._store(space, t, True, timeout)

    def _store(self, space: int | str, t: Sequence[Any], replace: bool, timeout: Any) -> Any:
        send = self._sender() if self._tx_open else self._req
        tmo = _DEFAULT if timeout is None else _timeout(timeout)
        if isinstance(t, Mapping):
            return self._later(
                space,
                lambda i, w: send(
                    self._insert, i.id, _by_format(i, t), i.field_names, replace, timeout=w
                ),
                tmo,
            )
        info = self._names.get(space) if self._engine._ready else None
        if info is None:
            info = self._space(space)
        if info is None:
            return self._later(
                space,
                lambda i, w: send(self._insert, i.id, t, i.field_names, replace, timeout=w),
                tmo,
            )
        return send(self._insert, info.id, t, info.field_names, replace, timeout=tmo)

    def update(
        self,
        space: int | str,
        key: Any,
        ops: Sequence[Any] | None = None,
        *,
        index: int | str = 0,
        timeout: float | None = None,
        operations: Sequence[Any] | None = None,
    ) -> Any:
        """Update by key with ops like [('=', 1, 'x'), ('+', 'name', 1)]; returns [tuple] or [].
        ``operations`` is asynctnt's name for ``ops``."""
        if ops is None or operations is not None:
            ops = _given_ops(ops, operations)
        if index.__class__ is not int and index.__class__ is not str:
            _check_index(index)
        if key.__class__ is not list and key.__class__ is not tuple:
            key = _key(key)
        send = self._sender() if self._tx_open else self._req
        tmo = _DEFAULT if timeout is None else _timeout(timeout)
        info = self._names.get(space) if self._engine._ready else None
        if info is None:
            info = self._space(space)
        if info is not None and key.__class__ is not dict:
            idx = index if index.__class__ is int else info.indexes.get(index)  # type: ignore[arg-type]
            resolved = _ops_or_none(info, ops)
            if idx is not None and resolved is not None:
                return send(
                    self._update, info.id, idx, key, resolved, info.field_names, timeout=tmo
                )
        return self._later(
            space,
            lambda i, t: send(
                self._update,
                i.id,
                i.index_id(index),
                _key_for(i, index, key),
                _ops(i, ops),
                i.field_names,
                timeout=t,
            ),
            tmo,
        )

    def upsert(
        self,
        space: int | str,
        t: Sequence[Any],
        ops: Sequence[Any] | None = None,
        *,
        timeout: float | None = None,
        operations: Sequence[Any] | None = None,
    ) -> Any:
        """Insert `t`, or apply `ops` to the existing tuple; returns [] (``operations``
        as in `update`)."""
        if ops is None or operations is not None:
            ops = _given_ops(ops, operations)
        send = self._sender() if self._tx_open else self._req
        tmo = _DEFAULT if timeout is None else _timeout(timeout)
        info = self._names.get(space) if self._engine._ready else None
        if info is None:
            info = self._space(space)
        if isinstance(t, Mapping):
            return self._later(
                space,
                lambda i, w: send(self._upsert, i.id, _by_format(i, t), _ops(i, ops), timeout=w),
                tmo,
            )
        if info is not None:
            resolved = _ops_or_none(info, ops)
            if resolved is not None:
                return send(self._upsert, info.id, t, resolved, timeout=tmo)
        return self._later(
            space, lambda i, w: send(self._upsert, i.id, t, _ops(i, ops), timeout=w), tmo
        )

    def delete(
        self, space: int | str, key: Any, *, index: int | str = 0, timeout: float | None = None
    ) -> Any:
        """Delete by key; returns [deleted tuple] or []."""
        if index.__class__ is not int and index.__class__ is not str:
            _check_index(index)
        if key.__class__ is not list and key.__class__ is not tuple:
            key = _key(key)
        send = self._sender() if self._tx_open else self._req
        tmo = _DEFAULT if timeout is None else _timeout(timeout)
        info = self._names.get(space) if self._engine._ready else None
        if info is None:
            info = self._space(space)
        if info is not None and key.__class__ is not dict:
            idx = index if index.__class__ is int else info.indexes.get(index)  # type: ignore[arg-type]
            if idx is not None:
                return send(self._delete, info.id, idx, key, info.field_names, timeout=tmo)
        return self._later(
            space,
            lambda i, t: send(
                self._delete,
                i.id,
                i.index_id(index),
                _key_for(i, index, key),
                i.field_names,
                timeout=t,
            ),
            tmo,
        )

    def call(
        self,
        function: str | None = None,
        args: Sequence[Any] | None = (),
        *,
        timeout: float | None = None,
        push_subscribe: bool = False,
        func_name: str | None = None,
    ) -> Any:
        """Call a stored (Lua) function; returns the list of its return values.
        ``push_subscribe``: a `PushFuture`, whose ``box.session.push`` messages
        `PushIterator` yields (asynctnt's). ``func_name`` is asynctnt's name for
        ``function``; ``args`` is a list or a tuple (None: none)."""
        return self._call(self._codec.call, function, func_name, args, timeout, push_subscribe)

    def call16(
        self,
        function: str | None = None,
        args: Sequence[Any] | None = (),
        *,
        timeout: float | None = None,
        push_subscribe: bool = False,
        func_name: str | None = None,
    ) -> Any:
        """`call` as Tarantool 1.6 made it (asynctnt's): each return value that is
        not a table comes back wrapped in a list."""
        return self._call(self._codec.call16, function, func_name, args, timeout, push_subscribe)

    def eval(
        self,
        expr: str | None = None,
        args: Sequence[Any] | None = (),
        *,
        timeout: float | None = None,
        push_subscribe: bool = False,
        expression: str | None = None,
    ) -> Any:
        """Evaluate Lua (`...` holds args); returns the list of its return values
        (``push_subscribe`` and ``args`` as in `call`; ``expression`` is asynctnt's
        name for ``expr``)."""
        return self._call(
            self._codec.eval, expr, expression, args, timeout, push_subscribe, _EVAL_NAMES
        )

    def _call(
        self,
        encode: Any,
        what: str | None,
        peer_what: str | None,
        args: Any,
        timeout: float | None,
        push_subscribe: bool,
        names: tuple[str, str] = _CALL_NAMES,
    ) -> Any:
        """call, call16 and eval: ``what`` (the function or the expression) is
        given under surge's name or asynctnt's (``peer_what``), not both; ``names``
        are the two names, for the error."""
        if peer_what is not None or what is None:
            what = _renamed(names[0], what, names[1], peer_what)
        if args.__class__ is not tuple and args.__class__ is not list:
            args = _args(args)
        send = self._sender() if self._tx_open else self._req
        if push_subscribe:
            return self._subscribed(send, encode, what, args, timeout)
        return send(encode, what, args, timeout=_timeout(timeout))

    def _subscribed(
        self, send: Any, encode: Any, what: str, args: Sequence[Any], timeout: float | None
    ) -> PushFuture:
        sub = PushFuture()
        reply = send(
            encode_subscribed, self._pushes, sub, encode, what, args, timeout=_timeout(timeout)
        )
        return sub.track(reply, self._pushes)

    def execute(
        self,
        query: str | int,
        params: Any = (),
        *,
        timeout: float | None = None,
        args: Any = None,
        parse_metadata: bool = True,
    ) -> Any:
        """Run SQL (text or a prepared statement id) with positional or named params;
        awaits to an `SQLResult`. ``args`` is asynctnt's name for ``params``;
        ``parse_metadata`` is taken and column names are always read."""
        if args is not None:
            params = _renamed("params", params or None, "args", args)
        send = self._sender() if self._tx_open else self._req
        return _sql_result(
            send(self._codec.execute, query, _sql_params(params), timeout=_timeout(timeout)), self
        )

    def prepare(
        self, sql: str | None = None, *, timeout: float | None = None, query: str | None = None
    ) -> PreparedStatement:
        """A `PreparedStatement` (asynctnt's; ``query`` is its name for ``sql``):
        awaiting it prepares the SQL on the server and gives the statement id for
        `execute`; ``async with`` prepares it and unprepares it after."""
        if query is not None or sql is None:
            sql = _renamed("sql", sql, "query", query)
        return PreparedStatement(self, sql, timeout)

    def prepare_iproto(self, query: str, timeout: float | None = None) -> Any:
        """Prepare SQL now (asynctnt's low-level call): awaits to an `SQLResult`
        whose ``stmt_id``, ``params`` and ``params_count`` describe the statement."""
        send = self._sender() if self._tx_open else self._req
        return _sql_result(send(self._codec.prepare, query, timeout=_timeout(timeout)), self)

    def unprepare_iproto(self, stmt_id: int, timeout: float | None = None) -> Any:
        """Drop a prepared statement on the server (asynctnt's low-level call)."""
        send = self._sender() if self._tx_open else self._req
        return send(self._codec.prepare, int(stmt_id), timeout=_timeout(timeout))


class _Closing:
    """What `Connection.close` returns: the close is under way; awaiting this waits
    until the connection is gone. Left unawaited (a port of asynctnt's plain
    ``close()``) it warns of nothing: no coroutine exists until it is awaited."""

    __slots__ = ("_gone",)

    def __init__(self, gone: Any) -> None:
        self._gone = gone

    def __await__(self) -> Generator[Any, None, None]:
        return self._gone().__await__()


def _renamed(name: str, value: Any, peer_name: str, peer_value: Any) -> Any:
    """One argument given under surge's name or under asynctnt's, not both."""
    if value is not None and peer_value is not None:
        raise TypeError(f"give {name}= or {peer_name}=, not both")
    if value is None and peer_value is None:
        raise TypeError(f"missing required argument: {name!r}")
    return peer_value if value is None else value


def _given_ops(ops: Any, operations: Any) -> Any:
    """Update operations under surge's name or asynctnt's (None: none, as asynctnt)."""
    if operations is None:
        return () if ops is None else ops
    if ops is not None:
        raise TypeError("give ops= or operations=, not both")
    return operations


def _args(args: Any) -> Any:
    """Arguments of call/eval: a list or a tuple, None for none (asynctnt's rule;
    anything else would reach the server as a malformed request)."""
    if args is None:
        return ()
    if isinstance(args, list | tuple):
        return args
    raise TypeError(f"args must be a list or a tuple, not {type(args).__name__}")


def _check_index(index: Any) -> None:
    # asynctnt's rule: an index is a name or an id; None is not "the primary key".
    if not isinstance(index, (int, str)):
        raise TypeError(f"index must be a str or an int, not {type(index).__name__}")


def _check_offset(offset: Any) -> int:
    # asynctnt's rule: an integer (None is not 0).
    try:
        return operator.index(offset)
    except TypeError:
        raise TypeError(f"offset must be an int, not {type(offset).__name__}") from None


def _timeout(timeout: float | None) -> Any:
    """asynctnt's per-call timeout rule in the engine's terms (see "requests")."""
    if timeout is None or timeout < 0:
        return _DEFAULT
    if timeout == 0:
        return None
    return float(timeout)


def _left(deadline: float | None, timeout: Any) -> Any:
    """What is left of a per-call timeout after waiting (or the default, unchanged)."""
    if deadline is None:
        return timeout
    return max(0.001, deadline - time.monotonic())


def _sql_result(reply: Any, conn: Connection) -> Awaitable[SQLResult]:
    """The reply as an `SQLResult`, in a future resolved by the reply's (no task,
    no extra loop step): like asynctnt's execute, a future, so the request goes out
    whether or not it is awaited."""
    if not isinstance(reply, asyncio.Future):  # built outside a running loop
        return _as_sql_result(reply, conn)
    out = reply.get_loop().create_future()
    chain(reply, out, lambda rows: SQLResult(rows, conn.schema_id))
    return out


async def _as_sql_result(reply: Any, conn: Connection) -> SQLResult:
    got = await reply
    return SQLResult(got, conn.schema_id)


#: Update operators, as Tarantool knows them (``:`` is splice: five items).
UPDATE_OPERATORS = frozenset("+-&^|#!=:")


def _ops(info: SpaceInfo, ops: Sequence[Any]) -> list:
    """Update ops checked, field names resolved to positions (a plain name the
    format lacks raises `SchemaError`: on a missing key, or in an upsert, the server
    would skip the operation without a word). A malformed operation raises
    `UpdateOperationError`, a `TypeError` (or, too short, `IndexError`/`ValueError`)
    where asynctnt raises one, before anything is sent."""
    if not isinstance(ops, list | tuple):
        raise UpdateOperationError(
            f"update operations must be a list or a tuple, not {type(ops).__name__}"
        )
    return [_op(info, op) for op in ops]


def _op(info: SpaceInfo, op: Any) -> Any:
    if not isinstance(op, list | tuple):
        raise UpdateOperationError(
            f"an update operation is a list or a tuple, not {type(op).__name__}: {op!r}"
        )
    if len(op) < 3:
        raise UpdateOperationLengthError(
            f"update operation {op!r}: want (operator, field, value), at least 3 items"
        )
    kind, field = op[0], op[1]
    if isinstance(kind, bytes):  # asynctnt takes b"=" too
        kind = kind.decode("latin-1")
    if not isinstance(kind, str):
        raise UpdateOperationError(
            f"update operator must be a str or bytes, not {type(kind).__name__}: {op!r}"
        )
    if len(kind) != 1 or kind not in UPDATE_OPERATORS:
        raise UpdateOperationError(
            f"unknown update operator {kind!r} in {op!r}: one of + - & ^ | # ! = :"
        )
    if kind == ":":
        if len(op) < 5:
            raise UpdateOperationLengthError(
                f"splice {op!r}: want (':', field, position, length, string), 5 items"
            )
        if not (_plain_int(op[2]) and _plain_int(op[3])):
            raise UpdateOperationError(f"splice {op!r}: position and length must be ints")
    if isinstance(field, str):
        pos = info.field_names.get(field) if info.field_names else None
        if pos is not None:
            field = pos
        elif "." not in field and "[" not in field:
            raise SchemaError(f"space {info.name!r} has no field named {field!r}")
        # else a JSON path ("meta.tags[1]", "[3].x"): sent as it is, the server
        # resolves it (Tarantool >= 2.3), as asynctnt does.
    elif not _plain_int(field):
        # (asynctnt sends True as field 1: a bool here is a bug, not a field number.)
        raise UpdateOperationError(
            f"update field must be a field number (int) or name (str), not"
            f" {type(field).__name__}: {op!r}"
        )
    if field is op[1] and kind is op[0]:
        return op
    return (kind, field, *op[2:])


def _plain_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _by_format(info: SpaceInfo, t: Mapping[str, Any]) -> list:
    """A tuple given as ``{field name: value}``, laid out by the space's format
    (a field not given is nil, as asynctnt). A name the format lacks raises
    `SchemaError` (asynctnt drops it with a warning: that would lose data)."""
    names = info.field_names
    if not names:
        raise SchemaError(f"space {info.name!r} has no format: give the tuple as a list")
    out: list = [None] * (max(names.values()) + 1)
    for name, value in t.items():
        pos = names.get(name)
        if pos is None:
            raise SchemaError(f"space {info.name!r} has no field named {name!r}")
        out[pos] = value
    return out


def _ops_or_none(info: SpaceInfo, ops: Sequence[Any]) -> list | None:
    """`_ops`, or None when a field name is not in the cached schema (reload first)."""
    try:
        return _ops(info, ops)
    except SchemaError:
        return None


def _sql_params(params: Any) -> Any:
    if params is None:  # asynctnt's default
        return ()
    if isinstance(params, dict):
        return [{(k if k[:1] in ":@$" else ":" + k): v} for k, v in params.items()]
    return params


def connect(
    address: str = "127.0.0.1:3301",
    *,
    user: str | None = None,
    password: str | None = None,
    **kwargs: Any,
) -> Connection:
    """A lazy `Connection` to `host:port` (await it, or just use it, to connect).
    ``host=`` and ``port=`` (asynctnt's ``await asynctnt.connect(host=, port=)``)
    stand for the address's."""
    if "://" in address and "@" in address:
        creds = address.split("://", 1)[1].rsplit("@", 1)[0]
        u, _, p = creds.partition(":")
        user = user or u
        password = password or p
    host, port = parse_address(address)
    host = kwargs.pop("host", host)
    port = kwargs.pop("port", port)
    return Connection(host, port, user=user, password=password, **kwargs)
