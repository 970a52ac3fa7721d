"""What one worker records: HDR latency histograms, errors by kind, per-second ticks.

Memory stays fixed however long a run lasts: latencies go into HDR histograms
(fixed size, 3 significant digits), never lists of samples, and the per-second
data leaves the worker at every tick (see `Recorder.tick`).
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any, Protocol

from hdrh.histogram import HdrHistogram

#: Histogram range in microseconds: 1 us .. 100 s, 3 significant digits (0.1 % error).
LOWEST_US = 1
HIGHEST_US = 100_000_000
SIGNIFICANT_DIGITS = 3

#: Error kinds, in the order reports show them.
ERROR_KINDS = (
    "connect_refused",
    "connect_timeout",
    "connect_error",
    "tls_handshake",
    "timeout",
    "disconnect",
    "malformed",
    "http_4xx",
    "http_5xx",
    "db_error",
    "interrupted",
    "other",
)


def new_histogram() -> HdrHistogram:
    """An empty latency histogram (microseconds)."""
    return HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)


def decode_histogram(data: bytes) -> HdrHistogram:
    """A histogram from `HdrHistogram.encode()` bytes (the HdrHistogram wire format)."""
    h = new_histogram()
    if data:
        h.decode_and_add(data)
    return h


class Sink(Protocol):
    """Where a target reports how its requests ended (a `Recorder`, or a stand-in)."""

    def ok(self, op: str, latency_ns: int) -> None: ...
    def http(self, op: str, status: int, latency_ns: int) -> None: ...
    def error(self, op: str, kind: str) -> None: ...


class OpStats:
    """Counts and latencies of one operation (an HTTP target has one, "request")."""

    __slots__ = ("errors", "hist", "interval", "interval_errors", "interval_n", "n", "status")

    def __init__(self) -> None:
        self.hist = new_histogram()
        self.interval = new_histogram()
        self.n = 0
        self.interval_n = 0
        self.errors: Counter[str] = Counter()
        self.interval_errors = 0
        self.status: Counter[str] = Counter()


class Recorder:
    """Latencies and errors of one worker, by operation."""

    def __init__(self, ops: list[str]) -> None:
        self.ops = {op: OpStats() for op in ops}
        #: How late the scheduler issued requests (us): the generator's own lag.
        self.lag = new_histogram()
        self.sent = 0
        self._cpu0 = _cpu_seconds()

    def ok(self, op: str, latency_ns: int) -> None:
        """A reply arrived `latency_ns` after the request was due."""
        s = self.ops[op]
        # Only the interval histogram per reply; it joins the total at each tick.
        s.interval.record_value(_clamp(latency_ns // 1000))
        s.n += 1
        s.interval_n += 1

    def http(self, op: str, status: int, latency_ns: int) -> None:
        """An HTTP response: latency recorded; 4xx/5xx also counted as errors by kind."""
        self.ok(op, latency_ns)
        s = self.ops[op]
        cls = f"{status // 100}xx"
        s.status[cls] += 1
        if status >= 400:
            kind = "http_4xx" if status < 500 else "http_5xx"
            s.errors[kind] += 1
            s.interval_errors += 1

    def error(self, op: str, kind: str) -> None:
        """A request that got no usable reply; not in the latency histogram."""
        s = self.ops[op]
        s.errors[kind] += 1
        s.interval_errors += 1

    def scheduled(self, lag_ns: int) -> None:
        """The scheduler issued a request `lag_ns` after its due time."""
        self.sent += 1
        self.lag.record_value(_clamp(lag_ns // 1000))

    def tick(self, second: int) -> dict[str, Any]:
        """This second's counts and latencies (encoded); starts the next second."""
        ops = {}
        for name, s in self.ops.items():
            ops[name] = {
                "n": s.interval_n,
                "errors": s.interval_errors,
                "hist": s.interval.encode() if s.interval_n else b"",
            }
            if s.interval_n:
                s.hist.add(s.interval)
            s.interval.reset()
            s.interval_n = 0
            s.interval_errors = 0
        return {"t": second, "ops": ops, "cpu": _cpu_seconds() - self._cpu0}

    def final(self) -> dict[str, Any]:
        """Everything this worker recorded, in a form that crosses processes.

        Call it after the last `tick` (the interval histograms join the totals there)."""
        return {
            "ops": {
                name: {
                    "n": s.n,
                    "hist": s.hist.encode() if s.hist.get_total_count() else b"",
                    "errors": dict(s.errors),
                    "status": dict(s.status),
                }
                for name, s in self.ops.items()
            },
            "sent": self.sent,
            "lag": self.lag.encode() if self.lag.get_total_count() else b"",
            "cpu": _cpu_seconds() - self._cpu0,
        }


def _clamp(us: int) -> int:
    if us < LOWEST_US:
        return LOWEST_US
    return min(us, HIGHEST_US)


def _cpu_seconds() -> float:
    return time.process_time()
