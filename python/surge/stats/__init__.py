"""Counters, gauges and latency histograms; Prometheus text, Graphite and StatsD push.

    from surge import stats
    hits = stats.counter("cache_hits_total", "cache hits", labels=("cache",))
    hits.inc(cache="users")
    lat = stats.histogram("db_query_seconds", "query latency")
    lat.observe(0.0021)
    app.add_metrics("/metrics")                       # Prometheus scrapes this
    stats.push_graphite("127.0.0.1", 2003, interval=1)  # as seed 000's Tarantool did

Besides what the application registers, every export includes:

* the HTTP server's counters (`surge._core.http_stats()`: requests, responses
  by status class, parse errors, open connections), counted on the native path
  at no measurable cost;
* every live driver connection (`surge.engine.CONNECTIONS`), summed by driver
  (the label each driver gives its engine) and address: requests by operation,
  timeouts, error replies, lost connections, reconnects, requests in flight.

Under ``surge serve`` with a master (several workers), those two are the whole
server's: every worker's summed (`surge.stats.multiprocess`), whichever worker
answers; so are an app's own prometheus_client metrics, which run in
prometheus_client's multiprocess mode there. Metrics registered here
(`counter`, `gauge`, `histogram`) stay per process.

Histograms are HDR histograms (values in microseconds, 3 significant digits,
fixed memory; the ``hdrhistogram`` package, imported on first use) and are
exported as Prometheus summaries (quantiles, sum, count).

One module per concern: `metrics` (types and the registry), `exposition`
(Prometheus text, Graphite names), `push` (Graphite, StatsD), `collectors`
(server and drivers) and `multiprocess` (across workers).
"""

from __future__ import annotations

from . import multiprocess
from .collectors import driver_families, http_families
from .exposition import PROMETHEUS_CONTENT_TYPE, flatten, graphite_lines, render_prometheus
from .metrics import (
    HDR,
    HIST_HIGHEST_US,
    QUANTILES,
    Collector,
    Counter,
    Family,
    Gauge,
    Histogram,
    Registry,
    summary_from_hdr,
)
from .push import STATSD_MAX_DATAGRAM, Pusher, push_graphite, push_statsd


def server_families() -> list[Family]:
    """The HTTP server's and the drivers' metrics: this process's, or under a master
    every worker's summed, with the app's own metrics of `REGISTRY`."""
    if multiprocess.directory() is None:
        return http_families() + driver_families()
    merged = multiprocess.gather(_own_families())
    return [summary_from_hdr(f) if f.kind == HDR else f for f in merged]


def _own_families() -> list[Family]:
    """What a worker publishes: the server's, the drivers' and the app's metrics."""
    return http_families() + driver_families() + REGISTRY.shareable_families()


class _ServerRegistry(Registry):
    """The process registry: under a master its own metrics are exported summed over
    every worker, by `server_families`, rather than as this worker's alone."""

    def shared(self) -> bool:
        return multiprocess.directory() is not None


#: The process's registry, with the HTTP server and driver collectors.
REGISTRY = _ServerRegistry()
REGISTRY.add_collector(server_families)

counter = REGISTRY.counter
gauge = REGISTRY.gauge
histogram = REGISTRY.histogram


def prometheus() -> str:
    """The process registry in Prometheus text format (with, under a master, the app's
    prometheus_client metrics of every worker)."""
    return REGISTRY.prometheus() + multiprocess.prometheus_client_text()


def start_publishing() -> multiprocess.Publisher | None:
    """In a worker under a master: publishes this worker's counters for the others
    (see `surge.stats.multiprocess`); None when there is no shared directory."""
    if multiprocess.directory() is None:
        return None
    return multiprocess.Publisher(_own_families).start()


__all__ = [
    "HIST_HIGHEST_US",
    "PROMETHEUS_CONTENT_TYPE",
    "QUANTILES",
    "REGISTRY",
    "STATSD_MAX_DATAGRAM",
    "Collector",
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
    "server_families",
    "start_publishing",
]
