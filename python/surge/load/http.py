"""HTTP/1.1 target: the schedule, the connections and the timing run natively.

`surge._core.HttpLoad` runs the whole load on a thread of its own with the GIL
released: a timerfd keeps the schedule to within microseconds, requests (built
once here) are written in one write per connection per loop turn, responses
are framed by surge-proto's HTTP/1 client parser and latencies go into HDR
histograms there. This module builds the request, resolves the address, starts
the loop and passes its per-second ticks on; see ``crates/surge-py/src/load``.

HTTPS: the same loop over rustls client sessions (TLS 1.2/1.3, ALPN
``http/1.1``, SNI from the URL's host or ``server_name``). The server's
certificate is checked against ``cafile`` (default: the system's CA file) and
must name the host, unless ``insecure`` (benchmark servers with self-signed
certificates). A connection counts as open once its handshake is done; a
failed or unfinished (within ``connect_timeout``) handshake is the error kind
``tls_handshake``, and the report keeps rustls's reason.

Open model: a request goes to a connection with room (fewer than ``pipeline``
requests in flight); if none has room, it waits in the queue (its latency still
counts from its due time) and a new connection is opened, up to
``connections``. Closed model: ``connections`` connections each keep
``pipeline`` requests in flight; each response sends the next.
"""

from __future__ import annotations

import asyncio
import math
import os
import socket
import ssl
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

from surge._core import HttpLoad, TlsClientConfig, TlsConfigError
from surge.load.interrupt import interrupted
from surge.load.target import (
    DEFAULT_CLOSED_CONNECTIONS,
    DEFAULT_OPEN_CONNECTIONS,
    LoadConfig,
    LoadError,
    Target,
    register,
)

_OP = "request"
#: How often the finished seconds are collected from the native loop (seconds).
TICK_POLL = 0.05


def build_request(config: LoadConfig) -> tuple[str, int, bytes]:
    """(host, port, request bytes) for the run's URL, method, headers and body."""
    url = urlsplit(config.target)
    if not url.hostname:
        raise LoadError(f"no host in {config.target!r}")
    default_port = 443 if url.scheme.lower() == "https" else 80
    try:
        port = url.port or default_port
    except ValueError as exc:
        raise LoadError(f"bad port in {config.target!r}: {exc}") from None
    path = url.path or "/"
    if url.query:
        path += "?" + url.query
    host = f"[{url.hostname}]" if ":" in url.hostname else url.hostname
    host_header = host if port == default_port else f"{host}:{port}"
    names = {k.lower() for k, _ in config.headers}
    lines = [f"{config.method.upper()} {path} HTTP/1.1"]
    if "host" not in names:
        lines.append(f"Host: {host_header}")
    lines += [f"{k}: {v}" for k, v in config.headers]
    if config.body and "content-length" not in names:
        lines.append(f"Content-Length: {len(config.body)}")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return url.hostname, port, head + config.body


