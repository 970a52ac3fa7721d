"""Fixed-rate load generation with honest latencies: `surge load`, and this API.

    import surge.load
    r = surge.load.run("http://127.0.0.1:8080/", rate=1000, duration=10)
    print(r.latency["p99"], r.achieved_rate, r.errors)

Open model (``rate=``): requests are issued on a fixed schedule whether or not
earlier ones were answered, each timed from its due time (no coordinated
omission). Closed model (no rate): ``connections`` connections each keep
``pipeline`` requests in flight. Latencies go into HDR histograms (merged across
``procs`` worker processes), so memory stays fixed however long a run lasts.

HTTP targets run in a native loop (`surge._core.HttpLoad`, see `surge.load.http`);
Tarantool, Redis and PostgreSQL targets on asyncio through surge's drivers
(`surge.load.driver`). Targets register their URL schemes (`surge.load.target`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

# The built-in targets register their URL schemes on import.
from surge.load import http, postgres, redis, tarantool  # noqa: F401
from surge.load.graphite import DEFAULT_PREFIX, GraphiteRates
from surge.load.report import Result, render_progress, render_sweep, render_table
from surge.load.runner import run_load, run_load_async
from surge.load.target import LoadConfig, LoadError, parse_mix

__all__ = [
    "GraphiteRates",
    "LoadConfig",
    "LoadError",
    "Result",
    "config",
    "render_sweep",
    "render_table",
    "run",
    "run_async",
    "sweep",
]


def config(
    target: str,
    *,
    rate: float | None = None,
    connections: int | None = None,
    pipeline: int = 1,
    duration: float = 10.0,
    warmup: float = 0.0,
    procs: int = 1,
    method: str = "GET",
    headers: Mapping[str, str] | Iterable[tuple[str, str]] = (),
    body: bytes | str = b"",
    mix: Mapping[str, float] | str | None = None,
    timeout: float = 10.0,
    connect_timeout: float = 5.0,
    cafile: str | None = None,
    insecure: bool = False,
    server_name: str | None = None,
    **workload: Any,
) -> LoadConfig:
    """A `LoadConfig` from keyword arguments (see `run`)."""
    pairs = list(headers.items()) if isinstance(headers, Mapping) else list(headers)
    return LoadConfig(
        target=target,
        rate=rate,
        connections=connections,
        pipeline=pipeline,
        duration=duration,
        warmup=warmup,
        procs=procs,
        method=method,
        headers=pairs,
        body=body.encode() if isinstance(body, str) else body,
        mix=parse_mix(mix) if isinstance(mix, str) else (dict(mix) if mix else None),
        timeout=timeout,
        connect_timeout=connect_timeout,
        cafile=cafile,
        insecure=insecure,
        server_name=server_name,
        **workload,
    )


def run(
    target: str,
    *,
    progress: bool | Callable[[dict], Any] = False,
    graphite: str | None = None,
    graphite_prefix: str = DEFAULT_PREFIX,
    **kw: Any,
) -> Result:
    """Runs a load and returns its `Result` (blocking; not inside a running loop).

    ``target``: ``http://host:port/path``, ``https://host:port/path`` (``cafile=``,
    ``insecure=True`` or ``server_name=`` for its certificate), ``tarantool://host:port``,
    ``redis://host:port`` or ``postgresql://user@host/db``; keywords as `config`.
    ``progress=True`` writes a live line to stderr each second; ``graphite="host:port"``
    sends each second's per-operation rates to Graphite under ``graphite_prefix``
    (see `surge.load.graphite`).
    """
    cfg = config(target, **kw)
    show = _progress(progress, cfg)
    if graphite is None:
        return run_load(cfg, show)
    sender = GraphiteRates(graphite, prefix=graphite_prefix)

    def both(point: dict) -> None:
        sender(point)
        if show is not None:
            show(point)

    try:
        return run_load(cfg, both)
    finally:
        sender.close()


async def run_async(target: str, **kw: Any) -> Result:
    """`run` inside the running event loop (one process only)."""
    progress = kw.pop("progress", False)
    cfg = config(target, **kw)
    return await run_load_async(cfg, _progress(progress, cfg))


def sweep(
    target: str,
    rates: Sequence[float],
    *,
    stop_p99_ms: float | None = None,
    on_result: Callable[[Result], Any] | None = None,
    **kw: Any,
) -> list[Result]:
    """Runs `run` at each rate in turn; stops after the first whose p99 exceeds
    ``stop_p99_ms`` (or whose achieved rate falls below 95 % of its target)."""
    results = []
    for rate in rates:
        r = run(target, rate=rate, **kw)
        results.append(r)
        if on_result is not None:
            on_result(r)
        p99 = r.latency["p99"]
        if stop_p99_ms is not None and (p99 is None or p99 > stop_p99_ms):
            break
        if stop_p99_ms is not None and r.achieved_rate < 0.95 * rate:
            break
    return results


def _progress(progress: bool | Callable[[dict], Any], cfg: LoadConfig) -> Any:
    if callable(progress):
        return progress
    if not progress:
        return None
    tty = sys.stderr.isatty()

    def show(point: dict) -> None:
        line = render_progress(point, cfg)
        if tty:
            sys.stderr.write("\r\x1b[2K" + line)
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    show.tty = tty  # type: ignore[attr-defined]
    return show
