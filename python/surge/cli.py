"""The ``surge`` command: ``surge serve module:app``, ``--version``, plugged-in subcommands.

A subcommand lives in a module exposing ``add_parser(subparsers)``, which adds
its parser and sets ``func`` (a callable taking the parsed arguments and
returning an exit code) with ``parser.set_defaults(func=...)``. Modules listed
in ``SUBCOMMAND_MODULES`` are imported when the command line is parsed and
skipped when absent, so ``surge serve`` never depends on them.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

#: Modules that add subcommands besides ``serve`` (``surge services up|down``, ...).
SUBCOMMAND_MODULES = ("surge.services_cli", "surge.load_cli")


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the ``surge`` command line and returns its exit code."""
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    func: Callable[[argparse.Namespace], int | None] | None = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return 2
    return func(args) or 0


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The top-level parser with ``serve`` and every available plugged-in subcommand
    (only ``serve`` when `argv`, default ``sys.argv[1:]``, runs it)."""
    parser = argparse.ArgumentParser(
        prog="surge", description="High-load asynchronous I/O for Python."
    )
    parser.add_argument("--version", action="version", version=f"surge {_version()}")
    subparsers = parser.add_subparsers(title="commands", metavar="COMMAND")
    add_serve_parser(subparsers)
    # `surge serve` needs no other subcommand, and importing them costs every worker
    # memory it keeps: `surge services` brings pytest (its fixtures), `surge load`
    # the load generator, 7.4 MB of an idle worker's 40.2 MB RSS.
    if _command(sys.argv[1:] if argv is None else argv) != "serve":
        for name in SUBCOMMAND_MODULES:
            _plug_in(name, subparsers)
    return parser


def _command(argv: Sequence[str]) -> str | None:
    """The subcommand `argv` names (its first word that is not an option)."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


