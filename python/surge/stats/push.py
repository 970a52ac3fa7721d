"""Pushing the registry: Graphite (plaintext over TCP) and StatsD (UDP), from a task or a thread."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .exposition import _number, flatten, graphite_lines

if TYPE_CHECKING:
    from .metrics import Registry

#: Largest StatsD datagram (fits an Ethernet MTU with IP/UDP headers).
STATSD_MAX_DATAGRAM = 1432


def _default_registry() -> Registry:
    from . import REGISTRY

    return REGISTRY


class Pusher:
    """Sends the registry every ``interval`` seconds until `stop` (a task or a thread)."""

    def __init__(self, send: Callable[[], Any], interval: float) -> None:
        self._send = send
        self.interval = interval
        #: Pushes made, and failures (the target down: retried next time, never raised).
        self.pushes = 0
        self.failures = 0
        self.last_error: BaseException | None = None
        self._stop = threading.Event()
        self._task: asyncio.Task | None = None
        self._thread: threading.Thread | None = None

    def _start(self) -> Pusher:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._thread = threading.Thread(
                target=self._run_thread, daemon=True, name="surge-stats"
            )
            self._thread.start()
        else:
            self._task = loop.create_task(self._run_task())
        return self

    def push_now(self) -> None:
        """Push once, now (errors are counted, not raised)."""
        try:
            self._send()
            self.pushes += 1
        except Exception as exc:
            self.failures += 1
            self.last_error = exc

    def _run_thread(self) -> None:
        while not self._stop.wait(self.interval):
            self.push_now()

    async def _run_task(self) -> None:
        asend = getattr(self._send, "asend", None)
        while not self._stop.is_set():
            await asyncio.sleep(self.interval)
            if asend is None:
                self.push_now()  # a non-blocking UDP send: fine inline
                continue
            try:
                await asend()
                self.pushes += 1
            except Exception as exc:
                self.failures += 1
                self.last_error = exc

    def stop(self) -> None:
        """Stop pushing."""
        self._stop.set()
        if self._task is not None:
            self._task.cancel()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=self.interval + 1)


class _GraphiteSender:
    """Plaintext lines over one kept TCP connection; with ``rates``, every counter also
    gets a ``.rate`` line (per second since the last push), as seed 000's Tarantool
    pushed ``box.stat`` rates."""

    def __init__(
        self, registry: Registry, host: str, port: int, prefix: str, timeout: float, rates: bool
    ) -> None:
        self.registry = registry
        self.addr = (host, port)
        self.prefix = prefix
        self.timeout = timeout
        self.rates = rates
        self.sock: socket.socket | None = None
        self.writer: asyncio.StreamWriter | None = None
        self._last: dict[str, tuple[float, float]] = {}

    def payload(self) -> bytes:
        now = time.time()
        pairs: list[tuple[str, float]] = []
        for fam in self.registry.collect():
            flat = flatten([fam])
            pairs += flat
            if not self.rates or fam.kind != "counter":
                continue
            for name, value in flat:
                prev = self._last.get(name)
                if prev is not None and now > prev[1]:
                    pairs.append((name + ".rate", (value - prev[0]) / (now - prev[1])))
                self._last[name] = (value, now)
        return graphite_lines(pairs, self.prefix, int(now))

    def __call__(self) -> None:
        """Thread mode: blocking socket with a timeout."""
        data = self.payload()
        if self.sock is None:
            self.sock = socket.create_connection(self.addr, timeout=self.timeout)
        try:
            self.sock.sendall(data)
        except OSError:
            self.sock.close()
            self.sock = None
            raise

    async def asend(self) -> None:
        """Loop mode: never blocks the loop, even when Graphite does not answer."""
        data = self.payload()
        try:
            writer = self.writer
            if writer is None or writer.is_closing():
                self.writer = None
                _, writer = await asyncio.wait_for(
                    asyncio.open_connection(*self.addr), self.timeout
                )
                self.writer = writer
            assert writer is not None
            writer.write(data)
            await asyncio.wait_for(writer.drain(), self.timeout)
        except (OSError, TimeoutError):
            if self.writer is not None:
                self.writer.close()
                self.writer = None
            raise


class _StatsdSender:
    def __init__(self, registry: Registry, host: str, port: int, prefix: str) -> None:
        self.registry, self.addr, self.prefix = registry, (host, port), prefix
        self.sock = socket.socket(
            socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_DGRAM
        )
        self.sock.setblocking(False)
        self.last: dict[str, float] = {}

    def __call__(self) -> None:
        pre = f"{self.prefix}." if self.prefix else ""
        lines = []
        for f in self.registry.collect():
            for name, v in flatten([f]):
                full = pre + name
                if f.kind == "counter":
                    delta = v - self.last.get(full, 0)
                    self.last[full] = v
                    if delta:
                        lines.append(f"{full}:{_number(delta)}|c")
                else:
                    lines.append(f"{full}:{_number(v)}|g")
        packet = b""
        for line in lines:
            b = line.encode()
            if packet and len(packet) + 1 + len(b) > STATSD_MAX_DATAGRAM:
                self.sock.sendto(packet, self.addr)
                packet = b""
            packet = packet + b"\n" + b if packet else b
        if packet:
            self.sock.sendto(packet, self.addr)


def push_graphite(
    host: str,
    port: int = 2003,
    interval: float = 1.0,
    prefix: str = "surge",
    *,
    registry: Registry | None = None,
    timeout: float = 2.0,
    rates: bool = True,
) -> Pusher:
    """Push every metric to Graphite (plaintext protocol over TCP) every ``interval`` s.

    Lines are ``prefix.name[.label values] value timestamp``; with ``rates`` each
    counter also gets ``....rate`` (per second). In a running event loop the pusher
    is a task (non-blocking connect and send); outside one, a daemon thread. A
    Graphite that is down costs a failed connect per interval, nothing more.
    """
    sender = _GraphiteSender(registry or _default_registry(), host, port, prefix, timeout, rates)
    return Pusher(sender, interval)._start()


def push_statsd(
    host: str,
    port: int = 8125,
    interval: float = 1.0,
    prefix: str = "surge",
    *,
    registry: Registry | None = None,
) -> Pusher:
    """Push to StatsD over UDP: counters as deltas (``|c``), the rest as gauges (``|g``)."""
    sender = _StatsdSender(registry or _default_registry(), host, port, prefix)
    return Pusher(sender, interval)._start()
