"""``surge load``: fixed-rate or closed-loop load on an HTTP URL or a database server.

    surge load http://127.0.0.1:8080/ --rate 1000 --duration 10
    surge load http://127.0.0.1:8080/ --rates 500,1000,2000 --chart lat.png --json out.json
    surge load http://127.0.0.1:8080/ --connections 50 --pipeline 8
    surge load https://127.0.0.1:8443/ --cacert ca.pem --server-name localhost -c 100
    surge load tarantool://127.0.0.1:3301 --mix insert=25,select=25,update=25,delete=25 \\
        --rate 20000 --procs 2 --chart rates.png
    surge load postgresql://postgres@127.0.0.1:5432/postgres --query "SELECT 1" -c 1 --pipeline 100
    surge load postgresql://postgres@127.0.0.1:5432/postgres --mix select=80,update=20 --rate 5000
    surge load tarantool://127.0.0.1:3301 --rate 20000 --graphite 127.0.0.1:2003
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Adds ``surge load``."""
    p = subparsers.add_parser(
        "load",
        help="generate load and report latency percentiles",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "target",
        help="http(s)://host:port/path, tarantool://host:port, redis://host:port "
        "or postgresql://user@host:port/db",
    )
    model = p.add_argument_group("load model")
    rate = model.add_mutually_exclusive_group()
    rate.add_argument(
        "--rate", type=_positive, metavar="R", help="open model: R requests per second in all"
    )
    rate.add_argument(
        "--rates",
        type=_rates,
        metavar="R1,R2,...",
        help="open model, one run per rate (a sweep; --chart plots percentiles against rate)",
    )
    model.add_argument(
        "--connections",
        "-c",
        type=int,
        metavar="N",
        help="per process: closed model: connections kept busy (default 10); open model: "
        "most HTTP connections opened (default 1000); databases: driver connections (default 1)",
    )
    model.add_argument(
        "--pipeline", type=int, default=1, metavar="D", help="requests in flight per connection"
    )
    model.add_argument(
        "--duration", "-d", type=_positive, default=10.0, metavar="S", help="seconds per run"
    )
    model.add_argument(
        "--warmup",
        type=float,
        default=0.0,
        metavar="S",
        help="seconds of the same load before each run, not recorded (default 0)",
    )
    model.add_argument(
        "--procs", "-p", type=int, default=1, metavar="P", help="worker processes (default 1)"
    )
    model.add_argument(
        "--timeout", type=_positive, default=10.0, metavar="S", help="request timeout (default 10)"
    )
    model.add_argument("--connect-timeout", type=_positive, default=5.0, metavar="S")
    model.add_argument(
        "--stop-p99",
        type=_positive,
        metavar="MS",
        help="with --rates: stop after the first rate whose p99 exceeds MS",
    )
    http = p.add_argument_group("HTTP targets")
    http.add_argument("--method", "-X", default="GET")
    http.add_argument(
        "--header", "-H", action="append", default=[], metavar="'NAME: VALUE'", dest="headers"
    )
    body = http.add_mutually_exclusive_group()
    body.add_argument("--body", help="request body")
    body.add_argument("--body-file", type=Path, metavar="FILE", help="request body from a file")
    tls = p.add_argument_group("HTTPS targets")
    tls.add_argument(
        "--cacert",
        metavar="FILE",
        help="CA certificates (PEM) the server's certificate must lead to (default: the system's)",
    )
    tls.add_argument(
        "--insecure",
        "-k",
        action="store_true",
        help="check no certificate at all (benchmark servers with self-signed ones)",
    )
    tls.add_argument(
        "--server-name",
        metavar="NAME",
        help="the name sent (SNI) and checked in the certificate (default: the URL's host)",
    )
    drv = p.add_argument_group("driver targets")
    drv.add_argument(
        "--mix",
        help="operation weights, e.g. insert=25,select=25,update=25,delete=25 (Tarantool's "
        "default); Redis: get, set; PostgreSQL: query, select, insert, update, delete "
        "(default select=80,update=20, or query alone with --query)",
    )
    drv.add_argument("--space", default="tester", help="Tarantool space (created if missing)")
    drv.add_argument(
        "--query", help="PostgreSQL: a statement to run as the operation 'query' (rows fetched)"
    )
    drv.add_argument(
        "--table", default="surge_load", help="PostgreSQL: the mix's table (created if missing)"
    )
    drv.add_argument("--tuple-size", type=int, default=1536, metavar="BYTES")
    out = p.add_argument_group("output")
    out.add_argument("--json", type=Path, metavar="FILE", help="write the results as JSON")
    out.add_argument(
        "--chart",
        type=Path,
        metavar="FILE.png",
        help="PNG: percentiles against rate for --rates, else per-operation rate over time",
    )
    out.add_argument("--quiet", "-q", action="store_true", help="no live progress line")
    out.add_argument(
        "--graphite",
        metavar="HOST:PORT",
        help="send each second's per-operation rates to Graphite (plaintext protocol)",
    )
    out.add_argument(
        "--graphite-prefix", default="surge.load", metavar="PREFIX", help="(default surge.load)"
    )
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Runs ``surge load`` with parsed arguments; returns the exit code."""
    import surge.load as load
    from surge.load import chart

    try:
        kw = _settings(args)
        _check_outputs(args)
        rates = args.rates or ([args.rate] if args.rate else [None])
        results: list[Any] = []
        for rate in rates:
            r = load.run(
                args.target,
                rate=rate,
                progress=not args.quiet,
                graphite=args.graphite,
                graphite_prefix=args.graphite_prefix,
                **kw,
            )
            if not args.quiet and sys.stderr.isatty():
                sys.stderr.write("\n")
            sys.stdout.write(load.render_table(r))
            sys.stdout.flush()
            results.append(r)
            if r.interrupted:
                break  # Ctrl-C: report what was measured, run no further rate
            p99 = r.latency["p99"]
            if args.stop_p99 and len(rates) > 1 and (p99 is None or p99 > args.stop_p99):
                print(f"stopping the sweep: p99 {p99} ms > {args.stop_p99:g} ms")
                break
    except load.LoadError as exc:
        print(f"surge load: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    if len(results) > 1:
        sys.stdout.write("\n" + load.render_sweep(results))
    if args.json:
        data: Any = [r.to_dict() for r in results] if args.rates else results[0].to_dict()
        args.json.write_text(json.dumps(data, indent=1))
        print(f"JSON: {args.json}")
    if args.chart:
        if args.rates:
            chart.percentiles_vs_rate({"target": results}, args.chart, title=args.target)
        else:
            chart.rate_over_time(results[0], args.chart)
        print(f"chart: {args.chart}")
    return 130 if results[-1].interrupted else 0


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    headers = []
    for h in args.headers:
        name, sep, value = h.partition(":")
        if not sep or not name.strip():
            raise _load_error(f"bad --header {h!r}: want 'Name: value'")
        headers.append((name.strip(), value.strip()))
    body: bytes = b""
    if args.body is not None:
        body = args.body.encode()
    elif args.body_file is not None:
        body = args.body_file.read_bytes()
    return {
        "connections": args.connections,
        "pipeline": args.pipeline,
        "duration": args.duration,
        "warmup": args.warmup,
        "procs": args.procs,
        "method": args.method,
        "headers": headers,
        "body": body,
        "mix": args.mix,
        "timeout": args.timeout,
        "connect_timeout": args.connect_timeout,
        "cafile": args.cacert,
        "insecure": args.insecure,
        "server_name": args.server_name,
        "space": args.space,
        "tuple_size": args.tuple_size,
        "query": args.query,
        "table": args.table,
    }


def _check_outputs(args: argparse.Namespace) -> None:
    """Refuse, before the run, files that could not be written after it (the run's
    results would be lost); warn of more workers than cores."""
    from surge.load.runner import cpu_count

    for out in (args.json, args.chart):
        if out is not None and not out.resolve().parent.is_dir():
            raise _load_error(f"cannot write {out}: {out.parent} is not a directory")
    cores = cpu_count()
    if args.procs > cores:
        print(
            f"surge load: warning: --procs {args.procs} > {cores} core(s) this process may"
            " use: the workers take turns on the cores, and their lag shows in the latencies",
            file=sys.stderr,
        )


def _load_error(msg: str) -> Exception:
    from surge.load import LoadError

    return LoadError(msg)


def _positive(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not v > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return v


def _rates(text: str) -> list[float]:
    rates = [_positive(t) for t in text.split(",") if t.strip()]
    if not rates:
        raise argparse.ArgumentTypeError(f"no rate in {text!r}: want R1,R2,...")
    return rates