def add_serve_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Adds ``surge serve``."""
    from surge.http.config import DEFAULT_KEEPALIVE_TIMEOUT, DEFAULT_MAX_BODY, DEFAULT_THREADS
    from surge.serve import DEFAULT_BACKLOG, DEFAULT_GC_THRESHOLD, DEFAULT_GRACE
    from surge.serve.listeners import DEFAULT_UDS_MODE
    from surge.serve.main import LOG_LEVELS

    serve = subparsers.add_parser(
        "serve",
        help="serve an HTTP app",
        description="Serve a surge.http.App, an ASGI 3 app (FastAPI, Starlette...) "
        "or a WSGI app (Flask, Django...), "
        "e.g. `surge serve examples.app:app --workers 4`.",
    )
    serve.add_argument("app", metavar="MODULE:APP", help="import string of the app")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default %(default)s)")
    serve.add_argument(
        "--port", type=_int_in(0, 65535), default=8080, help="port to bind (default %(default)s)"
    )
    serve.add_argument(
        "--workers",
        type=_int_in(1, 1024),
        default=1,
        metavar="N",
        help="worker processes; more than one starts a master that forks them (default 1)",
    )
    serve.add_argument(
        "--reload", action="store_true", help="restart the workers when a .py file changes"
    )
    serve.add_argument(
        "--reload-dir",
        action="append",
        default=[],
        metavar="DIR",
        help="with --reload: watch DIR instead of the app's project (repeatable)",
    )
    serve.add_argument(
        "--debug", action="store_true", help="tracebacks in 500 responses, debug logging"
    )
    serve.add_argument(
        "--grace",
        "--timeout-graceful-shutdown",
        type=_non_negative_float,
        default=DEFAULT_GRACE,
        metavar="S",
        help="seconds in-flight requests get to finish on SIGTERM/SIGINT (default %(default)s)",
    )
    serve.add_argument(
        "--factory",
        action="store_true",
        help="MODULE:APP is a function taking no argument that returns the app "
        "(called in each worker)",
    )
    serve.add_argument(
        "--app-dir",
        metavar="DIR",
        help="look MODULE up in DIR first (default: the current directory)",
    )
    serve.add_argument(
        "--env-file",
        metavar="FILE",
        help="set environment variables from FILE before loading the app (needs "
        "python-dotenv, as uvicorn; variables already set are kept)",
    )
    serve.add_argument(
        "--log-level",
        choices=list(LOG_LEVELS),
        help="level of surge's log (default info; --debug implies debug)",
    )
    serve.add_argument(
        "--backlog",
        type=_int_in(1, 1 << 20),
        default=DEFAULT_BACKLOG,
        help="listen backlog of each worker's socket (default %(default)s)",
    )
    serve.add_argument(
        "--gc-threshold",
        type=_int_in(0, 1 << 30),
        default=DEFAULT_GC_THRESHOLD,
        metavar="N",
        help="raise the garbage collector's first threshold to N while serving; "
        "0 leaves Python's (default %(default)s)",
    )
    serve.add_argument(
        "--interface",
        choices=["auto", "surge", "asgi", "wsgi"],
        default="auto",
        help="what the app is; auto detects a surge App, an ASGI 3 app or a WSGI app "
        "(default %(default)s)",
    )
    serve.add_argument(
        "--root-path",
        default="",
        metavar="PATH",
        help="ASGI/WSGI: the path the app is mounted at, behind a proxy "
        "(scope root_path, SCRIPT_NAME)",
    )
    serve.add_argument(
        "--lifespan",
        choices=["auto", "on", "off"],
        default="auto",
        help="ASGI lifespan protocol: auto carries on when the app does not support it, "
        "on fails startup then (default %(default)s)",
    )
    serve.add_argument(
        "--threads",
        type=_int_in(1, 4096),
        default=DEFAULT_THREADS,
        metavar="N",
        help="WSGI: threads running the app in each worker; more requests wait for one "
        "(default %(default)s)",
    )
    serve.add_argument(
        "--limit-concurrency",
        type=_int_in(1, 1 << 30),
        default=None,
        metavar="N",
        help="connections each worker serves at once; a connection opened beyond them "
        "gets 503 Service Unavailable and is closed (default: no limit)",
    )
    serve.add_argument(
        "--max-body",
        type=_int_in(1, 1 << 62),
        default=None,
        metavar="BYTES",
        help="largest request body; a larger one gets 413 (default: the app's "
        f"max_body, {DEFAULT_MAX_BODY >> 20} MiB for ASGI and WSGI apps; uvicorn has no limit)",
    )
    serve.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="NAME:VALUE",
        dest="headers",
        help="a header added to every response, the server's own error answers included "
        "(repeatable; a header the app sets itself replaces it; uvicorn's --header)",
    )
    serve.add_argument(
        "--server-header",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="send 'server: surge' (default: the app's server_header, on)",
    )
    serve.add_argument(
        "--date-header",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="send Date (default: the app's date_header, on)",
    )
    serve.add_argument(
        "--timeout-keep-alive",
        type=_positive_float,
        default=None,
        metavar="S",
        help="close a keep-alive connection that sends nothing for S seconds "
        f"(default: the app's keepalive_timeout, {DEFAULT_KEEPALIVE_TIMEOUT:g})",
    )
    ops = serve.add_argument_group("operations (uvicorn's and gunicorn's option names)")
    ops.add_argument(
        "--access-log",
        metavar="FILE",
        help="log every response to FILE ('-' for stderr), written by a thread, never "
        "blocking the server (default: off)",
    )
    ops.add_argument(
        "--access-log-format",
        metavar="FORMAT",
        help="gunicorn's atoms (%%(h)s %%(r)s %%(s)s %%(b)s %%(D)s %%({x-request-id}i)s...) "
        "or 'json' (default: gunicorn's combined format)",
    )
    ops.add_argument(
        "--proxy-headers",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="take the client address, scheme and host from Forwarded / X-Forwarded-* "
        "headers sent by a trusted proxy (--forwarded-allow-ips); on by default, as "
        "uvicorn's",
    )
    ops.add_argument(
        "--forwarded-allow-ips",
        metavar="IPS",
        help="trusted proxies: comma-separated IPs and CIDRs, or '*' "
        "(default: $FORWARDED_ALLOW_IPS or 127.0.0.1)",
    )
    ops.add_argument(
        "--proxy-protocol",
        action="store_true",
        help="every connection opens with a PROXY protocol v1/v2 header (HAProxy's "
        "send-proxy) from a peer in --forwarded-allow-ips; its client becomes the peer",
    )
    ops.add_argument("--uds", metavar="PATH", help="listen on this Unix socket (removed at exit)")
    ops.add_argument(
        "--uds-mode",
        type=lambda text: int(text, 8),
        default=DEFAULT_UDS_MODE,
        metavar="OCTAL",
        help=f"permissions of the --uds socket file (default {DEFAULT_UDS_MODE:o})",
    )
    ops.add_argument(
        "--fd", type=_int_in(0, 1 << 20), metavar="N", help="listen on this inherited socket"
    )
    ops.add_argument(
        "--limit-max-requests",
        type=_int_in(1, 1 << 62),
        metavar="N",
        help="replace a worker after N requests (its successor starts first)",
    )
    ops.add_argument(
        "--limit-max-requests-jitter",
        type=_int_in(0, 1 << 62),
        default=0,
        metavar="J",
        help="draw each worker's limit from N-J..N+J, so they do not restart together",
    )
    ops.add_argument(
        "--workers-max-rss",
        type=_int_in(1, 1 << 30),
        metavar="MIB",
        help="replace a worker whose resident memory exceeds MIB (checked every second)",
    )
    ops.add_argument(
        "--tracing",
        action="store_true",
        help="an OpenTelemetry span per request, child of the request's traceparent "
        "(needs opentelemetry-api; spans go to the app's TracerProvider)",
    )
    ws = serve.add_argument_group("WebSocket (uvicorn's option names; default: the app's limits)")
    ws.add_argument(
        "--ws-max-size",
        type=_int_in(1, 1 << 40),
        metavar="BYTES",
        help="largest message; larger closes with 1009 (default 16 MiB)",
    )
    ws.add_argument(
        "--ws-ping-interval",
        type=_positive_float,
        metavar="S",
        help="seconds between keep-alive pings (default 20)",
    )
    ws.add_argument(
        "--ws-ping-timeout",
        type=_positive_float,
        metavar="S",
        help="seconds a pong may take before closing with 1011 (default 20)",
    )
    ws.add_argument(
        "--ws-per-message-deflate",
        choices=["true", "false"],
        help="agree to permessage-deflate when offered (default true)",
    )
    tls = serve.add_argument_group("HTTPS (uvicorn's option names)")
    tls.add_argument(
        "--ssl-certfile", metavar="FILE", help="serve HTTPS with this certificate (PEM)"
    )
    tls.add_argument(
        "--ssl-keyfile", metavar="FILE", help="its private key (PEM; default: in the certfile)"
    )
    tls.add_argument("--ssl-keyfile-password", metavar="PASSWORD", help="the key's password")
    tls.add_argument(
        "--ssl-ca-certs", metavar="FILE", help="CA certificates to verify clients with"
    )
    tls.add_argument(
        "--ssl-cert-reqs",
        type=_int_in(0, 2),
        default=0,
        metavar="N",
        help="client certificates: 0 none, 1 optional, 2 required (default %(default)s)",
    )
    tls.add_argument("--ssl-ciphers", metavar="LIST", help="OpenSSL cipher list (TLS 1.2)")
    tls.add_argument(
        "--ssl-backend",
        choices=("auto", "rustls", "python"),
        default="auto",
        help="TLS stack: rustls (native, faster) or python (the ssl module); auto picks "
        "rustls unless --ssl-ciphers or a legacy-encrypted key need python (default auto)",
    )
    serve.set_defaults(func=_serve)


def _serve(args: argparse.Namespace) -> int:
    from surge._core import ProxyTrust
    from surge.serve import StartupError, TlsConfig, run
    from surge.serve.access_log import check_access_log

    tls = None
    if args.ssl_certfile:
        tls = TlsConfig(
            certfile=args.ssl_certfile,
            keyfile=args.ssl_keyfile,
            keyfile_password=args.ssl_keyfile_password,
            ca_certs=args.ssl_ca_certs,
            cert_reqs=args.ssl_cert_reqs,
            ciphers=args.ssl_ciphers,
            backend=args.ssl_backend,
        )
    elif args.ssl_keyfile or args.ssl_ca_certs:
        print("surge: error: --ssl-keyfile and --ssl-ca-certs need --ssl-certfile", file=sys.stderr)
        return 2
    try:
        # Checked here too, so a typo is a usage error rather than a traceback.
        if args.access_log:
            check_access_log(args.access_log, args.access_log_format)
        if (args.proxy_headers or args.proxy_protocol) and args.forwarded_allow_ips:
            ProxyTrust(args.forwarded_allow_ips)
        if args.env_file is not None:
            _load_env_file(args.env_file)
        headers = _headers(args.headers)
    except (ValueError, OSError) as exc:
        print(f"surge: error: {exc}", file=sys.stderr)
        return 2
    try:
        run(
            args.app,
            host=args.host,
            port=args.port,
            workers=args.workers,
            reload=args.reload,
            debug=args.debug,
            grace=args.grace,
            backlog=args.backlog,
            gc_threshold=args.gc_threshold or None,
            tls=tls,
            interface=args.interface,
            root_path=args.root_path,
            lifespan=args.lifespan,
            threads=args.threads,
            limit_concurrency=args.limit_concurrency,
            timeout_keep_alive=args.timeout_keep_alive,
            websocket=_websocket_options(args),
            access_log=args.access_log,
            access_log_format=args.access_log_format,
            proxy_headers=args.proxy_headers,
            forwarded_allow_ips=args.forwarded_allow_ips,
            uds=args.uds,
            uds_mode=args.uds_mode,
            fd=args.fd,
            limit_max_requests=args.limit_max_requests,
            limit_max_requests_jitter=args.limit_max_requests_jitter,
            workers_max_rss=args.workers_max_rss,
            tracing=args.tracing,
            proxy_protocol=args.proxy_protocol,
            factory=args.factory,
            app_dir=args.app_dir,
            log_level=args.log_level,
            reload_dirs=tuple(args.reload_dir),
            max_body=args.max_body,
            server_header=args.server_header,
            date_header=args.date_header,
            headers=headers,
        )
    except StartupError as exc:
        if exc.detail:
            sys.stderr.write(exc.detail.rstrip("\n") + "\n")
        print(f"surge: error: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


def _headers(options: list[str]) -> tuple[tuple[str, str], ...]:
    """``--header NAME:VALUE`` options as (name, value) pairs, checked (ValueError)."""
    from surge._core import HeadDefaults

    pairs = []
    for option in options:
        name, colon, value = option.partition(":")
        if not colon:
            raise ValueError(f"--header {option!r}: expected NAME:VALUE")
        pairs.append((name, value))
    try:
        HeadDefaults(True, True, pairs)
    except ValueError as exc:
        raise ValueError(f"--header: {exc}") from None
    return tuple(pairs)


def _load_env_file(path: str) -> None:
    """uvicorn's --env-file: python-dotenv reads `path` into os.environ (before the
    workers fork, so each sees it); a missing file or package is an error, not a no-op."""
    try:
        from dotenv import load_dotenv
    except ImportError:
        raise ValueError("--env-file needs the python-dotenv package") from None
    if not os.path.isfile(path):
        raise ValueError(f"--env-file {path!r}: no such file")
    load_dotenv(dotenv_path=path)


def _plug_in(
    module_name: str, subparsers: argparse._SubParsersAction[argparse.ArgumentParser]
) -> None:
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            return  # not written or not installed: no such subcommand
        _warn_unavailable(module_name, exc)
        return
    except Exception as exc:
        # A broken plugin must not take `surge serve` down with it.
        _warn_unavailable(module_name, exc)
        return
    module.add_parser(subparsers)


def _warn_unavailable(module_name: str, exc: BaseException) -> None:
    print(
        f"surge: warning: commands of {module_name} unavailable: {type(exc).__name__}: {exc}",
        file=sys.stderr,
    )


def _websocket_options(args: argparse.Namespace) -> dict[str, Any]:
    """The `Limits` ws_* fields given on the command line."""
    options: dict[str, Any] = {}
    if args.ws_max_size is not None:
        options["ws_max_message_size"] = args.ws_max_size
    if args.ws_ping_interval is not None:
        options["ws_ping_interval"] = args.ws_ping_interval
    if args.ws_ping_timeout is not None:
        options["ws_ping_timeout"] = args.ws_ping_timeout
    if args.ws_per_message_deflate is not None:
        options["ws_per_message_deflate"] = args.ws_per_message_deflate == "true"
    return options


def _version() -> str:
    # One place: Cargo.toml's workspace version, compiled into the extension.
    from surge import __version__

    return __version__


def _int_in(low: int, high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is not in {low}..{high}")
        return value

    parse.__name__ = "integer"
    return parse


def _non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value >= 0:  # also rejects nan
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def _positive_float(text: str) -> float:
    value = _non_negative_float(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be > 0")
    return value
