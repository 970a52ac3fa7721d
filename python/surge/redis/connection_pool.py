"""redis-py's `ConnectionPool` and `BlockingConnectionPool`, in surge's terms.

redis-py's asyncio client takes a connection from its pool per command; a surge
client pipelines the commands of every coroutine over one connection. So a pool
here holds the keywords of that connection and the one client that owns it:
every ``Redis(connection_pool=pool)`` is a view of that client (the same
connection and state, so making one per request costs no connection), closing a
view leaves the connection to the others (as a redis-py client gives its
connections back to the pool), and `disconnect`/`aclose` drop the connection,
which the next command opens again, as in redis-py.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

from surge.redis.errors import DataError

if TYPE_CHECKING:
    from surge.redis.client import Redis
    from surge.redis.encoder import Encoder

#: redis-py's defaults for `BlockingConnectionPool`.
DEFAULT_BLOCKING_MAX_CONNECTIONS = 50
DEFAULT_BLOCKING_TIMEOUT = 20.0


class ConnectionPool:
    """The keywords of one pipelined connection and the client that owns it."""

    def __init__(
        self,
        connection_class: Any = None,
        max_connections: int | None = None,
        **connection_kwargs: Any,
    ) -> None:
        if connection_class is not None:
            # redis-py's SSLConnection / UnixDomainSocketConnection choose the
            # transport: ignoring one could send in plaintext what was meant for TLS.
            raise DataError(
                "connection_class is not supported: use ssl=True (or a rediss:// URL)"
                " for TLS and unix_socket_path= (or unix://) for a Unix socket"
            )
        if max_connections is not None and max_connections <= 0:
            raise ValueError('"max_connections" must be a positive integer')
        #: The keywords every client made from this pool is made with.
        self.connection_kwargs = connection_kwargs
        #: redis-py's bound; here it bounds the blocking commands' connections.
        self.max_connections = max_connections
        self._client: Redis | None = None
        #: The clients `Redis.from_pool` made: closing one closes the pool.
        self._owners: weakref.WeakSet[Redis] = weakref.WeakSet()

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> ConnectionPool:
        """A pool for ``url`` (as `surge.redis.from_url` reads it); keywords win."""
        from surge.redis.client import url_options

        return cls(**{**url_options(url), **kwargs})

    def client(self) -> Redis:
        """The client that owns the connection (made on first use)."""
        if self._client is None:
            from surge.redis.client import Redis

            kwargs = dict(self.connection_kwargs)
            if self.max_connections is not None:
                kwargs.setdefault("max_connections", self.max_connections)
            self._client = Redis(**self._client_kwargs(kwargs))
            self._client.__dict__["_connection_pool"] = self
        return self._client

    def _client_kwargs(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        return kwargs

    def get_encoder(self) -> Encoder:
        """redis-py's encoder for the pool's ``decode_responses``."""
        from surge.redis.encoder import Encoder

        return Encoder(decode_responses=bool(self.connection_kwargs.get("decode_responses")))

    async def disconnect(self, inuse_connections: bool = True) -> None:
        """Drop the connection (commands in flight on it fail with
        `ConnectionLostError`); the next command connects again."""
        c = self._client
        if c is not None:
            await c._blocking.close()
            await c._drop()

    async def aclose(self) -> None:
        """`disconnect`, under redis-py's name."""
        await self.disconnect()

    close = aclose

    def reset(self) -> None:
        """redis-py's call after a fork: the next command connects afresh."""
        if self._client is not None:
            self._client._engine.abort()

    def __repr__(self) -> str:
        kw = self.connection_kwargs
        where = kw.get("unix_socket_path") or f"{kw.get('host', '127.0.0.1')}:{kw.get('port')}"
        return f"<surge.redis.{type(self).__name__} {where}/{kw.get('db', 0)}>"


class BlockingConnectionPool(ConnectionPool):
    """redis-py's pool that waits for a free connection: here ``timeout`` bounds
    the wait for one of the blocking commands' connections (``max_connections``)."""

    def __init__(
        self,
        max_connections: int = DEFAULT_BLOCKING_MAX_CONNECTIONS,
        timeout: float | None = DEFAULT_BLOCKING_TIMEOUT,
        connection_class: Any = None,
        queue_class: Any = None,
        **connection_kwargs: Any,
    ) -> None:
        super().__init__(connection_class, max_connections, **connection_kwargs)
        #: Seconds a caller waits for a connection (None: no bound).
        self.timeout = timeout

    def _client_kwargs(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        kwargs.setdefault("blocking_pool_timeout", self.timeout)
        return kwargs
