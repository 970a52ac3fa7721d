"""`Redis`: commands of any number of coroutines pipelined over one connection."""

from __future__ import annotations

import asyncio
import codecs
import functools
import ssl as _ssl
import types
from collections.abc import AsyncIterator, Generator
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, unquote, urlsplit

from surge._core import RespCodec, RespLane, TlsClientConfig, TlsConfigError
from surge.engine import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_LIVENESS_INTERVAL,
    DEFAULT_LIVENESS_TIMEOUT,
    DEFAULT_MAX_IN_FLIGHT,
    EARLY_FLUSH,
    FLUSH_SIZE,
    Endpoint,
    PipelinedConnection,
    Tls,
    liveness,
)
from surge.errors import ProtocolError
from surge.redis import replies
from surge.redis.blocking import (
    DEFAULT_BLOCKING_POOL_TIMEOUT,
    DEFAULT_MAX_BLOCKING_CONNECTIONS,
    BlockingPool,
    is_blocking,
)
from surge.redis.commands import Commands, Reply, _plain_set
from surge.redis.connection_pool import ConnectionPool
from surge.redis.errors import DataError, make_error

if TYPE_CHECKING:
    from surge.redis.encoder import Encoder
    from surge.redis.lock import Lock
    from surge.redis.monitor import Monitor
    from surge.redis.pipeline import Pipeline
    from surge.redis.pubsub import PubSub

DEFAULT_PORT = 6379
#: TLS through the engine's native record layer when the options allow it (see
#: `_native_tls`); False: always the ``ssl`` module (a switch for comparisons).
NATIVE_TLS = True
#: ``get(k)``, the plain ``set(k, v)`` and the sending of every other command in one
#: native call (`surge._core.RespLane`, the engine's request path step for step);
#: False: the Python methods (a switch for comparisons).
NATIVE_LANE = True
#: The liveness probe: any reply (+PONG, or -NOAUTH before AUTH) proves the server alive.
PROBE = b"PING\r\n"


def _same(e: Any) -> Any:
    # The codec already made the exception object (with its class from the prefix).
    return e


class _StreamGuard:
    """After each read: replies behind bytes that are not RESP cannot be matched,
    so the connection is dropped (commands still waiting fail with ConnectionLostError)."""

    __slots__ = ("codec", "engine")

    def __init__(self, codec: RespCodec) -> None:
        self.codec = codec
        self.engine: PipelinedConnection | None = None

    def __call__(self) -> None:
        if self.codec.failed and self.engine is not None:
            self.engine.abort()


async def _then(aw: Any, reply: Any) -> Any:
    return reply(await aw)


async def _value(v: Any) -> Any:
    return v


def _plain(args: tuple[Any, ...]) -> tuple[Any, ...]:
    # The codec takes bytes, str, int and float; a memoryview is copied to bytes
    # (inside a pipeline's list of commands too).
    return tuple(
        bytes(a)
        if isinstance(a, memoryview)
        else [_plain(c) for c in a]
        if isinstance(a, list) and a and isinstance(a[0], tuple)
        else a
        for a in args
    )


