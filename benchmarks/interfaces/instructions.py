"""Server instructions per request under callgrind, for the interfaces suite's servers.

A figure the machine's load does not move (unlike req/s, and unlike CPU time,
which other processes' cache traffic inflates): the server of a workload
(``raw_asgi``, ``fastapi``, ``flask`` as `benchmarks.interfaces.run` starts it)
runs under ``valgrind --tool=callgrind --dump-instr=no``; after a warm-up the
counters are zeroed (``callgrind_control -z``), a client sends ``--n`` requests
over ``--conc`` keep-alive connections (one request in flight per connection,
as wrk without pipelining), and the counters are dumped. Kernel time (the
syscalls) is not in it.

Under callgrind the server runs ~50x slower, so each loop iteration finds more
connections ready than at full speed: per-request costs are as they are, per
loop iteration costs are spread over more requests (the same for every server).

    .venv/bin/python -m benchmarks.interfaces.instructions raw_asgi fastapi \\
        [--server surge,uvicorn] [--surge-python /tmp/base/bin/python] [--keep DIR]

The per-function costs stay in the dump files (``--keep DIR``;
``callgrind_annotate --inclusive=yes FILE``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from benchmarks._lib import CLIENT_CORE, SERVER_CORE, dump_dir, free_port, pinned
from benchmarks.interfaces import run as suite

ROOT = suite.ROOT
_LENGTH = re.compile(rb"\r\ncontent-length:\s*(\d+)", re.IGNORECASE)


async def _connection(port: int, n: int) -> None:
    """`n` requests one after another on one keep-alive connection."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    request = f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
    for _ in range(n):
        writer.write(request)
        head = await reader.readuntil(b"\r\n\r\n")
        match = _LENGTH.search(head)
        if not head.startswith(b"HTTP/1.1 200 ") or match is None:
            raise RuntimeError(f"unexpected response head {head[:200]!r}")
        await reader.readexactly(int(match.group(1)))
    writer.close()


async def _load(port: int, conc: int, n: int) -> None:
    await asyncio.gather(*(_connection(port, n // conc) for _ in range(conc)))


def _ready(port: int, proc: subprocess.Popen, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode}")
        try:
            asyncio.run(_load(port, 1, 1))
            return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError("the server did not answer")


def _argv(workload: str, name: str, surge_python: str | None) -> list[str]:
    servers = {s.name: s for s in suite.workloads()[workload]}
    argv = list(servers[name].argv)
    if name == "surge" and surge_python:
        argv = [surge_python, "-m", "surge", *argv[1:]]
    elif argv[0].endswith(("/surge", "/uvicorn", "/granian")):
        # valgrind follows the interpreter, not the script's shebang.
        argv = [str(Path(argv[0]).parent / "python"), argv[0], *argv[1:]]
    return argv


def count(
    workload: str,
    name: str,
    out: Path,
    conc: int,
    n: int,
    warmup: int,
    surge_python: str | None = None,
) -> int:
    """Instructions per request of server `name` of `workload` (dump left in `out`)."""
    port = free_port()
    label = f"{workload}-{name}".replace(" ", "_")
    cmd = ["valgrind", "--tool=callgrind", "--dump-instr=no"]
    cmd += [f"--callgrind-out-file={out}/{label}.%p"]
    cmd += [*_argv(workload, name, surge_python), "--host", "127.0.0.1", "--port", str(port)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        pinned(cmd, SERVER_CORE),
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        _ready(port, proc)
        asyncio.run(_load(port, conc, warmup))
        pid = str(proc.pid)
        subprocess.run(["callgrind_control", "-z", pid], check=True, capture_output=True)
        asyncio.run(_load(port, conc, n))
        subprocess.run(["callgrind_control", "-d", "load", pid], check=True, capture_output=True)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:  # a drain under valgrind can take long
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(60)
    dumps = [d for d in out.glob(f"{label}.*") if "Trigger: dump load" in d.read_text("latin-1")]
    if not dumps:
        raise RuntimeError(f"no dump of {label}")
    text = dumps[-1].read_text("latin-1")
    return int(text.split("\nsummary: ", 1)[1].split()[0]) // n


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.interfaces.instructions")
    ap.add_argument("workloads", nargs="+", choices=("raw_asgi", "fastapi", "flask"))
    ap.add_argument("--server", default="surge", help="comma-separated server names")
    ap.add_argument("--conc", type=int, default=10, help="connections")
    ap.add_argument("--n", type=int, default=4000, help="requests counted")
    ap.add_argument("--warmup", type=int, default=1000)
    ap.add_argument("--surge-python", help="the interpreter of another surge build to count")
    ap.add_argument("--keep", type=Path, help="keep the callgrind dumps in this directory")
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    with dump_dir(args.keep) as out:
        for workload in args.workloads:
            for name in args.server.split(","):
                per = count(workload, name, out, args.conc, args.n, args.warmup, args.surge_python)
                print(f"{workload:>9} {name:>10}: {per:,} instructions per request", flush=True)


if __name__ == "__main__":
    # The client runs on the other core.
    with contextlib.suppress(OSError):
        os.sched_setaffinity(0, {int(CLIENT_CORE)})
    main()
