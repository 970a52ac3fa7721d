"""Per-second rates of a load run, sent to Graphite as the run goes (seed 000's
picture: each operation's rate, second by second, on a Graphite graph).

`GraphiteRates` is a ``progress`` callback of `surge.load.run`: each finished
second becomes one point per operation (``PREFIX.OP.rate``), plus ``all.rate``
and ``errors.rate``, stamped with that second's own timestamp (the run's start
plus its index), so each point holds exactly the count of one second of the
generator's series. `surge.stats.push_graphite` pushes a registry on a timer
stamped with the push time; a point per *generator* second needs the second's
own stamp, which is why this sender writes its lines (with
`surge.stats.graphite_lines`) itself.
"""

from __future__ import annotations

import contextlib
import socket
import time
from typing import Any

from surge.stats import graphite_lines

#: Metric prefix of the load's points.
DEFAULT_PREFIX = "surge.load"


def parse_address(address: str, default_port: int = 2003) -> tuple[str, int]:
    """``host[:port]`` (or ``graphite://host:port``) -> (host, port)."""
    text = address.split("://", 1)[-1].rstrip("/")
    host, sep, port = text.rpartition(":")
    if not sep:
        return text, default_port
    try:
        return host.strip("[]"), int(port)
    except ValueError:
        raise ValueError(f"bad Graphite address {address!r}: want host:port") from None


class GraphiteRates:
    """Sends each finished second of a run to Graphite (plaintext protocol, TCP)."""

    def __init__(self, address: str, *, prefix: str = DEFAULT_PREFIX, timeout: float = 2.0) -> None:
        self.addr = parse_address(address)
        self.prefix = prefix
        self.timeout = timeout
        self._sock: socket.socket | None = None
        self._base: int | None = None
        #: Points sent, and sends that failed (Graphite down: counted, never raised).
        self.sent = 0
        self.failures = 0

    def lines(self, point: dict[str, Any]) -> bytes:
        """The plaintext lines of one finished second."""
        if self._base is None:
            # Second t of the run ended now: its own stamp is now - 1 - t.
            self._base = int(time.time()) - 1 - point["t"]
        dt = point.get("dt", 1) or 1
        pairs = [(f"{op}.rate", n / dt) for op, n in point["ops"].items()]
        pairs += [("all.rate", point["n"] / dt), ("errors.rate", point["errors"] / dt)]
        return graphite_lines(pairs, self.prefix, self._base + point["t"])

    def __call__(self, point: dict[str, Any]) -> None:
        data = self.lines(point)
        try:
            if self._sock is None:
                self._sock = socket.create_connection(self.addr, timeout=self.timeout)
            self._sock.sendall(data)
            self.sent += 1
        except OSError:
            self.failures += 1
            self.close()

    def close(self) -> None:
        """Closes the connection (the next point opens a new one)."""
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.close()
            self._sock = None