class Redis(Commands):
    """A Redis client on one pipelined connection; made outside a loop, it connects on
    first use. Command methods return awaitables; a bad argument raises `DataError`
    at the call, before anything is sent.

    Where it differs from redis-py: status replies (``+OK``, TYPE's ``+string``)
    are always ``str`` (they are ASCII words, not data); connection errors are
    surge's (`surge.errors.ConnectionLostError`, ...), not `RedisError`s; a pipeline
    that WATCHes opens a connection of its own for that transaction (and the
    client's own ``watch``/``unwatch``, ``reset`` and ``client_reply("OFF")``, which
    would change the connection every coroutine shares, raise `DataError`); a path that
    goes silent with commands pending is found dead within ``liveness_interval +
    2 * liveness_timeout`` seconds (20 s by default, see `surge.engine`) even with
    no timeout set, where redis-py relies on its 5 s socket timeout.

    Blocking commands (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP, BZPOPMIN/MAX,
    BZMPOP, XREAD/XREADGROUP with BLOCK, WAIT, WAITAOF; by method or by
    `execute_command`) go on connections of their own, at most
    ``max_blocking_connections`` (16) at a time; more callers wait for one at most
    ``blocking_pool_timeout`` seconds. They never hold up the pipelined connection.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        db: int = 0,
        password: str | None = None,
        *,
        username: str | None = None,
        decode_responses: bool = False,
        protocol: int = 2,
        client_name: str | None = None,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        request_timeout: float | None = None,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        reconnect: bool = True,
        liveness_interval: float | None = DEFAULT_LIVENESS_INTERVAL,
        liveness_timeout: float = DEFAULT_LIVENESS_TIMEOUT,
        tcp_keepalive: bool = True,
        max_blocking_connections: int = DEFAULT_MAX_BLOCKING_CONNECTIONS,
        blocking_pool_timeout: float | None = DEFAULT_BLOCKING_POOL_TIMEOUT,
        unix_socket_path: str | None = None,
        ssl: bool | _ssl.SSLContext = False,
        ssl_ca_certs: str | None = None,
        ssl_certfile: str | None = None,
        ssl_keyfile: str | None = None,
        ssl_password: str | None = None,
        ssl_cert_reqs: str = "required",
        ssl_check_hostname: bool = True,
        # redis-py's names, so a port keeps its keywords (docs/migration/redis-py.md):
        socket_timeout: float | None = None,
        socket_connect_timeout: float | None = None,
        socket_keepalive: bool | None = None,
        socket_keepalive_options: Any = None,
        socket_read_size: int | None = None,
        health_check_interval: float = 0,
        max_connections: int | None = None,
        retry_on_timeout: bool = False,
        retry_on_error: list | None = None,
        retry: Any = None,
        encoding: str = "utf-8",
        encoding_errors: str = "strict",
        single_connection_client: bool = False,
        auto_close_connection_pool: bool | None = None,
        lib_name: str | None = None,
        lib_version: str | None = None,
        connection_pool: ConnectionPool | None = None,
    ) -> None:
        if connection_pool is not None:
            # A view of the pool's one client (see `connection_pool.py`): the same
            # connection and state, shared through one attribute dict, so that a
            # client made per request costs no connection. The other keywords are
            # the pool's, as in redis-py.
            self.__dict__ = connection_pool.client().__dict__
            return
        given = {k: v for k, v in locals().items() if k not in ("self", "connection_pool")}
        if protocol not in (2, 3):
            raise DataError(f"protocol must be 2 or 3, not {protocol!r}")
        # redis-py's socket options map onto surge's: socket_timeout bounds each
        # command (request_timeout), socket_connect_timeout the connect, a health
        # check interval sets the liveness probe's, max_connections bounds the
        # connections of blocking commands (the rest share one connection). The
        # retry options are taken and not acted on: surge never sends a command twice.
        if socket_connect_timeout is not None:
            connect_timeout = socket_connect_timeout
        if socket_timeout is not None and request_timeout is None:
            request_timeout = socket_timeout
        if socket_keepalive is not None:
            tcp_keepalive = socket_keepalive
        if health_check_interval:
            liveness_interval = health_check_interval
        if max_connections is not None:
            max_blocking_connections = max_connections
        if codecs.lookup(encoding).name != "utf-8" or encoding_errors != "strict":
            # Replies are decoded in Rust as strict UTF-8; another encoding would
            # give other strings than redis-py, silently.
            raise DataError(
                f"only encoding='utf-8', encoding_errors='strict' are supported,"
                f" not {encoding!r}, {encoding_errors!r}"
            )
        self.host, self.port, self.db = host, port, db
        tls = None
        if isinstance(ssl, _ssl.SSLContext):
            tls = Tls(ssl, host)
        elif ssl:
            options = (
                ssl_ca_certs,
                ssl_certfile,
                ssl_keyfile,
                ssl_password,
                ssl_cert_reqs,
                ssl_check_hostname,
            )
            tls = Tls(_ssl_context(*options), host, native=_native_tls(*options))
        if unix_socket_path is not None:
            tls = None  # a local socket: no TLS, as redis-py
        #: Where the engine connects (TLS from the first byte with ``ssl``, as rediss://).
        self.endpoint = Endpoint(host, port, path=unix_socket_path, tls=tls)
        self.username, self.password = username, password
        self.decode_responses = decode_responses
        self._protocol = protocol
        self.client_name = client_name
        #: The keywords it was made with (`connection_pool.connection_kwargs`).
        self._given = given
        self._engine_options: dict[str, Any] = {
            "connect_timeout": connect_timeout,
            "request_timeout": request_timeout,
            "reconnect": reconnect,
            "tcp_keepalive": tcp_keepalive,
        }
        # Checked here, so a bad value raises at the call; each engine gets its own
        # ping, bound to its codec.
        liveness(liveness_interval, liveness_timeout)
        self._liveness = (liveness_interval, liveness_timeout)
        self._codec = RespCodec(decode_responses, False, make_error, DataError, ProtocolError)
        self._scratch = RespCodec(False, False, make_error, DataError, ProtocolError)
        #: Where a command sent with `_routed` that a cluster node redirected goes:
        #: ``(future, error, args, ok)`` (`RedisCluster` sets it on its nodes' clients).
        self._on_redirect: Any = None
        #: A cluster node's direct path (`RespLane.routed`), when the lane is on.
        self._routed: Any = None
        #: Called when the connection is lost (`RedisCluster`: the map is read again).
        self._on_connection_lost: Any = None
        self._engine = self.new_engine(
            self._codec,
            max_in_flight=max_in_flight,
            on_lost=self._use_cold_path,
            on_out_of_band=self._out_of_band,
        )
        self._use_cold_path()
        self._command = self._codec.command
        self._command_ok = self._codec.command_ok
        self._blocking = BlockingPool(self, max_blocking_connections, blocking_pool_timeout)
        #: How `_exec` sends a command (a reply as the codec makes it, or +OK as True).
        self._submit: Any = self._submit_py
        self._submit_ok: Any = self._submit_ok_py
        # A traced connection wraps its own `request`: the lane would bypass it.
        if NATIVE_LANE and "request" not in vars(self._engine):
            # The hot path: the lane does natively what `get`, `set`, `_submit_py` and
            # `_submit_ok_py` do, and calls them whenever it cannot (not connected,
            # over a limit, a memoryview, SET with options, a request timeout).
            lane = RespLane(
                self._codec,
                self._engine,
                types.MethodType(Redis.get, self),
                types.MethodType(Redis.set, self),
                self._submit_py,
                self._submit_ok_py,
                FLUSH_SIZE,
                EARLY_FLUSH,
            )
            self._submit, self._submit_ok = lane.command, lane.command_ok
            self._routed = lane.routed
            cls = type(self)
            if cls.get is Redis.get and cls.set is Redis.set:  # not a subclass's own
                self.__dict__["get"] = lane.get
                self.__dict__["set"] = lane.set

    def _out_of_band(self, value: Any) -> None:
        # A redirection (MOVED, ASK, ...) of a command a cluster sent with `_routed`:
        # the command did not run, and its future, taken back from the engine, goes
        # to the cluster, which sends the command where the slot is. Anything else
        # out of band (a RESP3 push on this connection) is dropped, as before.
        if type(value) is not tuple or not value or value[0] != "redirect":
            return
        _, rid, exc, args, ok = value
        engine = self._engine
        fut = engine._pending.pop(rid, None)
        engine._deadline_of.pop(rid, None)
        if fut is None or fut.done():
            return  # cancelled meanwhile: nothing waits for it
        if self._on_redirect is None:
            fut.set_exception(exc)
            return
        try:
            self._on_redirect(fut, exc, args, ok)
        except Exception as e:  # the read path goes on; the caller gets the error
            if not fut.done():
                fut.set_exception(e)

    def _submit_py(self, *args: Any) -> Any:
        return self._req(self._command, *args)

    def _submit_ok_py(self, *args: Any) -> Any:
        return self._req(self._command_ok, *args)

    def new_engine(self, codec: RespCodec, **kwargs: Any) -> PipelinedConnection:
        """A connection to the same server with the same handshake (pub/sub uses one)."""
        guard = _StreamGuard(codec)
        ping = functools.partial(codec.command, "PING")
        guard.engine = PipelinedConnection(
            self.host,
            self.port,
            codec,
            endpoints=[self.endpoint],
            liveness=liveness(*self._liveness, ping=ping, probe=PROBE),
            on_connect=kwargs.pop("on_connect", self._handshake),
            on_batch=guard,
            make_error=_same,
            **{**self._engine_options, **kwargs},
            driver="redis",
        )
        return guard.engine

    def _use_cold_path(self, err: BaseException | None = None) -> None:
        # Not connected, a command's encoding waits inside the engine, where a
        # memoryview could not be caught and retried: until the connection is
        # up, arguments are made plain first. Once up, the engine's own request
        # (the hot path; `_exec` retries a refused memoryview there).
        self._req = self._request_cold
        if err is not None and self._on_connection_lost is not None:
            self._on_connection_lost()

    def _request_cold(self, encode: Any, *args: Any, **kwargs: Any) -> Any:
        plain = _plain(args)
        if not self._engine.is_connected:
            # The engine encodes once connected: a bad argument (None, bool, a dict)
            # would surface only then. Encoded once here into a scratch buffer, it
            # raises DataError at the call, as on the hot path.
            getattr(self._scratch, encode.__name__)(*plain)
            self._scratch.reset()
        return self._engine.request(encode, *plain, **kwargs)

    async def _handshake(self, engine: PipelinedConnection) -> None:
        # Every step is sent at once and awaited together: one round trip.
        cmd = engine.codec.command  # type: ignore[attr-defined]
        steps = []
        if self.protocol == 3:
            hello: list[Any] = ["HELLO", 3]
            if self.password is not None:
                hello += ("AUTH", self.username or "default", self.password)
            if self.client_name:
                hello += ("SETNAME", self.client_name)
            steps.append(engine.submit_raw(cmd, *hello))
        else:
            if self.password is not None:
                user = (self.username,) if self.username else ()
                steps.append(engine.submit_raw(cmd, "AUTH", *user, self.password))
            if self.client_name:
                steps.append(engine.submit_raw(cmd, "CLIENT", "SETNAME", self.client_name))
        if self.db:
            steps.append(engine.submit_raw(cmd, "SELECT", self.db))
        if steps:
            results = await asyncio.gather(*steps, return_exceptions=True)
            for r in results:
                if isinstance(r, BaseException):
                    raise r
        if engine is getattr(self, "_engine", None):
            self._req = engine.request

    @property
    def protocol(self) -> int:
        """The RESP version spoken (2, or 3 after HELLO 3)."""
        return self._protocol

    # -- lifecycle ------------------------------------------------------------------

    @property
    def engine(self) -> PipelinedConnection:
        """The pipelined connection underneath (stats, limits)."""
        return self._engine

    @property
    def is_connected(self) -> bool:
        """True once connected and the handshake (AUTH, SELECT, HELLO) is done."""
        return self._engine.is_connected

    async def connect(self) -> Redis:
        """Connect now rather than on first use."""
        await self._engine.connect()
        return self

    def __await__(self) -> Generator[Any, None, Redis]:
        return self.connect().__await__()

    async def close(self, close_connection_pool: bool | None = None) -> None:
        """Close; pending commands fail with ClosedError. A client made from a
        `ConnectionPool` leaves the pool's connection to its other clients, unless
        it was made by `from_pool` or ``close_connection_pool`` is true (then the
        pool is disconnected, as in redis-py)."""
        pool = self.__dict__.get("_connection_pool")
        if pool is not None and self is not pool._client:
            owner = self in pool._owners
            if close_connection_pool or (close_connection_pool is None and owner):
                await pool.aclose()
            return
        await self._blocking.close()
        await self._engine.close()

    @property
    def connection_pool(self) -> ConnectionPool:
        """redis-py's pool object: the keywords of this client's connection
        (``connection_kwargs``) and `ConnectionPool.disconnect`."""
        pool = self.__dict__.get("_connection_pool")
        if pool is None:
            kwargs = dict(self._given)
            pool = ConnectionPool(max_connections=kwargs.pop("max_connections"), **kwargs)
            pool._client = self
            self.__dict__["_connection_pool"] = pool
        return pool  # type: ignore[no-any-return]

    def get_connection_kwargs(self) -> dict[str, Any]:
        """The keywords of this client's connection (redis-py's call)."""
        return self.connection_pool.connection_kwargs

    @classmethod
    def from_pool(cls, connection_pool: ConnectionPool) -> Redis:
        """A client of ``connection_pool`` that disconnects the pool when closed."""
        r = cls(connection_pool=connection_pool)
        connection_pool._owners.add(r)
        return r

    aclose = close

    async def __aenter__(self) -> Redis:
        return await self.connect()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<surge.redis.Redis {self.host}:{self.port}/{self.db}>"

    # -- commands -------------------------------------------------------------------

    def _exec(self, reply: Reply, *args: Any) -> Any:
        try:
            if reply is None:
                return self._submit(*args)
            if reply is replies.ok or reply is replies.pong:
                # The codec answers +OK with True itself: no wrapper per SET.
                return self._submit_ok(*args)
            if reply is replies.raw:
                # A binary payload (DUMP): bytes whatever decode_responses says.
                return self._req(self._codec.command_raw, *args)
            return _then(self._submit(*args), reply)
        except DataError:
            # Off the hot path: the codec refused an argument; a memoryview is
            # taken as its bytes, anything else raises again.
            if not any(isinstance(a, memoryview) for a in args):
                raise
            return self._exec(reply, *_plain(args))

    def _exec_blocking(self, reply: Reply, *args: Any) -> Any:
        return self._blocking.run(reply, _plain(args))

    def _const(self, value: Any) -> Any:
        return _value(value)

    def execute_command(self, *args: Any) -> Any:
        """Any command; `execute_command("OBJECT", "ENCODING", k)` (blocking ones
        go on a connection of their own, as the methods do)."""
        if is_blocking(args):
            return self._blocking.run(None, _plain(args))
        return self._exec(None, *args)

    @property
    def blocking_pool(self) -> BlockingPool:
        """The connections blocking commands run on."""
        return self._blocking

    def get(self, name: Any) -> Any:
        """GET: the value or None."""
        try:
            return self._req(self._command, "GET", name)
        except DataError:
            return self._exec(None, "GET", name)  # a memoryview is taken as its bytes

    def set(
        self,
        name: Any,
        value: Any,
        ex: Any = None,
        px: Any = None,
        nx: bool = False,
        xx: bool = False,
        keepttl: bool = False,
        get: bool = False,
        exat: Any = None,
        pxat: Any = None,
    ) -> Any:
        """SET with redis-py's options (see `Commands.set`); the plain ``set(k, v)``
        goes straight to the codec: the hot path of most programs."""
        if _plain_set(ex, px, nx, xx, keepttl, get, exat, pxat):
            try:
                return self._req(self._command_ok, "SET", name, value)
            except DataError:
                pass  # a memoryview (or a bad value): the general path decides
        return Commands.set(self, name, value, ex, px, nx, xx, keepttl, get, exat, pxat)

    def pipeline(self, transaction: bool = True) -> Pipeline:
        """Commands queued and sent together by `execute()` (in MULTI/EXEC when transaction)."""
        from surge.redis.pipeline import Pipeline

        return Pipeline(self, transaction)

    def pubsub(self, ignore_subscribe_messages: bool = False) -> PubSub:
        """A subscriber on a connection of its own."""
        from surge.redis.pubsub import PubSub

        return PubSub(self, ignore_subscribe_messages=ignore_subscribe_messages)

    async def quit(self) -> Any:
        """QUIT: the server answers and closes the connection; surge drops it at once
        (commands pipelined behind QUIT fail, as on any connection) and the next
        command reconnects."""
        ok = await self._exec(replies.ok, "QUIT")
        await self._drop()
        return ok

    async def _drop(self) -> None:
        """Drop the connection now; the next command opens a new one."""
        self._engine.abort()
        # The transport reports the loss on a later loop iteration: until then a
        # new command would still be written to the closing connection.
        for _ in range(100):
            if not self._engine.is_connected:
                break
            await asyncio.sleep(0)

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> Redis:
        """`connect(url, **kwargs)` under redis-py's name."""
        return connect(url, **kwargs)

    def get_encoder(self) -> Encoder:
        """redis-py's encoder object (the client itself encodes in Rust, same rules)."""
        from surge.redis.encoder import Encoder

        return Encoder(decode_responses=self.decode_responses)

    def lock(
        self,
        name: Any,
        timeout: float | None = None,
        sleep: float = 0.1,
        blocking: bool = True,
        blocking_timeout: float | None = None,
        lock_class: type[Lock] | None = None,
        thread_local: bool = True,
        raise_on_release_error: bool = True,
    ) -> Lock:
        """redis-py's `Lock` on key ``name`` (see `surge.redis.lock`)."""
        from surge.redis.lock import Lock

        cls = lock_class or Lock
        return cls(
            self,
            name,
            timeout=timeout,
            sleep=sleep,
            blocking=blocking,
            blocking_timeout=blocking_timeout,
            thread_local=thread_local,
            raise_on_release_error=raise_on_release_error,
        )

    def monitor(self) -> Monitor:
        """MONITOR on a connection of its own: ``async with r.monitor() as m``."""
        from surge.redis.monitor import Monitor

        return Monitor(self)

    async def transaction(
        self,
        func: Any,
        *watches: Any,
        shard_hint: Any = None,
        value_from_callable: bool = False,
        watch_delay: float | None = None,
    ) -> Any:
        """Run ``func(pipe)`` (sync or async) with ``watches`` WATCHed, then EXEC;
        again from the start whenever a watched key changed (WatchError)."""
        from surge.redis.errors import WatchError

        while True:
            pipe = self.pipeline(True)
            try:
                await pipe.watch(*watches)
                value = func(pipe)
                if asyncio.iscoroutine(value):
                    value = await value
                result = await pipe.execute()
                return value if value_from_callable else result
            except WatchError:
                if watch_delay is not None and watch_delay > 0:
                    await asyncio.sleep(watch_delay)
            finally:
                await pipe.reset()

    async def scan_iter(
        self, match: Any = None, count: int | None = None, _type: str | None = None
    ) -> AsyncIterator[Any]:
        """Every key, SCAN by SCAN (a key may come twice, as SCAN promises no more)."""
        cursor = -1
        while cursor != 0:
            cursor, keys = await self.scan(max(cursor, 0), match=match, count=count, _type=_type)
            for k in keys:
                yield k

    async def hscan_iter(
        self, name: Any, match: Any = None, count: int | None = None
    ) -> AsyncIterator[tuple[Any, Any]]:
        """Every (field, value) of a hash, HSCAN by HSCAN."""
        cursor = -1
        while cursor != 0:
            cursor, data = await self.hscan(name, max(cursor, 0), match=match, count=count)
            for item in data.items():
                yield item

    async def sscan_iter(
        self, name: Any, match: Any = None, count: int | None = None
    ) -> AsyncIterator[Any]:
        """Every member of a set, SSCAN by SSCAN."""
        cursor = -1
        while cursor != 0:
            cursor, data = await self.sscan(name, max(cursor, 0), match=match, count=count)
            for m in data:
                yield m

    async def zscan_iter(
        self,
        name: Any,
        match: Any = None,
        count: int | None = None,
        score_cast_func: Any = float,
    ) -> AsyncIterator[tuple[Any, Any]]:
        """Every (member, score) of a sorted set, ZSCAN by ZSCAN."""
        cursor = -1
        while cursor != 0:
            cursor, data = await self.zscan(
                name, max(cursor, 0), match=match, count=count, score_cast_func=score_cast_func
            )
            for item in data:
                yield item


