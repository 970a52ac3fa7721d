"""Client instructions per request, by phase: the seed-000 workload under callgrind.

A figure the machine's load does not move (unlike ops/s, and unlike CPU time,
which other processes' cache traffic inflates): each side runs the workload
(insert, select, update, delete of N tuples of 1.5 KB on one connection) in a
client under ``valgrind --tool=callgrind``, which is zeroed before each phase
and dumps after it (``callgrind_control``), so a phase's count is its own and
excludes start-up, connecting and the warm-up requests. Kernel time (the
syscalls) is not in it: read it beside `benchmarks.tarantool.ab`'s CPU
microseconds per op, which include it.

Under callgrind the client runs ~50x slower, so each read brings more replies
than at full speed: per-request costs (encode, decode, futures) are as they
are, per-read and per-write costs are spread over more requests.

A side is ``LABEL=DRIVER[@PYTHONPATH][,NAME=VALUE...]`` as in
`benchmarks.tarantool.ab` (parsed by its runner, so a knob of `surge.engine`
applies here as it does there).

    .venv/bin/python -m benchmarks.tarantool.instructions --conc 10 --loop uvloop \\
        --side asynctnt=asynctnt --side base=surge@/tmp/base --side new=surge

The per-function costs stay in the dump files (``--keep DIR``;
``callgrind_annotate --inclusive=yes FILE``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
from pathlib import Path

from benchmarks._lib import CLIENT_CORE, SERVER_CORE, dump_dir, pin_pid, pinned
from benchmarks.tarantool.ab import parse_side

ROOT = Path(__file__).resolve().parents[2]
PY = ROOT / ".venv" / "bin" / "python"


def _ctl(*args: str) -> None:
    subprocess.run(["callgrind_control", *args, str(os.getpid())], check=True, capture_output=True)


async def _phases(conn, conc: int, n: int) -> None:
    from benchmarks.tarantool.client import PHASES, op

    await conn.eval("box.space.tester:truncate()")
    for phase in PHASES:  # warm-up: every code path once, outside the counts
        await asyncio.gather(*(op(conn, phase, n + k) for k in range(conc)))
    for phase in PHASES:

        async def worker(start: int, phase: str = phase) -> None:
            for i in range(start, n, conc):
                await op(conn, phase, i)

        _ctl("-z")
        await asyncio.gather(*(worker(k) for k in range(conc)))
        _ctl("-d", phase)


async def _client(driver: str, conc: int, n: int, port: int, knobs: list[str]) -> None:
    if driver == "surge":
        import surge.tarantool

        from benchmarks.tarantool.ab_client import parse_knobs, set_knobs

        set_knobs(parse_knobs(knobs))
        conn = surge.tarantool.connect(f"127.0.0.1:{port}")
        await _phases(conn, conc, n)
        await conn.close()
    else:
        import asynctnt

        conn = asynctnt.Connection(host="127.0.0.1", port=port)
        await conn.connect()
        await _phases(conn, conc, n)
        await conn.disconnect()


def _count(spec: str, loop: str, conc: int, n: int, port: int, out: Path) -> dict[str, int]:
    label, driver, path, knobs = parse_side(spec)
    env = {**os.environ, "PYTHONPATH": f"{path}:{ROOT}" if path else str(ROOT)}
    cmd = ["valgrind", "--tool=callgrind", "--dump-instr=no"]
    cmd += [
        f"--callgrind-out-file={out}/{label}.%p",
        str(PY),
        "-m",
        "benchmarks.tarantool.instructions",
    ]
    cmd += [
        "--client",
        driver,
        "--loop",
        loop,
        "--conc",
        str(conc),
        "--n",
        str(n),
        "--port",
        str(port),
        *(f"--knob={k}" for k in knobs),
    ]
    subprocess.run(pinned(cmd, CLIENT_CORE), check=True, capture_output=True, env=env, cwd=ROOT)
    per_op = {}
    for dump in sorted(out.glob(f"{label}.*.*")):
        text = dump.read_text(errors="replace")
        phase = text.split("desc: Trigger: dump ", 1)[1].split()[0]
        total = int(text.split("\nsummary: ", 1)[1].split()[0])
        per_op[phase] = total // n
    return per_op


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.tarantool.instructions")
    ap.add_argument("--side", action="append", default=[], help="LABEL=DRIVER[@PATH][,K=V]")
    ap.add_argument("--conc", type=int, default=10)
    ap.add_argument("--loop", default="uvloop", choices=("uvloop", "asyncio"))
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--keep", type=Path, help="keep the callgrind dumps in this directory")
    ap.add_argument("--client", help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--knob", action="append", default=[], help=argparse.SUPPRESS)
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    if args.client:
        from benchmarks.tarantool.client import run_on

        run_on(args.loop, _client(args.client, args.conc, args.n, args.port, args.knob))
        return
    from surge import services

    from benchmarks.tarantool import run as suite

    with (
        dump_dir(args.keep) as out,
        services.tarantool(extra_lua=suite.SPACE_LUA, wal_mode="none") as svc,
    ):
        pin_pid(svc.pid, SERVER_CORE)
        rows = {
            s.split("=", 1)[0]: _count(s, args.loop, args.conc, args.n, svc.port, out)
            for s in args.side
        }
    print(
        f"client instructions per request (callgrind), {args.conc} coroutines,"
        f" {args.loop}, N={args.n}"
    )
    phases = list(next(iter(rows.values())))
    print(f"{'':>10} " + " ".join(f"{p:>8}" for p in phases))
    for label, per_op in rows.items():
        print(f"{label:>10} " + " ".join(f"{per_op[p]:8,}" for p in phases))


if __name__ == "__main__":
    main()
