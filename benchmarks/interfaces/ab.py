"""A/B of two surge builds (and, optionally, the suite's peers) on one interfaces workload.

Each side is the suite's server for the workload (`benchmarks.interfaces.run`),
started once and paused (SIGSTOP) while the others run; rounds alternate the
sides, and each figure is the median over the rounds, with the server's CPU
time per request from /proc (steadier than req/s on a shared machine). The
other build is a copy of the `surge` package (its Python files and its
`_core.abi3.so`) in a directory put first on the server's PYTHONPATH:

    mkdir -p /tmp/base && git archive HEAD python/surge | tar -x -C /tmp/base
    cp OLD/_core.abi3.so /tmp/base/python/surge/
    .venv/bin/python -m benchmarks.interfaces.ab raw_asgi --base /tmp/base/python \\
        [--peers uvicorn] [--runs 5] [--seconds 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from benchmarks.interfaces import run as suite


def servers(
    workload: str, base: Path, peers: list[str], base_first: bool = False
) -> list[suite.Server]:
    """This build's surge and the base build's (in this order unless `base_first`),
    then the named peers of `workload`."""
    by_name = {s.name: s for s in suite.workloads()[workload]}
    new = by_name["surge"]
    python = str(suite.SURGE.parent / "python")
    old_argv = ["env", f"PYTHONPATH={base}:{suite.ROOT}", python, "-m", "surge", *new.argv[1:]]
    pair = [suite.Server("surge new", new.argv), suite.Server("surge base", old_argv)]
    return [*(pair[::-1] if base_first else pair), *(by_name[p] for p in peers)]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.interfaces.ab")
    ap.add_argument("workload", choices=("raw_asgi", "fastapi", "flask"))
    ap.add_argument("--base", type=Path, required=True, help="directory holding the other surge")
    ap.add_argument("--peers", default="", help="comma-separated peer names, e.g. uvicorn")
    ap.add_argument(
        "--base-first", action="store_true", help="run the base build first in each round"
    )
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=5)
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    peers = [p for p in args.peers.split(",") if p]
    with tempfile.TemporaryDirectory(prefix="surge-ab-") as logs:
        res = suite.measure(
            args.workload,
            servers(args.workload, args.base, peers, args.base_first),
            args.runs,
            args.seconds,
            Path(logs),
        )
    for name, why in res["missing"].items():
        print(f"{name}: not measured ({why})")
    got = res["servers"]
    for name, s in got.items():
        runs = ", ".join(f"{r:,.0f}" for r in s["runs"])
        us = ", ".join(str(c["us"]) for c in s["cpu"])
        print(f"{name:>12}: median {s['median']:,.0f} req/s [{runs}]; server us/req [{us}]")
        print(f"{'':>12}  median {statistics.median(c['us'] for c in s['cpu'])} us/req")
    if "surge new" in got and "surge base" in got:
        print(f"new/base: {got['surge new']['median'] / got['surge base']['median']:.3f}")
    for p in peers:
        if p in got and "surge new" in got:
            print(f"new/{p}: {got['surge new']['median'] / got[p]['median']:.2f}")


if __name__ == "__main__":
    main()
