"""Metric types: counters, gauges, HDR-histogram summaries, and the registry holding them."""

from __future__ import annotations

import contextlib
import math
import re
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from .exposition import Family, flatten, render_prometheus

if TYPE_CHECKING:
    from hdrh.histogram import HdrHistogram

#: Quantiles exported for every histogram.
QUANTILES = (0.5, 0.9, 0.95, 0.99, 0.999)
#: Histogram range: 1 us .. 1 hour.
HIST_HIGHEST_US = 3_600_000_000

_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


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
                h = self._hists.setdefault(key, (_hdr_histogram(1, self.highest, 3), [0.0]))
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
            _summary_samples(f, self._labels(key), hist, total[0], self.unit)
        return f

    def shareable(self) -> Family:
        """The histograms as a family other processes can add up (kind ``hdr``: per
        label set the encoded HDR histogram, its sum and the unit; see
        `surge.stats.multiprocess`), where quantiles could not be summed."""
        f = Family(self.name, HDR, self.help)
        for key, (hist, total) in list(self._hists.items()):
            labels = self._labels(key)
            f.samples.append(("", labels, hist.encode().decode()))  # type: ignore[arg-type]
            f.samples.append(("_sum", labels, total[0]))
            f.samples.append(("_unit", labels, self.unit))
        return f


#: The kind of a family that carries encoded HDR histograms between processes.
HDR = "hdr"


def _summary_samples(
    f: Family, labels: dict[str, str], hist: HdrHistogram, total: float, unit: float
) -> None:
    n = hist.get_total_count()
    for q in QUANTILES:
        v = hist.get_value_at_percentile(q * 100) * unit if n else math.nan
        f.samples.append(("", {**labels, "quantile": f"{q:g}"}, v))
    f.samples.append(("_sum", labels, total))
    f.samples.append(("_count", labels, n))


def add_encoded(payloads: Iterable[str]) -> str:
    """One encoded HDR histogram holding every value of ``payloads`` (several
    processes' histograms of one metric and label set)."""
    from hdrh.histogram import HdrHistogram

    merged: HdrHistogram | None = None
    for payload in payloads:
        hist = HdrHistogram.decode(payload)
        if merged is None:
            merged = hist
        else:
            merged.add(hist)
    assert merged is not None, "no histogram to add"
    return merged.encode().decode()  # type: ignore[no-any-return]


def summary_from_hdr(family: Family) -> Family:
    """The summary (quantiles, sum, count) of a family of kind `HDR` whose samples
    were added up per label set (`surge.stats.multiprocess.merge`)."""
    from hdrh.histogram import HdrHistogram

    by_key: dict[tuple[tuple[str, str], ...], dict[str, Any]] = {}
    for suffix, labels, value in family.samples:
        by_key.setdefault(tuple(sorted(labels.items())), {})[suffix] = value
    out = Family(family.name, "summary", family.help)
    for key, parts in by_key.items():
        hist = HdrHistogram.decode(parts[""])
        _summary_samples(out, dict(key), hist, parts.get("_sum", 0.0), parts.get("_unit", 1e-6))
    return out


def _hdr_histogram(lowest: int, highest: int, digits: int) -> HdrHistogram:
    # Imported on first use: counters and gauges (and App.add_metrics) work on a
    # base install; only histograms need the package (the `load` extra has it).
    try:
        from hdrh.histogram import HdrHistogram
    except ImportError:
        raise ImportError(
            "surge.stats histograms need the hdrhistogram package: pip install hdrhistogram"
        ) from None
    return HdrHistogram(lowest, highest, digits)


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
        out = [] if self.shared() else self.metric_families()
        for fn in list(self._collectors):
            out.extend(fn())
        return out

    def shared(self) -> bool:
        """Whether a collector exports the registered metrics instead (summed over the
        workers of a server: see `surge.stats`); False for a plain registry."""
        return False

    def metric_families(self) -> list[Family]:
        """The registered metrics' families, as exported."""
        return [m.collect() for m in list(self._metrics.values())]  # type: ignore[attr-defined]

    def shareable_families(self) -> list[Family]:
        """The registered metrics' families in a form other processes can add up
        (counters and gauges as they are, histograms as encoded HDR histograms)."""
        return [
            m.shareable() if isinstance(m, Histogram) else m.collect()  # type: ignore[attr-defined]
            for m in list(self._metrics.values())
        ]

    def prometheus(self) -> str:
        """The Prometheus text exposition format (version 0.0.4)."""
        return render_prometheus(self.collect())

    def flat(self) -> list[tuple[str, float]]:
        """(dotted.name, value) pairs for Graphite and StatsD."""
        return flatten(self.collect())