@register("http", "https")
class HttpTarget(Target):
    """Load on one HTTP URL, run by the native loop."""

    ops = [_OP]
    example = "http://host:port/path"
    native = True

    @classmethod
    def operations(cls, config: LoadConfig) -> list[str]:
        tls_config(config)  # bad TLS settings fail before any worker starts
        return [_OP]

    async def run_native(
        self,
        index: int,
        sink: Callable[[dict[str, Any]], None] | None,
        ready: Callable[[], Awaitable[float | None]] | None,
    ) -> dict[str, Any]:
        config = self.config
        host, port, request = build_request(config)
        tls = tls_config(config)
        ip = await _resolve(host, port, min(config.connect_timeout, 1.0))
        default = DEFAULT_OPEN_CONNECTIONS if config.open_model else DEFAULT_CLOSED_CONNECTIONS
        if ready is not None:
            start_wall = await ready()
            if start_wall is not None:
                await asyncio.sleep(max(0.0, start_wall - time.time()))
        start_ns = time.monotonic_ns() + int(config.warmup * 1e9)
        load = HttpLoad(
            ip,
            port,
            request,
            head=config.method.upper() == "HEAD",
            rate=config.rate / config.procs if config.rate is not None else None,
            phase=index / config.procs,
            connections=config.connections or default,
            pipeline=config.pipeline,
            start_ns=start_ns,
            warmup=config.warmup,
            duration=config.duration,
            timeout=config.timeout,
            connect_timeout=config.connect_timeout,
            tls=tls,
            server_name=(config.server_name or host) if tls is not None else None,
        )
        cpu0 = time.process_time()

        def pass_ticks(upto: float | None = None) -> None:
            for tick in load.ticks():
                if upto is not None and tick["t"] >= upto:
                    continue  # interrupted: the seconds never run
                if sink is not None:
                    sink(
                        {
                            "t": tick["t"],
                            "ops": {_OP: {k: tick[k] for k in ("n", "errors", "hist")}},
                            "cpu": time.process_time() - cpu0,
                        }
                    )

        load.start()
        stopped = False
        try:
            while not load.done():
                pass_ticks()
                await asyncio.sleep(TICK_POLL)
        except asyncio.CancelledError:
            if not interrupted():
                raise
            stopped = True  # Ctrl-C: what is in flight counts as "interrupted"
        finally:
            load.stop()  # a no-op once it has ended; ends it if we were cancelled
            final = load.join()
        wall = (time.monotonic_ns() - start_ns) / 1e9
        pass_ticks(max(1, math.ceil(wall)) if stopped else None)
        return {
            "ops": {
                _OP: {
                    "n": final["n"],
                    "hist": final["hist"],
                    "errors": final["errors"],
                    "status": final["status"],
                }
            },
            "sent": final["sent"],
            "reasons": final["reasons"],
            "lag": final["lag"] if config.open_model else b"",
            "cpu": time.process_time() - cpu0,
            "index": index,
            "wall": wall if stopped else max(wall, config.duration),
            "duration": min(max(wall, 0.0), config.duration) if stopped else config.duration,
            "interrupted": stopped,
        }


def tls_config(config: LoadConfig) -> TlsClientConfig | None:
    """The rustls client settings of an https target (None for http); `LoadError`
    for TLS options on an http target, or files that cannot be used."""
    https = config.target.lower().startswith("https:")
    if not https:
        if config.cafile or config.insecure or config.server_name:
            raise LoadError("--cacert, --insecure and --server-name apply to https targets only")
        return None
    if config.insecure and config.cafile:
        raise LoadError("--insecure checks no certificate: give --cacert or --insecure, not both")
    cafile = None if config.insecure else (config.cafile or system_cafile())
    try:
        return TlsClientConfig(cafile=cafile, check_name=not config.insecure)
    except TlsConfigError as exc:
        raise LoadError(f"TLS settings: {exc}") from None


def system_cafile() -> str:
    """The system's CA certificates file (what Python's ssl module would load)."""
    paths = ssl.get_default_verify_paths()
    for path in (paths.cafile, paths.openssl_cafile):
        if path and os.path.isfile(path):
            return path
    raise LoadError(
        "no system CA certificates file found: give --cacert FILE, or --insecure to check "
        "no certificate"
    )


async def _resolve(host: str, port: int, timeout: float) -> str:
    """The IP address of `host` to load: the first of its addresses that accepts a
    connection (``localhost`` may list ::1 first for a server on 127.0.0.1 only),
    else the first (the run then counts the connect errors)."""
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
        )
    except socket.gaierror as exc:
        raise LoadError(f"cannot resolve {host!r}: {exc}") from None
    ips = list(dict.fromkeys(str(info[4][0]) for info in infos))
    if not ips:
        raise LoadError(f"cannot resolve {host!r}")
    if len(ips) == 1:
        return ips[0]
    for ip in ips:
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection(ip, port), timeout)
        except (OSError, TimeoutError):
            continue
        writer.close()
        return ip
    return ips[0]