#: redis-py's ssl_cert_reqs names.
_CERT_REQS = {
    "required": _ssl.CERT_REQUIRED,
    "optional": _ssl.CERT_OPTIONAL,
    "none": _ssl.CERT_NONE,
}


def _ssl_context(
    ca_certs: str | None,
    certfile: str | None,
    keyfile: str | None,
    password: str | None,
    cert_reqs: str,
    check_hostname: bool,
) -> _ssl.SSLContext:
    """redis-py's TLS options as a context (the default trust store unless ca_certs)."""
    if cert_reqs not in _CERT_REQS:
        raise DataError(f"ssl_cert_reqs must be one of {', '.join(_CERT_REQS)}, not {cert_reqs!r}")
    try:
        ctx = _ssl.create_default_context(cafile=ca_certs)
        if certfile:
            ctx.load_cert_chain(certfile, keyfile, password=password)
    except (OSError, _ssl.SSLError) as exc:
        raise DataError(f"cannot load the TLS files: {exc}") from None
    ctx.check_hostname = check_hostname and cert_reqs == "required"
    ctx.verify_mode = _CERT_REQS[cert_reqs]
    return ctx


def _native_tls(
    ca_certs: str | None,
    certfile: str | None,
    keyfile: str | None,
    password: str | None,
    cert_reqs: str,
    check_hostname: bool,
) -> TlsClientConfig | None:
    """The checks of `_ssl_context`'s context for the engine's native (rustls) record
    layer (see `surge.endpoint`: a few Python calls less per read and per write), or
    None where only the ``ssl`` module can do them: the system trust store (no
    ``ssl_ca_certs`` while the chain is checked), an encrypted client key."""
    if not NATIVE_TLS or password is not None:
        return None
    verify = cert_reqs != "none"
    if verify and ca_certs is None:
        return None
    try:
        return TlsClientConfig(
            cafile=ca_certs if verify else None,
            # As the context: CERT_OPTIONAL checks the chain (a server always sends
            # one) but not the name.
            check_name=check_hostname and cert_reqs == "required",
            certfile=certfile,
            keyfile=keyfile,
        )
    except TlsConfigError:
        return None  # the ssl module's context says why, or copes (e.g. a key format)


