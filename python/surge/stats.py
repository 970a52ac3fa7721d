"""Counters, gauges and latency histograms; Prometheus text, Graphite and StatsD push.

    from surge import stats
    hits = stats.counter("cache_hits_total", "cache hits", labels=("cache",))
    hits.inc(cache="users")
    lat = stats.histogram("db_query_seconds", "query latency")
    lat.observe(0.0021)
    app.add_metrics("/metrics")                       # Prometheus scrapes this
    stats.push_graphite("127.0.0.1", 2003, interval=1)  # as seed 000's Tarantool did

Besides what the application registers, every export includes:

* the HTTP server's process-wide counters (`surge._core.http_stats()`: requests,
  responses by status class, parse errors, open connections), counted on the
  native path at no measurable cost;
* every live driver connection (`surge.engine.CONNECTIONS`), summed by driver
  and address: requests by operation, timeouts, error replies, lost connections,
  reconnects, requests in flight.

Histograms are HDR histograms (values in microseconds, 3 significant digits,
fixed memory) and are exported as Prometheus summaries (quantiles, sum, count).
Counters are per process: with ``surge serve --workers N`` each worker has its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import re
import socket
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from hdrh.histogram import HdrHistogram

#: Quantiles exported for every histogram.
QUANTILES = (0.5, 0.9, 0.95, 0.99, 0.999)
#: Histogram range: 1 us .. 1 hour.
HIST_HIGHEST_US = 3_600_000_000
#: Prometheus text format content type.
PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: Largest StatsD datagram (fits an Ethernet MTU with IP/UDP headers).
STATSD_MAX_DATAGRAM = 1432

_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


@dataclass
class Family:
    """One metric with its samples, ready to export: (suffix, labels, value) each."""

    name: str
    kind: str  # counter | gauge | summary
    help: str
    samples: list[tuple[str, dict[str, str], float]] = field(default_factory=list)


class _Metric:
    kind = ""

    def __init__(self, name: str, help: str = "", labels: Sequence[str] = ()) -> None:
        if not _NAME.match(name):
            raise ValueError(f"bad metric name {name!r}")
        for label in labels:
            if not _LABEL.match(label) or label == "quantile":
                raise ValueError(f"bad label name {label!r}")
        self.name = name
        self.help = help
        self.labelnames = tuple(labels)
        self._lock = threading.Lock()

    def _key(self, labels: dict[str, Any]) -> tuple[str, ...]:
        if set(labels) != set(self.labelnames):
            raise ValueError(f"{self.name} takes labels {self.labelnames}, got {tuple(labels)}")
        return tuple(str(labels[n]) for n in self.labelnames)

    def _labels(self, key: tuple[str, ...]) -> dict[str, str]:
        return dict(zip(self.labelnames, key, strict=True))


class Counter(_Metric):
    """A number that only goes up."""

    kind = "counter"

    def __init__(self, name: str, help: str = "", labels: Sequence[str] = ()) -> None:
        super().__init__(name, help, labels)
        self._values: dict[tuple[str, ...], float] = {}

    def inc(self, amount: float = 1, **labels: Any) -> None:
        """Add ``amount`` (>= 0)."""
        if amount < 0:
            raise ValueError("a counter only goes up")
        key = self._key(labels)
        self._values[key] = self._values.get(key, 0) + amount

    def value(self, **labels: Any) -> float:
        """The current value."""
        return self._values.get(self._key(labels), 0)

    def collect(self) -> Family:
        f = Family(self.name, self.kind, self.help)
        f.samples = [("", self._labels(k), v) for k, v in list(self._values.items())]
        return f


class Gauge(_Metric):
    """A number that goes up and down, or that a function reads when exported."""

    kind = "gauge"

    def __init__(
        self,
        name: str,
        help: str = "",
        labels: Sequence[str] = (),
        fn: Callable[[], float] | None = None,
    ) -> None:
        super().__init__(name, help, labels)
        if fn is not None and labels:
            raise ValueError("a function gauge has no labels")
        self._fn = fn
        self._values: dict[tuple[str, ...], float] = {}

    def set(self, value: float, **labels: Any) -> None:
        """Set the value."""
        self._values[self._key(labels)] = value

    def inc(self, amount: float = 1, **labels: Any) -> None:
        """Add ``amount``."""
        key = self._key(labels)
        self._values[key] = self._values.get(key, 0) + amount

    def dec(self, amount: float = 1, **labels: Any) -> None:
        """Subtract ``amount``."""
        self.inc(-amount, **labels)

    def value(self, **labels: Any) -> float:
        """The current value."""
        if self._fn is not None:
            return float(self._fn())
        return self._values.get(self._key(labels), 0)

    def collect(self) -> Family:
        f = Family(self.name, self.kind, self.help)
        if self._fn is not None:
            f.samples = [("", {}, float(self._fn()))]
        else:
            f.samples = [("", self._labels(k), v) for k, v in list(self._values.items())]
        return f


class Histogram(_Metric):
    """Latencies (or sizes) in an HDR histogram per label set; exported as a summary.

    ``observe(seconds)`` for durations; ``record(value)`` for raw integers (then
    ``unit=1``). Memory is fixed per label set however many values are recorded.
    """

    kind = "summary"

    def __init__(
        self,
        name: str,
        help: str = "",
        labels: Sequence[str] = (),
        *,
        unit: float = 1e-6,
        highest: int = HIST_HIGHEST_US,
    ) -> None:
        super().__init__(name, help, labels)
        self.unit = unit
        self.highest = highest
        self._hists: dict[tuple[str, ...], tuple[HdrHistogram, list[float]]] = {}

    def _get(self, labels: dict[str, Any]) -> tuple[HdrHistogram, list[float]]:
        key = self._key(labels)
        h = self._hists.get(key)
        if h is None:
            with self._lock:
                h = self._hists.setdefault(key, (HdrHistogram(1, self.highest, 3), [0.0]))
        return h

    def observe(self, value: float, **labels: Any) -> None:
        """Record a value in the exported unit (seconds by default)."""
        hist, total = self._get(labels)
        hist.record_value(min(self.highest, max(1, round(value / self.unit))))
        total[0] += value

    def record(self, units: int, **labels: Any) -> None:
        """Record a raw integer value (microseconds by default)."""
        hist, total = self._get(labels)
        hist.record_value(min(self.highest, max(1, int(units))))
        total[0] += units * self.unit

    def time(self, **labels: Any) -> contextlib.AbstractContextManager[None]:
        """``with hist.time(): ...`` records how long the block took."""
        return _Timer(self, labels)

    def quantile(self, q: float, **labels: Any) -> float:
        """The value at quantile ``q`` (0..1), in the exported unit."""
        hist, _ = self._get(labels)
        return hist.get_value_at_percentile(q * 100) * self.unit

    def collect(self) -> Family:
        f = Family(self.name, self.kind, self.help)
        for key, (hist, total) in list(self._hists.items()):
            labels = self._labels(key)
            n = hist.get_total_count()
            for q in QUANTILES:
                v = hist.get_value_at_percentile(q * 100) * self.unit if n else math.nan
                f.samples.append(("", {**labels, "quantile": f"{q:g}"}, v))
            f.samples.append(("_sum", labels, total[0]))
            f.samples.append(("_count", labels, n))
        return f


class _Timer:
    __slots__ = ("_hist", "_labels", "_t0")

    def __init__(self, hist: Histogram, labels: dict[str, Any]) -> None:
        self._hist = hist
        self._labels = labels
        self._t0 = 0.0

    def __enter__(self) -> None:
        self._t0 = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        self._hist.observe(time.perf_counter() - self._t0, **self._labels)


Collector = Callable[[], Iterable[Family]]


class Registry:
    """The metrics of a process, and collectors that read live objects on export."""

    def __init__(self) -> None:
        self._metrics: dict[str, _Metric] = {}
        self._collectors: list[Collector] = []
        self._lock = threading.Lock()

    def _register(self, cls: type, name: str, help: str, labels: Sequence[str], **kw: Any) -> Any:
        with self._lock:
            m = self._metrics.get(name)
            if m is None:
                m = self._metrics[name] = cls(name, help, labels, **kw)
            elif type(m) is not cls or m.labelnames != tuple(labels):
                raise ValueError(f"metric {name!r} exists as another kind or with other labels")
            return m

    def counter(self, name: str, help: str = "", labels: Sequence[str] = ()) -> Counter:
        """The counter called ``name`` (created on first use)."""
        return self._register(Counter, name, help, labels)

    def gauge(
        self,
        name: str,
        help: str = "",
        labels: Sequence[str] = (),
        fn: Callable[[], float] | None = None,
    ) -> Gauge:
        """The gauge called ``name``; with ``fn``, its value is read at export."""
        return self._register(Gauge, name, help, labels, fn=fn)

    def histogram(
        self, name: str, help: str = "", labels: Sequence[str] = (), *, unit: float = 1e-6
    ) -> Histogram:
        """The histogram called ``name`` (seconds, recorded in microseconds, by default)."""
        return self._register(Histogram, name, help, labels, unit=unit)

    def add_collector(self, fn: Collector) -> None:
        """Call ``fn()`` at each export for families read from live objects."""
        self._collectors.append(fn)

    def unregister(self, name: str) -> None:
        """Forget a metric."""
        with self._lock:
            self._metrics.pop(name, None)

    def collect(self) -> list[Family]:
        """Every family, the registered metrics' then the collectors'."""
        out = [m.collect() for m in list(self._metrics.values())]  # type: ignore[attr-defined]
        for fn in list(self._collectors):
            out.extend(fn())
        return out

    def prometheus(self) -> str:
        """The Prometheus text exposition format (version 0.0.4)."""
        return render_prometheus(self.collect())

    def flat(self) -> list[tuple[str, float]]:
        """(dotted.name, value) pairs for Graphite and StatsD."""
        return flatten(self.collect())


# --------------------------------------------------------------------------- formats


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _number(v: float) -> str:
    if isinstance(v, int):
        return str(v)
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(float(v))


def render_prometheus(families: Iterable[Family]) -> str:
    """Families as Prometheus text; families with one name are merged."""
    merged: dict[str, Family] = {}
    for f in families:
        m = merged.get(f.name)
        if m is None:
            merged[f.name] = Family(f.name, f.kind, f.help, list(f.samples))
        else:
            m.samples.extend(f.samples)
    lines = []
    for f in merged.values():
        if f.help:
            lines.append(f"# HELP {f.name} {_escape_help(f.help)}")
        lines.append(f"# TYPE {f.name} {f.kind}")
        for suffix, labels, value in f.samples:
            if labels:
                inner = ",".join(f'{k}="{_escape(str(v))}"' for k, v in labels.items())
                lines.append(f"{f.name}{suffix}{{{inner}}} {_number(value)}")
            else:
                lines.append(f"{f.name}{suffix} {_number(value)}")
    return "\n".join(lines) + "\n"


_GRAPHITE_UNSAFE = re.compile(r"[^A-Za-z0-9_\-]")


def _graphite_part(text: str) -> str:
    return _GRAPHITE_UNSAFE.sub("_", text) or "_"


def flatten(families: Iterable[Family]) -> list[tuple[str, float]]:
    """Dotted names: ``name[.suffix].labelvalue...`` (quantile 0.99 becomes ``p99``)."""
    out = []
    for f in families:
        for suffix, labels, value in f.samples:
            parts = [f.name]
            for k, v in labels.items():
                if k == "quantile":
                    parts.append("p" + _graphite_part(f"{float(v) * 100:g}"))
                else:
                    parts.append(_graphite_part(str(v)))
            if suffix:
                parts.append(suffix.lstrip("_"))
            if isinstance(value, float) and math.isnan(value):
                continue
            out.append((".".join(parts), value))
    return out


def graphite_lines(pairs: Iterable[tuple[str, float]], prefix: str, ts: int) -> bytes:
    """Graphite plaintext protocol: ``prefix.name value timestamp\\n`` per metric."""
    pre = f"{prefix}." if prefix else ""
    return "".join(f"{pre}{name} {_number(v)} {ts}\n" for name, v in pairs).encode()


# --------------------------------------------------------------------------- built-in collectors


def _http_families() -> list[Family]:
    try:
        from surge._core import http_stats  # type: ignore[attr-defined]
    except ImportError:
        return []  # an older build without native counters
    s = http_stats()
    return [
        Family(
            "surge_http_requests_total",
            "counter",
            "HTTP requests parsed by the server",
            [("", {}, s["requests"])],
        ),
        Family(
            "surge_http_responses_total",
            "counter",
            "HTTP responses sent, by status class",
            [("", {"class": k}, v) for k, v in s["responses"].items()],
        ),
        Family(
            "surge_http_parse_errors_total",
            "counter",
            "requests refused as malformed (answered 4xx and closed)",
            [("", {}, s["parse_errors"])],
        ),
        Family(
            "surge_http_connections_open",
            "gauge",
            "open client connections",
            [("", {}, s["connections_open"])],
        ),
        Family(
            "surge_http_connections_total",
            "counter",
            "client connections accepted",
            [("", {}, s["connections_opened"])],
        ),
    ]


def _driver_name(conn: Any) -> str:
    codec = type(conn.codec).__name__.lower()
    for name in ("iproto", "pg", "resp", "http"):
        if codec.startswith(name):
            return {"iproto": "tarantool", "pg": "postgres", "resp": "redis"}.get(name, name)
    return codec.removesuffix("codec") or "unknown"


def _driver_families() -> list[Family]:
    from surge.engine import CONNECTIONS

    sums: dict[tuple[str, str], dict[str, Any]] = {}
    for conn in list(CONNECTIONS):
        key = (_driver_name(conn), f"{conn.host}:{conn.port}")
        s = sums.setdefault(key, {"ops": {}, "in_flight": 0, "connections": 0})
        for k, v in conn.stats.items():
            s[k] = s.get(k, 0) + v
        for op, v in getattr(conn, "ops", {}).items():
            s["ops"][op] = s["ops"].get(op, 0) + v
        s["in_flight"] += conn.in_flight
        s["connections"] += 1
        s["reconnects"] = s.get("reconnects", 0) + max(0, conn.stats.get("connects", 0) - 1)
    req = Family("surge_driver_requests_total", "counter", "driver requests sent, by operation")
    err = Family("surge_driver_errors_total", "counter", "driver request failures, by kind")
    gauges = {
        "in_flight": Family("surge_driver_in_flight", "gauge", "requests awaiting a reply"),
        "connections": Family("surge_driver_connections", "gauge", "driver connection objects"),
    }
    counters = {
        "connects": Family("surge_driver_connects_total", "counter", "connections made"),
        "reconnects": Family("surge_driver_reconnects_total", "counter", "connections remade"),
        "writes": Family("surge_driver_writes_total", "counter", "socket writes (batches)"),
    }
    for (driver, address), s in sums.items():
        labels = {"driver": driver, "address": address}
        for op, v in sorted(s["ops"].items()):
            req.samples.append(("", {**labels, "op": op}, v))
        for kind, stat in (("timeout", "timeouts"), ("error_reply", "errors"), ("lost", "lost")):
            err.samples.append(("", {**labels, "kind": kind}, s.get(stat, 0)))
        for k, fam in {**gauges, **counters}.items():
            fam.samples.append(("", labels, s.get(k, 0)))
    return [req, err, *gauges.values(), *counters.values()]


# --------------------------------------------------------------------------- pushing


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
    sender = _GraphiteSender(registry or REGISTRY, host, port, prefix, timeout, rates)
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
    sender = _StatsdSender(registry or REGISTRY, host, port, prefix)
    return Pusher(sender, interval)._start()


#: The process's registry, with the HTTP server and driver collectors.
REGISTRY = Registry()
REGISTRY.add_collector(_http_families)
REGISTRY.add_collector(_driver_families)

counter = REGISTRY.counter
gauge = REGISTRY.gauge
histogram = REGISTRY.histogram


def prometheus() -> str:
    """The process registry in Prometheus text format."""
    return REGISTRY.prometheus()


__all__ = [
    "PROMETHEUS_CONTENT_TYPE",
    "REGISTRY",
    "Counter",
    "Family",
    "Gauge",
    "Histogram",
    "Pusher",
    "Registry",
    "counter",
    "flatten",
    "gauge",
    "graphite_lines",
    "histogram",
    "prometheus",
    "push_graphite",
    "push_statsd",
    "render_prometheus",
]
