"""asynctnt's read-only `Connection` properties, for ported code that reads them
(logs, health checks, settings echoed back): the values surge runs with, under
asynctnt's names. Mixed into `surge.tarantool.Connection`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from surge.engine import PipelinedConnection

#: asynctnt's ``reconnect_timeout`` default (seconds); surge reconnects on the
#: next request instead of after a wait, so the value is only reported.
ASYNCTNT_RECONNECT_TIMEOUT = 1.0 / 3.0


class AsynctntNames:
    """Properties under asynctnt's names (see the module's docstring)."""

    # Set by `Connection.__init__`.
    _engine: PipelinedConnection
    user: str | None
    _asynctnt_opts: dict[str, Any]

    async def reconnect(self) -> None:
        """asynctnt's: a new connection now. surge's closes the old one gracefully
        (requests in flight get their replies first), then connects."""
        self._engine.drain()
        await self._engine.connect()

    @property
    def host(self) -> str:
        """The server's host."""
        return self._engine.host

    @property
    def port(self) -> int | str:
        """The server's port (a Unix socket's path, as asynctnt's)."""
        e = self._engine
        return e.port if e.endpoint.path is None else e.endpoint.path

    @property
    def username(self) -> str | None:
        """The user logged in as (None: guest); surge's `user`."""
        return self.user

    @property
    def fingerprint(self) -> str:
        """``Tarantool[host:port]``, as asynctnt names a connection in its logs."""
        return f"Tarantool[{self.host}:{self.port}]"

    @property
    def connect_timeout(self) -> float:
        """Seconds a connect may take."""
        return self._engine.connect_timeout

    @property
    def request_timeout(self) -> float:
        """The default per-request timeout in seconds; -1.0 when there is none
        (asynctnt's default)."""
        t = self._engine.request_timeout
        return -1.0 if t is None else t

    @property
    def reconnect_timeout(self) -> float:
        """asynctnt's reconnect delay as given (0 when reconnecting is off)."""
        return self._asynctnt_opts["reconnect_timeout"]

    @property
    def auto_refetch_schema(self) -> bool:
        """Always True: surge reloads the schema whenever it changes."""
        return True

    @property
    def encoding(self) -> str:
        """Always ``utf-8`` (another encoding is refused when connecting)."""
        return "utf-8"

    @property
    def initial_read_buffer_size(self) -> int | None:
        """As given (surge's read buffer grows as needed)."""
        return self._asynctnt_opts["initial_read_buffer_size"]
