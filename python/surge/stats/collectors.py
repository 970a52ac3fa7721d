"""Built-in collectors: the HTTP server's native counters and every live driver connection,
read on export (nothing is counted per request in Python)."""

from __future__ import annotations

from typing import Any

from .exposition import Family


def _access_log_dropped() -> int:
    import sys

    module = sys.modules.get("surge.serve.access_log")  # loaded only when a log is on
    if module is None:
        return 0
    return sum(log.dropped for log in list(module.OPEN_LOGS))


def http_families() -> list[Family]:
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
            "surge_access_log_dropped_total",
            "counter",
            "access log lines dropped because the log could not keep up",
            [("", {}, _access_log_dropped())],
        ),
        Family(
            "surge_http_connections_total",
            "counter",
            "client connections accepted",
            [("", {}, s["connections_opened"])],
        ),
    ]


def driver_families() -> list[Family]:
    from surge.engine import CONNECTIONS

    sums: dict[tuple[str, str], dict[str, Any]] = {}
    for conn in list(CONNECTIONS):
        key = (conn.driver, f"{conn.host}:{conn.port}")
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
