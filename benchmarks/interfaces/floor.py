"""The floor of an interfaces workload: its app's own cost per request with no server.

The app of a workload (``raw_asgi``, ``fastapi`` of `benchmarks.interfaces.apps`,
the same object the servers load) is called in a loop, in-process: each request
gets a fresh HTTP scope as a server builds it for wrk's ``GET /`` (spec 2.4 keys,
one ``host`` header), a ``receive`` that returns the whole (empty) body and a
``send`` that completes at once, and its coroutine is stepped inside a running
task on uvloop (anyio and sniffio need one). No socket, no parsing, no event
loop round trip: what is left is what any server must at least spend, so a
server's own cost per request is its figure minus this one, and the best ratio
a server can reach over a peer is the peer's figure over this one.

    .venv/bin/python -m benchmarks.interfaces.floor fastapi [--n 20000] [--rounds 5]
    .venv/bin/python -m benchmarks.interfaces.floor fastapi --instructions

CPU microseconds per request come from the process's own CPU time (median of
``--rounds``), pinned to the server core. ``--instructions`` counts the app's
instructions per request under callgrind instead: two runs of ``n`` and ``2n``
requests, differenced, so the interpreter's start and the app's import cancel
out (the figure to set beside `benchmarks.interfaces.instructions`).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._lib import SERVER_CORE

#: ``empty`` answers nothing and returns at once: the loop's own cost, to subtract.
APPS = {"raw_asgi": "raw_asgi", "fastapi": "fastapi_app", "empty": None}
_HOST = [(b"host", b"127.0.0.1:8000")]
_ASGI = {"version": "3.0", "spec_version": "2.4"}
_BASE = {
    "type": "http",
    "http_version": "1.1",
    "server": ("127.0.0.1", 8000),
    "client": ("127.0.0.1", 40000),
    "scheme": "http",
    "method": "GET",
    "root_path": "",
    "path": "/",
    "raw_path": b"/",
    "query_string": b"",
}


def _scope() -> dict[str, Any]:
    """The scope a server hands the app for wrk's request (fresh, as apps mutate it)."""
    scope = _BASE.copy()
    scope["asgi"] = _ASGI.copy()
    scope["headers"] = _HOST.copy()
    scope["state"] = {}
    return scope


async def _empty(scope: Any, receive: Any, send: Any) -> None:
    return None


class _Done:
    """What `send` returns: an awaitable complete at once (as a fast server's)."""

    __slots__ = ()

    def __await__(self) -> Any:
        return
        yield  # a generator


_DONE = _Done()
_REQUEST = {"type": "http.request", "body": b"", "more_body": False}


async def _receive() -> dict[str, Any]:
    return dict(_REQUEST)


async def _requests(app: Any, n: int) -> float:
    """CPU seconds `n` requests took; checks every response is a 200."""
    sent: list[dict[str, Any]] = []
    send = sent.append

    def _send(message: dict[str, Any]) -> _Done:
        send(message)
        return _DONE

    clock = time.process_time
    t0 = clock()
    for _ in range(n):
        coro = app(_scope(), _receive, _send)
        try:
            coro.send(None)
        except StopIteration:
            pass
        else:
            coro.close()
            raise RuntimeError("the app suspended: its floor needs a running loop")
        if sent and sent[0].get("status") != 200:
            raise RuntimeError(f"unexpected response {sent[:1]!r}")
        sent.clear()
    return clock() - t0


def run(workload: str, n: int, rounds: int, warmup: int) -> list[float]:
    """CPU microseconds per request of each round."""
    import uvloop

    from benchmarks.interfaces import apps

    name = APPS[workload]
    app = _empty if name is None else getattr(apps, name)
    # As `surge serve` sets it while serving (`DEFAULT_GC_THRESHOLD`).
    gc.set_threshold(10_000, *gc.get_threshold()[1:])

    async def main() -> list[float]:
        await _requests(app, warmup)
        return [1e6 * await _requests(app, n) / n for _ in range(rounds)]

    return uvloop.run(main())


def _callgrind_total(workload: str, n: int, out: Path) -> int:
    """Instructions of one whole run of `n` requests under callgrind."""
    dump = out / f"floor-{workload}-{n}"
    cmd = ["valgrind", "--tool=callgrind", "--dump-instr=no", f"--callgrind-out-file={dump}"]
    cmd += [sys.executable, "-m", "benchmarks.interfaces.floor", workload]
    cmd += ["--n", str(n), "--rounds", "1", "--warmup", "0"]
    subprocess.run(cmd, check=True, capture_output=True, cwd=Path(__file__).parents[2])
    return int(dump.read_text("latin-1").split("\nsummary: ", 1)[1].split()[0])


def instructions(workload: str, n: int) -> int:
    """The app's instructions per request (runs of `n` and `2n` differenced)."""
    with tempfile.TemporaryDirectory(prefix="surge-floor-") as tmp:
        one = _callgrind_total(workload, n, Path(tmp))
        two = _callgrind_total(workload, 2 * n, Path(tmp))
    return (two - one) // n


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.interfaces.floor")
    ap.add_argument("workload", choices=sorted(APPS))
    ap.add_argument("--n", type=int, default=20_000, help="requests per round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2_000)
    ap.add_argument(
        "--instructions", action="store_true", help="count instructions per request (callgrind)"
    )
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    if args.instructions:
        per = instructions(args.workload, min(args.n, 3_000))
        print(f"{args.workload:>9} no server: {per:,} instructions per request", flush=True)
        return
    with contextlib.suppress(OSError):
        os.sched_setaffinity(0, {int(SERVER_CORE)})
    us = run(args.workload, args.n, args.rounds, args.warmup)
    runs = ", ".join(f"{u:.2f}" for u in us)
    median = statistics.median(us)
    print(f"{args.workload:>9} no server: median {median:.2f} us CPU per request [{runs}]")


if __name__ == "__main__":
    main()
