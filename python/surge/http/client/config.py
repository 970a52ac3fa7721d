"""How long `surge.http.Client` waits (`Timeout`) and how much it holds (`ClientLimits`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from surge._core import HTTP_CLIENT_MAX_BODY

__all__ = ["DEFAULT_TIMEOUT", "UNSET", "ClientLimits", "Timeout"]

#: Default seconds for each timeout but `total` (which is off by default).
DEFAULT_TIMEOUT = 5.0

#: "Argument not given" where None means "no limit".
UNSET: Any = object()


class Timeout:
    """Timeouts in seconds (None: no limit). `Timeout(10)` sets connect, read and
    pool to 10; keywords set one each."""

    __slots__ = ("connect", "pool", "read", "total")

    def __init__(
        self,
        timeout: float | None = UNSET,
        *,
        connect: float | None = UNSET,
        read: float | None = UNSET,
        pool: float | None = UNSET,
        total: float | None = None,
    ) -> None:
        default = DEFAULT_TIMEOUT if timeout is UNSET else timeout
        self.connect = default if connect is UNSET else connect
        self.read = default if read is UNSET else read
        self.pool = default if pool is UNSET else pool
        self.total = total

    @classmethod
    def of(cls, value: Timeout | float | None) -> Timeout:
        if isinstance(value, Timeout):
            return value
        return cls(value)

    def __repr__(self) -> str:
        return (
            f"Timeout(connect={self.connect}, read={self.read}, "
            f"pool={self.pool}, total={self.total})"
        )


@dataclass(frozen=True, slots=True)
class ClientLimits:
    """Pool sizes and caps; every field has a default."""

    #: Most open connections, all hosts together.
    max_connections: int = 100
    #: Most open connections to one (scheme, host, port).
    max_connections_per_host: int = 10
    #: Idle keep-alive connections older than this (seconds) are closed, not reused.
    keepalive_expiry: float = 5.0
    #: Most requests in flight on one connection when pipelining (`pipelining=True`).
    max_pipeline: int = 32
    #: Largest buffered response body in bytes (streamed bodies have no limit).
    max_response_body: int = HTTP_CLIENT_MAX_BODY
