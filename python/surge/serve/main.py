"""``run``: serve in this process, or become the master of N workers."""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from surge._core import ProxyTrust
from surge.http.config import DEFAULT_GC_THRESHOLD, DEFAULT_THREADS

from .access_log import check_access_log
from .errors import StartupError
from .listeners import DEFAULT_BACKLOG, DEFAULT_UDS_MODE, check_bindable, resolve
from .loader import INTERFACES, import_string_of, importing_app, parse_import_string
from .master import Master
from .tls import TlsConfig
from .worker import DEFAULT_FORWARDED_ALLOW_IPS, DEFAULT_GRACE, Config, run_single

if TYPE_CHECKING:
    from surge.http.app import App

__all__ = ["LOG_LEVELS", "run"]

#: uvicorn's --log-level names and the "surge" logger's level for each (uvicorn's
#: "trace" adds a level below debug; surge logs nothing finer than debug).
LOG_LEVELS = {
    "critical": logging.CRITICAL,
    "error": logging.ERROR,
    "warning": logging.WARNING,
    "info": logging.INFO,
    "debug": logging.DEBUG,
    "trace": logging.DEBUG,
}


def run(
    target: App | str | Any,
    *,
    host: str = "127.0.0.1",
    port: int = 8080,
    workers: int = 1,
    reload: bool = False,
    debug: bool = False,
    grace: float = DEFAULT_GRACE,
    backlog: int = DEFAULT_BACKLOG,
    gc_threshold: int | None = DEFAULT_GC_THRESHOLD,
    tls: TlsConfig | None = None,
    interface: str = "auto",
    root_path: str = "",
    lifespan: str = "auto",
    threads: int = DEFAULT_THREADS,
    limit_concurrency: int | None = None,
    timeout_keep_alive: float | None = None,
    websocket: Mapping[str, Any] | None = None,
    access_log: str | None = None,
    access_log_format: str | None = None,
    proxy_headers: bool = False,
    forwarded_allow_ips: str | None = None,
    uds: str | None = None,
    uds_mode: int = DEFAULT_UDS_MODE,
    fd: int | None = None,
    limit_max_requests: int | None = None,
    limit_max_requests_jitter: int = 0,
    workers_max_rss: int | None = None,
    tracing: bool = False,
    proxy_protocol: bool = False,
    factory: bool = False,
    app_dir: str | None = None,
    log_level: str | None = None,
    reload_dirs: tuple[str, ...] = (),
    max_body: int | None = None,
    server_header: bool | None = None,
    date_header: bool | None = None,
    headers: Sequence[tuple[str, str]] = (),
) -> None:
    """Serves ``target`` (an App, an ASGI 3 app or ``"module:attr"``) until SIGTERM/SIGINT.

    One process when ``workers == 1`` and not ``reload``; otherwise a master
    forking ``workers`` processes. Raises :class:`AppLoadError` when the app
    cannot be loaded and :class:`StartupError` when the port cannot be bound.

    While serving, the garbage collector's first threshold is raised to
    ``gc_threshold`` once the app is loaded (see `DEFAULT_GC_THRESHOLD`; never
    lowered); ``None`` leaves the collector as the app set it.

    ``interface`` ("auto", "surge", "asgi", "wsgi") overrides detecting what the
    target is; ``root_path`` applies to ASGI and WSGI apps and ``lifespan``
    ("auto", "on", "off") to ASGI apps, as uvicorn's options of those names.
    ``threads`` sizes each worker's thread pool running a WSGI app. ``websocket``
    holds `Limits` ``ws_*`` fields (uvicorn's --ws-max-size and co.) set over the app's.

    ``limit_concurrency`` and ``timeout_keep_alive`` are uvicorn's options of
    those names, for every interface and per worker: with ``limit_concurrency``
    N, a connection opened while N are open gets ``503 Service Unavailable`` for
    its request and is closed; ``timeout_keep_alive`` (seconds) closes a
    connection idle for that long (default: the app's
    `Limits.keepalive_timeout`, 15 s).

    ``tls`` serves HTTPS (see `surge.serve.tls`); its files are checked here, once,
    so a bad certificate or password fails before any worker starts.

    ``access_log`` ("-" for stderr, or a file) logs every response, in
    gunicorn's ``access_log_format`` atoms or ``"json"`` (see
    `surge.serve.access_log`). ``proxy_headers`` takes each request's client,
    scheme and host from ``Forwarded`` / ``X-Forwarded-*`` headers sent by a peer
    in ``forwarded_allow_ips`` (IPs, CIDRs, "*"; default
    `DEFAULT_FORWARDED_ALLOW_IPS`, or ``$FORWARDED_ALLOW_IPS`` as uvicorn reads it).

    ``uds`` (a Unix socket path, file mode ``uds_mode``, removed at exit) or ``fd``
    (an inherited listening socket) replace ``host``/``port``.
    ``limit_max_requests`` N replaces a worker (its successor first) after N
    requests, give or take ``limit_max_requests_jitter``; ``workers_max_rss``
    (MiB) replaces one whose resident memory grows past it. Both need the master,
    which they start even with one worker.

    ``proxy_protocol`` expects a PROXY v1/v2 header on every connection, from a
    peer in ``forwarded_allow_ips`` (`surge.serve.proxy_protocol`).
    ``tracing`` gives every request an OpenTelemetry span (`surge.tracing`; needs
    the opentelemetry-api package).

    ``factory``, ``app_dir`` and ``log_level`` are uvicorn's --factory (the
    target is called with no argument, in each worker, to make the app),
    --app-dir (the import string is looked up there first) and --log-level (of
    the "surge" logger: "critical", "error", "warning", "info", "debug" or
    "trace", which logs as "debug"; ``debug`` implies "debug").
    ``reload_dirs`` (uvicorn's --reload-dir) are the directories ``reload``
    watches instead of the app's project. ``max_body`` (bytes) replaces the
    app's `Limits.max_body` (1 MiB by default, as nginx's client_max_body_size;
    uvicorn has no limit): a larger body is refused with 413.
    ``server_header``, ``date_header`` (None keeps the
    app's) and ``headers`` (added after the app's own) are uvicorn's
    --server-header, --date-header and --header: `Limits.server_header`,
    `Limits.date_header`, `Limits.default_headers`.
    """
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if grace < 0:
        raise ValueError(f"grace must be >= 0, got {grace}")
    if backlog < 1:
        raise ValueError(f"backlog must be >= 1, got {backlog}")
    if gc_threshold is not None and gc_threshold < 1:
        raise ValueError(f"gc_threshold must be >= 1 or None, got {gc_threshold}")
    if interface not in INTERFACES:
        raise ValueError(f"interface must be one of {', '.join(INTERFACES)}, got {interface!r}")
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    if limit_concurrency is not None and limit_concurrency < 1:
        raise ValueError(f"limit_concurrency must be >= 1 or None, got {limit_concurrency}")
    if timeout_keep_alive is not None and not timeout_keep_alive > 0:
        raise ValueError(f"timeout_keep_alive must be > 0 or None, got {timeout_keep_alive}")
    if lifespan not in ("auto", "on", "off"):
        raise ValueError(f"lifespan must be auto, on or off, got {lifespan!r}")
    if uds is not None and fd is not None:
        raise ValueError("uds and fd are exclusive: give one listener")
    if limit_max_requests is not None and limit_max_requests < 1:
        raise ValueError(f"limit_max_requests must be >= 1 or None, got {limit_max_requests}")
    if limit_max_requests_jitter < 0:
        raise ValueError(f"limit_max_requests_jitter must be >= 0, got {limit_max_requests_jitter}")
    if workers_max_rss is not None and workers_max_rss < 1:
        raise ValueError(f"workers_max_rss must be >= 1 (MiB) or None, got {workers_max_rss}")
    if log_level is not None and log_level not in LOG_LEVELS:
        raise ValueError(f"log_level must be one of {', '.join(LOG_LEVELS)}, got {log_level!r}")
    if max_body is not None and max_body < 1:
        raise ValueError(f"max_body must be >= 1 or None, got {max_body}")
    if reload_dirs and not reload:
        raise StartupError("--reload-dir needs --reload")
    for directory in reload_dirs:
        if not os.path.isdir(directory):
            raise StartupError(f"--reload-dir {directory!r} is not a directory")
    if app_dir is not None and not os.path.isdir(app_dir):
        raise StartupError(f"--app-dir {app_dir!r} is not a directory")
    if forwarded_allow_ips is None:
        forwarded_allow_ips = os.environ.get("FORWARDED_ALLOW_IPS", DEFAULT_FORWARDED_ALLOW_IPS)
    if proxy_headers or proxy_protocol:
        ProxyTrust(forwarded_allow_ips)  # a malformed CIDR fails here, once
    if proxy_protocol and tls is not None and not tls.uses_rustls():
        raise StartupError("--proxy-protocol needs --ssl-backend rustls (or plain HTTP)")
    if access_log is not None:
        check_access_log(access_log, access_log_format)
    if tracing:
        from surge.tracing import available

        if not available():
            raise StartupError("--tracing needs the opentelemetry-api package")
        from surge.tracing import trace_drivers

        trace_drivers()  # before the app is imported: its connections are made traced
    if importing_app():
        raise RuntimeError(
            "run() was called while importing the app: "
            "put app.run() under `if __name__ == '__main__':`"
        )
    if isinstance(target, str):
        parse_import_string(target)
    elif reload:
        target = import_string_of(target)
    if tls is not None:
        tls.check()
    _configure_logging(debug, log_level)
    addr = resolve(host, port)
    cfg = Config(
        target,
        addr,
        workers,
        reload,
        debug,
        grace,
        backlog,
        gc_threshold,
        tls,
        interface=interface,
        root_path=root_path,
        lifespan=lifespan,
        threads=threads,
        limit_concurrency=limit_concurrency,
        timeout_keep_alive=timeout_keep_alive,
        websocket=tuple((websocket or {}).items()),
        access_log=access_log,
        access_log_format=access_log_format,
        proxy_headers=proxy_headers,
        forwarded_allow_ips=forwarded_allow_ips,
        uds=uds,
        uds_mode=uds_mode,
        fd=fd,
        limit_max_requests=limit_max_requests,
        limit_max_requests_jitter=limit_max_requests_jitter,
        workers_max_rss=workers_max_rss,
        tracing=tracing,
        proxy_protocol=proxy_protocol,
        factory=factory,
        app_dir=app_dir,
        reload_dirs=tuple(os.path.abspath(d) for d in reload_dirs),
        max_body=max_body,
        response_headers=_response_headers(server_header, date_header, headers),
    )
    if workers == 1 and not reload and not cfg.needs_master:
        run_single(cfg)
        return
    if uds is None and fd is None:
        cfg = dataclasses.replace(cfg, addr=check_bindable(addr))
    Master(cfg).run()


def _configure_logging(debug: bool, log_level: str | None = None) -> None:
    """Makes the "surge" logger print to stderr unless the application configured logging."""
    logger = logging.getLogger("surge")
    if debug:
        logger.setLevel(logging.DEBUG)
    elif log_level is not None:
        logger.setLevel(LOG_LEVELS[log_level])
    elif logger.level == logging.NOTSET:
        logger.setLevel(logging.INFO)
    if logger.handlers or logging.getLogger().handlers:
        return
    handler = logging.StreamHandler()
    handler.setFormatter(
        logging.Formatter("%(asctime)s [%(process)d] %(levelname)s %(message)s", "%H:%M:%S")
    )
    logger.addHandler(handler)


def _response_headers(
    server: bool | None, date: bool | None, headers: Sequence[tuple[str, str]]
) -> tuple[tuple[str, Any], ...]:
    """The `Limits` fields the header options set over the app's."""
    options: list[tuple[str, Any]] = []
    if server is not None:
        options.append(("server_header", server))
    if date is not None:
        options.append(("date_header", date))
    if headers:
        options.append(("default_headers", tuple((str(n), str(v)) for n, v in headers)))
    return tuple(options)