def connect(url: str = "redis://127.0.0.1:6379/0", **kwargs: Any) -> Redis:
    """A lazy `Redis` for ``redis://[[user]:password@]host[:port][/db][?db=N]``,
    ``rediss://`` (TLS, redis-py's ``ssl_*`` options as keywords or in the query)
    or ``unix:///path/to/socket?db=N`` (`host:port` alone works too); keyword
    arguments win over the URL."""
    return Redis(**{**url_options(url), **kwargs})


def url_options(url: str) -> dict[str, Any]:
    """`Redis` keyword arguments from a ``redis://``, ``rediss://`` or ``unix://`` URL."""
    if "://" not in url:
        url = "redis://" + url
    u = urlsplit(url)
    if u.scheme not in ("redis", "rediss", "unix", ""):
        raise DataError(f"unsupported scheme {u.scheme!r} (redis://, rediss:// or unix://)")
    opts: dict[str, Any] = {"host": u.hostname or "127.0.0.1", "port": u.port or DEFAULT_PORT}
    if u.scheme == "rediss":
        opts["ssl"] = True
    if u.scheme == "unix":
        opts["unix_socket_path"] = unquote(u.path)
    if u.password is not None:
        opts["password"] = unquote(u.password)
    if u.username:
        opts["username"] = unquote(u.username)
    path = u.path.strip("/")
    if path and u.scheme != "unix":
        opts["db"] = int(path)
    query = parse_qs(u.query)
    for name in ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile", "ssl_cert_reqs"):
        if name in query:
            opts[name] = query[name][0]
    if "ssl_check_hostname" in query:
        opts["ssl_check_hostname"] = query["ssl_check_hostname"][0].lower() in ("1", "true", "yes")
    if "db" in query:
        opts["db"] = int(query["db"][0])
    if "protocol" in query:
        opts["protocol"] = int(query["protocol"][0])
    for name, parse in _URL_QUERY_OPTIONS.items():
        if name in query:
            opts[name] = parse(query[name][0])
    return opts


def _flag(value: str) -> bool:
    return value.lower() in ("1", "true", "yes", "y", "on")


#: Options a URL's query may carry, as redis-py reads them.
_URL_QUERY_OPTIONS: dict[str, Any] = {
    "decode_responses": _flag,
    "socket_timeout": float,
    "socket_connect_timeout": float,
    "socket_keepalive": _flag,
    "health_check_interval": float,
    "max_connections": int,
    "retry_on_timeout": _flag,
    "client_name": str,
}


from_url = connect
