"""Decoding anonymous records alone: CPU microseconds per query of 1000 records
of 4 fields (int4, text, float8, bool), builds A/B.

A real server's reply to ten executions of the query is recorded once per run,
then fed whole into fresh `PgCodec`s (no socket, no event loop, the cyclic
collector off), so the figure is the codec's decoding and the load of the
machine moves it little; end to end, a query also pays its reads and wake-ups,
which depend on how the server's bytes arrive. Each side is a build's package
directory, run in its own process, the sides alternating round by round:

    .venv/bin/python -m benchmarks.postgres.record_decode \\
        --side base=/tmp/base-pkg --side new=python --rounds 7
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import socket
import statistics
import subprocess
import sys
from typing import Any

from benchmarks._lib import CLIENT_CORE, SERVER_CORE, pin_pid, pinned

SQL = "SELECT ROW(i, i::text, i::float8, i % 2 = 0) FROM generate_series(1, 1000) i"
#: Executions per recorded reply.
EXECUTIONS = 10


def _answered(sock: socket.socket, codec: Any, log: list[bytes]) -> list:
    """Send what `codec` holds and read until every request it made is answered;
    the reads go to `log`."""
    sock.sendall(codec.take())
    out: list = []
    while codec.waiting():
        log.append(sock.recv(65536))
        assert log[-1], "server closed"
        out += codec.feed(log[-1])
    return out


def _child(host: str, port: int, repeats: int) -> None:
    """Record the reply, then print the median and the least CPU us per query."""
    from surge._core import PgCodec, Statement

    codec, log = PgCodec(), []
    with socket.create_connection((host, port)) as sock:
        codec.startup([("user", "postgres"), ("database", "postgres")])
        _answered(sock, codec, log)
        codec.prepare("s1", SQL)
        (stmt,) = [r[2] for r in _answered(sock, codec, log) if isinstance(r[2], Statement)]
        start = len(log)
        for _ in range(EXECUTIONS):
            codec.bind_execute(stmt, (), 0)
        first = _answered(sock, codec, log)[0][2]
        assert len(first) == 1000 and first[1][0] == (2, "2", 2.0, True)
    stream = b"".join(log[start:])
    gc.disable()
    costs = []
    for _ in range(repeats):
        c = PgCodec()  # waiting for the executions' replies only
        for _ in range(EXECUTIONS):
            c.bind_execute(stmt, (), 0)
        c.take()
        t0 = resource.getrusage(resource.RUSAGE_SELF)
        replies = c.feed(stream)
        t1 = resource.getrusage(resource.RUSAGE_SELF)
        assert len(replies) == EXECUTIONS
        cpu = (t1.ru_utime - t0.ru_utime) + (t1.ru_stime - t0.ru_stime)
        costs.append(cpu / EXECUTIONS * 1e6)
    print(statistics.median(costs), min(costs))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--side", action="append", required=True, help="LABEL=PACKAGE_DIR")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--repeats", type=int, default=40, help="feeds per process")
    ap.add_argument("--child", nargs=2, metavar=("HOST", "PORT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(args.child[0], int(args.child[1]), args.repeats)
        return
    from surge import services

    sides = dict(s.split("=", 1) for s in args.side)
    medians: dict[str, list[float]] = {k: [] for k in sides}
    with services.postgres() as svc:
        pin_pid(svc.pid, SERVER_CORE)
        for r in range(args.rounds):
            for label in sides if r % 2 == 0 else list(sides)[::-1]:
                env = dict(os.environ, PYTHONPATH=os.path.abspath(sides[label]))
                cmd = [sys.executable, "-m", "benchmarks.postgres.record_decode", "--side", "x=."]
                cmd += ["--repeats", str(args.repeats), "--child", svc.host, str(svc.port)]
                run = subprocess.run(pinned(cmd, CLIENT_CORE), env=env, capture_output=True)
                run.check_returncode()
                out = run.stdout.decode()
                medians[label].append(float(out.split()[0]))
            print(f"round {r}:", {k: round(v[-1], 1) for k, v in medians.items()}, flush=True)
    for label, v in medians.items():
        rounds = ", ".join(f"{x:.1f}" for x in sorted(v))
        print(f"{label}: median {statistics.median(v):.1f} us/query (rounds: {rounds})")


if __name__ == "__main__":
    main()
